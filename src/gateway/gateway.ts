import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { APPROVAL_TOKEN_TTL_SECONDS, claimsMatch, mintApprovalToken, verifyApprovalToken, type ApprovalTokenClaims } from "./approval-token.js";
import { argumentHash, canonicalJson, CanonicalJsonError, sha256Hex } from "../domain/canonical.js";
import { CedarEvaluationError, type CedarGate, type GateDecision } from "./cedar-gate.js";
import { fixedGate, workspaceGates, type GateSource } from "./workspace-gates.js";
import {
  APPROVAL_CLOSED_HTTP_STATUS,
  approvalClosedJsonRpc,
  APPROVAL_REQUIRED_HTTP_STATUS,
  isClosedApprovalStatus,
  type ApprovalStatus,
  type ClosedApprovalStatus,
  APPROVAL_STREAM,
  approvalRequiredJsonRpc,
  encodeTicket,
  newApprovalTicket,
  NOT_READY_HTTP_STATUS,
  NOT_READY_JSONRPC_CODE,
  NOT_READY_RETRY_AFTER_SECONDS,
  notReadyHttp,
  notReadyJsonRpc,
} from "./errors.js";
import { hashVirtualKey } from "./keys.js";
import type { ApprovalOutcome, GatewayConnection, GatewayKey, GatewayRoute, GatewayStore, HeldInvocation } from "./store.js";
import { classifyTool, UpstreamError, type DestructiveSource, type UpstreamPool, type UpstreamTool } from "./upstream.js";

/**
 * The gateway's half of held tool calls (seed 003), as a library: a tool gateway embeds it,
 * hands it each `tools/call`, and mounts its resume handler. Countersign mounts it too, so one
 * process can demo the whole flow (src/workers/runtime.ts).
 *
 * - Tools come from real upstream MCP servers (`upstreams`, src/gateway/upstream.ts): a connection
 *   with a url serves its upstream's tools as `<connection>.<tool>`, destructive by the tool's
 *   annotations unless an admin override says otherwise. A gateway may instead pass an `executor`
 *   for connections without an upstream (destructive then by `isDestructive`, the name guess).
 * - `handleToolCall`: Cedar gate → execute, deny, or hold. Holding writes the ticket to the
 *   approval stream and awaits the write BEFORE committing the held record; a failed write
 *   holds nothing and answers not_ready. The agent-side re-issue (the two approval headers)
 *   counts as approved only when the token verifies and every bound claim matches.
 * - `resume`: the service-authenticated `POST /internal/v1/approvals/resume`.
 */

// ─── wiring ───────────────────────────────────────────────────────────────────────────────────

/** One call the gateway runs against a provider. */
export type ExecuteCall = {
  approvalId: string | null;
  invocationId: string;
  workspaceId: string;
  virtualKeyId: string;
  connectionId: string;
  provider: string;
  /** The concrete tool, e.g. `github.delete_repo`. */
  tool: string;
  /** The name the agent called, e.g. `github.delete_repo` routed through the `github` connection. */
  logicalTool: string;
  arguments: Record<string, unknown>;
  idempotencyKey: string;
};

export type ToolExecutor = (call: ExecuteCall) => Promise<unknown>;

/** The subset of ioredis the gateway needs: it only ever appends to the stream. */
export type ApprovalStreamWriter = { xadd(key: string, id: string, ...fieldsAndValues: string[]): Promise<string | null> };

export type GatewayLogger = {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
};

export type GatewayOptions = {
  store: GatewayStore;
  /** An ioredis client (or anything with `xadd`) for the private approval stream. */
  stream: ApprovalStreamWriter;
  /** Default `stream:approvals`. */
  streamKey?: string;
  /** How long a ticket write may take before the call stops as not_ready. Default 2 s. */
  streamWriteTimeoutMs?: number;
  /**
   * The gate per workspace: by default each workspace's newest saved policy set, read through
   * `store.loadPolicySet` (the built-in default set where none is saved; src/gateway/workspace-gates.ts).
   * `gate` instead applies one fixed gate to every workspace; `gates` is any other source.
   */
  gate?: CedarGate;
  gates?: GateSource;
  /** The HS256 secret control mints approval tokens with. */
  approvalSecret: string | Uint8Array;
  /** Default `obol-control`. */
  tokenIssuer?: string;
  /** Default `obol-gateway`. */
  tokenAudience?: string;
  /** Put into approval_required as `inbox_url`; `{approval_id}` is replaced by the id. */
  inboxUrl?: string | undefined;
  /** The bearer token control presents to resume. Without one, resume answers 404. */
  serviceToken?: string | undefined;
  /** The upstream MCP servers' clients: a connection with a url runs its tools there. */
  upstreams?: UpstreamPool | undefined;
  /**
   * For connections without an upstream url: a function that runs the call (an embedder's own
   * provider client). Without one, such a connection's calls fail as upstream_unavailable.
   */
  executor?: ToolExecutor | undefined;
  /** Executor connections only: whether a concrete tool is destructive. Default: `isDestructiveByName`. */
  isDestructive?: (tool: string) => boolean;
  now?: () => Date;
  logger?: GatewayLogger;
};

export type ToolCallInput = {
  /** The Authorization header: `Bearer <virtual key>`. */
  authorization: string | null | undefined;
  /** `x-obol-approval-id` */
  approvalId?: string | null | undefined;
  /** `x-obol-approval-token` */
  approvalToken?: string | null | undefined;
  /** `Idempotency-Key`, when the agent sends one. */
  idempotencyKey?: string | null | undefined;
  /** The JSON-RPC request. */
  body: unknown;
};

export type GatewayResponse = { status: number; headers: Record<string, string>; body: unknown };

export type ToolCallOutcome =
  | { kind: "executed"; replayed: boolean; approvalId: string | null; invocationId: string }
  /** The upstream could not be reached, timed out, or answered a JSON-RPC error: nothing held. */
  | { kind: "upstream_failed"; error: string }
  | { kind: "execution_failed"; approvalId: string | null }
  | { kind: "approval_required"; approvalId: string; reused: boolean }
  | { kind: "denied"; reason: string }
  | { kind: "not_ready"; reason: string }
  | { kind: "rejected"; reason: string }
  /** The identical call's request has closed: answered with its status, never held again. */
  | { kind: "approval_closed"; approvalId: string; status: ClosedApprovalStatus };

