// The approval delivery queue (delivery_jobs): what a leased job and an attempt's outcome are,
// and the lease itself. Leasing bumps the job's fence; every later write of the attempt is
// fenced on it (./claim.ts, ./settle.ts).

import type { ResumeBody } from "../../gateway/gateway.js";
import type { Database } from "../../infra/db.js";
import type { EventBus } from "../../infra/events.js";
import type { PreflightCode } from "../../services/approvals/authority.js";

/** `traceparent`: the trace of the vote that queued it (traces on), which the attempt continues. */
export type LeasedJob = { id: string; requestId: string; fence: number; attempts: number; traceparent: string | null };

export type DeliveryResult =
  | { kind: "lost_lease" }
  | { kind: "preflight_failed"; code: PreflightCode }
  | { kind: "delivered"; replayed: boolean }
  | { kind: "execution_failed" }
  | { kind: "retry"; reason: string; nextRunAt: Date }
  | { kind: "failed"; code: string };

/** A claimed attempt: the resume call's body, and where its request lives. */
export type Dispatch = { body: ResumeBody; orgId: string; workspaceId: string };

/** Leases up to `limit` due jobs for `owner`: the lease bumps each job's fence and its attempts. */
export async function leaseJobs(db: Database, owner: string, leaseMs: number, limit: number): Promise<LeasedJob[]> {
  return db.sql.query<LeasedJob>(
    `UPDATE delivery_jobs j
        SET status = 'leased', fence = j.fence + 1, "leaseOwner" = $1,
            "leaseExpiresAt" = now() + make_interval(secs => $2::double precision / 1000),
            attempts = j.attempts + 1, "updatedAt" = now()
      WHERE j.id IN (
        SELECT id FROM delivery_jobs
         WHERE (status = 'queued' AND "nextRunAt" <= now()) OR (status IN ('leased', 'dispatching') AND "leaseExpiresAt" <= now())
         ORDER BY "nextRunAt"
         LIMIT $3
         FOR UPDATE SKIP LOCKED)
      RETURNING j.id, j."requestId", j.fence, j.attempts, j.traceparent`,
    [owner, leaseMs, limit],
  );
}

/** Publishes what became of the request (approval:changed, `reason`). */
export function publishChange(events: EventBus, orgId: string, workspaceId: string, requestId: string, reason: string): void {
  events.publish("approval:changed", { orgId, workspaceId, requestId, reason });
}
