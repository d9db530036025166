import type { HeldState } from "./store.js";

// The types of held calls as MCP tasks (src/gateway/tasks.ts), apart so the gateway's options
// (protocol.ts) can name them without an import circle.

/** A task as MCP carries it (the SDK's `Task`). */
export type McpTask = {
  taskId: string;
  status: "working" | "input_required" | "completed" | "failed" | "cancelled";
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  /** null: kept for as long as the held record is (it is the audit trail; nothing purges it). */
  ttl: number | null;
  pollInterval?: number;
};

/** One held call with everything its task state is read from (src/gateway/postgres-tasks.ts reads it in one statement). */
export type TaskRow = {
  approvalId: string;
  virtualKeyId: string;
  workspaceId: string;
  /** The concrete tool, and the logical name the agent called when it differs. */
  tool: string;
  logicalTool: string | null;
  invocationId: string;
  heldState: HeldState;
  createdAt: Date;
  expiresAt: Date;
  /** Control's approval request: null until ingest has filed it. */
  request: {
    status: "pending" | "approved" | "rejected" | "expired" | "invalidated" | "default_deny" | "withdrawn";
    closeReason: string | null;
    executionStatus: "none" | "pending" | "dispatched" | "executed" | "failed";
    updatedAt: Date;
    deliveryError: string | null;
  } | null;
  /** The execution record of this approval (execute-once), when one was claimed for it. */
  execution: { state: "Executing" | "Executed" | "Failed"; result: unknown; error: string | null; updatedAt: Date } | null;
};

export interface TaskStore {
  findTask(approvalId: string): Promise<TaskRow | null>;
  /** The key's held calls, newest first, strictly after `after` (the previous page's last one). */
  listTasks(virtualKeyId: string, page: { after: { createdAt: Date; approvalId: string } | null; limit: number }): Promise<TaskRow[]>;
}

/**
 * Wakes a waiting `tasks/result` when a held call may have moved on. Countersign passes its event
 * bus's `approval:changed` (votes, decisions, expiry, delivery), so a decision made in any process
 * reaches the one that waits; the waiter also re-reads every `pollIntervalMs` for what a wake missed.
 */
export type TaskWake = { subscribe(listener: (approvalId: string) => void): () => void };

export type TaskOptions = {
  store: TaskStore;
  /**
   * The quorum and the reviewers of a pending request, in words (Countersign passes
   * src/services/approvals/review-progress.ts). Without it a waiting task says only that it waits.
   */
  reviewProgress?: (approvalId: string) => Promise<string | null>;
  wake?: TaskWake;
  /** Suggested to clients as `pollInterval` (for those that poll `tasks/get`). Default 2 s. */
  pollIntervalMs?: number;
  /**
   * How often a waiting `tasks/result` re-reads its task for a wake it missed (a lost Redis
   * message): the wake is what ends a wait; this is the sweep behind it. Default 30 s with a
   * `wake`, `pollIntervalMs` without one. A held call that reaches its expiry is re-read then too.
   */
  sweepIntervalMs?: number;
  /**
   * How often a waiting `tasks/result` writes on its SSE answer (a comment, or a progress
   * notification when the request carried a progress token), so no proxy's or client's idle
   * timeout ends it. Default 15 s.
   */
  keepAliveMs?: number;
  /**
   * Open `tasks/result` waits one virtual key may hold on one gateway process; past it the
   * request is answered -32004 not_ready (`task_waits_exhausted`). Default 16.
   */
  maxWaitsPerKey?: number;
  /**
   * Takes a cancelled call's request out of the reviewers' inbox (Countersign passes
   * src/services/approvals/withdraw.ts). Called once the execution is spent, so a failure here
   * leaves a request whose approval runs nothing.
   */
  withdraw?: (approvalId: string) => Promise<unknown>;
  /** Tasks per `tasks/list` page. Default 50. */
  listPageSize?: number;
};

export type RpcAnswer = { result: Record<string, unknown> } | { error: { code: number; message: string; data?: unknown } };
