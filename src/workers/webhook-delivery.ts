// The webhook delivery worker (docs/webhooks.md): leases due rows of webhook_deliveries (the
// outbox), POSTs each signed to its webhook, and records the outcome under the lease's fence.
//
// - Lease: one UPDATE … FOR UPDATE SKIP LOCKED moves due rows to `delivering` and bumps their
//   fence; a row is written back only by the worker holding the current fence, so two workers
//   never both deliver it, and an expired lease (a crashed worker) is taken over.
// - Retries: a non-2xx answer, a timeout or a network error is retried with exponential backoff
//   (base × 2^(attempt-1), at most an hour) until maxAttempts, then the row is `failed`.
// - SSRF: the outbound address policy (src/domain/address-policy.ts, connected through
//   src/gateway/outbound.ts): the host is resolved once and EVERY address checked; the connection
//   is made to a checked address (no second resolution to rebind); a redirect is never followed.
//   Loopback and private addresses are refused unless COUNTERSIGN_WEBHOOK_ALLOW_PRIVATE=1;
//   link-local (cloud metadata) and the other never-allowed ranges always. A failure is recorded
//   as what failed, never as the receiver's or the resolver's words.
// - What is sent: only what the webhook's owner (its creator) may read at delivery time, by the
//   GraphQL types' read rules (eventViewFor in webhooks.ts). An event whose subject the owner may
//   not read is not sent: the row is closed `skipped` with the reason as `lastError`.

import { randomUUID } from "node:crypto";
import http from "node:http";
import https from "node:https";
import type { Authz } from "../authz/authz.js";
import type { OutboundPolicy } from "../domain/address-policy.js";
import { networkFailure, OutboundAddressRefused, outboundConnectOptions } from "../gateway/outbound.js";
import { webhookDeadReasonSql } from "../domain/liveness.js";
import { sha256Signature } from "../domain/signing.js";
import { escapeMrkdwn, planActionsBlock, requestActionsBlock } from "../domain/slack.js";
import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import type { Webhook } from "../generated/prisma/client.js";
import type { Logger } from "../infra/logger.js";
import { inSpan, injectTraceContext, type SpanHandle } from "../infra/tracing.js";
import { eventViewFor, eventWorkspaceReader, NO_OWNER_REASON, openWebhookSecret, webhookOwnerAuthz, type EventWorkspaceRead } from "../services/webhooks.js";
import { settleDelivery, type DeliveryOutcome } from "./leased-delivery.js";
import { createWorkerLoop } from "./loop.js";

export interface WebhookWorker {
  /** One pass: lease due deliveries and send them. Returns how many were attempted. */
  tick(): Promise<number>;
  start(): void;
  stop(): Promise<void>;
  readonly owner: string;
}

interface Leased {
  id: string;
  fence: number;
  attempts: number;
  webhookId: string;
  eventId: string;
  eventType: string;
  payload: Record<string, unknown>;
  /** The trace of the work that queued the event (traces on): the attempt's span continues it. */
  traceparent: string | null;
  /** Why its webhook may no longer deliver (src/domain/liveness.ts), or null. */
  dead: string | null;
}

export const SIGNATURE_HEADER = "X-Countersign-Signature";
export const EVENT_ID_HEADER = "X-Countersign-Event-Id";
export const TIMESTAMP_HEADER = "X-Countersign-Timestamp";
export const EVENT_TYPE_HEADER = "X-Countersign-Event";

/**
 * A Slack incoming-webhook message ({ text, blocks }) for an event payload. `interactive` (the
 * organization has a Slack app, docs/integrations.md): a plan whose gate waits carries Approve, a
 * held call filed for review Approve and Deny at its revision.
 */
export function slackMessage(payload: Record<string, unknown>, interactive = false): { text: string; blocks: unknown[] } {
  const summary = String(payload.summary ?? payload.type);
  const blocks: unknown[] = [{ type: "section", text: { type: "mrkdwn", text: escapeMrkdwn(summary) } }];
  const data = (payload.data ?? {}) as { gate?: { missingApprovers?: any[]; unansweredReservations?: any[] } };
  const lines: string[] = [];
  for (const m of data.gate?.missingApprovers ?? []) {
    const names = [...m.users.map((u: any) => u.name), ...m.roles.map((r: any) => `role ${r.name}`)].join(", ");
    lines.push(`• ${m.policy.name} (${m.action}): one of ${names}`);
  }
  for (const r of data.gate?.unansweredReservations ?? []) lines.push(`• reserved for ${r.holder.kind} ${r.holder.name ?? r.holder.id}`);
  if (lines.length > 0) blocks.push({ type: "section", text: { type: "mrkdwn", text: escapeMrkdwn(`Who can approve:\n${lines.join("\n")}`).slice(0, 3000) } });
  blocks.push({ type: "context", elements: [{ type: "mrkdwn", text: escapeMrkdwn(`${payload.type} · event ${payload.id}`) }] });
  if (interactive) {
    const d = data as { plan?: { id?: unknown; status?: unknown }; request?: { id?: unknown; status?: unknown; revision?: unknown } };
    if (payload.type === "plan.needs_approvals" && typeof d.plan?.id === "string" && d.plan.status === "planned") blocks.push(planActionsBlock(d.plan.id));
    if (payload.type === "approval_request.filed" && typeof d.request?.id === "string" && d.request.status === "pending" && typeof d.request.revision === "number") {
      blocks.push(requestActionsBlock(d.request.id, d.request.revision));
    }
  }
  return { text: summary, blocks };
}

