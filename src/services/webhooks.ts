// Outbound webhooks (docs/webhooks.md): an organization's webhook configuration, and the outbox.
// An event is queued by enqueueWebhookEvent INSIDE the transaction of the change that causes it
// (one webhook_deliveries row per subscribed webhook), so it is committed with the change or not
// at all; the delivery worker (src/workers/webhook-delivery.ts) sends it.

import { randomBytes, randomUUID } from "node:crypto";
import { seal, sealingKeyFor, unseal } from "../domain/seal.js";
import { endpointUrlProblem, MAX_ENDPOINT_URL_LENGTH } from "../domain/endpoint-url.js";
import type { OutboundPolicy } from "../domain/address-policy.js";
import { z } from "zod";
import { Authz, type SignedInAuthz } from "../authz/authz.js";
import { workspaceFamilyTarget, type WorkspaceFamily } from "../authz/targets.js";
import type { Target } from "../domain/catalog/check.js";
import { InvalidStateError, NotFoundError, ValidationError } from "../errors.js";
import type { Config } from "../infra/config.js";
import type { Database, SqlRunner } from "../infra/db.js";
import { evaluateLive, loadPeople, loadPlanHead } from "./gate.js";
import { txSql, type Tx } from "../infra/db.js";
import { currentTraceparent } from "../infra/tracing.js";
import { parseInput } from "./parse.js";

export const WEBHOOK_EVENTS = [
  "plan.needs_approvals",
  "plan.approval_added",
  "plan.approval_withdrawn",
  "plan.gate_passed",
  "plan.apply_started",
  "plan.apply_finished",
  "reservation.placed",
  "reservation.released",
  "approval_request.filed",
  "approval_request.decided",
  "workspace.tier_changed",
  "gateway_policy.saved",
  "hold_authority.changed",
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];
export const WEBHOOK_FORMATS = ["json", "slack"] as const;
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];
/**
 * A delivery's states (webhook_deliveries.status): queued → delivering → delivered | failed, or
 * skipped: nothing was sent because the webhook's owner may not read the event (not a failure of
 * the receiver's; `lastError` says which rule refused).
 */
export const WEBHOOK_DELIVERY_STATUSES = ["queued", "delivering", "delivered", "failed", "skipped"] as const;

export const MAX_WEBHOOKS_PER_ORG = 50;
export const MAX_URL_LENGTH = MAX_ENDPOINT_URL_LENGTH;

/** An event as queued: `data` is the event's own shape (docs/webhooks.md, "Events"). */
export interface WebhookEvent {
  type: WebhookEventType;
  /** One line a person reads (the Slack text). */
  summary: string;
  data: Record<string, unknown>;
}

// ── What a reader may see of an event ─────────────────────────────────────────────────────

/**
 * Per event type, the rule deciding what of it a reader may see, by the read rules of the types
 * GraphQL serves the same objects as (src/authz/targets.ts, the rules src/graphql/schema/ runs):
 *
 * - `subject`: the family whose (read) on the event's workspace decides whether the event reaches
 *   the reader at all — the type its payload describes (a plan and a reservation are read as part
 *   of their workspace; a held call as an approval request; a policy set as a gateway policy).
 * - `workspaceName`: the family that may read the workspace's name alongside; a reader holding the
 *   subject but not this one gets the event with the name removed and a summary without it.
 *
 * An event type without a rule here is never delivered (fail closed); the `Record` over every
 * WEBHOOK_EVENTS entry makes a new type without one fail to compile.
 */
export interface EventReadRule {
  subject: WorkspaceFamily;
  workspaceName: WorkspaceFamily;
  /** Where the event's workspace id is in `data`. */
  workspaceId: (data: Record<string, any>) => unknown;
}

const planRule: EventReadRule = { subject: "workspace", workspaceName: "workspace", workspaceId: (d) => d.plan?.workspace?.id };
const inWorkspace = (subject: WorkspaceFamily, workspaceName: WorkspaceFamily = "workspace"): EventReadRule => ({ subject, workspaceName, workspaceId: (d) => d.workspace?.id });