/**
 * What `GET /gateway/v1/approvals/{id}` answers the key that made the request (snake_case, like
 * every field the gateway exchanges). `approval_token` only while approved and executable: the
 * agent re-issues the identical tools/call (same arguments, same Idempotency-Key) with
 * `x-obol-approval-id` and `x-obol-approval-token`.
 */
export type ApprovalStatusBody = {
  approval_id: string;
  status: ApprovalStatus;
  tool: string;
  expires_at: string;
  decided_at: string | null;
  execution_status: ApprovalOutcome["executionStatus"];
  reason?: string;
  approval_token?: string;
  approval_token_expires_at?: string;
};

export type ApprovalStatusOutcome =
  | { kind: "status"; status: ApprovalStatus; tokenMinted: boolean }
  | { kind: "unauthorized" }
  | { kind: "not_found" };

export type ResumeOutcome =
  | { kind: "executed"; replayed: boolean }
  | { kind: "execution_failed" }
  | { kind: "not_ready"; reason: string }
  | { kind: "refused"; error: string };

export const APPROVAL_ID_HEADER = "x-obol-approval-id";
export const APPROVAL_TOKEN_HEADER = "x-obol-approval-token";
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
export const RESUME_PATH = "/internal/v1/approvals/resume";

/** JSON-RPC codes beside approval_required (-32003) and not_ready (-32004). */
export const GATEWAY_JSONRPC = {
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  unauthorized: -32001,
  denied: -32002,
  executionFailed: -32005,
  executionInProgress: -32006,
  /** -32007 is approval_closed (errors.ts). The upstream is unreachable or not configured. */
  upstreamUnavailable: -32008,
  /** The upstream did not answer within the connection's timeout. */
  upstreamTimeout: -32009,
  /** The upstream answered a JSON-RPC error outside the standard codes (its code is in data). */
  upstreamError: -32010,
} as const;

const DESTRUCTIVE_VERBS = new Set([
  "delete", "destroy", "drop", "remove", "purge", "terminate", "revoke", "refund",
  "transfer", "truncate", "wipe", "erase", "reset", "force",
]);

/**
 * The classifier for executor connections (no upstream, so no annotations): a concrete tool is
 * destructive when a word of its operation (`github.delete_repo` → `delete`, `repo`) is a
 * destructive verb. Upstream tools never use it: their annotations decide (`classifyTool`).
 */
export function isDestructiveByName(tool: string): boolean {
  const operation = tool.slice(tool.indexOf(".") + 1);
  return operation.split(/[._-]+/).some((word) => DESTRUCTIVE_VERBS.has(word.toLowerCase()));
}

// ─── the gateway ──────────────────────────────────────────────────────────────────────────────

/** One tool of `tools/list`, as MCP lists it, namespaced by its connection. */
export type ListedTool = { name: string; title?: string; description?: string; inputSchema: UpstreamTool["inputSchema"]; outputSchema?: UpstreamTool["outputSchema"]; annotations?: UpstreamTool["annotations"] };

export type Gateway = {
  handleToolCall(input: ToolCallInput): Promise<GatewayResponse & { outcome: ToolCallOutcome }>;
  /**
   * `tools/list` for a virtual key: the active connections' upstream tools, `<connection>.<tool>`.
   * A connection whose upstream cannot be read is left out (and its calls fail closed).
   */
  listTools(input: { authorization: string | null | undefined }): Promise<{ ok: true; tools: ListedTool[] } | { ok: false; status: 401 }>;
  /** Whether the Authorization header carries a live virtual key. */
  authenticate(input: { authorization: string | null | undefined }): Promise<boolean>;
  resume(input: { authorization: string | null | undefined; body: unknown }): Promise<GatewayResponse & { outcome: ResumeOutcome }>;
  /** Resume's credential alone (src/gateway/http.ts checks it before reading a body): "disabled" without a service token configured. */
  authenticateService(input: { authorization: string | null | undefined }): "ok" | "unauthorized" | "disabled";
  /**
   * The agent's side of the outcome: its request's status (and, approved, its approval token),
   * for the virtual key that made it. Any other key, a malformed id and a missing request all
   * answer the same 404.
   */
  approvalStatus(input: { authorization: string | null | undefined; approvalId: string }): Promise<GatewayResponse & { outcome: ApprovalStatusOutcome }>;
  readonly streamKey: string;
};

const toolCallSchema = z.object({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string(), z.number(), z.null()]).optional(),
  method: z.string(),
  params: z.unknown().optional(),
});

const toolCallParams = z.object({
  name: z.string().min(1).max(256).regex(/^\S+$/, "a tool name has no whitespace"),
  arguments: z.custom<Record<string, unknown>>(isPlainObject, "arguments must be a JSON object").optional(),
  _meta: z.record(z.string(), z.unknown()).optional(),
});

const idempotencyKeySchema = z.string().min(1).max(255).regex(/^[\x21-\x7e]+$/);
const idSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/);

/** The resume request body (snake_case, like every field gateway and control exchange). */
export const resumeBodySchema = z.strictObject({
  approval_id: idSchema,
  workspace_id: idSchema,
  virtual_key_id: idSchema,
  /** sha256 hex of the virtual key: the plaintext is never reconstructed. */
  key_hash: z.string().regex(/^[0-9a-f]{64}$/),
  connection_id: idSchema,
  tool: z.string().min(1).max(256),
  logical_tool: z.string().min(1).max(256).nullable().optional(),
  invocation_id: idSchema,
  arguments: z.custom<Record<string, unknown>>(isPlainObject, "arguments must be a JSON object"),
  idempotency_key: idempotencyKeySchema,
  token: z.string().min(1).max(4096),
});

export type ResumeBody = z.infer<typeof resumeBodySchema>;