type Outcome = DeliveryOutcome;

async function post(url: URL, body: string, headers: Record<string, string>, timeoutMs: number, policy: OutboundPolicy): Promise<Outcome> {
  let lookup: Awaited<ReturnType<typeof outboundConnectOptions>>["lookup"];
  try {
    ({ lookup } = await outboundConnectOptions(url, policy));
  } catch (error) {
    if (!(error instanceof OutboundAddressRefused)) throw error;
    // A refused address stays refused; a name that does not resolve may yet.
    return { ok: false, status: null, error: `refused: ${networkFailure(error, "the receiver")}`, permanent: error.reason === "refused" };
  }
  return new Promise((resolve) => {
    const client = url.protocol === "https:" ? https : http;
    const req = client.request(
      url,
      {
        method: "POST",
        headers: { ...headers, "content-length": String(Buffer.byteLength(body)) },
        lookup,
        timeout: timeoutMs,
        agent: false,
      },
      (res) => {
        res.resume();
        // A redirect is an answer, not an instruction: it is never followed (its target is not checked).
        const status = res.statusCode ?? 0;
        const done = () => resolve({ ok: status >= 200 && status < 300, status, error: status >= 200 && status < 300 ? null : `HTTP ${status}`, permanent: false });
        res.on("end", done);
        res.on("error", done);
      },
    );
    const timedOut = Object.assign(new Error("timed out"), { code: "ETIMEDOUT" });
    const timer = setTimeout(() => req.destroy(timedOut), timeoutMs);
    req.on("timeout", () => req.destroy(timedOut));
    req.on("error", (error) => {
      clearTimeout(timer);
      resolve({ ok: false, status: null, error: networkFailure(error, "the receiver"), permanent: false });
    });
    req.on("close", () => clearTimeout(timer));
    req.end(body);
  });
}

/**
 * What one tick reads once, however many of its jobs need it: a burst of events loads each
 * webhook, its owner's principal and each workspace once. A new tick reads them again, so every
 * delivery is decided as things stand at its tick.
 */
interface TickReads {
  webhook(id: string): Promise<Webhook | null>;
  /** The webhook's owner (webhookOwnerAuthz), one principal per webhook. */
  owner(webhook: Webhook): Authz | null;
  workspaces: EventWorkspaceRead;
  /** Whether the organization has a Slack app taking clicks (its messages then carry buttons). */
  hasSlackApp(orgId: string): Promise<boolean>;
}

function tickReads(db: Database): TickReads {
  const webhooks = new Map<string, Promise<Webhook | null>>();
  const owners = new Map<string, Authz | null>();
  const slackApps = new Map<string, Promise<boolean>>();
  return {
    webhook(id) {
      let read = webhooks.get(id);
      if (!read) {
        read = db.prisma.webhook.findUnique({ where: { id } });
        read.catch(() => webhooks.delete(id));
        webhooks.set(id, read);
      }
      return read;
    },
    owner(webhook) {
      if (!owners.has(webhook.id)) owners.set(webhook.id, webhookOwnerAuthz(db.sql, webhook));
      return owners.get(webhook.id)!;
    },
    workspaces: eventWorkspaceReader(db.sql),
    hasSlackApp(orgId) {
      let read = slackApps.get(orgId);
      if (!read) {
        read = db.sql.query<{ id: string }>(`SELECT id FROM slack_integrations WHERE "orgId" = $1 LIMIT 1`, [orgId]).then((rows) => rows.length > 0);
        read.catch(() => slackApps.delete(orgId));
        slackApps.set(orgId, read);
      }
      return read;
    },
  };
}