export const WEBHOOK_EVENT_READ_RULES: Readonly<Record<WebhookEventType, EventReadRule>> = {
  "plan.needs_approvals": planRule,
  "plan.approval_added": planRule,
  "plan.approval_withdrawn": planRule,
  "plan.gate_passed": planRule,
  "plan.apply_started": planRule,
  "plan.apply_finished": planRule,
  "reservation.placed": inWorkspace("workspace"),
  "reservation.released": inWorkspace("workspace"),
  // ApprovalRequest.workspaceName is part of the request (src/graphql/schema/approvals.ts).
  "approval_request.filed": inWorkspace("approval_request", "approval_request"),
  "approval_request.decided": inWorkspace("approval_request", "approval_request"),
  "workspace.tier_changed": inWorkspace("workspace"),
  "gateway_policy.saved": inWorkspace("gateway_policy"),
  // HoldAuthorityChange is read under (hold_authority, read) (Workspace.holdAuthorityChanges).
  "hold_authority.changed": inWorkspace("hold_authority"),
};

/** What a reader sees of a queued event: the payload (parts it may not read removed), or why it sees nothing. */
export type EventView = { payload: Record<string, unknown>; skipped: null } | { payload: null; skipped: string };

const skip = (reason: string): EventView => ({ payload: null, skipped: reason });

/** An event's workspace as its read rule sees it: the current name and the stack's groups. */
export type EventWorkspace = { name: string; authzGroups: string[] };

/** An organization's workspace by id, or null when it no longer exists. */
export type EventWorkspaceRead = (orgId: string, workspaceId: string) => Promise<EventWorkspace | null>;

/**
 * Reads each workspace at most once for as long as the reader is kept: the webhook worker keeps
 * one per tick, so a burst of events on one workspace reads it once. A failed read is not kept.
 */
export function eventWorkspaceReader(sql: SqlRunner): EventWorkspaceRead {
  const reads = new Map<string, Promise<EventWorkspace | null>>();
  return (orgId, workspaceId) => {
    const key = JSON.stringify([orgId, workspaceId]);
    let read = reads.get(key);
    if (!read) {
      read = sql
        .query<EventWorkspace>(
          `SELECT w.name, s."authzGroups" FROM workspaces w JOIN stacks s ON s.id = w."stackId" WHERE w.id = $1 AND w."orgId" = $2`,
          [workspaceId, orgId],
        )
        .then(([workspace]) => workspace ?? null);
      read.catch(() => reads.delete(key));
      reads.set(key, read);
    }
    return read;
  };
}

/**
 * The event `payload` (as enqueueWebhookEvent queued it) as `authz`'s principal may read it NOW:
 * the workspace is read as it stands (its current name and stack groups decide), and the checks
 * are the ones the GraphQL types run. The delivery worker calls it with the webhook's owner;
 * WebhookDelivery.payload with the caller. A skip reason names the rule, never the hidden object.
 */