export function createGateway(options: GatewayOptions): Gateway {
  const store = options.store;
  const streamKey = options.streamKey ?? APPROVAL_STREAM;
  const writeTimeoutMs = options.streamWriteTimeoutMs ?? 2_000;
  const now = options.now ?? (() => new Date());
  const isDestructive = options.isDestructive ?? isDestructiveByName;
  const tokenOptions = {
    ...(options.tokenIssuer ? { issuer: options.tokenIssuer } : {}),
    ...(options.tokenAudience ? { audience: options.tokenAudience } : {}),
  };
  const log: GatewayLogger = options.logger ?? { info() {}, warn() {}, error() {} };
  const serviceTokenDigest = options.serviceToken ? digest(options.serviceToken) : null;
  const gates = options.gates ?? (options.gate ? fixedGate(options.gate) : workspaceGates(store, { logger: log }));

  function gateRequest(key: GatewayKey, route: { connectionId: string; tool: string }, logicalTool: string, approved: boolean, destructive: boolean) {
    return {
      principal: { type: "VirtualKey", id: key.id },
      action: { type: "Action", id: "tools/call" },
      resource: { type: "Tool", id: route.tool },
      context: { workspace_id: key.workspaceId, connection_id: route.connectionId, logical_tool: logicalTool },
      destructive,
      environment: key.workspace.environment,
      production: key.workspace.production,
      alreadyApproved: approved,
    };
  }

  async function decide(key: GatewayKey, request: ReturnType<typeof gateRequest>): Promise<GateDecision> {
    // The workspace's gate; a set that cannot be read or parsed denies (fail closed).
    const choice = await gates.gateFor(key);
    if (!choice.ok) return { decision: "deny", reason: choice.reason, policyIds: [] };
    try {
      return choice.gate.decide(request);
    } catch (error) {
      // A request Cedar cannot evaluate never authorizes anything.
      if (error instanceof CedarEvaluationError) return { decision: "deny", reason: "forbidden", policyIds: [] };
      throw error;
    }
  }

  type ResolvedTool = {
    destructive: boolean;
    source: DestructiveSource;
    run: (call: ExecuteCall) => Promise<CallResult>;
  };

  /**
   * What the call runs on and whether it is destructive. Fails closed: when the upstream's tools
   * cannot be read, the call is not treated as non-destructive, it fails (upstream_unavailable).
   */
  async function resolveTool(
    route: Pick<GatewayRoute, "tool" | "upstream" | "upstreamTool" | "override">,
    how: { live?: boolean } = {},
  ): Promise<ResolvedTool | { error: UpstreamError | "unknown_tool" }> {
    const override = route.override ?? null;
    const upstream = route.upstream;
    if (options.upstreams && upstream?.url) {
      const pool = options.upstreams;
      const name = route.upstreamTool ?? route.tool.slice(route.tool.indexOf(".") + 1);
      let tool: UpstreamTool | null;
      try {
        tool = await pool.tool(upstream, name);
      } catch (error) {
        if (error instanceof UpstreamError) return { error };
        throw error;
      }
      if (!tool) return { error: "unknown_tool" };
      // Before a held call's execution is claimed (once claimed, a failure is final): the
      // upstream answers now, so an upstream that is down is a retry, not a failed execution.
      if (how.live) {
        try {
          await pool.ping(upstream);
        } catch (error) {
          if (error instanceof UpstreamError) return { error };
          throw error;
        }
      }
      const c = classifyTool(tool, override);
      return { ...c, run: (call) => pool.call(upstream, name, call.arguments) };
    }
    if (options.executor) {
      const executor = options.executor;
      return {
        destructive: override ?? isDestructive(route.tool),
        source: override !== null ? "override" : "fallback",
        run: async (call) => asCallResult(await executor(call)),
      };
    }
    return { error: new UpstreamError("upstream_not_configured", upstream?.url ? "this gateway reaches no upstream MCP servers" : "the connection has no upstream MCP server") };
  }

  /**
   * Runs a held call once per (key, idempotency key). The first caller inserts the execution
   * row and executes; every later caller — another resume, an agent re-issue, a retry after a
   * lost response — replays the stored outcome.
   */
  async function executeHeld(
    held: HeldInvocation,
    args: Record<string, unknown>,
    run: ResolvedTool["run"],
  ): Promise<{ ok: true; replayed: boolean; result: unknown } | { ok: false; inProgress: boolean; error: string }> {
    const claim = await store.claimExecution({
      virtualKeyId: held.virtualKeyId,
      idempotencyKey: held.idempotencyKey,
      approvalId: held.approvalId,
      invocationId: held.invocationId,
    });
    if (!claim.claimed) {
      const existing = claim.existing;
      if (existing.state === "Executed") return { ok: true, replayed: true, result: existing.result };
      if (existing.state === "Failed") return { ok: false, inProgress: false, error: existing.error ?? "execution failed" };
      return { ok: false, inProgress: true, error: "execution_in_progress" };
    }
    // Marking the held record runs beside the call: the execution row above is what makes it once.
    const marking = store.setHeldState(held.approvalId, "Executing");
    marking.catch(() => {}); // awaited below; never an unhandled rejection meanwhile
    const call: ExecuteCall = {
      approvalId: held.approvalId,
      invocationId: held.invocationId,
      workspaceId: held.workspaceId,
      virtualKeyId: held.virtualKeyId,
      connectionId: held.connectionId,
      // The provider the hold saw; callers have checked the connection still points there.
      provider: held.provider,
      tool: held.tool,
      logicalTool: held.logicalTool ?? held.tool,
      arguments: args,
      idempotencyKey: held.idempotencyKey,
    };
    let result: unknown;
    try {
      result = await run(call);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      await marking;
      await Promise.all([store.finishExecution(held, { state: "Failed", error: message }), store.setHeldState(held.approvalId, "Failed")]);
      log.warn({ approvalId: held.approvalId, invocationId: held.invocationId, err: message }, "held call failed at the provider");
      return { ok: false, inProgress: false, error: message };
    }
    const stored = toJsonValue(result);
    await marking;
    await Promise.all([store.finishExecution(held, { state: "Executed", result: stored }), store.setHeldState(held.approvalId, "Executed", stored)]);
    log.info({ approvalId: held.approvalId, invocationId: held.invocationId, tool: held.tool }, "held call executed");
    return { ok: true, replayed: false, result: stored };
  }

  /** Writes the ticket, awaits the write, then commits the held record (seed: "What the agent sees"). */
  async function hold(
    key: GatewayKey,
    route: { connectionId: string; provider: string; tool: string; upstream?: { url: string | null } | undefined },
    destructive: boolean,
    logicalTool: string,
    args: Record<string, unknown>,
    idempotencyKey: string,
    rpcId: RpcId,
    amountUsd: number | undefined,
  ): Promise<GatewayResponse & { outcome: ToolCallOutcome }> {
    const approvalId = `apr_${randomUUID()}`;
    const invocationId = `inv_${randomUUID()}`;
    const ticket = newApprovalTicket(
      {
        approval_id: approvalId,
        workspace_id: key.workspaceId,
        virtual_key_id: key.id,
        connection_id: route.connectionId,
        provider: route.provider,
        tool: route.tool,
        ...(logicalTool !== route.tool ? { logical_tool: logicalTool } : {}),
        environment: key.workspace.environment,
        destructive,
        arguments: args,
        idempotency_key: idempotencyKey,
        ...(amountUsd !== undefined ? { amount_usd: amountUsd } : {}),
        invocation_id: invocationId,
      },
      now(),
    );
    const fields = encodeTicket(ticket);
    try {
      await withTimeout(options.stream.xadd(streamKey, "*", ...fields), writeTimeoutMs);
    } catch (error) {
      log.warn({ approvalId, err: String(error) }, "approval stream write failed: nothing held");
      const nr = notReadyJsonRpc("approval_stream_unavailable");
      return { ...rpcError(rpcId, NOT_READY_HTTP_STATUS, nr.code, nr.message, nr.data, notReadyHttp("approval_stream_unavailable").headers), outcome: { kind: "not_ready", reason: "approval_stream_unavailable" } };
    }
    try {
      await store.createHeld({
        approvalId,
        workspaceId: key.workspaceId,
        virtualKeyId: key.id,
        connectionId: route.connectionId,
        provider: route.provider,
        upstreamUrl: route.upstream?.url ?? null,
        tool: route.tool,
        logicalTool: logicalTool !== route.tool ? logicalTool : null,
        invocationId,
        argumentHash: ticket.argument_hash,
        idempotencyKey,
        createdAt: new Date(ticket.created_at),
        expiresAt: new Date(ticket.expires_at),
        ticket: fields[3],
      });
    } catch (error) {
      // The ticket is on the stream but nothing is held: an orphan. Its resume answers
      // not_ready forever, so it can never create execution authority.
      log.error({ approvalId, err: String(error) }, "held record not committed: the ticket is an orphan");
      const data = { error: "not_ready", reason: "hold_not_committed", retryable: true, retry_after_seconds: NOT_READY_RETRY_AFTER_SECONDS };
      return { ...rpcError(rpcId, NOT_READY_HTTP_STATUS, NOT_READY_JSONRPC_CODE, "not_ready", data, { "Retry-After": String(NOT_READY_RETRY_AFTER_SECONDS) }), outcome: { kind: "not_ready", reason: "hold_not_committed" } };
    }
    return approvalRequired(rpcId, approvalId, logicalTool, ticket.expires_at, false);
  }

  function approvalRequired(rpcId: RpcId, approvalId: string, tool: string, expiresAt: Date | string, reused: boolean) {
    const inboxUrl = options.inboxUrl?.replaceAll("{approval_id}", encodeURIComponent(approvalId));
    const err = approvalRequiredJsonRpc({ approvalId, tool, expiresAt, inboxUrl });
    return { ...rpcError(rpcId, APPROVAL_REQUIRED_HTTP_STATUS, err.code, err.message, err.data), outcome: { kind: "approval_required" as const, approvalId, reused } };
  }

  async function handleToolCall(input: ToolCallInput): Promise<GatewayResponse & { outcome: ToolCallOutcome }> {
    const envelope = toolCallSchema.safeParse(input.body);
    if (!envelope.success) return rejected(null, 400, GATEWAY_JSONRPC.invalidRequest, "invalid_request", "not a JSON-RPC 2.0 request");
    const rpcId: RpcId = envelope.data.id ?? null;
    if (envelope.data.method !== "tools/call") return rejected(rpcId, 400, GATEWAY_JSONRPC.methodNotFound, "method_not_found", "only tools/call is served");
    const params = toolCallParams.safeParse(envelope.data.params ?? {});
    if (!params.success) return rejected(rpcId, 400, GATEWAY_JSONRPC.invalidParams, "invalid_params", z.prettifyError(params.error));
    const logicalTool = params.data.name;
    const args = params.data.arguments ?? {};

    const plaintext = bearer(input.authorization);
    let key: GatewayKey | null = null;
    let route: GatewayRoute | null = null;
    if (plaintext && store.resolveCall) {
      ({ key, route } = await store.resolveCall(hashVirtualKey(plaintext), logicalTool));
    } else if (plaintext) {
      key = await store.findKeyByHash(hashVirtualKey(plaintext));
      route = key ? await store.resolveRoute(key.workspaceId, logicalTool) : null;
    }
    if (!key || key.revoked || key.workspace.archived) return rejected(rpcId, 401, GATEWAY_JSONRPC.unauthorized, "unauthorized", "send a live virtual key as `Authorization: Bearer <key>`");

    if (!route) return rejected(rpcId, 404, GATEWAY_JSONRPC.invalidParams, "unknown_tool", `no connection of this workspace serves ${logicalTool}`);
    if (!route.active) return denied(rpcId, "connection_inactive", []);

    let hash: string;
    try {
      hash = argumentHash(args);
    } catch (error) {
      if (error instanceof CanonicalJsonError) return rejected(rpcId, 400, GATEWAY_JSONRPC.invalidParams, "invalid_params", error.message);
      throw error;
    }
    const explicitKey = input.idempotencyKey ?? (typeof params.data._meta?.["idempotency_key"] === "string" ? (params.data._meta["idempotency_key"] as string) : null);
    if (explicitKey !== null && !idempotencyKeySchema.safeParse(explicitKey).success) {
      return rejected(rpcId, 400, GATEWAY_JSONRPC.invalidParams, "invalid_params", "an idempotency key is 1-255 printable ASCII characters");
    }
    const idempotencyKey = explicitKey ?? derivedIdempotencyKey(key, logicalTool, hash);
    const amount = params.data._meta?.["amount_usd"];
    const amountUsd = typeof amount === "number" && Number.isFinite(amount) && amount >= 0 ? amount : undefined;

    // The agent-side re-issue: approved only when the token verifies and EVERY bound claim
    // matches the live call, and the exact held record still pins this connection. Anything
    // else is approved = false, and the gate issues a new ticket.
    const presented = Boolean(input.approvalId || input.approvalToken);
    let approvedHeld: HeldInvocation | null = null;
    let orphanApproval = false;
    if (input.approvalId && input.approvalToken) {
      const live: ApprovalTokenClaims = {
        approvalId: input.approvalId,
        workspaceId: key.workspaceId,
        keyId: key.id,
        tool: route.tool,
        argumentHash: hash,
        idempotencyKey,
      };
      const verified = await verifyApprovalToken(options.approvalSecret, input.approvalToken, { ...tokenOptions, now: now() });
      const matched = verified.ok ? claimsMatch(verified.claims, live) : null;
      if (!verified.ok) {
        log.warn({ approvalId: input.approvalId, reason: verified.reason }, "approval token did not verify: approved = false");
      } else if (matched && !matched.ok) {
        log.warn({ approvalId: input.approvalId, mismatched: matched.mismatched }, "approval token claims do not match the call: approved = false");
      } else {
        const held = await store.findHeld(input.approvalId);
        if (!held) orphanApproval = true;
        else if (heldMatchesLive(held, key, route, logicalTool, hash, idempotencyKey)) approvedHeld = held;
        else log.warn({ approvalId: input.approvalId }, "held record does not pin this call: approved = false");
      }
    }
    if (orphanApproval) {
      const nr = notReadyJsonRpc("held_record_missing");
      return { ...rpcError(rpcId, NOT_READY_HTTP_STATUS, nr.code, nr.message, nr.data, notReadyHttp("held_record_missing").headers), outcome: { kind: "not_ready", reason: "held_record_missing" } };
    }

    const resolved = await resolveTool(route, { live: approvedHeld !== null });
    if ("error" in resolved) return toolUnavailable(rpcId, logicalTool, resolved.error);

    const decision = await decide(key, gateRequest(key, route, logicalTool, approvedHeld !== null, resolved.destructive));
    if (decision.decision === "deny") return denied(rpcId, decision.reason, decision.policyIds);
    if (decision.decision === "approval_required") {
      // Idempotent on the idempotency key: a call that already ran is answered with its
      // outcome, never run again and never held again.
      const done = await store.findExecution(key.id, idempotencyKey);
      if (done && done.state !== "Executing") {
        const replay = done.state === "Executed" ? { ok: true as const, replayed: true, result: done.result } : { ok: false as const, inProgress: false, error: done.error ?? "execution failed" };
        return executionResponse(rpcId, done.approvalId, done.invocationId, replay);
      }
      // A plain retry of a call that is already held gets the same ticket back; a call that
      // presented approval headers that did not hold up gets a new one (seed: "re-issues a ticket").
      if (!presented) {
        // A request that has closed answers the identical retry with its status: only a new
        // idempotency key opens a new one.
        const closed = await closedRequest(key, idempotencyKey, hash);
        if (closed) {
          const err = approvalClosedJsonRpc({ status: closed.status, approvalId: closed.approvalId, tool: logicalTool, reason: closed.reason });
          return { ...rpcError(rpcId, APPROVAL_CLOSED_HTTP_STATUS, err.code, err.message, err.data), outcome: { kind: "approval_closed", approvalId: closed.approvalId, status: closed.status } };
        }
        const awaiting = await store.findAwaiting(key.id, idempotencyKey, hash, now());
        if (awaiting && awaiting.connectionId === route.connectionId && awaiting.provider === route.provider && (awaiting.upstreamUrl ?? null) === (route.upstream?.url ?? null) && awaiting.tool === route.tool) {
          return approvalRequired(rpcId, awaiting.approvalId, logicalTool, awaiting.expiresAt, true);
        }
      }
      return hold(key, route, resolved.destructive, logicalTool, args, idempotencyKey, rpcId, amountUsd);
    }

    if (approvedHeld) {
      if (now().getTime() >= approvedHeld.expiresAt.getTime()) return denied(rpcId, "approval_expired", []);
      const outcome = await executeHeld(approvedHeld, args, resolved.run);
      return executionResponse(rpcId, approvedHeld.approvalId, approvedHeld.invocationId, outcome);
    }
    // Allowed outright (not held): execute directly.
    const invocationId = `inv_${randomUUID()}`;
    try {
      const result = await resolved.run({
        approvalId: null,
        invocationId,
        workspaceId: key.workspaceId,
        virtualKeyId: key.id,
        connectionId: route.connectionId,
        provider: route.provider,
        tool: route.tool,
        logicalTool,
        arguments: args,
        idempotencyKey,
      });
      return { ...rpcResult(rpcId, result, { invocation_id: invocationId, replayed: false }), outcome: { kind: "executed", replayed: false, approvalId: null, invocationId } };
    } catch (error) {
      if (error instanceof UpstreamError) return toolUnavailable(rpcId, logicalTool, error);
      const message = error instanceof Error ? error.message : String(error);
      return { ...rpcError(rpcId, 502, GATEWAY_JSONRPC.executionFailed, "execution_failed", { error: "execution_failed", message }), outcome: { kind: "execution_failed", approvalId: null } };
    }
  }

  async function liveKey(authorization: string | null | undefined): Promise<GatewayKey | null> {
    const plaintext = bearer(authorization);
    const key = plaintext ? await store.findKeyByHash(hashVirtualKey(plaintext)) : null;
    return key && !key.revoked && !key.workspace.archived ? key : null;
  }

  async function listTools(input: { authorization: string | null | undefined }): Promise<{ ok: true; tools: ListedTool[] } | { ok: false; status: 401 }> {
    const key = await liveKey(input.authorization);
    if (!key) return { ok: false, status: 401 };
    const connections = store.listConnections ? await store.listConnections(key.workspaceId) : [];
    const pool = options.upstreams;
    const lists = await Promise.all(
      connections
        .filter((c): c is GatewayConnection & { name: string } => c.active && typeof c.name === "string" && Boolean(c.upstream?.url) && pool !== undefined)
        .map(async (c) => {
          try {
            const tools = await pool!.tools(c.upstream!);
            return tools.map((t) => listedTool(c.name, t, c.overrides?.[t.name] ?? null));
          } catch (error) {
            log.warn({ connectionId: c.id, err: String(error) }, "upstream tools unreadable: left out of tools/list");
            return [];
          }
        }),
    );
    return { ok: true, tools: lists.flat() };
  }

  function executionResponse(
    rpcId: RpcId,
    approvalId: string,
    invocationId: string,
    outcome: Awaited<ReturnType<typeof executeHeld>>,
  ): GatewayResponse & { outcome: ToolCallOutcome } {
    if (outcome.ok) {
      return { ...rpcResult(rpcId, asCallResult(outcome.result), { invocation_id: invocationId, approval_id: approvalId, replayed: outcome.replayed }), outcome: { kind: "executed", replayed: outcome.replayed, approvalId, invocationId } };
    }
    if (outcome.inProgress) {
      return { ...rpcError(rpcId, 409, GATEWAY_JSONRPC.executionInProgress, "execution_in_progress", { error: "execution_in_progress", retryable: true }), outcome: { kind: "not_ready", reason: "execution_in_progress" } };
    }
    return { ...rpcError(rpcId, 502, GATEWAY_JSONRPC.executionFailed, "execution_failed", { error: "execution_failed", message: outcome.error }), outcome: { kind: "execution_failed", approvalId } };
  }

  /** The identical call's latest request, when it has closed. */
  async function closedRequest(key: GatewayKey, idempotencyKey: string, hash: string): Promise<{ approvalId: string; status: ClosedApprovalStatus; reason: string | null } | null> {
    if (!store.findLatestHeld || !store.findApprovalOutcome) return null;
    const latest = await store.findLatestHeld(key.id, idempotencyKey, hash);
    if (!latest || latest.state !== "AwaitingApproval") return null; // executions answer for themselves
    const at = now();
    const outcome = await store.findApprovalOutcome(latest.approvalId, at);
    if (outcome && outcome.virtualKeyId === key.id && isClosedApprovalStatus(outcome.status)) return { approvalId: latest.approvalId, status: outcome.status, reason: outcome.reason };
    // Held, never filed, and past its 24 hours: expired all the same.
    if (!outcome && latest.expiresAt.getTime() <= at.getTime()) return { approvalId: latest.approvalId, status: "expired", reason: null };
    return null;
  }

  async function approvalStatus(input: { authorization: string | null | undefined; approvalId: string }): Promise<GatewayResponse & { outcome: ApprovalStatusOutcome }> {
    const key = await liveKey(input.authorization);
    if (!key) {
      return { status: 401, headers: {}, body: { error: "unauthorized", message: "send a live virtual key as `Authorization: Bearer <key>`" }, outcome: { kind: "unauthorized" } };
    }
    const notFound = { status: 404, headers: {}, body: { error: "not_found", message: "this key made no approval request with that id" }, outcome: { kind: "not_found" as const } };
    if (!idSchema.safeParse(input.approvalId).success) return notFound;
    const at = now();
    const [held, outcome] = await Promise.all([store.findHeld(input.approvalId), store.findApprovalOutcome ? store.findApprovalOutcome(input.approvalId, at) : Promise.resolve(null)]);
    // Only the key that made the request may read it; for any other it does not exist.
    const owner = outcome ?? held;
    if (!owner || owner.virtualKeyId !== key.id || owner.workspaceId !== key.workspaceId) return notFound;
    if (held && (held.virtualKeyId !== key.id || held.workspaceId !== key.workspaceId)) return notFound;

    const tool = held ? (held.logicalTool ?? held.tool) : outcome!.tool;
    let body: ApprovalStatusBody;
    if (outcome) {
      body = {
        approval_id: outcome.approvalId,
        status: outcome.status,
        tool,
        expires_at: outcome.expiresAt.toISOString(),
        decided_at: outcome.decidedAt ? outcome.decidedAt.toISOString() : null,
        execution_status: outcome.executionStatus,
        ...(outcome.reason ? { reason: outcome.reason } : {}),
      };
    } else {
      // Held, not yet in the inbox (ingest files it within seconds): pending until it expires.
      const h = held!;
      const failed = h.state === "Failed";
      body = {
        approval_id: h.approvalId,
        status: failed ? "failed" : h.state === "AwaitingApproval" && h.expiresAt.getTime() <= at.getTime() ? "expired" : h.state === "AwaitingApproval" ? "pending" : "approved",
        tool,
        expires_at: h.expiresAt.toISOString(),
        decided_at: null,
        execution_status: h.state === "Executed" ? "executed" : failed ? "failed" : h.state === "Executing" ? "dispatched" : "none",
        ...(failed ? { reason: "execution_failed" } : {}),
      };
    }
    let tokenMinted = false;
    if (outcome && outcome.status === "approved" && outcome.notExecutable === null) {
      // Minted as control's delivery mints it: bound to the approval id, workspace, key, concrete
      // tool, argument hash and idempotency key; short-lived, and never past the request's expiry.
      const ttl = Math.min(APPROVAL_TOKEN_TTL_SECONDS, Math.floor((outcome.expiresAt.getTime() - at.getTime()) / 1000));
      if (ttl > 0) {
        body.approval_token = await mintApprovalToken(
          options.approvalSecret,
          { approvalId: outcome.approvalId, workspaceId: outcome.workspaceId, keyId: outcome.virtualKeyId, tool: outcome.tool, argumentHash: outcome.argumentHash, idempotencyKey: outcome.idempotencyKey },
          { ...tokenOptions, ttlSeconds: ttl, now: at },
        );
        body.approval_token_expires_at = new Date((Math.floor(at.getTime() / 1000) + ttl) * 1000).toISOString();
        tokenMinted = true;
      }
    } else if (outcome && outcome.status === "approved" && outcome.notExecutable) {
      body.reason = outcome.notExecutable;
    }
    return { status: 200, headers: {}, body, outcome: { kind: "status", status: body.status, tokenMinted } };
  }

  async function resume(input: { authorization: string | null | undefined; body: unknown }): Promise<GatewayResponse & { outcome: ResumeOutcome }> {
    const refuse = (status: number, error: string, extra: Record<string, unknown> = {}) => ({
      status,
      headers: {},
      body: { error, retryable: false, ...extra },
      outcome: { kind: "refused" as const, error },
    });
    if (!serviceTokenDigest) return refuse(404, "resume_disabled");
    const presented = bearer(input.authorization);
    if (!presented || !timingSafeEqual(digest(presented), serviceTokenDigest)) return refuse(401, "service_unauthorized");

    const parsed = resumeBodySchema.safeParse(input.body);
    if (!parsed.success) return refuse(400, "invalid_request", { issues: parsed.error.issues.map((i) => ({ path: i.path.join("."), message: i.message })) });
    const body = parsed.data;

    const verified = await verifyApprovalToken(options.approvalSecret, body.token, { ...tokenOptions, now: now() });
    if (!verified.ok) return refuse(403, "approval_token_invalid", { reason: verified.reason });
    let hash: string;
    try {
      hash = argumentHash(body.arguments);
    } catch (error) {
      if (error instanceof CanonicalJsonError) return refuse(400, "invalid_request", { issues: [{ path: "arguments", message: error.message }] });
      throw error;
    }
    const matched = claimsMatch(verified.claims, {
      approvalId: body.approval_id,
      workspaceId: body.workspace_id,
      keyId: body.virtual_key_id,
      tool: body.tool,
      argumentHash: hash,
      idempotencyKey: body.idempotency_key,
    });
    if (!matched.ok) return refuse(403, "approval_token_mismatch", { mismatched: matched.mismatched });

    // The exact durable held record (resume never creates an invocation), and the current key
    // and connection, read together.
    const [held, key, connection] = await Promise.all([
      store.findHeld(body.approval_id),
      store.findKeyByHash(body.key_hash),
      store.findConnection(body.connection_id),
    ]);
    if (!held) {
      const nr = notReadyHttp("held_record_missing");
      return { status: nr.status, headers: nr.headers, body: nr.body, outcome: { kind: "not_ready", reason: "held_record_missing" } };
    }
    // Pinned: the original concrete tool, connection, key, invocation and idempotency identity.
    const mismatched = (
      [
        ["workspace_id", held.workspaceId, body.workspace_id],
        ["virtual_key_id", held.virtualKeyId, body.virtual_key_id],
        ["connection_id", held.connectionId, body.connection_id],
        ["tool", held.tool, body.tool],
        ["logical_tool", held.logicalTool, body.logical_tool ?? null],
        ["invocation_id", held.invocationId, body.invocation_id],
        ["argument_hash", held.argumentHash, hash],
        ["idempotency_key", held.idempotencyKey, body.idempotency_key],
      ] as const
    )
      .filter(([, a, b]) => a !== b)
      .map(([field]) => field);
    if (mismatched.length > 0) return refuse(409, "held_record_mismatch", { mismatched });

    // Re-apply the gateway's CURRENT key, workspace, connection and Cedar state. (The connection
    // read is the held record's: connection_id was just required to equal it.)
    if (!key || key.id !== held.virtualKeyId || key.workspaceId !== held.workspaceId || key.revoked) return refuse(403, "key_unavailable");
    if (key.workspace.archived) return refuse(403, "workspace_unavailable");
    if (!connection || connection.workspaceId !== held.workspaceId || !connection.active) return refuse(403, "connection_unavailable");
    // The route is pinned (seed: "changing routes cannot move an approved operation to another
    // provider"): the connection must still point at the provider the hold saw, which is also the
    // provider of the concrete tool. Otherwise refuse; nothing runs anywhere.
    if (connection.provider !== held.provider) return refuse(409, "route_changed", { held_provider: held.provider });
    // The upstream is pinned the same way: a connection now pointing at another url is refused.
    if ((connection.upstream?.url ?? null) !== (held.upstreamUrl ?? null)) return refuse(409, "route_changed", { held_upstream_url: held.upstreamUrl ?? null });
    if (now().getTime() >= held.expiresAt.getTime()) return refuse(410, "approval_expired");
    const logicalTool = held.logicalTool ?? held.tool;
    const upstreamTool = held.tool.slice(held.tool.indexOf(".") + 1);
    const resolved = await resolveTool({ tool: held.tool, upstream: connection.upstream, upstreamTool, override: connection.overrides?.[upstreamTool] ?? null }, { live: true });
    if ("error" in resolved) {
      // Nothing was claimed: the delivery may try again once the upstream is back.
      if (resolved.error === "unknown_tool") return refuse(409, "unknown_tool");
      const retryable = resolved.error.code !== "upstream_error";
      return { status: 503, headers: retryable ? { "Retry-After": "10" } : {}, body: { error: resolved.error.code, retryable, message: resolved.error.message }, outcome: { kind: "not_ready" as const, reason: resolved.error.code } };
    }
    const decision = await decide(key, gateRequest(key, { connectionId: held.connectionId, tool: held.tool }, logicalTool, true, resolved.destructive));
    if (decision.decision !== "allow") return refuse(403, "denied", { reason: decision.decision === "deny" ? decision.reason : "approval_required", policy_ids: decision.policyIds });

    const outcome = await executeHeld(held, body.arguments, resolved.run);
    if (outcome.ok) {
      return {
        status: 200,
        headers: {},
        body: { status: "executed", approval_id: held.approvalId, invocation_id: held.invocationId, replayed: outcome.replayed, result: outcome.result },
        outcome: { kind: "executed", replayed: outcome.replayed },
      };
    }
    if (outcome.inProgress) {
      return { status: 409, headers: { "Retry-After": "5" }, body: { error: "execution_in_progress", retryable: true }, outcome: { kind: "not_ready", reason: "execution_in_progress" } };
    }
    return { status: 502, headers: {}, body: { error: "execution_failed", retryable: false, message: outcome.error }, outcome: { kind: "execution_failed" } };
  }

  function authenticateService(input: { authorization: string | null | undefined }): "ok" | "unauthorized" | "disabled" {
    if (!serviceTokenDigest) return "disabled";
    const presented = bearer(input.authorization);
    return presented && timingSafeEqual(digest(presented), serviceTokenDigest) ? "ok" : "unauthorized";
  }

  return { handleToolCall, listTools, authenticate: async (input) => (await liveKey(input.authorization)) !== null, resume, authenticateService, approvalStatus, streamKey };
}

