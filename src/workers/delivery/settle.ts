// Step 4 of a delivery attempt: what its outcome writes, fenced on the attempt's lease. A
// delivered or refused call is finished; one that did not get through is queued again with
// backoff, or failed once out of attempts or no longer deliverable; an attempt that may not
// dispatch (again) fails its job and its request's execution.

import type { Database, SqlRunner } from "../../infra/db.js";
import type { EventBus } from "../../infra/events.js";
import type { Logger } from "../../infra/logger.js";
import type { PreflightCode } from "../../services/approvals/authority.js";
import { policySetHashOf } from "../../services/approvals/policies.js";
import { inTransaction } from "../../services/approvals/sql.js";
import { publishChange, type DeliveryResult, type Dispatch, type LeasedJob } from "./jobs.js";

/** What a retry works with: the worker's settings, resolved. */
export type RetryDeps = { db: Database; events: EventBus; log: Logger; retryBaseMs: number; retryMaxMs: number; maxAttempts: number };

/**
 * Ends an attempt that may not dispatch (again): the job fails with the code and the request's
 * execution fails. `policy_changed` also closes an approved request as invalidated: it has not
 * executed, and seed 003 closes every unexecuted request under a changed policy set.
 */
export async function failAttempt(tx: SqlRunner, jobId: string, requestId: string, code: PreflightCode, lastError: string | null = null): Promise<void> {
  await tx.query(
    `UPDATE delivery_jobs SET status = 'failed', "errorCode" = $2, "lastError" = $3, "leaseOwner" = NULL, "leaseExpiresAt" = NULL, "updatedAt" = now()
      WHERE id = $1`,
    [jobId, code, lastError],
  );
  await tx.query(
    `UPDATE approval_requests
        SET revision = revision + 1, "updatedAt" = now(),
            "executionStatus" = CASE WHEN "executionStatus" IN ('pending', 'dispatched') THEN 'failed'::"ExecutionStatus" ELSE "executionStatus" END,
            status = CASE WHEN $2 = 'policy_changed' AND status = 'approved' THEN 'invalidated'::"ApprovalRequestStatus" ELSE status END,
            "closeReason" = CASE WHEN $2 = 'policy_changed' AND status = 'approved' THEN 'policy_changed' ELSE "closeReason" END,
            "decidedAt" = CASE WHEN $2 = 'policy_changed' AND status = 'approved' THEN now() ELSE "decidedAt" END
      WHERE id = $1`,
    [requestId, code],
  );
}

/** A fenced final write: nothing happens unless this attempt still holds the lease. */
export async function finish(
  db: Database,
  job: LeasedJob,
  dispatch: Dispatch,
  jobStatus: "delivered" | "failed",
  executionStatus: "executed" | "failed",
  errorCode: string | null,
  lastError: string | null,
): Promise<boolean> {
  return inTransaction(db, async (tx) => {
    const moved = await tx.query<{ id: string }>(
      `UPDATE delivery_jobs
          SET status = $3, "errorCode" = $4, "lastError" = $5, "leaseOwner" = NULL, "leaseExpiresAt" = NULL, "updatedAt" = now()
        WHERE id = $1 AND fence = $2 AND status = 'dispatching'
        RETURNING id`,
      [job.id, job.fence, jobStatus, errorCode, lastError],
    );
    if (moved.length === 0) return false;
    await tx.query(
      `UPDATE approval_requests SET "executionStatus" = $2::"ExecutionStatus", revision = revision + 1, "updatedAt" = now() WHERE id = $1`,
      [dispatch.body.approval_id, executionStatus],
    );
    return true;
  });
}

/**
 * An attempt that did not get through: queued again with backoff, or failed once out of attempts
 * (or when the request may no longer be delivered).
 */
export async function retry(deps: RetryDeps, job: LeasedJob, dispatch: Dispatch, reason: string): Promise<DeliveryResult> {
  const { db, events, log, retryBaseMs, retryMaxMs, maxAttempts } = deps;
  if (job.attempts >= maxAttempts) {
    const ok = await finish(db, job, dispatch, "failed", "failed", "delivery_exhausted", reason);
    if (ok) publishChange(events, dispatch.orgId, dispatch.workspaceId, dispatch.body.approval_id, "delivery_failed");
    return ok ? { kind: "failed", code: "delivery_exhausted" } : { kind: "lost_lease" };
  }
  const delay = Math.min(retryBaseMs * 2 ** (job.attempts - 1), retryMaxMs);
  const nextRunAt = new Date(Date.now() + delay);
  // Under the workspace lock, like the preflight: a policy change that landed while this
  // attempt was in flight (and so had to leave it alone) closes the request now, before it
  // could wait for another attempt as if still approved.
  const outcome = await inTransaction(db, async (tx): Promise<DeliveryResult> => {
    await tx.query(`SELECT id FROM workspaces WHERE id = $1 FOR UPDATE`, [dispatch.workspaceId]);
    const [request] = await tx.query<{ status: string; policySetHash: string }>(
      `SELECT status::text AS status, "policySetHash" FROM approval_requests WHERE id = $1 FOR UPDATE`,
      [job.requestId],
    );
    const [fenced] = await tx.query<{ fence: number; status: string }>(`SELECT fence, status FROM delivery_jobs WHERE id = $1 FOR UPDATE`, [job.id]);
    if (!request || !fenced || fenced.fence !== job.fence || fenced.status !== "dispatching") return { kind: "lost_lease" };
    const code: PreflightCode | null =
      request.status !== "approved"
        ? "approval_not_executable"
        : (await policySetHashOf(tx, dispatch.workspaceId)) !== request.policySetHash
          ? "policy_changed"
          : null;
    if (code !== null) {
      await failAttempt(tx, job.id, job.requestId, code, reason);
      return { kind: "failed", code };
    }
    await tx.query(
      `UPDATE delivery_jobs
          SET status = 'queued', "nextRunAt" = $2, "lastError" = $3, "leaseOwner" = NULL, "leaseExpiresAt" = NULL, "updatedAt" = now()
        WHERE id = $1`,
      [job.id, nextRunAt, reason],
    );
    return { kind: "retry", reason, nextRunAt };
  });
  if (outcome.kind === "failed") {
    log.warn({ jobId: job.id, requestId: job.requestId, code: outcome.code, reason }, "resume not delivered, and the request may no longer be delivered");
    publishChange(events, dispatch.orgId, dispatch.workspaceId, dispatch.body.approval_id, outcome.code === "policy_changed" ? "invalidated" : "delivery_failed");
  } else if (outcome.kind === "retry") {
    log.warn({ jobId: job.id, requestId: job.requestId, attempts: job.attempts, reason, nextRunAt }, "resume not delivered; retrying");
  }
  return outcome;
}