export async function eventViewFor(
  sql: SqlRunner,
  authz: Authz,
  payload: Record<string, unknown>,
  workspaces: EventWorkspaceRead = eventWorkspaceReader(sql),
): Promise<EventView> {
  const type = String(payload.type ?? "");
  if (!Object.hasOwn(WEBHOOK_EVENT_READ_RULES, type)) return skip(`the event type ${JSON.stringify(type.slice(0, 80))} has no read rule, so it is never delivered`);
  const rule = WEBHOOK_EVENT_READ_RULES[type as WebhookEventType];
  const principal = await authz.requireMember().catch(() => null);
  if (!principal || !authz.viewer) return skip("the webhook's owner is no longer an active member of the organization");
  const data = (payload.data ?? {}) as Record<string, any>;
  const workspaceId = rule.workspaceId(data);
  if (typeof workspaceId !== "string" || payload.organizationId !== authz.viewer.orgId) return skip("the event names no workspace of this organization");
  const workspace = await workspaces(authz.viewer.orgId, workspaceId);
  if (!workspace) return skip("the event's workspace no longer exists");
  const ruleWorkspace = { name: workspace.name, stack: { authzGroups: workspace.authzGroups } };
  // The operations' decision on a found object (Authz.allows, decideAction), not a check of its own.
  if (!(await authz.allows(workspaceFamilyTarget(ruleWorkspace, rule.subject, "read")))) {
    return skip(`the webhook's owner may not read this event: it needs (${rule.subject}, read) on its workspace`);
  }
  if (rule.workspaceName === rule.subject || (await authz.allows(workspaceFamilyTarget(ruleWorkspace, rule.workspaceName, "read")))) {
    return { payload, skipped: null };
  }
  // The subject is readable, its workspace's name is not: the name goes, and the summary that carries it.
  const redacted = structuredClone(data);
  for (const holder of [redacted.workspace, redacted.plan?.workspace]) if (holder && typeof holder === "object") holder.name = null;
  return { payload: { ...payload, summary: `${type} on workspace ${workspaceId}`, data: redacted }, skipped: null };
}

/**
 * The webhook's owner as a principal: the member who created it, in the webhook's organization.
 * A webhook speaks for its creator; one with no creator recorded speaks for nobody, and nothing
 * reaches it (null). No token is involved: only the organization and the user are read.
 */
export function webhookOwnerAuthz(sql: SqlRunner, webhook: { orgId: string; createdById: string | null }): SignedInAuthz | null {
  if (!webhook.createdById) return null;
  return new Authz(sql, { orgId: webhook.orgId, userId: webhook.createdById, tokenId: "", name: "", email: "", isServiceAccount: false });
}

export const NO_OWNER_REASON = "the webhook has no owner recorded, so it speaks for nobody: recreate it to receive events";

export function webhookTarget(action: "read" | "create" | "update" | "delete"): Target {
  return { resourceType: "webhook", action, matchValue: null, groups: null };
}

// ── Secrets ────────────────────────────────────────────────────────────────────────────

const WEBHOOK_SEAL = "webhook-secret-seal-v1";

/** Sealed under a key derived from the configured key: the row never holds the secret readably. */
export const sealWebhookSecret = (key: string, secret: string): string => seal(WEBHOOK_SEAL, key, secret);

/** The secret, or null when sealed under another key (or altered). */
export const openWebhookSecret = (key: string, sealed: string): string | null => unseal(WEBHOOK_SEAL, key, sealed);

// ── URLs ───────────────────────────────────────────────────────────────────────────────

/**
 * Why a webhook URL is refused at create/update, or null: its form, and its host as written
 * under the outbound address policy. What the host resolves to is checked at every delivery.
 */
export const webhookUrlProblem = (raw: string, policy: OutboundPolicy): string | null => endpointUrlProblem(raw, "put a token in the path or query", policy);

// ── Configuration ──────────────────────────────────────────────────────────────────────

export interface WebhookDeps {
  db: Database;
  authz: SignedInAuthz;
  config: Config;
}

const EventList = z
  .array(z.enum(WEBHOOK_EVENTS))
  .min(1, "Subscribe to at least one event.")
  .max(WEBHOOK_EVENTS.length)
  .transform((events) => [...new Set(events)]);
const webhookUrl = (config: Pick<Config, "webhooks">) =>
  z.string().superRefine((url, ctx) => {
    const problem = webhookUrlProblem(url, config.webhooks);
    if (problem) ctx.addIssue({ code: "custom", message: `The URL ${problem}.` });
  });

export const createWebhookInput = (config: Pick<Config, "webhooks">) =>
  z.object({ url: webhookUrl(config), events: EventList, format: z.enum(WEBHOOK_FORMATS).default("json") });
