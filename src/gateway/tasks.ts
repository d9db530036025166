import { liveKey, type GatewayDeps } from "./deps.js";
import { approvalClosedJsonRpc, approvalClosedBody, isClosedApprovalStatus, notReadyJsonRpc, type ClosedApprovalStatus } from "./errors.js";
import { handleToolCall } from "./hold.js";
import { GATEWAY_JSONRPC, idSchema, isPlainObject, type ToolCallInput } from "./protocol.js";
import { asCallResult } from "./respond.js";
import type { McpTask, RpcAnswer, TaskOptions, TaskRow } from "./task-types.js";

// Held calls as MCP tasks (MCP 2025-11-25, "Tasks"): a task-augmented tools/call the gateway
// holds answers a task at once, and the task IS the held call — its id is the approval id, its
// state is read from the held record, control's approval request and the execution record in
// PostgreSQL. So there is nothing per session or per process: a task survives a restart, and any
// gateway process on the same database answers tasks/get and tasks/result for it.

export const RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task";
export const MODEL_IMMEDIATE_RESPONSE_META_KEY = "io.modelcontextprotocol/model-immediate-response";

/** What the gateway advertises in `initialize` (the spec's object form; the SDK's client refuses `true`). */
export const TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } } as const;

const notFound = (taskId: string): RpcAnswer => ({ error: { code: GATEWAY_JSONRPC.invalidParams, message: `Failed to retrieve task: Task not found`, data: { error: "task_not_found", task_id: taskId.slice(0, 128) } } });
const unauthorized: RpcAnswer = { error: { code: GATEWAY_JSONRPC.unauthorized, message: "unauthorized", data: { error: "unauthorized", message: "send a live virtual key as `Authorization: Bearer <key>`" } } };

/** What a wait answers once its client went away (nobody reads it). */
const GONE: RpcAnswer = { error: { code: GATEWAY_JSONRPC.invalidRequest, message: "request_ended", data: { error: "request_ended" } } };

export type Tasks = ReturnType<typeof createTasks>;