// ─── helpers ──────────────────────────────────────────────────────────────────────────────────

type RpcId = string | number | null;

function rpcError(id: RpcId, status: number, code: number, message: string, data: unknown, headers: Record<string, string> = {}): GatewayResponse {
  return { status, headers, body: { jsonrpc: "2.0", id, error: { code, message, data } } };
}

/** An MCP `tools/call` result (what an upstream answers; what the gateway stores and replays). */
export type CallResult = { content: unknown[]; structuredContent?: Record<string, unknown>; isError?: boolean; _meta?: Record<string, unknown>; [k: string]: unknown };

/** An upstream's result passes through; an executor's value (or a result stored before upstreams) becomes one. */
function asCallResult(value: unknown): CallResult {
  if (isPlainObject(value) && Array.isArray(value["content"])) return toJsonValue(value) as CallResult;
  const json = toJsonValue(value);
  return { content: [{ type: "text", text: JSON.stringify(json) }], ...(isPlainObject(json) ? { structuredContent: json } : {}), isError: false };
}

function rpcResult(id: RpcId, result: CallResult, meta: Record<string, unknown>): GatewayResponse {
  return { status: 200, headers: {}, body: { jsonrpc: "2.0", id, result: { ...result, _meta: { ...(isPlainObject(result._meta) ? result._meta : {}), ...meta } } } };
}

