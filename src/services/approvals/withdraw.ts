import type { Database } from "../../infra/db.js";
import type { EventBus } from "../../infra/events.js";
import { inTransaction } from "./sql.js";

/**
 * Its agent withdrew a held call (MCP tasks/cancel; the gateway has already spent its execution,
 * so nothing can run it): the request leaves the reviewers' inbox as `withdrawn`, a queued
 * delivery is cancelled, and live subscribers hear of it. A request already decided and on its
 * way (dispatched), or closed, is left as it is: false.
 */
export async function withdrawApprovalRequest(db: Database, events: EventBus, approvalId: string): Promise<boolean> {
  const closed = await inTransaction(db, async (tx) => {
    const rows = await tx.query<{ orgId: string; workspaceId: string }>(
      `UPDATE approval_requests
          SET status = 'withdrawn', "closeReason" = 'withdrawn', "decidedAt" = now(), "updatedAt" = now(), revision = revision + 1,
              "executionStatus" = CASE WHEN "executionStatus" = 'pending' THEN 'failed'::"ExecutionStatus" ELSE "executionStatus" END
        WHERE id = $1 AND (status = 'pending' OR (status = 'approved' AND "executionStatus" IN ('none', 'pending')))
        RETURNING "orgId", "workspaceId"`,
      [approvalId],
    );
    if (rows.length === 0) return null;
    await tx.query(
      `UPDATE delivery_jobs SET status = 'failed', "errorCode" = 'withdrawn', "leaseOwner" = NULL, "leaseExpiresAt" = NULL, "updatedAt" = now()
        WHERE "requestId" = $1 AND status IN ('queued', 'leased')`,
      [approvalId],
    );
    return rows[0]!;
  });
  if (!closed) return false;
  events.publish("approval:changed", { orgId: closed.orgId, workspaceId: closed.workspaceId, requestId: approvalId, reason: "withdrawn" });
  return true;
}