export function createTasks(deps: GatewayDeps, options: TaskOptions) {
  const { store } = options;
  const pollIntervalMs = options.pollIntervalMs ?? 2_000;
  const sweepIntervalMs = options.sweepIntervalMs ?? (options.wake ? 30_000 : pollIntervalMs);
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  const maxWaitsPerKey = options.maxWaitsPerKey ?? 16;
  const pageSize = options.listPageSize ?? 50;
  /** Open tasks/result waits by virtual key id (this process's). */
  const waits = new Map<string, number>();

  /** The task, for the key that made the call; any other key gets what an unknown id gets. */
  async function owned(authorization: string | null | undefined, taskId: unknown): Promise<{ row: TaskRow } | RpcAnswer> {
    const key = await liveKey(deps, authorization);
    if (!key) return unauthorized;
    if (typeof taskId !== "string" || !idSchema.safeParse(taskId).success) return notFound(String(taskId));
    const row = await store.findTask(taskId);
    if (!row || row.virtualKeyId !== key.id || row.workspaceId !== key.workspaceId) return notFound(taskId);
    return { row };
  }

  async function describe(row: TaskRow): Promise<McpTask> {
    const state = taskState(row, deps.now());
    let statusMessage = state.statusMessage;
    if (state.waitingForReview && options.reviewProgress) {
      const progress = await options.reviewProgress(row.approvalId).catch(() => null);
      if (progress) statusMessage = `${statusMessage}: ${progress}`;
    }
    return {
      taskId: row.approvalId,
      status: state.status,
      statusMessage,
      createdAt: row.createdAt.toISOString(),
      lastUpdatedAt: state.lastUpdatedAt.toISOString(),
      ttl: null,
      ...(state.status === "working" ? { pollInterval: pollIntervalMs } : {}),
    };
  }

  /** Resolves on a wake for this approval, after `ms`, or when the request goes away. */
  function pause(approvalId: string, ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      let unsubscribe = () => {};
      const done = () => {
        clearTimeout(timer);
        unsubscribe();
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      if (options.wake) unsubscribe = options.wake.subscribe((id) => id === approvalId && done());
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** The next re-read: the sweep, or the held call's expiry when that comes first (it ends the task unannounced). */
  function nextReadIn(row: TaskRow): number {
    const toExpiry = row.expiresAt.getTime() - deps.now().getTime();
    return toExpiry > 0 ? Math.min(sweepIntervalMs, toExpiry + 1) : sweepIntervalMs;
  }

  return {
    pollIntervalMs,
    keepAliveMs,

    /**
     * A task-augmented tools/call: the call goes through the gateway exactly as a plain one (gate,
     * hold, replay); what is held (or was held: closed, executed) answers its task. A call the
     * gate allows outright is refused before it runs (-32601, the spec's answer for a tool that
     * does not take tasks): tools/list marks a tool `taskSupport: "optional"` only while the gate
     * holds it for this key, so this happens only when the gate changed since.
     */
    async callTool(input: ToolCallInput): Promise<RpcAnswer> {
      const answer = await handleToolCall(deps, { ...input, asTask: true });
      const outcome = answer.outcome;
      const approvalId =
        outcome.kind === "approval_required" || outcome.kind === "approval_closed"
          ? outcome.approvalId
          : outcome.kind === "executed" || outcome.kind === "execution_failed"
            ? outcome.approvalId
            : null;
      if (approvalId) {
        const row = await store.findTask(approvalId);
        if (row) {
          const task = await describe(row);
          const immediate =
            task.status === "working"
              ? `The call is held for human approval as task ${task.taskId}; its result comes with tasks/result once reviewers approve.`
              : `The call's task ${task.taskId} is ${task.status}; read it with tasks/result.`;
          return { result: { task, _meta: { [MODEL_IMMEDIATE_RESPONSE_META_KEY]: immediate } } };
        }
      }
      const rpc = answer.body as { error?: { code: number; message: string; data?: unknown }; result?: Record<string, unknown> };
      if (rpc.error) return { error: rpc.error };
      // Unreachable: a call that ran outright was refused above. Fail closed all the same.
      return { error: { code: GATEWAY_JSONRPC.invalidRequest, message: "task_not_created", data: { error: "task_not_created" } } };
    },

    async get(input: { authorization: string | null | undefined; taskId: unknown }): Promise<RpcAnswer> {
      const found = await owned(input.authorization, input.taskId);
      if (!("row" in found)) return found;
      return { result: { ...(await describe(found.row)) } };
    },

    /**
     * Blocks until the task is terminal, then answers exactly what the call answers now: the
     * tool's result (stored once, at its one execution), or the JSON-RPC error of a call that
     * closed without running — with the related-task `_meta`. No bound but the task's own: a
     * held call ends (decided and run, denied, expired at its `expiresAt`, invalidated,
     * cancelled), and the wait with it. A wake (`approval:changed`) re-reads the task at once; a
     * sweep every `sweepIntervalMs`, and one at the held call's expiry, catch what a wake missed.
     * `onWaiting` hears the task's status message when the wait starts and at each re-read that
     * finds it still working (the caller keeps its answer open meanwhile). The wait ends, and
     * frees its listener, timer and place, when `signal` aborts (the client went away); what it
     * answers then is read by nobody.
     */
    async result(input: { authorization: string | null | undefined; taskId: unknown; signal?: AbortSignal; onWaiting?: (statusMessage: string) => void }): Promise<RpcAnswer> {
      const found = await owned(input.authorization, input.taskId);
      if (!("row" in found)) return found;
      let row = found.row;
      let state = taskState(row, deps.now());
      if (state.status !== "working") return finalAnswer(row, state);
      const keyId = row.virtualKeyId;
      const open = waits.get(keyId) ?? 0;
      if (open >= maxWaitsPerKey) {
        const nr = notReadyJsonRpc("task_waits_exhausted", Math.max(1, Math.ceil(pollIntervalMs / 1000)));
        return {
          error: {
            code: nr.code,
            message: nr.message,
            data: { ...nr.data, max_waits_per_key: maxWaitsPerKey, message: `this key already waits on ${maxWaitsPerKey} tasks here; end one, or read this one with tasks/get`, task_id: row.approvalId, _meta: { [RELATED_TASK_META_KEY]: { taskId: row.approvalId } } },
          },
        };
      }
      waits.set(keyId, open + 1);
      try {
        input.onWaiting?.((await describe(row)).statusMessage ?? state.statusMessage);
        for (;;) {
          await pause(row.approvalId, nextReadIn(row), input.signal);
          if (input.signal?.aborted) return GONE;
          try {
            row = (await store.findTask(row.approvalId)) ?? row;
          } catch (error) {
            // A failed read ends nothing: the next wake or sweep reads again.
            deps.log.warn({ approvalId: row.approvalId, err: String(error) }, "waiting task not re-read; reading it again at the next wake or sweep");
            continue;
          }
          state = taskState(row, deps.now());
          if (state.status !== "working") {
            // The key is asked again at the end of a wait: one revoked meanwhile reads nothing.
            const key = await liveKey(deps, input.authorization);
            return key && key.id === row.virtualKeyId ? finalAnswer(row, state) : unauthorized;
          }
          input.onWaiting?.((await describe(row).catch(() => null))?.statusMessage ?? state.statusMessage);
        }
      } finally {
        const left = (waits.get(keyId) ?? 1) - 1;
        if (left > 0) waits.set(keyId, left);
        else waits.delete(keyId);
      }
    },

    /** Open tasks/result waits on this process, all keys (what a test or an operator reads). */
    openWaits(): number {
      let n = 0;
      for (const count of waits.values()) n += count;
      return n;
    },

    async list(input: { authorization: string | null | undefined; cursor: unknown }): Promise<RpcAnswer> {
      const key = await liveKey(deps, input.authorization);
      if (!key) return unauthorized;
      let after: { createdAt: Date; approvalId: string } | null = null;
      if (input.cursor !== undefined) {
        after = decodeCursor(input.cursor);
        if (!after) return { error: { code: GATEWAY_JSONRPC.invalidParams, message: "Invalid cursor", data: { error: "invalid_cursor" } } };
      }
      const rows = (await store.listTasks(key.id, { after, limit: pageSize + 1 })).filter((r) => r.workspaceId === key.workspaceId);
      const page = rows.slice(0, pageSize);
      const tasks = await Promise.all(page.map((row) => describe(row)));
      const last = page[page.length - 1];
      return { result: { tasks, ...(rows.length > pageSize && last ? { nextCursor: encodeCursor(last) } : {}) } };
    },

    /**
     * Cancelling a held call withdraws it: its execution is spent as failed (`cancelled`) in the
     * same execute-once record every execution claims, so no later approval, delivery or re-issue
     * can run it, the held record reads `Cancelled`, and its request leaves the inbox (`withdraw`). A call already running cannot be
     * stopped (the spec's terminal statuses aside, this is the one refusal).
     */
    async cancel(input: { authorization: string | null | undefined; taskId: unknown }): Promise<RpcAnswer> {
      const found = await owned(input.authorization, input.taskId);
      if (!("row" in found)) return found;
      const row = found.row;
      const state = taskState(row, deps.now());
      if (state.status !== "working") {
        return { error: { code: GATEWAY_JSONRPC.invalidParams, message: `Cannot cancel task: already in terminal status '${state.status}'`, data: { error: "task_terminal", status: state.status } } };
      }
      const held = await deps.store.findHeld(row.approvalId);
      if (!held) return notFound(row.approvalId);
      const claim = await deps.store.claimExecution({ virtualKeyId: held.virtualKeyId, idempotencyKey: held.idempotencyKey, approvalId: held.approvalId, invocationId: held.invocationId });
      if (!claim.claimed) {
        return { error: { code: GATEWAY_JSONRPC.invalidParams, message: "Cannot cancel task: the approved call is already running", data: { error: "task_running" } } };
      }
      await deps.store.finishExecution(held, { state: "Failed", error: CANCELLED_ERROR });
      await deps.store.setHeldState(held.approvalId, "Cancelled");
      deps.log.info({ approvalId: held.approvalId }, "held call cancelled by its agent");
      if (options.withdraw) {
        await options.withdraw(held.approvalId).catch((error: unknown) => deps.log.warn({ approvalId: held.approvalId, err: String(error) }, "cancelled call's request not withdrawn: its approval runs nothing"));
      }
      const after = await store.findTask(row.approvalId);
      return { result: { ...(await describe(after ?? row)) } };
    },
  };
}

/** The execution error a cancelled held call is spent with (what its identical call answers from then on). */
export const CANCELLED_ERROR = "cancelled by the agent (tasks/cancel) before it ran";

type TaskState = {
  status: McpTask["status"];
  statusMessage: string;
  lastUpdatedAt: Date;
  /** Pending in the inbox: the message gets the quorum and the reviewers. */
  waitingForReview: boolean;
  /** Why a failed task closed without running: the status the identical call is answered with. */
  closed?: { status: ClosedApprovalStatus; reason: string | null };
};

/**
 * A held call's task state (pure: a function of its row and the time).
 * - working: held and not yet filed, pending review, approved and not yet run, or running;
 * - completed: executed, and the tool's result is not an error;
 * - failed: the tool answered `isError` (the spec's rule for tool calls), the execution failed,
 *   or the request closed without running — rejected, default_deny, invalidated, expired, or
 *   approved and then stopped by the delivery's checks (each named, with why);
 * - cancelled: the agent withdrew it (tasks/cancel).
 * Never input_required: nothing is owed by the agent while humans review.
 */
export function taskState(row: TaskRow, now: Date): TaskState {
  const r = row.request;
  const latest = (...dates: (Date | null | undefined)[]) => new Date(Math.max(row.createdAt.getTime(), ...dates.filter((d): d is Date => d instanceof Date).map((d) => d.getTime())));
  const e = row.execution;
  if (row.heldState === "Cancelled") return { status: "cancelled", statusMessage: "cancelled: withdrawn by the agent before it ran", lastUpdatedAt: latest(e?.updatedAt, r?.updatedAt), waitingForReview: false };
  if (e) {
    const at = latest(e.updatedAt, r?.updatedAt);
    if (e.state === "Executed") {
      const isError = isPlainObject(e.result) && e.result["isError"] === true;
      return isError
        ? { status: "failed", statusMessage: "failed: approved and executed; the tool answered an error (isError)", lastUpdatedAt: at, waitingForReview: false }
        : { status: "completed", statusMessage: "completed: approved and executed", lastUpdatedAt: at, waitingForReview: false };
    }
    if (e.state === "Failed") return { status: "failed", statusMessage: `failed: approved, then the execution failed: ${e.error ?? "execution failed"}`, lastUpdatedAt: at, waitingForReview: false };
    return { status: "working", statusMessage: "approved: running on the upstream", lastUpdatedAt: at, waitingForReview: false };
  }
  const expired = row.expiresAt.getTime() <= now.getTime();
  const closed = (status: ClosedApprovalStatus, reason: string | null, at: Date): TaskState => {
    const tool = row.logicalTool ?? row.tool;
    const message = approvalClosedBody({ status, approvalId: row.approvalId, tool, reason }).message.split(";")[0];
    return { status: "failed", statusMessage: `${status}: ${message}${reason && reason !== status ? ` (${reason})` : ""}`, lastUpdatedAt: at, waitingForReview: false, closed: { status, reason } };
  };
  if (!r) {
    if (expired) return closed("expired", null, row.expiresAt);
    return { status: "working", statusMessage: "held: on its way to the reviewers' inbox", lastUpdatedAt: latest(), waitingForReview: false };
  }
  if (r.status === "pending") {
    if (expired) return closed("expired", null, row.expiresAt);
    return { status: "working", statusMessage: "waiting for approval", lastUpdatedAt: latest(r.updatedAt), waitingForReview: true };
  }
  if (r.status === "approved") {
    if (r.executionStatus === "failed") return closed("failed", r.deliveryError ?? "execution_failed", latest(r.updatedAt));
    if (expired && r.executionStatus !== "executed") return closed("expired", "approval_expired", row.expiresAt);
    return { status: "working", statusMessage: "approved: on its way to execution", lastUpdatedAt: latest(r.updatedAt), waitingForReview: false };
  }
  const status = r.status as ClosedApprovalStatus;
  if (!isClosedApprovalStatus(status)) return closed("failed", r.closeReason, latest(r.updatedAt));
  return closed(status, r.closeReason, latest(r.updatedAt));
}

/** What the call answers now that its task is terminal, with the related-task `_meta`. */
function finalAnswer(row: TaskRow, state: TaskState): RpcAnswer {
  const related = { [RELATED_TASK_META_KEY]: { taskId: row.approvalId } };
  const e = row.execution;
  if (e?.state === "Executed") {
    const result = asCallResult(e.result);
    return { result: { ...result, _meta: { ...(isPlainObject(result._meta) ? result._meta : {}), invocation_id: row.invocationId, approval_id: row.approvalId, replayed: true, ...related } } };
  }
  if (e?.state === "Failed") {
    return { error: { code: GATEWAY_JSONRPC.executionFailed, message: "execution_failed", data: { error: "execution_failed", message: e.error ?? "execution failed", _meta: related } } };
  }
  const closed = state.closed ?? { status: "failed" as const, reason: null };
  const err = approvalClosedJsonRpc({ status: closed.status, approvalId: row.approvalId, tool: row.logicalTool ?? row.tool, reason: closed.reason });
  return { error: { code: err.code, message: err.message, data: { ...err.data, _meta: related } } };
}

function encodeCursor(row: TaskRow): string {
  return Buffer.from(JSON.stringify([row.createdAt.toISOString(), row.approvalId])).toString("base64url");
}

function decodeCursor(cursor: unknown): { createdAt: Date; approvalId: string } | null {
  if (typeof cursor !== "string" || cursor.length > 512) return null;
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (!Array.isArray(value) || value.length !== 2 || typeof value[0] !== "string" || typeof value[1] !== "string") return null;
    const createdAt = new Date(value[0]);
    if (Number.isNaN(createdAt.getTime()) || !idSchema.safeParse(value[1]).success) return null;
    return { createdAt, approvalId: value[1] };
  } catch {
    return null;
  }
}
