import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { RESUME_PATH } from "../gateway/gateway.js";
import type { Database } from "../infra/db.js";
import type { EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import { inSpan } from "../infra/tracing.js";
import { expireOverdueRequests } from "../services/approvals/requests.js";
import { PREFLIGHT_CODES, type PreflightCode } from "../services/approvals/authority.js";
import { claim, type TokenSettings } from "./delivery/claim.js";
import { leaseJobs, publishChange, type DeliveryResult, type LeasedJob } from "./delivery/jobs.js";
import { callResume, type ResumeCall } from "./delivery/resume-call.js";
import { finish, retry, type RetryDeps } from "./delivery/settle.js";
import { createWorkerLoop, type WorkerLoop } from "./loop.js";

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
 *
 * An attempt's steps are modules under ./delivery/: the lease (jobs.ts), the claim under the
 * workspace lock (claim.ts), the resume call (resume-call.ts) and its fenced outcome
 * (settle.ts). This file resolves the settings and runs them: deliver, tick, start and stop.
 */

export { PREFLIGHT_CODES, type PreflightCode, type LeasedJob, type DeliveryResult };

export type DeliveryOptions = TokenSettings & {
  db: Database;
  events: EventBus;
  logger: Logger;
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

export type DeliveryWorker = {
  tick(): Promise<DeliveryResult[]>;
  /** Leases due jobs (exported for tests that interleave two workers). */
  lease(limit?: number): Promise<LeasedJob[]>;
  deliver(job: LeasedJob): Promise<DeliveryResult>;
  start(): void;
  stop(): Promise<void>;
  readonly owner: string;
};

export function createDeliveryWorker(options: DeliveryOptions): DeliveryWorker {
  const { db, events, logger } = options;
  const owner = options.owner ?? `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
  const intervalMs = options.intervalMs ?? 10_000;
  const batchSize = options.batchSize ?? 20;
  const httpTimeoutMs = options.httpTimeoutMs ?? 15_000;
  const leaseMs = Math.max(options.leaseMs ?? 60_000, httpTimeoutMs * 2);
  const log = logger.child({ worker: "approval-delivery", owner });
  const retryDeps: RetryDeps = {
    db,
    events,
    log,
    retryBaseMs: options.retryBaseMs ?? 2_000,
    retryMaxMs: options.retryMaxMs ?? 300_000,
    maxAttempts: options.maxAttempts ?? 10,
  };
  const resume: ResumeCall = {
    url: new URL(RESUME_PATH, options.gatewayUrl).toString(),
    serviceToken: options.serviceToken,
    timeoutMs: httpTimeoutMs,
    fetch: options.fetch ?? fetch,
  };
  const lease = (limit = batchSize) => leaseJobs(db, owner, leaseMs, limit);

  /**
   * One attempt, in a span continuing the trace of the vote that queued the job (traces on): the
   * claim's SQL, the resume call (which sends this span's traceparent to the gateway) and what
   * became of it read under the approval's own trace.
   */
  function deliver(job: LeasedJob): Promise<DeliveryResult> {
    return inSpan(
      "approval delivery",
      { kind: "internal", parent: job.traceparent, attributes: { "countersign.delivery.id": job.id, "countersign.delivery.attempt": job.attempts } },
      async (span) => {
        const result = await attempt(job);
        span?.setAttributes({ "countersign.delivery.outcome": result.kind });
        // A lease another worker took over is not a failure of the delivery: that worker goes on.
        if (result.kind === "preflight_failed" || result.kind === "execution_failed" || result.kind === "failed") span?.fail(result.kind);
        return result;
      },
    );
  }

  async function attempt(job: LeasedJob): Promise<DeliveryResult> {
    const checked = await claim(db, options, job);
    if (checked.kind === "lost_lease") return checked;
    if (checked.kind === "failed") {
      log.warn({ jobId: job.id, requestId: job.requestId, code: checked.code }, "delivery preflight failed");
      publishChange(events, checked.orgId, checked.workspaceId, job.requestId, checked.code === "policy_changed" ? "invalidated" : "delivery_failed");
      return { kind: "preflight_failed", code: checked.code };
    }
    const { dispatch } = checked;
    const published = (reason: string) => publishChange(events, dispatch.orgId, dispatch.workspaceId, job.requestId, reason);
    published("dispatched");

    const answer = await callResume(resume, dispatch.body);
    switch (answer.kind) {
      case "retry":
        return retry(retryDeps, job, dispatch, answer.reason);
      case "executed": {
        if (!(await finish(db, job, dispatch, "delivered", "executed", null, null))) return { kind: "lost_lease" };
        published("executed");
        return { kind: "delivered", replayed: answer.replayed };
      }
      case "execution_failed": {
        if (!(await finish(db, job, dispatch, "failed", "failed", "execution_failed", null))) return { kind: "lost_lease" };
        published("execution_failed");
        return { kind: "execution_failed" };
      }
      case "refused": {
        const { status, code } = answer;
        if (!(await finish(db, job, dispatch, "failed", "failed", code, `gateway answered ${status}`))) return { kind: "lost_lease" };
        log.warn({ jobId: job.id, requestId: job.requestId, status, code }, "gateway refused the resume");
        published("delivery_failed");
        return { kind: "failed", code };
      }
    }
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
  let stopWaking: (() => Promise<void>) | null = null;

  return {
    owner,
    tick,
    lease,
    deliver,
    start() {
      if (loop.started) return;
      loop.start();
      if (options.wakeOnApproval !== false) stopWaking = wakeOnApproval(events, loop, log);
    },
    async stop() {
      const stopping = loop.stop();
      await stopWaking?.();
      stopWaking = null;
      await stopping;
    },
  };
}

/** Runs the loop's next tick as soon as a request is approved, on any process; returns the unsubscribe. */
function wakeOnApproval(events: EventBus, loop: WorkerLoop, log: Logger): () => Promise<void> {
  const iterator = events.subscribe("approval:changed");
  void (async () => {
    try {
      for await (const event of iterator) if (event.reason === "approved") loop.wake();
    } catch (error) {
      log.warn({ err: error }, "approval wake-up subscription ended");
    }
  })();
  return async () => {
    await iterator.return?.();
  };
}