/** The standard JSON-RPC codes an upstream's error keeps; any other becomes upstream_error (never one of the gateway's own). */
const PASSED_THROUGH_CODES = new Set([-32600, -32601, -32602, -32603]);

function toolUnavailable(id: RpcId, tool: string, error: UpstreamError | "unknown_tool"): GatewayResponse & { outcome: ToolCallOutcome } {
  if (error === "unknown_tool") return rejected(id, 404, GATEWAY_JSONRPC.invalidParams, "unknown_tool", `the upstream does not serve ${tool}`);
  const data = { error: error.code, tool, message: error.message, retryable: error.code !== "upstream_error" };
  const outcome = { kind: "upstream_failed" as const, error: error.code };
  switch (error.code) {
    case "upstream_timeout":
      return { ...rpcError(id, 504, GATEWAY_JSONRPC.upstreamTimeout, "upstream_timeout", data), outcome };
    case "upstream_error": {
      const code = error.upstreamCode !== undefined && PASSED_THROUGH_CODES.has(error.upstreamCode) ? error.upstreamCode : GATEWAY_JSONRPC.upstreamError;
      return { ...rpcError(id, 502, code, error.message, { ...data, upstream_code: error.upstreamCode ?? null }), outcome };
    }
    default:
      return { ...rpcError(id, 502, GATEWAY_JSONRPC.upstreamUnavailable, "upstream_unavailable", { ...data, error: "upstream_unavailable", reason: error.code }), outcome };
  }
}