export const updateWebhookInput = (config: Pick<Config, "webhooks">) => z.object({
  id: z.string().min(1),
  url: webhookUrl(config).optional(),
  events: EventList.optional(),
  format: z.enum(WEBHOOK_FORMATS).optional(),
  active: z.boolean().optional(),
});

/** A webhook of the viewer's organization after the check, or NotFound (nothing of another org shows). */
async function findWebhookFor({ db, authz }: Pick<WebhookDeps, "db" | "authz">, id: string, action: "read" | "update" | "delete") {
  await authz.requireMember();
  const found = await db.prisma.webhook.findFirst({ where: { id, orgId: authz.viewer.orgId } });
  if (!found) throw new NotFoundError("Webhook", id);
  await authz.require(webhookTarget(action));
  return found;
}

/** (webhook, create). The secret is returned here and never again. */
export async function createWebhook({ db, authz, config }: WebhookDeps, raw: unknown) {
  const input = parseInput(createWebhookInput(config), raw);
  await authz.require(webhookTarget("create"));
  const viewer = authz.viewer;
  const key = sealingKeyFor(config, "Webhook");
  const count = await db.prisma.webhook.count({ where: { orgId: viewer.orgId } });
  if (count >= MAX_WEBHOOKS_PER_ORG) {
    throw ValidationError.field("input", "too_many", `An organization has at most ${MAX_WEBHOOKS_PER_ORG} webhooks.`);
  }
  const secret = `whsec_${randomBytes(32).toString("base64url")}`;
  const webhook = await db.prisma.webhook.create({
    data: {
      orgId: viewer.orgId,
      url: input.url,
      events: input.events,
      format: input.format,
      secretSealed: sealWebhookSecret(key, secret),
      createdById: viewer.userId,
    },
  });
  return { webhook, secret };
}

export async function updateWebhook(deps: WebhookDeps, raw: unknown) {
  const input = parseInput(updateWebhookInput(deps.config), raw);
  const found = await findWebhookFor(deps, input.id, "update");
  return deps.db.prisma.webhook.update({
    where: { id: found.id },
    data: {
      ...(input.url !== undefined ? { url: input.url } : {}),
      ...(input.events !== undefined ? { events: input.events } : {}),
      ...(input.format !== undefined ? { format: input.format } : {}),
      ...(input.active !== undefined ? { active: input.active } : {}),
    },
  });
}

/** Deletes the webhook and its delivery log; queued deliveries go with it. */
export async function deleteWebhook(deps: Pick<WebhookDeps, "db" | "authz">, id: string) {
  const found = await findWebhookFor(deps, id, "delete");
  await deps.db.prisma.webhook.delete({ where: { id: found.id } });
  return found;
}

export async function findReadableWebhook(deps: Pick<WebhookDeps, "db" | "authz">, id: string) {
  return findWebhookFor(deps, id, "read");
}