export function createWebhookWorker(deps: { db: Database; config: Config; logger: Logger; batchSize?: number }): WebhookWorker {
  const { db, config } = deps;
  const settings = config.webhooks;
  const log = deps.logger.child({ module: "webhooks" });
  const owner = `webhooks-${randomUUID()}`;
  const batchSize = deps.batchSize ?? 20;
  const leaseMs = settings.timeoutMs + 30_000;

  async function lease(): Promise<Leased[]> {
    return db.sql.query<Leased>(
      `UPDATE webhook_deliveries d
          SET status = 'delivering', "leaseOwner" = $1, "leaseExpiresAt" = now() + ($2::int * interval '1 millisecond'),
              fence = d.fence + 1, attempts = d.attempts + 1, "updatedAt" = now()
        WHERE d.id IN (
          SELECT id FROM webhook_deliveries
           WHERE (status = 'queued' AND "nextRunAt" <= now()) OR (status = 'delivering' AND "leaseExpiresAt" < now())
           ORDER BY "nextRunAt", id
           LIMIT $3
           FOR UPDATE SKIP LOCKED)
        RETURNING d.id, d.fence, d.attempts, d."webhookId", d."eventId", d."eventType", d.payload, d.traceparent,
                  (SELECT ${webhookDeadReasonSql("w")} FROM webhooks w WHERE w.id = d."webhookId") AS dead`,
      [owner, leaseMs, batchSize],
    );
  }

  async function finish(job: Leased, outcome: Outcome): Promise<void> {
    await settleDelivery(db, "webhook_deliveries", job, outcome, settings);
  }

  async function deliver(job: Leased, reads: TickReads, span: SpanHandle | null): Promise<void> {
    const webhook = await reads.webhook(job.webhookId);
    if (!webhook) return; // deleted: its deliveries went with it
    // A deleted organization's (or a removed creator's) webhook sends nothing more, ever.
    if (job.dead) return finish(job, { ok: false, status: null, error: `the webhook is not live: ${job.dead}`, permanent: true });
    if (!webhook.active) return finish(job, { ok: false, status: null, error: "the webhook is disabled", permanent: true });
    const secret = settings.secretKey ? openWebhookSecret(settings.secretKey, webhook.secretSealed) : null;
    if (!secret) {
      // Fail closed: never send unsigned. The key may come back (a restart with the right one).
      return finish(job, { ok: false, status: null, error: "the signing secret cannot be opened with the configured COUNTERSIGN_WEBHOOK_SECRET_KEY", permanent: false });
    }
    // Decided now, as the owner stands now: a grant revoked since the event was queued counts.
    const owner = reads.owner(webhook);
    const view = owner ? await eventViewFor(db.sql, owner, job.payload, reads.workspaces) : ({ payload: null, skipped: NO_OWNER_REASON } as const);
    if (view.payload === null) {
      log.info({ deliveryId: job.id, reason: view.skipped }, "webhook delivery skipped");
      return finish(job, { ok: false, status: null, error: view.skipped, permanent: true, skipped: true });
    }
    const body = JSON.stringify(webhook.format === "slack" ? slackMessage(view.payload, await reads.hasSlackApp(webhook.orgId)) : view.payload);
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "user-agent": "Countersign-Webhooks/1",
      [SIGNATURE_HEADER]: sha256Signature(secret, body),
      [EVENT_ID_HEADER]: job.eventId,
      [EVENT_TYPE_HEADER]: job.eventType,
      [TIMESTAMP_HEADER]: String(Math.floor(Date.now() / 1000)),
    };
    // Traces on: the receiver can join this attempt's trace (W3C traceparent; the signature covers the body only).
    injectTraceContext(headers);
    const outcome = await post(new URL(webhook.url), body, headers, settings.timeoutMs, { allowPrivate: settings.allowPrivate });
    if (outcome.status !== null) span?.setAttributes({ "http.response.status_code": outcome.status });
    if (!outcome.ok) span?.fail(outcome.error ?? "failed");
    if (!outcome.ok) log.warn({ deliveryId: job.id, attempt: job.attempts, error: outcome.error }, "webhook delivery failed");
    await finish(job, outcome);
  }

  async function tick(): Promise<number> {
    const jobs = await lease();
    const reads = tickReads(db);
    // A span per attempt when traces are on, in the trace that queued the event: the event type, the
    // webhook and the receiver's status code.
    const attempt = (job: Leased) =>
      inSpan(
        "webhook delivery",
        { kind: "client", parent: job.traceparent, attributes: { "countersign.webhook.id": job.webhookId, "countersign.event.type": job.eventType, "countersign.delivery.id": job.id, "countersign.delivery.attempt": job.attempts } },
        (span) => deliver(job, reads, span),
      );
    await Promise.all(jobs.map((job) => attempt(job).catch((error: unknown) => log.error({ err: error, deliveryId: job.id }, "webhook delivery crashed"))));
    return jobs.length;
  }

  const loop = createWorkerLoop({ intervalMs: settings.intervalMs, tick, log, failed: "webhook delivery tick failed" });

  return {
    owner,
    tick,
    start: loop.start,
    stop: loop.stop,
  };
}
