import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { mintApprovalToken } from "../gateway/approval-token.js";
import type { ApprovalTicket } from "../gateway/errors.js";
import { RESUME_PATH, type ResumeBody } from "../gateway/gateway.js";
import type { Database, SqlRunner } from "../infra/db.js";
import type { EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import { policySetHashOf } from "../services/approvals/policies.js";
import { inTransaction } from "../services/approvals/sql.js";
import { createWorkerLoop } from "./loop.js";
import { expireOverdueRequests } from "../services/approvals/requests.js";
import { PREFLIGHT_CODES, preflightHeldCall, type HeldCallRequest, type PreflightCode } from "../services/approvals/authority.js";

/**
 * The delivery worker (seed 003, "Resume"): takes due delivery jobs with a lease and an attempt
 * fence, re-verifies everything under the workspace lock, mints the approval token, commits,
 * then calls the gateway's resume endpoint with the key HASH, the original arguments, the
 * idempotency key and the token.
 *
 * Fencing: leasing increments `fence`; every later write of the attempt says
 * `WHERE fence = <mine> AND status = 'leased'` (before the dispatch) or `'dispatching'` (after
 * the preflight committed: the resume call is in flight, and only then). A worker whose lease expired and was taken over
 * writes nothing — its preflight cannot commit, so it never dispatches — and the new holder's
 * dispatch of an already-executed call is replayed by the gateway, never executed again.
 */

export { PREFLIGHT_CODES, type PreflightCode };

export type DeliveryOptions = {
  db: Database;
  events: EventBus;
  logger: Logger;
  approvalSecret: string;
  tokenIssuer?: string;
  tokenAudience?: string;
  /** Approval token lifetime. Default 300 s. */
  tokenTtlSeconds?: number;
  /** The gateway's base URL; resume is `POST <gatewayUrl>/internal/v1/approvals/resume`. */
  gatewayUrl: string;
  /** The bearer token the gateway's resume endpoint expects. */
  serviceToken: string;
  /** Default 10 s (COUNTERSIGN_DELIVERY_INTERVAL_MS). */
  intervalMs?: number;
  batchSize?: number;
  /** Default 60 s; always longer than the HTTP timeout, so a live attempt keeps its lease. */
  leaseMs?: number;
  httpTimeoutMs?: number;
  /** Backoff: base × 2^(attempt-1), capped. Defaults 2 s and 5 min. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  maxAttempts?: number;
  owner?: string;
  fetch?: typeof fetch;
  /** Run a tick as soon as a request is approved (the event bus carries it across processes). Default true. */
  wakeOnApproval?: boolean;
};

export type LeasedJob = { id: string; requestId: string; fence: number; attempts: number };

export type DeliveryResult =
  | { kind: "lost_lease" }
  | { kind: "preflight_failed"; code: PreflightCode }
  | { kind: "delivered"; replayed: boolean }
  | { kind: "execution_failed" }
  | { kind: "retry"; reason: string; nextRunAt: Date }
  | { kind: "failed"; code: string };

export type DeliveryWorker = {
  tick(): Promise<DeliveryResult[]>;
  /** Leases due jobs (exported for tests that interleave two workers). */
  lease(limit?: number): Promise<LeasedJob[]>;
  deliver(job: LeasedJob): Promise<DeliveryResult>;
  start(): void;
  stop(): Promise<void>;
  readonly owner: string;
};

type Dispatch = { body: ResumeBody; orgId: string; workspaceId: string };

/**
 * Ends an attempt that may not dispatch (again): the job fails with the code and the request's
 * execution fails. `policy_changed` also closes an approved request as invalidated: it has not
 * executed, and seed 003 closes every unexecuted request under a changed policy set.
 */
async function failAttempt(tx: SqlRunner, jobId: string, requestId: string, code: PreflightCode, lastError: string | null = null): Promise<void> {
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

/** What minting the approval token needs. */
type TokenSettings = Pick<DeliveryOptions, "approvalSecret" | "tokenIssuer" | "tokenAudience" | "tokenTtlSeconds">;

/** What a retry works with: the worker's settings, resolved. */
type RetryDeps = { db: Database; events: EventBus; log: Logger; retryBaseMs: number; retryMaxMs: number; maxAttempts: number };

/** Leases up to `limit` due jobs for `owner`: the lease bumps each job's fence and its attempts. */
async function leaseJobs(db: Database, owner: string, leaseMs: number, limit: number): Promise<LeasedJob[]> {
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
      RETURNING j.id, j."requestId", j.fence, j.attempts`,
    [owner, leaseMs, limit],
  );
}

function publish(events: EventBus, orgId: string, workspaceId: string, requestId: string, reason: string): void {
  events.publish("approval:changed", { orgId, workspaceId, requestId, reason });
}

/** Step 1 and 2 of the seed: preflight under the workspace lock, then mint; one transaction. */
async function claim(db: Database, settings: TokenSettings, job: LeasedJob): Promise<{ kind: "lost_lease" } | { kind: "failed"; code: PreflightCode; orgId: string; workspaceId: string } | { kind: "dispatch"; dispatch: Dispatch }> {
  // The workspace id first (it never changes), so the workspace lock can be taken before the request's.
  const [head] = await db.sql.query<{ workspaceId: string }>(`SELECT "workspaceId" FROM approval_requests WHERE id = $1`, [job.requestId]);
  if (!head) return { kind: "lost_lease" };
  return inTransaction(db, async (tx) => {
    const [workspace] = await tx.query<{ id: string; frozen: boolean; archived: boolean }>(
      `SELECT id, frozen, ("archivedAt" IS NOT NULL) AS archived FROM workspaces WHERE id = $1 FOR UPDATE`,
      [head.workspaceId],
    );
    const [request] = await tx.query<
      HeldCallRequest & { logicalTool: string | null; invocationId: string; idempotencyKey: string; argumentHash: string; requestSnapshot: unknown }
    >(
      `SELECT id, "orgId", "workspaceId", "virtualKeyId", "connectionId", provider, tool, "logicalTool", "invocationId",
              "idempotencyKey", "argumentHash", "requestSnapshot", status::text AS status,
              "executionStatus"::text AS "executionStatus", "expiresAt", "policySetHash", "matchedRules"
         FROM approval_requests WHERE id = $1 FOR UPDATE`,
      [job.requestId],
    );
    const [fenced] = await tx.query<{ fence: number; status: string }>(`SELECT fence, status FROM delivery_jobs WHERE id = $1 FOR UPDATE`, [job.id]);
    if (!request || !workspace || !fenced || fenced.fence !== job.fence || fenced.status !== "leased") return { kind: "lost_lease" as const };

    const verdict = await preflightHeldCall(tx, request, workspace, new Date());
    if (verdict.code !== null) {
      await failAttempt(tx, job.id, request.id, verdict.code, verdict.detail);
      return { kind: "failed" as const, code: verdict.code, orgId: request.orgId, workspaceId: request.workspaceId };
    }

    const ticket = request.requestSnapshot as ApprovalTicket;
    const token = await mintApprovalToken(
      settings.approvalSecret,
      {
        approvalId: request.id,
        workspaceId: request.workspaceId,
        keyId: request.virtualKeyId,
        tool: request.tool,
        argumentHash: request.argumentHash,
        idempotencyKey: request.idempotencyKey,
      },
      {
        ...(settings.tokenIssuer ? { issuer: settings.tokenIssuer } : {}),
        ...(settings.tokenAudience ? { audience: settings.tokenAudience } : {}),
        ...(settings.tokenTtlSeconds ? { ttlSeconds: settings.tokenTtlSeconds } : {}),
      },
    );
    if (request.executionStatus === "pending") {
      await tx.query(`UPDATE approval_requests SET "executionStatus" = 'dispatched', revision = revision + 1, "updatedAt" = now() WHERE id = $1`, [request.id]);
    }
    // In flight from the commit on: a policy change leaves a dispatching job alone (it cannot
    // be retracted) and closes every other unexecuted one (invalidateStaleRequests).
    await tx.query(`UPDATE delivery_jobs SET status = 'dispatching', "updatedAt" = now() WHERE id = $1`, [job.id]);
    return {
      kind: "dispatch" as const,
      dispatch: {
        orgId: request.orgId,
        workspaceId: request.workspaceId,
        body: {
          approval_id: request.id,
          workspace_id: request.workspaceId,
          virtual_key_id: request.virtualKeyId,
          key_hash: verdict.keyHash,
          connection_id: request.connectionId,
          tool: request.tool,
          logical_tool: request.logicalTool,
          invocation_id: request.invocationId,
          arguments: ticket.arguments,
          idempotency_key: request.idempotencyKey,
          token,
        },
      },
    };
  });
}

/** A fenced final write: nothing happens unless this attempt still holds the lease. */
async function finish(
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
async function retry(deps: RetryDeps, job: LeasedJob, dispatch: Dispatch, reason: string): Promise<DeliveryResult> {
  const { db, events, log, retryBaseMs, retryMaxMs, maxAttempts } = deps;
  if (job.attempts >= maxAttempts) {
    const ok = await finish(db, job, dispatch, "failed", "failed", "delivery_exhausted", reason);
    if (ok) publish(events, dispatch.orgId, dispatch.workspaceId, dispatch.body.approval_id, "delivery_failed");
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
    publish(events, dispatch.orgId, dispatch.workspaceId, dispatch.body.approval_id, outcome.code === "policy_changed" ? "invalidated" : "delivery_failed");
  } else if (outcome.kind === "retry") {
    log.warn({ jobId: job.id, requestId: job.requestId, attempts: job.attempts, reason, nextRunAt }, "resume not delivered; retrying");
  }
  return outcome;
}

export function createDeliveryWorker(options: DeliveryOptions): DeliveryWorker {
  const { db, events, logger } = options;
  const owner = options.owner ?? `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
  const intervalMs = options.intervalMs ?? 10_000;
  const batchSize = options.batchSize ?? 20;
  const httpTimeoutMs = options.httpTimeoutMs ?? 15_000;
  const leaseMs = Math.max(options.leaseMs ?? 60_000, httpTimeoutMs * 2);
  const retryBaseMs = options.retryBaseMs ?? 2_000;
  const retryMaxMs = options.retryMaxMs ?? 300_000;
  const maxAttempts = options.maxAttempts ?? 10;
  const doFetch = options.fetch ?? fetch;
  const resumeUrl = new URL(RESUME_PATH, options.gatewayUrl).toString();
  const log = logger.child({ worker: "approval-delivery", owner });
  const retryDeps: RetryDeps = { db, events, log, retryBaseMs, retryMaxMs, maxAttempts };
  const lease = (limit = batchSize) => leaseJobs(db, owner, leaseMs, limit);

  async function deliver(job: LeasedJob): Promise<DeliveryResult> {
    const checked = await claim(db, options, job);
    if (checked.kind === "lost_lease") return checked;
    if (checked.kind === "failed") {
      log.warn({ jobId: job.id, requestId: job.requestId, code: checked.code }, "delivery preflight failed");
      publish(events, checked.orgId, checked.workspaceId, job.requestId, checked.code === "policy_changed" ? "invalidated" : "delivery_failed");
      return { kind: "preflight_failed", code: checked.code };
    }
    const { dispatch } = checked;
    publish(events, dispatch.orgId, dispatch.workspaceId, job.requestId, "dispatched");

    // Step 3: the transaction is committed; call the gateway.
    let status: number;
    let body: { status?: string; error?: string; retryable?: boolean; replayed?: boolean } = {};
    try {
      const response = await doFetch(resumeUrl, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${options.serviceToken}` },
        body: JSON.stringify(dispatch.body),
        signal: AbortSignal.timeout(httpTimeoutMs),
      });
      status = response.status;
      body = (await response.json().catch(() => ({}))) as typeof body;
    } catch (error) {
      return retry(retryDeps, job, dispatch, `gateway unreachable: ${error instanceof Error ? error.message : String(error)}`);
    }

    if (status === 200 && body.status === "executed") {
      const ok = await finish(db, job, dispatch, "delivered", "executed", null, null);
      if (!ok) return { kind: "lost_lease" };
      publish(events, dispatch.orgId, dispatch.workspaceId, job.requestId, "executed");
      return { kind: "delivered", replayed: body.replayed === true };
    }
    if (body.error === "execution_failed") {
      const ok = await finish(db, job, dispatch, "failed", "failed", "execution_failed", null);
      if (!ok) return { kind: "lost_lease" };
      publish(events, dispatch.orgId, dispatch.workspaceId, job.requestId, "execution_failed");
      return { kind: "execution_failed" };
    }
    if (status >= 500 || status === 429 || body.retryable === true) {
      return retry(retryDeps, job, dispatch, `gateway answered ${status} ${body.error ?? ""}`.trim());
    }
    const code = `gateway_${body.error ?? status}`;
    const ok = await finish(db, job, dispatch, "failed", "failed", code, `gateway answered ${status}`);
    if (!ok) return { kind: "lost_lease" };
    log.warn({ jobId: job.id, requestId: job.requestId, status, code }, "gateway refused the resume");
    publish(events, dispatch.orgId, dispatch.workspaceId, job.requestId, "delivery_failed");
    return { kind: "failed", code };
  }

  let lastSweep = 0;

  async function tick(): Promise<DeliveryResult[]> {
    // The expiry sweep runs once an interval, not on every approval wake-up.
    if (Date.now() - lastSweep >= intervalMs) {
      lastSweep = Date.now();
      await expireOverdueRequests(db, events);
    }
    const results: DeliveryResult[] = [];
    for (let round = 0; round < 100; round++) {
      const jobs = await lease();
      if (jobs.length === 0) break;
      results.push(...(await Promise.all(jobs.map((job) => deliver(job).catch((error: unknown): DeliveryResult => {
        log.error({ err: error, jobId: job.id }, "delivery attempt crashed; the lease will expire and another attempt follows");
        return { kind: "lost_lease" };
      })))));
      if (jobs.length < batchSize) break;
    }
    return results;
  }

  const loop = createWorkerLoop({
    intervalMs,
    tick,
    log,
    failed: "delivery tick failed",
    done: (results) => {
      if (results.length > 0) log.info({ results: results.map((r) => r.kind) }, "delivery jobs run");
    },
  });
  let subscription: (AsyncIterator<unknown> & AsyncIterable<unknown>) | null = null;

  return {
    owner,
    tick,
    lease,
    deliver,
    start() {
      if (loop.started) return;
      loop.start();
      if (options.wakeOnApproval !== false) {
        const iterator = events.subscribe("approval:changed");
        subscription = iterator;
        void (async () => {
          try {
            for await (const event of iterator) if (event.reason === "approved") loop.wake();
          } catch (error) {
            log.warn({ err: error }, "approval wake-up subscription ended");
          }
        })();
      }
    },
    async stop() {
      const stopping = loop.stop();
      await subscription?.return?.();
      subscription = null;
      await stopping;
    },
  };
}