export async function listWebhooks({ db, authz }: Pick<WebhookDeps, "db" | "authz">) {
  await authz.require(webhookTarget("read"));
  return db.prisma.webhook.findMany({ where: { orgId: authz.viewer.orgId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
}

export async function listDeliveries({ db, authz }: Pick<WebhookDeps, "db" | "authz">, webhookId: string, first: number) {
  const found = await findWebhookFor({ db, authz }, webhookId, "read");
  return db.prisma.webhookDelivery.findMany({
    where: { webhookId: found.id },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: Math.min(Math.max(first, 1), 200),
  });
}

/** (webhook, update): the delivery is queued again from scratch, whatever its state. */
export async function redeliverWebhook({ db, authz }: Pick<WebhookDeps, "db" | "authz">, deliveryId: string) {
  await authz.requireMember();
  const orgId = authz.viewer.orgId;
  const found = await db.prisma.webhookDelivery.findFirst({ where: { id: deliveryId, orgId } });
  if (!found) throw new NotFoundError("WebhookDelivery", deliveryId);
  await authz.require(webhookTarget("update"));
  // The fence moves: a worker still holding the old lease may no longer write this row.
  const [row] = await db.sql.query<{ id: string }>(
    `UPDATE webhook_deliveries
        SET status = 'queued', attempts = 0, "nextRunAt" = now(), "leaseOwner" = NULL, "leaseExpiresAt" = NULL,
            fence = fence + 1, "lastError" = NULL, "responseCode" = NULL, "deliveredAt" = NULL, "updatedAt" = now()
      WHERE id = $1 RETURNING id`,
    [found.id],
  );
  if (!row) throw new NotFoundError("WebhookDelivery", deliveryId);
  return db.prisma.webhookDelivery.findUniqueOrThrow({ where: { id: found.id } });
}

// ── The outbox ─────────────────────────────────────────────────────────────────────────

type TxLike = Tx | SqlRunner;
const asSql = (tx: TxLike): SqlRunner =>
  typeof (tx as { $queryRawUnsafe?: unknown }).$queryRawUnsafe === "function" ? txSql(tx as Tx) : (tx as SqlRunner);

async function subscribedWebhooks(sql: SqlRunner, orgId: string, type: WebhookEventType): Promise<string[]> {
  const rows = await sql.query<{ id: string }>(
    `SELECT id FROM webhooks WHERE "orgId" = $1 AND active AND $2 = ANY(events) ORDER BY id`,
    [orgId, type],
  );
  return rows.map((r) => r.id);
}

/**
 * Which of `orgIds` have an active webhook subscribed to any of `types`: one statement for a
 * batch, so a caller that files many rows asks for the events of those organizations only.
 */
export async function organizationsListening(tx: TxLike, orgIds: readonly string[], types: readonly WebhookEventType[]): Promise<Set<string>> {
  if (orgIds.length === 0) return new Set();
  const rows = await asSql(tx).query<{ orgId: string }>(
    `SELECT DISTINCT "orgId" FROM webhooks WHERE "orgId" = ANY($1::text[]) AND active AND events && $2::text[]`,
    [[...new Set(orgIds)], [...types]],
  );
  return new Set(rows.map((r) => r.orgId));
}

/**
 * Queues `event` for every active webhook of the organization subscribed to its type, in the
 * caller's transaction (a Prisma interactive transaction or a raw SqlRunner transaction): it is
 * committed with the change that caused it, or rolled back with it. Returns the event id, or
 * null when no webhook listens.
 */
export async function enqueueWebhookEvent(tx: TxLike, orgId: string, event: WebhookEvent): Promise<string | null> {
  const sql = asSql(tx);
  const webhookIds = await subscribedWebhooks(sql, orgId, event.type);
  if (webhookIds.length === 0) return null;
  const eventId = randomUUID();
  const payload = {
    id: eventId,
    type: event.type,
    occurredAt: new Date().toISOString(),
    organizationId: orgId,
    summary: event.summary,
    data: event.data,
  };
  await sql.query(
    `INSERT INTO webhook_deliveries (id, "orgId", "webhookId", "eventId", "eventType", payload, status, "nextRunAt", "updatedAt", traceparent)
     SELECT gen_random_uuid()::text, $1, w, $2, $3, $4::jsonb, 'queued', now(), now(), $6 FROM unnest($5::text[]) AS w`,
    [orgId, eventId, event.type, JSON.stringify(payload), webhookIds, currentTraceparent()],
  );
  return eventId;
}

// ── Plan events: what the gate says ────────────────────────────────────────────────────

type PlanEventType = Extract<WebhookEventType, `plan.${string}`>;

/**
 * Queues a plan event carrying the gate as it stands inside the transaction (who can still
 * approve: the missing approver lists and the unanswered reservations), and — for a submission or
 * an approval — `plan.gate_passed` when the gate now passes, else `plan.needs_approvals`.
 * Does nothing (no evaluation) when no webhook of the organization listens.
 */
export async function enqueuePlanEvent(
  tx: TxLike,
  orgId: string,
  planId: string,
  type: PlanEventType,
  extra: Record<string, unknown> = {},
): Promise<void> {
  const sql = asSql(tx);
  const follow: PlanEventType[] =
    type === "plan.approval_added" || type === "plan.approval_withdrawn" || type === "plan.needs_approvals" ? ["plan.gate_passed", "plan.needs_approvals"] : [];
  const wanted = [type, ...follow];
  const listening = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhooks WHERE "orgId" = $1 AND active AND events && $2::text[]`,
    [orgId, wanted],
  );
  if (!listening[0]?.n) return;
  const head = await loadPlanHead(sql, orgId, planId);
  if (!head) return;
  const plan = { id: head.id, status: head.status, targeted: head.targeted, workspace: { id: head.workspaceId, name: head.workspaceName } };
  const snapshot = await evaluateLive(sql, head, 0);
  const e = snapshot.evaluation;
  const people = await loadPeople(
    sql,
    e.reservations.flatMap((r) => (r.holder.kind === "user" ? [r.holder.userId] : [])),
    e.reservations.flatMap((r) => (r.holder.kind === "role" ? [r.holder.roleId] : [])),
  );
  const userName = (id: string) => snapshot.people.users.get(id)?.name ?? people.users.get(id)?.name ?? id;
  const roleName = (id: string) => snapshot.people.roles.get(id)?.name ?? people.roles.get(id)?.name ?? id;
  const gate = {
    passed: e.passed,
    approvalsCounted: e.approvalsCounted,
    baseline: { applies: e.baseline.applies, required: e.baseline.required, counted: e.baseline.counted, met: e.baseline.met },
    reasons: e.reasons.map((r) => ({ code: r.code, message: r.message })),
    missingApprovers: e.requirements
      .filter((r) => !r.approverListSatisfied)
      .map((r) => ({
        policy: { id: r.policyId, name: r.policyName },
        action: r.action,
        users: r.missingApprovers.userIds.map((id) => ({ id, name: userName(id) })),
        roles: r.missingApprovers.roleIds.map((id) => ({ id, name: roleName(id) })),
        eligibleUsers: r.missingApprovers.eligibleUserIds.map((id) => ({ id, name: userName(id) })),
      })),
    unansweredReservations: e.reservations
      .filter((r) => !r.answered)
      .map((r) => ({
        id: r.id,
        holder: r.holder.kind === "user" ? { kind: "user", id: r.holder.userId, name: userName(r.holder.userId) } : { kind: "role", id: r.holder.roleId, name: roleName(r.holder.roleId) },
        currentMembers: r.currentMembers?.map((id) => ({ id, name: userName(id) })) ?? null,
      })),
  };
  const where = `${head.workspaceName} plan ${head.id}`;
  const data = { plan, gate, ...extra };
  const summaries: Record<PlanEventType, string> = {
    "plan.needs_approvals": `${where} needs approvals: ${gate.reasons.map((r) => r.message).join(" ") || "waiting"}`,
    "plan.approval_added": `${where}: an approval arrived (${e.approvalsCounted} counted).`,
    "plan.approval_withdrawn": `${where}: an approval was withdrawn (${e.approvalsCounted} counted).`,
    "plan.gate_passed": `${where}: the gate passed; it can be applied.`,
    "plan.apply_started": `${where}: apply started.`,
    "plan.apply_finished": `${where}: apply finished (${head.status}).`,
  };
  if (type !== "plan.needs_approvals") await enqueueWebhookEvent(sql, orgId, { type, summary: summaries[type], data });
  if (follow.length > 0 && head.status === "planned") {
    const next: PlanEventType = e.passed ? "plan.gate_passed" : "plan.needs_approvals";
    await enqueueWebhookEvent(sql, orgId, { type: next, summary: summaries[next], data });
  }
}

/** reservation.placed / reservation.released, from the reservation row as written. */
export async function enqueueReservationEvent(
  tx: TxLike,
  reservation: { id: string; orgId: string; workspaceId: string; holderUserId: string | null; holderRoleId: string | null; placedById: string; releasedById?: string | null; releaseReason?: string | null },
  type: "reservation.placed" | "reservation.released",
): Promise<void> {
  const sql = asSql(tx);
  if ((await subscribedWebhooks(sql, reservation.orgId, type)).length === 0) return;
  const [ws] = await sql.query<{ name: string }>(`SELECT name FROM workspaces WHERE id = $1`, [reservation.workspaceId]);
  const people = await loadPeople(
    sql,
    [reservation.holderUserId, reservation.placedById, reservation.releasedById].filter((v): v is string => !!v),
    reservation.holderRoleId ? [reservation.holderRoleId] : [],
  );
  const holder = reservation.holderUserId
    ? { kind: "user", id: reservation.holderUserId, name: people.users.get(reservation.holderUserId)?.name ?? null }
    : { kind: "role", id: reservation.holderRoleId, name: people.roles.get(reservation.holderRoleId!)?.name ?? null };
  const verb = type === "reservation.placed" ? "placed" : "released";
  await enqueueWebhookEvent(sql, reservation.orgId, {
    type,
    summary: `${ws?.name ?? reservation.workspaceId}: reservation for ${holder.kind} ${holder.name ?? holder.id} ${verb}.`,
    data: {
      reservation: { id: reservation.id, holder, placedById: reservation.placedById, releasedById: reservation.releasedById ?? null, releaseReason: reservation.releaseReason ?? null },
      workspace: { id: reservation.workspaceId, name: ws?.name ?? null },
    },
  });
}

/**
 * approval_request.filed / approval_request.decided. The reviewer view only: tool, workspace,
 * status — never the call's arguments.
 */
export async function enqueueApprovalRequestEvent(tx: TxLike, requestId: string, type: "approval_request.filed" | "approval_request.decided"): Promise<void> {
  const sql = asSql(tx);
  const [r] = await sql.query<ApprovalRequestEventRow>(
    `SELECT r.id, r."orgId", r."workspaceId", w.name AS "workspaceName", r.tool, r.environment, r.status::text AS status, r.revision,
            r."closeReason", r."expiresAt"
       FROM approval_requests r JOIN workspaces w ON w.id = r."workspaceId" WHERE r.id = $1`,
    [requestId],
  );
  if (!r) return;
  const event = approvalRequestEvent(r, type);
  if ((await subscribedWebhooks(sql, r.orgId, event.type)).length === 0) return;
  await enqueueWebhookEvent(sql, r.orgId, event);
}

/** A request as its approval_request.* event reads it. */
export type ApprovalRequestEventRow = {
  id: string;
  orgId: string;
  workspaceId: string;
  workspaceName: string;
  tool: string;
  environment: string;
  status: string;
  revision: number;
  closeReason: string | null;
  expiresAt: Date;
};

function approvalRequestEvent(r: ApprovalRequestEventRow, asked: "approval_request.filed" | "approval_request.decided"): WebhookEvent {
  // A request filed already decided (no rule matched: default deny) waits for nobody.
  const type = asked === "approval_request.filed" && r.status !== "pending" ? "approval_request.decided" : asked;
  return {
    type,
    summary:
      type === "approval_request.filed"
        ? `${r.workspaceName}: tool call ${r.tool} waits for review.`
        : `${r.workspaceName}: tool call ${r.tool} was ${r.status}.`,
    data: {
      request: { id: r.id, tool: r.tool, environment: r.environment, status: r.status, revision: r.revision, closeReason: r.closeReason, expiresAt: new Date(r.expiresAt).toISOString() },
      workspace: { id: r.workspaceId, name: r.workspaceName },
    },
  };
}

/**
 * approval_request.filed (or .decided, for one filed closed) for many requests just filed, from
 * the rows the caller has in hand: one statement reads the subscribed webhooks of their
 * organizations, one inserts every delivery. The same events, payloads included, as
 * enqueueApprovalRequestEvent queues one request at a time, without reading each request back.
 */
export async function enqueueApprovalRequestsFiled(tx: TxLike, requests: readonly ApprovalRequestEventRow[]): Promise<void> {
  if (requests.length === 0) return;
  const sql = asSql(tx);
  const events = requests.map((r) => ({ r, event: approvalRequestEvent(r, "approval_request.filed") }));
  const hooks = await sql.query<{ id: string; orgId: string; events: string[] }>(
    `SELECT id, "orgId", events FROM webhooks WHERE "orgId" = ANY($1::text[]) AND active AND events && $2::text[] ORDER BY id`,
    [[...new Set(requests.map((r) => r.orgId))], [...new Set(events.map((e) => e.event.type))]],
  );
  const byOrg = new Map<string, { id: string; events: string[] }[]>();
  for (const hook of hooks) byOrg.set(hook.orgId, [...(byOrg.get(hook.orgId) ?? []), hook]);
  const cols = { orgId: [] as string[], webhookId: [] as string[], eventId: [] as string[], eventType: [] as string[], payload: [] as string[] };
  const occurredAt = new Date().toISOString();
  for (const { r, event } of events) {
    const subscribed = (byOrg.get(r.orgId) ?? []).filter((h) => h.events.includes(event.type));
    if (subscribed.length === 0) continue;
    const eventId = randomUUID();
    const payload = JSON.stringify({ id: eventId, type: event.type, occurredAt, organizationId: r.orgId, summary: event.summary, data: event.data });
    for (const hook of subscribed) {
      cols.orgId.push(r.orgId);
      cols.webhookId.push(hook.id);
      cols.eventId.push(eventId);
      cols.eventType.push(event.type);
      cols.payload.push(payload);
    }
  }
  if (cols.webhookId.length === 0) return;
  await sql.query(
    `INSERT INTO webhook_deliveries (id, "orgId", "webhookId", "eventId", "eventType", payload, status, "nextRunAt", "updatedAt", traceparent)
     SELECT gen_random_uuid()::text, o, w, e, t, p::jsonb, 'queued', now(), now(), $6
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS d(o, w, e, t, p)`,
    [cols.orgId, cols.webhookId, cols.eventId, cols.eventType, cols.payload, currentTraceparent()],
  );
}

// ── Held-call settings: security-relevant changes ─────────────────────────────────────────

/**
 * workspace.tier_changed: a workspace became production (its destructive tool calls are held
 * from now on) or stopped being production (they run unheld). Who changed it travels with it.
 */
export async function enqueueWorkspaceTierEvent(
  tx: TxLike,
  workspace: { id: string; orgId: string; name: string; environment: string; production: boolean },
  wasProduction: boolean,
  changedById: string,
): Promise<void> {
  await enqueueWebhookEvent(tx, workspace.orgId, {
    type: "workspace.tier_changed",
    summary: workspace.production
      ? `${workspace.name} is now production: its destructive tool calls are held for approval.`
      : `${workspace.name} is no longer production: its destructive tool calls run without approval.`,
    data: {
      workspace: { id: workspace.id, name: workspace.name, environment: workspace.environment, production: workspace.production },
      previous: { production: wasProduction },
      changedBy: { id: changedById },
    },
  });
}

/** gateway_policy.saved: a new version of a workspace's gate policy set is in force. Never the text itself. */
export async function enqueueGatewayPolicyEvent(
  tx: TxLike,
  saved: { orgId: string; workspaceId: string; workspaceName: string; version: number; authorId: string; note: string | null; policyIds: string[] },
): Promise<void> {
  await enqueueWebhookEvent(tx, saved.orgId, {
    type: "gateway_policy.saved",
    summary: `${saved.workspaceName}: gateway policy set version ${saved.version} is in force.`,
    data: {
      workspace: { id: saved.workspaceId, name: saved.workspaceName },
      version: saved.version,
      policyIds: saved.policyIds,
      note: saved.note,
      author: { id: saved.authorId },
    },
  });
}
