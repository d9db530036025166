import type { SqlRunner } from "../infra/db.js";
import type { HeldState } from "./store.js";
import type { TaskRow, TaskStore } from "./task-types.js";

/**
 * Held calls' task state on Countersign's PostgreSQL, one statement per read: the gateway's held
 * record, control's approval request (null until ingest files it) with its delivery's error, and
 * the execution claimed for this approval. Times are read as epoch milliseconds (the columns are
 * UTC without a zone), so no driver's time-zone setting can move them.
 */
export function createPostgresTaskStore(sql: SqlRunner): TaskStore {
  return {
    async findTask(approvalId) {
      const [row] = await sql.query<Row>(`${SELECT} WHERE g."approvalId" = $1`, [approvalId]);
      return row ? toTaskRow(row) : null;
    },
    async listTasks(virtualKeyId, page) {
      const rows = page.after
        ? await sql.query<Row>(
            `${SELECT} WHERE g."virtualKeyId" = $1 AND (g."createdAt", g."approvalId") < (to_timestamp($2::double precision / 1000) AT TIME ZONE 'UTC', $3)
              ORDER BY g."createdAt" DESC, g."approvalId" DESC LIMIT $4`,
            [virtualKeyId, page.after.createdAt.getTime(), page.after.approvalId, page.limit],
          )
        : await sql.query<Row>(`${SELECT} WHERE g."virtualKeyId" = $1 ORDER BY g."createdAt" DESC, g."approvalId" DESC LIMIT $2`, [virtualKeyId, page.limit]);
      return rows.map(toTaskRow);
    },
  };
}

const ms = (column: string) => `(extract(epoch from ${column}) * 1000)::double precision`;

const SELECT = `
SELECT g."approvalId", g."virtualKeyId", g."workspaceId", g.tool, g."logicalTool", g."invocationId", g.state AS "heldState",
       ${ms('g."createdAt"')} AS "createdAt", ${ms('g."expiresAt"')} AS "expiresAt",
       r.status::text AS "requestStatus", r."closeReason", r."executionStatus"::text AS "executionStatus", ${ms('r."updatedAt"')} AS "requestUpdatedAt",
       d."errorCode" AS "deliveryError",
       e.state AS "executionState", e.result AS "executionResult", e.error AS "executionError",
       ${ms('COALESCE(e."finishedAt", e."startedAt")')} AS "executionUpdatedAt"
  FROM gateway_invocations g
  LEFT JOIN approval_requests r ON r.id = g."approvalId"
  LEFT JOIN delivery_jobs d ON d."requestId" = g."approvalId"
  LEFT JOIN gateway_executions e ON e."virtualKeyId" = g."virtualKeyId" AND e."idempotencyKey" = g."idempotencyKey" AND e."approvalId" = g."approvalId"`;

type Row = {
  approvalId: string;
  virtualKeyId: string;
  workspaceId: string;
  tool: string;
  logicalTool: string | null;
  invocationId: string;
  heldState: string;
  createdAt: number;
  expiresAt: number;
  requestStatus: string | null;
  closeReason: string | null;
  executionStatus: string | null;
  requestUpdatedAt: number | null;
  deliveryError: string | null;
  executionState: string | null;
  executionResult: unknown;
  executionError: string | null;
  executionUpdatedAt: number | null;
};

function toTaskRow(row: Row): TaskRow {
  return {
    approvalId: row.approvalId,
    virtualKeyId: row.virtualKeyId,
    workspaceId: row.workspaceId,
    tool: row.tool,
    logicalTool: row.logicalTool,
    invocationId: row.invocationId,
    heldState: row.heldState as HeldState,
    createdAt: new Date(Number(row.createdAt)),
    expiresAt: new Date(Number(row.expiresAt)),
    request: row.requestStatus
      ? {
          status: row.requestStatus as NonNullable<TaskRow["request"]>["status"],
          closeReason: row.closeReason,
          executionStatus: (row.executionStatus ?? "none") as NonNullable<TaskRow["request"]>["executionStatus"],
          updatedAt: new Date(Number(row.requestUpdatedAt)),
          deliveryError: row.deliveryError,
        }
      : null,
    execution: row.executionState
      ? {
          state: row.executionState as NonNullable<TaskRow["execution"]>["state"],
          result: row.executionResult ?? null,
          error: row.executionError,
          updatedAt: new Date(Number(row.executionUpdatedAt)),
        }
      : null,
  };
}
