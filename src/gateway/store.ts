import type { ApprovalStatus } from "./errors.js";
import type { UpstreamConnection } from "./upstream.js";

/**
 * What the gateway reads and writes durably (seed 003, "What the agent sees" and "Resume").
 * The gateway never trusts a caller for any of it: resume re-reads the held record, the key,
 * the workspace and the connection here before it executes anything.
 */

/** The agent's virtual key as the gateway sees it: who it is, where it acts, whether it still may. */
export type GatewayKey = {
  id: string;
  workspaceId: string;
  /** sha256 hex of the plaintext key; the plaintext itself is never stored. */
  keyHash: string;
  revoked: boolean;
  workspace: {
    id: string;
    environment: string;
    archived: boolean;
    /** The workspace's tier: whether destructive calls here can be held for approval. */
    production: boolean;
    /**
     * The newest saved version of the workspace's gate policy set, read with the key (0: none, the
     * built-in default set). Undefined when the store does not read it on the hot path: the gateway
     * then loads the set on every call.
     */
    policyVersion?: number;
  };
};

/** A workspace's saved Cedar policy set for the gate: the newest version, which is the one in force. */
export type GatewayPolicySet = { workspaceId: string; version: number; policies: string };

/** Where a logical tool name goes: one connection (provider) and the concrete tool it runs there. */
export type GatewayRoute = {
  connectionId: string;
  provider: string;
  /** The concrete tool that executes, e.g. `github.delete_repo`. */
  tool: string;
  active: boolean;
  /** The tool's name on the upstream MCP server (the logical name after the connection's). */
  upstreamTool?: string;
  /** Where the connection's tools run (absent: a store that predates upstreams). */
  upstream?: UpstreamConnection;
  /** The connection's destructive override for this tool, or null. */
  override?: boolean | null;
};

export type GatewayConnection = {
  id: string;
  workspaceId: string;
  /** The namespace of its tools (`<name>.<tool>`). */
  name?: string;
  provider: string;
  active: boolean;
  upstream?: UpstreamConnection;
  /** Destructive overrides by upstream tool name. */
  overrides?: Record<string, boolean>;
};

/** `Cancelled`: its agent withdrew it (MCP tasks/cancel) before it ran; its execution is spent as failed. */
export type HeldState = "AwaitingApproval" | "Executing" | "Executed" | "Failed" | "Cancelled";

/**
 * The durable held record. Raw arguments are not part of it: only their canonical hash. (Its row
 * also keeps the ticket written to the stream, sealed under the approval secret and only while
 * the call awaits approval, so a ticket the stream lost can be written again; see createHeld.)
 */
export type HeldInvocation = {
  approvalId: string;
  workspaceId: string;
  virtualKeyId: string;
  connectionId: string;
  /**
   * The connection's provider when the call was held. Resume pins it with the connection and
   * the concrete tool: a connection now pointing at another provider is `route_changed`.
   */
  provider: string;
  /** The connection's upstream url when the call was held (null: none); pinned like the provider. */
  upstreamUrl?: string | null;
  tool: string;
  logicalTool: string | null;
  invocationId: string;
  argumentHash: string;
  idempotencyKey: string;
  state: HeldState;
  createdAt: Date;
  expiresAt: Date;
};

export type ExecutionState = "Executing" | "Executed" | "Failed";

/** Execute-once, keyed by (virtual key, idempotency key). */
export type Execution = {
  virtualKeyId: string;
  idempotencyKey: string;
  approvalId: string;
  invocationId: string;
  state: ExecutionState;
  result: unknown;
  error: string | null;
};

/**
 * A held call's request as its agent may read it (seed 003's statuses, plus `failed`: approved,
 * then the delivery or the execution failed). Read from control's approval request.
 */
export type ApprovalOutcome = {
  approvalId: string;
  workspaceId: string;
  virtualKeyId: string;
  /** The concrete tool the token binds. */
  tool: string;
  argumentHash: string;
  idempotencyKey: string;
  status: ApprovalStatus;
  /** Why it closed, when it did: the request's close reason or the delivery's error code. */
  reason: string | null;
  executionStatus: "none" | "pending" | "dispatched" | "executed" | "failed";
  expiresAt: Date;
  decidedAt: Date | null;
  /**
   * Approved only: null when authority may be minted now (control's preflight passes, or the call
   * already executed and a re-issue only replays it); otherwise the preflight code that stops it.
   */
  notExecutable: string | null;
};

export interface GatewayStore {
  findKeyByHash(keyHash: string): Promise<GatewayKey | null>;
  /** The route a logical tool name takes in a workspace, or null when nothing serves it. */
  resolveRoute(workspaceId: string, logicalTool: string): Promise<GatewayRoute | null>;
  findConnection(connectionId: string): Promise<GatewayConnection | null>;
  /**
   * The workspace's newest saved gate policy set, or null when it has none (the default set
   * applies). Throws when it cannot be read: the gateway then denies (fail closed).
   */
  loadPolicySet?(workspaceId: string): Promise<GatewayPolicySet | null>;

  /**
   * Commits the held record (state AwaitingApproval). Called only after the ticket is on the
   * stream; `ticket` is the canonical JSON written there, kept so it can be written again.
   */
  createHeld(record: Omit<HeldInvocation, "state"> & { ticket?: string }): Promise<void>;
  findHeld(approvalId: string): Promise<HeldInvocation | null>;
  /** An unexpired AwaitingApproval record for the same key, idempotency key and arguments. */
  findAwaiting(virtualKeyId: string, idempotencyKey: string, argumentHash: string, now: Date): Promise<HeldInvocation | null>;
  setHeldState(approvalId: string, state: HeldState, result?: unknown): Promise<void>;
  /** The newest held record of the identical call (same key, idempotency key and arguments), in any state. */
  findLatestHeld?(virtualKeyId: string, idempotencyKey: string, argumentHash: string): Promise<HeldInvocation | null>;
  /**
   * The request's outcome, or null when no request of that id has been filed (yet). Optional: a
   * store without it serves no status reads (404) and answers a closed request's retry as before.
   */
  findApprovalOutcome?(approvalId: string, now: Date): Promise<ApprovalOutcome | null>;

  findExecution(virtualKeyId: string, idempotencyKey: string): Promise<Execution | null>;
  /**
   * Inserts the execution row in state Executing, atomically: exactly one caller per
   * (key, idempotency key) ever gets `claimed: true`; every other one gets the existing row.
   */
  claimExecution(
    claim: Pick<Execution, "virtualKeyId" | "idempotencyKey" | "approvalId" | "invocationId">,
  ): Promise<{ claimed: true } | { claimed: false; existing: Execution }>;
  finishExecution(
    key: Pick<Execution, "virtualKeyId" | "idempotencyKey">,
    outcome: { state: "Executed"; result: unknown } | { state: "Failed"; error: string },
  ): Promise<void>;

  /**
   * The hot path's one round trip: the key (with its workspace) by hash and, when it exists, the
   * route of the logical tool in the key's workspace with the connection's upstream and override.
   */
  resolveCall?(keyHash: string, logicalTool: string): Promise<{ key: GatewayKey | null; route: GatewayRoute | null }>;
  /** The workspace's connections (active or not) with their upstreams and overrides: tools/list. */
  listConnections?(workspaceId: string): Promise<GatewayConnection[]>;
}

/**
 * The provider a concrete tool `<provider>.<operation>` runs on (providers carry no dot): what a
 * hold recorded before the provider was stored beside the tool.
 */
export function providerOfTool(tool: string): string {
  const dot = tool.indexOf(".");
  return dot > 0 ? tool.slice(0, dot) : tool;
}
