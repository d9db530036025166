import { z } from "zod";
import type { CedarGate } from "./cedar-gate.js";
import type { ApprovalStatus, ClosedApprovalStatus } from "./errors.js";
import type { ApprovalOutcome, GatewayStore } from "./store.js";
import type { CallChannel, UpstreamPool, UpstreamTool } from "./upstream.js";
import type { GateSource } from "./workspace-gates.js";
import type { RpcAnswer, TaskOptions } from "./task-types.js";

// The gateway's public surface: its options, what it is handed, what it answers, its wire
// constants and the request schemas (re-exported by gateway.ts, which composes the parts).

// ─── wiring ───────────────────────────────────────────────────────────────────────────────────

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
  /**
   * The upstream MCP servers' clients: a connection with a url runs its tools there. A connection
   * without one (or a gateway without upstreams) serves nothing: its calls fail upstream_unavailable.
   */
  upstreams?: UpstreamPool | undefined;
  now?: () => Date;
  logger?: GatewayLogger;
  /**
   * Held calls as MCP tasks (src/gateway/tasks.ts): where their state is read, and what wakes a
   * waiting `tasks/result`. Without it the gateway advertises no tasks capability.
   */
  tasks?: TaskOptions | undefined;
  /**
   * Where a client's answer to a relayed request (elicitation, sampling, roots) reaches the
   * process whose call asked, when it was POSTed to another (a fleet behind a balancer that does
   * not route by mcp-session-id). Without it, an answer reaches only this process's calls.
   */
  answers?: AnswerRelay | null | undefined;
};

/** A client's answer as it crosses processes: whose it is (a digest of the call's Authorization) and the JSON-RPC response. */
export type RelayedAnswer = { owner: string; message: unknown };

export type AnswerRelay = {
  /** Fire and forget: an answer the relay cannot carry is lost, and the call that asked ends when its wait does. */
  publish(answer: RelayedAnswer): void;
  /** Every answer published by any process (this one's included); returns an unsubscribe. */
  subscribe(listener: (answer: RelayedAnswer) => void): () => void;
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
  /**
   * The MCP client asked for a task (`params.task`): a call the gate would run outright is then
   * refused before it runs (src/gateway/tasks.ts), never run and answered as a plain result.
   */
  asTask?: boolean;
  /** The caller's stream, where the upstream's progress and requests are relayed (MCP transport only). */
  relay?: CallChannel | null | undefined;
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

// ─── the gateway ──────────────────────────────────────────────────────────────────────────────

/**
 * One tool of `tools/list`, as MCP lists it, namespaced by its connection. `execution.taskSupport`
 * is "optional" on a tool the gate holds for this key (src/gateway/tasks.ts).
 */
export type ListedTool = {
  name: string;
  title?: string;
  description?: string;
  inputSchema: UpstreamTool["inputSchema"];
  outputSchema?: UpstreamTool["outputSchema"];
  annotations?: UpstreamTool["annotations"];
  execution?: { taskSupport: "optional" };
};

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
  /**
   * Held calls as MCP tasks (MCP 2025-11-25), null when not configured: a task-augmented
   * tools/call, and tasks/get, tasks/result, tasks/list and tasks/cancel for the key's tasks.
   */
  readonly tasks: GatewayTasks | null;
  readonly streamKey: string;
  /** The answer relay (GatewayOptions.answers), null when this process's calls take only its own answers. */
  readonly answers: AnswerRelay | null;
};

export type GatewayTasks = {
  callTool(input: ToolCallInput): Promise<RpcAnswer>;
  get(input: { authorization: string | null | undefined; taskId: unknown }): Promise<RpcAnswer>;
  /** Blocks until the task is terminal; `onWaiting` hears its status while it waits, `signal` ends the wait. */
  result(input: { authorization: string | null | undefined; taskId: unknown; signal?: AbortSignal; onWaiting?: (statusMessage: string) => void }): Promise<RpcAnswer>;
  list(input: { authorization: string | null | undefined; cursor: unknown }): Promise<RpcAnswer>;
  cancel(input: { authorization: string | null | undefined; taskId: unknown }): Promise<RpcAnswer>;
  /** How often a waiting tasks/result writes on its open answer. */
  readonly keepAliveMs: number;
  /** Open tasks/result waits on this process. */
  openWaits(): number;
};

export const toolCallSchema = z.object({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string(), z.number(), z.null()]).optional(),
  method: z.string(),
  params: z.unknown().optional(),
});

export const toolCallParams = z.object({
  name: z.string().min(1).max(256).regex(/^\S+$/, "a tool name has no whitespace"),
  arguments: z.custom<Record<string, unknown>>(isPlainObject, "arguments must be a JSON object").optional(),
  _meta: z.record(z.string(), z.unknown()).optional(),
});

/** A `tools/call` as the gateway serves it: the request's id, the tool's name, its arguments and `_meta`. */
export type ParsedToolCall = {
  id: string | number | null;
  name: string;
  arguments: Record<string, unknown> | undefined;
  meta: Record<string, unknown> | undefined;
};

/** Why a body is not a `tools/call` the gateway serves: the JSON-RPC code and the error's name and text. */
export type ToolCallProblem = {
  id: string | number | null;
  code: number;
  error: "invalid_request" | "method_not_found" | "invalid_params";
  message: string;
};

const NO_WHITESPACE = /^\S+$/;

/**
 * The one validation of a `tools/call` (toolCallSchema, then toolCallParams), run once per call on
 * every transport. The common case, a well-formed call, is accepted by plain checks that are never
 * looser than the schemas; anything else is decided by the schemas themselves, so the answer and
 * its message are the schemas' own.
 */
export function parseToolCall(body: unknown): { ok: true; call: ParsedToolCall } | { ok: false; problem: ToolCallProblem } {
  if (isPlainObject(body) && body["jsonrpc"] === "2.0" && body["method"] === "tools/call") {
    const id = body["id"];
    const params = body["params"] ?? {};
    if ((id === undefined || id === null || typeof id === "string" || (typeof id === "number" && Number.isFinite(id))) && isPlainObject(params)) {
      const { name, arguments: args, _meta: meta } = params;
      if (
        typeof name === "string" &&
        name.length >= 1 &&
        name.length <= 256 &&
        NO_WHITESPACE.test(name) &&
        (args === undefined || isPlainObject(args)) &&
        (meta === undefined || isPlainObject(meta))
      ) {
        return { ok: true, call: { id: (id ?? null) as string | number | null, name, arguments: args as Record<string, unknown> | undefined, meta: meta as Record<string, unknown> | undefined } };
      }
    }
  }
  // Not the plain case: the schemas decide, and word the refusal.
  const envelope = toolCallSchema.safeParse(body);
  if (!envelope.success) return { ok: false, problem: { id: null, code: GATEWAY_JSONRPC.invalidRequest, error: "invalid_request", message: "not a JSON-RPC 2.0 request" } };
  const id = envelope.data.id ?? null;
  if (envelope.data.method !== "tools/call") return { ok: false, problem: { id, code: GATEWAY_JSONRPC.methodNotFound, error: "method_not_found", message: "only tools/call is served" } };
  const params = toolCallParams.safeParse(envelope.data.params ?? {});
  if (!params.success) return { ok: false, problem: { id, code: GATEWAY_JSONRPC.invalidParams, error: "invalid_params", message: z.prettifyError(params.error) } };
  return { ok: true, call: { id, name: params.data.name, arguments: params.data.arguments, meta: params.data._meta } };
}

export const idempotencyKeySchema = z.string().min(1).max(255).regex(/^[\x21-\x7e]+$/);
export const idSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/);

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

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
