// The HCP Terraform run task worker (docs/integrations.md): leases open rows of
// hcp_run_task_requests, fetches and submits the plan of a new one, and PATCHes HCP's
// task-results as the gate moves; every PATCH is recorded in hcp_callback_attempts.
//
// - Lease: as webhook deliveries (UPDATE … FOR UPDATE SKIP LOCKED, a fence per lease): a row is
//   written back only by the worker holding the current fence, and an expired lease (a worker or
//   a whole process that stopped between HCP's request and the callback) is taken over.
// - Results: `running` with what the gate is missing, from whom (sent again when that changes,
//   and at least every five minutes: HCP errors a task with no update for ten); `passed` when the
//   gate passes; `failed` when the plan can no longer pass (superseded, discarded), when it could
//   not be fetched or submitted, and at the result deadline (COUNTERSIGN_HCP_RESULT_DEADLINE_MS,
//   before HCP's own 60 minutes) while the gate still waits.
// - Retries: a failed PATCH is retried with the webhook worker's backoff until maxAttempts; a
//   refused address or host, or a 4xx, is not retried. Once the task is done (a final result
//   delivered, or given up) its access token is dropped.

import { randomUUID } from "node:crypto";
import { AppError } from "../errors.js";
import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import type { EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import { evaluateLive, loadPlanHead } from "../services/gate.js";
import { fetchPlanJson, HCP_HEARTBEAT_MS, memberAuthz, openAccessToken, patchTaskResult, type HttpOutcome } from "../services/hcp-run-task.js";
import { submitPlan } from "../services/plans.js";
import { createWorkerLoop } from "./loop.js";
import { backoffMs } from "./leased-delivery.js";

export interface HcpRunTaskWorker {
  /** One pass: lease due requests and move each on. Returns how many were leased. */
  tick(): Promise<number>;
  start(): void;
  /** Runs the next tick now (a request was just recorded). */
  wake(): void;
  stop(): Promise<void>;
}

interface Leased {
  id: string;
  fence: number;
  orgId: string;
  runTaskId: string;
  configuredById: string;
  state: "received" | "tracking";
  workspaceId: string | null;
  planId: string | null;
  planJsonUrl: string | null;
  runUrl: string | null;
  callbackUrl: string;
  accessTokenSealed: string | null;
  decidedStatus: string | null;
  decidedMessage: string | null;
  sentStatus: string | null;
  sentMessage: string | null;
  sentAt: Date | null;
  attempts: number;
  deadlineAt: Date;
}

export interface TaskResult {
  status: "running" | "passed" | "failed";
  message: string;
  url: string | null;
}

/** HCP shows the message on the run page: one short paragraph. */
const MAX_MESSAGE = 1000;
const clip = (s: string) => (s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE - 1)}…` : s);

export const DEADLINE_MESSAGE = "Approval still pending at HCP Terraform's deadline for a run task; re-run the plan in HCP Terraform once the approvers are ready (a new run is a new plan to approve).";

export function createHcpRunTaskWorker(deps: { db: Database; config: Config; events: EventBus; logger: Logger; batchSize?: number }): HcpRunTaskWorker {
  const { db, config } = deps;
  const settings = config.hcp;
  const log = deps.logger.child({ module: "hcp-run-task" });
  const owner = `hcp-${randomUUID()}`;
  const batchSize = deps.batchSize ?? 20;
  // A lease covers a plan fetch, a submission and a PATCH, each bounded by the timeout.
  const leaseMs = settings.timeoutMs * 3 + 30_000;

  const planPage = (planId: string) => (config.publicUrl ? new URL(`/#plan/${planId}`, config.publicUrl).href : null);

  async function lease(): Promise<Leased[]> {
    return db.sql.query<Leased>(
      `UPDATE hcp_run_task_requests r
          SET "leaseOwner" = $1, "leaseExpiresAt" = now() + ($2::int * interval '1 millisecond'), fence = r.fence + 1, "updatedAt" = now()
        WHERE r.id IN (
          SELECT id FROM hcp_run_task_requests
           WHERE state <> 'done'
             AND (("leaseOwner" IS NULL AND "nextRunAt" <= now()) OR "leaseExpiresAt" < now())
           ORDER BY "nextRunAt", id
           LIMIT $3
           FOR UPDATE SKIP LOCKED)
        RETURNING r.id, r.fence, r."orgId", r."runTaskId", (SELECT "configuredById" FROM hcp_run_tasks t WHERE t.id = r."runTaskId") AS "configuredById",
                  r.state, r."workspaceId", r."planId", r."planJsonUrl", r."runUrl", r."callbackUrl", r."accessTokenSealed",
                  r."decidedStatus", r."decidedMessage", r."sentStatus", r."sentMessage", r."sentAt", r.attempts, r."deadlineAt"`,
      [owner, leaseMs, batchSize],
    );
  }

  /** Writes the row back (and releases the lease) only under the job's fence. */
  async function save(job: Leased, fields: Record<string, unknown>, nextInMs: number): Promise<void> {
    const names = Object.keys(fields);
    const sets = names.map((name, i) => `"${name}" = $${i + 4}`);
    await db.sql.query(
      `UPDATE hcp_run_task_requests
          SET ${[...sets, `"leaseOwner" = NULL`, `"leaseExpiresAt" = NULL`, `"nextRunAt" = now() + ($3::int * interval '1 millisecond')`, `"updatedAt" = now()`].join(", ")}
        WHERE id = $1 AND fence = $2`,
      [job.id, job.fence, Math.round(nextInMs), ...names.map((n) => fields[n])],
    );
  }

  const done = { state: "done", accessTokenSealed: null };

  /** The result the gate calls for now. */
  async function gateResult(job: Leased & { planId: string }): Promise<TaskResult> {
    const url = planPage(job.planId);
    const [row] = await db.sql.query<{ status: string; discardReason: string | null; workspaceName: string }>(
      `SELECT p.status::text AS status, p."discardReason", w.name AS "workspaceName" FROM plans p JOIN workspaces w ON w.id = p."workspaceId" WHERE p.id = $1 AND p."orgId" = $2`,
      [job.planId, job.orgId],
    );
    if (!row) return { status: "failed", message: "The Countersign plan for this run no longer exists.", url: null };
    if (row.status === "discarded") {
      const why = row.discardReason === "superseded" ? `superseded by a newer plan on ${row.workspaceName}` : `discarded (${row.discardReason ?? "no reason given"})`;
      return { status: "failed", message: clip(`The Countersign plan was ${why}: it can no longer pass.`), url };
    }
    if (row.status !== "planned") return { status: "passed", message: "The Countersign gate passed.", url };
    const head = await loadPlanHead(db.sql, job.orgId, job.planId);
    if (!head) return { status: "failed", message: "The Countersign plan for this run no longer exists.", url: null };
    const { evaluation } = await evaluateLive(db.sql, head, 0);
    if (evaluation.passed) {
      const n = evaluation.approvalsCounted;
      return { status: "passed", message: n === 0 ? "The Countersign gate passed: no approval is needed for these changes." : `The Countersign gate passed with ${n} approval${n === 1 ? "" : "s"}.`, url };
    }
    return { status: "running", message: clip(`Waiting for approval in Countersign. ${evaluation.reasons.map((r) => r.message).join(" ")}`), url };
  }

  /** A new request: fetch HCP's plan and submit it as the run task's member. A result when it cannot be. */
  async function submit(job: Leased, token: string): Promise<{ planId: string } | { retry: HttpOutcome } | { result: TaskResult }> {
    const fail = (message: string) => ({ result: { status: "failed" as const, message: clip(message), url: null } });
    if (!job.planJsonUrl || !job.workspaceId) return fail("The run task request has no plan or workspace to gate.");
    const fetched = await fetchPlanJson(config, job.planJsonUrl, token);
    if (!fetched.ok) {
      log.warn({ requestId: job.id, error: fetched.error }, "hcp plan json fetch failed");
      if (!fetched.permanent && job.attempts + 1 < settings.maxAttempts && Date.now() < job.deadlineAt.getTime()) return { retry: fetched };
      return fail(`Countersign could not fetch the plan JSON from HCP Terraform (${fetched.error ?? "no answer"}).`);
    }
    let plan: unknown;
    try {
      plan = JSON.parse(fetched.body!.toString("utf8"));
    } catch {
      return fail("The plan JSON HCP Terraform served is not JSON.");
    }
    try {
      const authz = memberAuthz(db, job.orgId, job.configuredById);
      const created = await submitPlan({ db, authz, events: deps.events }, { workspaceId: job.workspaceId, plan, runUrl: job.runUrl }, { origin: "hcp_terraform_run" });
      log.info({ requestId: job.id, planId: created.id }, "hcp run submitted as a plan");
      return { planId: created.id };
    } catch (error) {
      // The member's rights decide, as the API would: fail closed when they may no longer plan.
      if (error instanceof AppError) return fail(`Countersign refused the plan, submitted as the member who configured the run task: ${error.message}`);
      throw error;
    }
  }

  async function deliver(job: Leased, token: string, result: TaskResult, extra: Record<string, unknown>): Promise<void> {
    const outcome = await patchTaskResult(config, job.callbackUrl, token, result);
    await db.sql.query(
      `INSERT INTO hcp_callback_attempts (id, "requestId", status, message, ok, "responseCode", error) VALUES (gen_random_uuid()::text, $1, $2, $3, $4, $5, $6)`,
      [job.id, result.status, result.message, outcome.ok, outcome.status, outcome.error],
    );
    const final = result.status !== "running";
    if (outcome.ok) {
      log.info({ requestId: job.id, status: result.status }, "hcp task result delivered");
      return save(job, { ...extra, sentStatus: result.status, sentMessage: result.message, sentAt: new Date(), attempts: 0, ...(final ? done : {}) }, settings.intervalMs);
    }
    const attempts = job.attempts + 1;
    log.warn({ requestId: job.id, status: result.status, attempt: attempts, error: outcome.error }, "hcp task result not delivered");
    if (outcome.permanent || attempts >= settings.maxAttempts) {
      // HCP will not take it (or never answered): the task ends there, and its token with it.
      return save(job, { ...extra, attempts, ...done }, 0);
    }
    return save(job, { ...extra, attempts }, backoffMs(attempts, settings.retryBaseMs));
  }

  async function move(job: Leased): Promise<void> {
    const token = job.accessTokenSealed ? openAccessToken(config, job.accessTokenSealed) : null;
    if (!token) {
      if (job.accessTokenSealed && Date.now() < job.deadlineAt.getTime()) {
        // Fail closed, and wait: the sealing key may come back (a restart with the right one).
        log.error({ requestId: job.id }, "hcp access token cannot be opened with the configured COUNTERSIGN_WEBHOOK_SECRET_KEY");
        return save(job, {}, backoffMs(job.attempts + 1, settings.retryBaseMs));
      }
      return save(job, done, 0);
    }
    let extra: Record<string, unknown> = {};
    let result: TaskResult;
    if (job.decidedStatus) {
      result = { status: job.decidedStatus as TaskResult["status"], message: job.decidedMessage ?? "", url: job.planId ? planPage(job.planId) : null };
    } else if (job.state === "received" || !job.planId) {
      const submitted = await submit(job, token);
      if ("retry" in submitted) return save(job, { attempts: job.attempts + 1 }, backoffMs(job.attempts + 1, settings.retryBaseMs));
      if ("result" in submitted) {
        extra = { decidedStatus: submitted.result.status, decidedMessage: submitted.result.message, attempts: 0 };
        job = { ...job, attempts: 0 };
        result = submitted.result;
      } else {
        extra = { planId: submitted.planId, state: "tracking", attempts: 0 };
        job = { ...job, planId: submitted.planId, state: "tracking", attempts: 0 };
        result = await gateResult(job as Leased & { planId: string });
      }
    } else {
      result = await gateResult(job as Leased & { planId: string });
    }
    if (result.status === "running" && Date.now() >= job.deadlineAt.getTime()) result = { ...result, status: "failed", message: DEADLINE_MESSAGE };
    const changed = result.status !== job.sentStatus || result.message !== job.sentMessage;
    const heartbeat = result.status === "running" && (!job.sentAt || Date.now() - new Date(job.sentAt).getTime() >= HCP_HEARTBEAT_MS);
    if (!changed && !heartbeat) return save(job, extra, settings.intervalMs);
    return deliver(job, token, result, extra);
  }

  async function tick(): Promise<number> {
    const jobs = await lease();
    await Promise.all(
      jobs.map((job) =>
        move(job).catch(async (error: unknown) => {
          log.error({ err: error, requestId: job.id }, "hcp run task step crashed");
          // A transient fault ends this step, not the task: it is taken up again after a pause.
          await save(job, {}, backoffMs(job.attempts + 1, settings.retryBaseMs)).catch(() => {});
        }),
      ),
    );
    return jobs.length;
  }

  const loop = createWorkerLoop({ intervalMs: settings.intervalMs, tick, log, failed: "hcp run task tick failed" });

  // A gate that may have moved (an approval, a newer plan, a grant) wakes the loop at once; the
  // interval still reads every open task, so a lost event only delays a callback.
  let iterators: AsyncIterator<unknown>[] = [];
  function listen(): void {
    for (const topic of ["gate:changed", "authz:changed"] as const) {
      const it = deps.events.subscribe(topic);
      iterators.push(it);
      void (async () => {
        for (;;) {
          const next = await it.next();
          if (next.done) return;
          loop.wake();
        }
      })().catch((error: unknown) => log.warn({ err: String(error) }, "hcp run task wake-ups stopped: open tasks are read on the interval"));
    }
  }

  return {
    tick,
    wake: loop.wake,
    start() {
      if (loop.started) return;
      loop.start();
      listen();
    },
    async stop() {
      const open = iterators;
      iterators = [];
      await Promise.all(open.map((it) => it.return?.()));
      await loop.stop();
    },
  };
}