function listedTool(connection: string, t: UpstreamTool, override: boolean | null): ListedTool {
  const c = classifyTool(t, override);
  // The annotations an agent sees say what the gate will do: an override shows as the hint.
  const annotations = c.source === "override" ? { ...t.annotations, destructiveHint: c.destructive, ...(c.destructive ? { readOnlyHint: false } : {}) } : t.annotations;
  return {
    name: `${connection}.${t.name}`,
    ...(t.title !== undefined ? { title: t.title } : {}),
    ...(t.description !== undefined ? { description: t.description } : {}),
    inputSchema: t.inputSchema,
    ...(t.outputSchema !== undefined ? { outputSchema: t.outputSchema } : {}),
    ...(annotations !== undefined ? { annotations } : {}),
  };
}

function rejected(id: RpcId, status: number, code: number, error: string, message: string): GatewayResponse & { outcome: ToolCallOutcome } {
  return { ...rpcError(id, status, code, error, { error, message }), outcome: { kind: "rejected", reason: error } };
}

function denied(id: RpcId, reason: string, policyIds: string[]): GatewayResponse & { outcome: ToolCallOutcome } {
  return { ...rpcError(id, 403, GATEWAY_JSONRPC.denied, "denied", { error: "denied", reason, policy_ids: policyIds }), outcome: { kind: "denied", reason } };
}

