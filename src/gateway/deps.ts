import { APPROVAL_STREAM } from "./errors.js";
import { hashVirtualKey } from "./keys.js";
import type { ApprovalStreamWriter, GatewayLogger, GatewayOptions } from "./protocol.js";
import { bearer, digest } from "./respond.js";
import type { GatewayKey, GatewayStore } from "./store.js";
import type { UpstreamPool } from "./upstream.js";
import { fixedGate, workspaceGates, type GateSource } from "./workspace-gates.js";

/**
 * What every part of the gateway runs on (hold.ts, resume.ts, status.ts, listing.ts), resolved
 * once from the options: each part is a function of these and its input, nothing else.
 */
export type GatewayDeps = {
  store: GatewayStore;
  /** The private approval stream the hold files tickets on. */
  stream: ApprovalStreamWriter;
  streamKey: string;
  writeTimeoutMs: number;
  /** The gate per workspace (fails closed when a workspace's set cannot be read). */
  gates: GateSource;
  approvalSecret: string | Uint8Array;
  tokenOptions: { issuer?: string; audience?: string };
  inboxUrl: string | undefined;
  /** sha256 of the service token resume requires; null: resume is disabled. */
  serviceTokenDigest: Buffer | null;
  upstreams: UpstreamPool | undefined;
  now: () => Date;
  log: GatewayLogger;
};

export function gatewayDeps(options: GatewayOptions): GatewayDeps {
  const log: GatewayLogger = options.logger ?? { info() {}, warn() {}, error() {} };
  return {
    store: options.store,
    stream: options.stream,
    streamKey: options.streamKey ?? APPROVAL_STREAM,
    writeTimeoutMs: options.streamWriteTimeoutMs ?? 2_000,
    gates: options.gates ?? (options.gate ? fixedGate(options.gate) : workspaceGates(options.store, { logger: log })),
    approvalSecret: options.approvalSecret,
    tokenOptions: {
      ...(options.tokenIssuer ? { issuer: options.tokenIssuer } : {}),
      ...(options.tokenAudience ? { audience: options.tokenAudience } : {}),
    },
    inboxUrl: options.inboxUrl,
    serviceTokenDigest: options.serviceToken ? digest(options.serviceToken) : null,
    upstreams: options.upstreams,
    now: options.now ?? (() => new Date()),
    log,
  };
}

/** The live virtual key the Authorization header carries, or null (none, unknown, revoked, archived workspace). */
export async function liveKey(deps: GatewayDeps, authorization: string | null | undefined): Promise<GatewayKey | null> {
  const { store } = deps;
  const plaintext = bearer(authorization);
  const key = plaintext ? await store.findKeyByHash(hashVirtualKey(plaintext)) : null;
  return key && !key.revoked && !key.workspace.archived ? key : null;
}