function heldMatchesLive(
  held: HeldInvocation,
  key: GatewayKey,
  route: { connectionId: string; provider: string; tool: string; upstream?: { url: string | null } | undefined },
  logicalTool: string,
  hash: string,
  idempotencyKey: string,
): boolean {
  return (
    held.workspaceId === key.workspaceId &&
    held.virtualKeyId === key.id &&
    held.connectionId === route.connectionId &&
    held.provider === route.provider &&
    // The upstream is pinned too: a connection now pointing elsewhere is not the held call's route.
    (held.upstreamUrl ?? null) === (route.upstream?.url ?? null) &&
    held.tool === route.tool &&
    (held.logicalTool ?? held.tool) === logicalTool &&
    held.argumentHash === hash &&
    held.idempotencyKey === idempotencyKey
  );
}

/**
 * Without an explicit key, the identical call always derives the same one, so the agent's
 * re-issue of "the identical tools/call" matches the token's bound idempotency key.
 */
export function derivedIdempotencyKey(key: Pick<GatewayKey, "id" | "workspaceId">, logicalTool: string, argHash: string): string {
  return `auto-${sha256Hex(canonicalJson({ workspace: key.workspaceId, key: key.id, tool: logicalTool, argument_hash: argHash }))}`;
}

function bearer(header: string | null | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

function digest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Results are stored and replayed as JSON: drop what JSON cannot carry. */
function toJsonValue(value: unknown): unknown {
  if (value === undefined) return null;
  return JSON.parse(JSON.stringify(value)) as unknown;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
