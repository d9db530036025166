// Outbound webhooks over GraphQL (docs/webhooks.md): configure them, read the delivery log,
// redeliver. Needs the org-level (webhook, …) family. Rules in src/services/webhooks.ts.

import { builder, readable } from "../builder.js";
import { signedIn, type Context } from "../context.js";
import { COMMON_ERRORS } from "./errors.js";
import { InvalidStateError } from "../../errors.js";
import type { Webhook } from "../../generated/prisma/client.js";
import {
  WEBHOOK_DELIVERY_STATUSES,
  WEBHOOK_EVENTS,
  WEBHOOK_FORMATS,
  createWebhook,
  eventViewFor,
  deleteWebhook,
  findReadableWebhook,
  listDeliveries,
  listWebhooks,
  redeliverWebhook,
  updateWebhook,
  webhookTarget,
} from "../../services/webhooks.js";
import { deps, notFoundAsNull, oneOf, SIGNED_IN } from "../helpers.js";


/** GraphQL enum names cannot hold a dot: plan.needs_approvals ↔ PLAN_NEEDS_APPROVALS. */
const WebhookEventEnum = builder.enumType("WebhookEvent", {
  description: "An event a webhook can subscribe to; the payload's `type` is the dotted form (plan.needs_approvals).",
  values: Object.fromEntries(WEBHOOK_EVENTS.map((e) => [e.replace(".", "_").toUpperCase(), { value: e }])) as Record<string, { value: (typeof WEBHOOK_EVENTS)[number] }>,
});

const WebhookFormatEnum = builder.enumType("WebhookFormat", {
  description: "json: the event as documented; slack: { text, blocks } for a Slack incoming webhook.",
  values: { JSON: { value: "json" }, SLACK: { value: "slack" } } as const,
});

const WebhookDeliveryStatusEnum = builder.enumType("WebhookDeliveryStatus", {
  values: {
    QUEUED: { value: "queued" },
    DELIVERING: { value: "delivering" },
    DELIVERED: { value: "delivered" },
    FAILED: { value: "failed", description: "Given up: the receiver did not take it after every attempt, or it may never be sent (lastError says why)." },
    SKIPPED: {
      value: "skipped",
      description: "Nothing was sent: the webhook's owner may not read this event (lastError names the rule). redeliverWebhook decides again.",
    },
  } as const,
});

const readWebhook = (ctx: Context, object: object, orgId: string) => readable(ctx, object, orgId, webhookTarget("read"));

export const WebhookDeliveryRef = builder.prismaObject("WebhookDelivery", {
  description: "One event sent (or to be sent) to one webhook: the outbox row and its log. Needs (webhook, read).",
  runScopesOnType: true,
  authScopes: (d, ctx) => readWebhook(ctx, d, d.orgId),
  fields: (t) => ({
    id: t.exposeID("id"),
    eventId: t.exposeString("eventId", { description: "Sent as X-Countersign-Event-Id; shared by every webhook the event went to." }),
    event: t.field({ type: WebhookEventEnum, resolve: (d) => oneOf(WEBHOOK_EVENTS, d.eventType, "webhook_deliveries.eventType") }),
    status: t.field({ type: WebhookDeliveryStatusEnum, resolve: (d) => oneOf(WEBHOOK_DELIVERY_STATUSES, d.status, "webhook_deliveries.status") }),
    attempts: t.exposeInt("attempts"),
    responseCode: t.exposeInt("responseCode", { nullable: true, description: "The receiver's HTTP status on the last attempt." }),
    lastError: t.exposeString("lastError", {
      nullable: true,
      description: "Why the last attempt failed; for a SKIPPED delivery, why it was not sent (the rule the webhook's owner did not meet).",
    }),
    nextRunAt: t.expose("nextRunAt", { type: "DateTime", description: "When a queued delivery is next tried." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    deliveredAt: t.expose("deliveredAt", { type: "DateTime", nullable: true }),
    payload: t.field({
      type: "JSON",
      nullable: true,
      description:
        "The event (the json format's body) as YOU may read it now, by the rules a delivery follows (docs/webhooks.md, " +
        "\"What a delivery carries\"): null when you may not read its subject, without the parts you may not read.",
      resolve: async (d, _args, ctx) => (await eventViewFor(ctx.db.sql, ctx.authz, d.payload as Record<string, unknown>)).payload,
    }),
  }),
});

export const WebhookRef = builder.prismaObject("Webhook", {
  description: "An outbound webhook of the organization. Its signing secret is shown once, at creation. Needs (webhook, read).",
  runScopesOnType: true,
  authScopes: (w, ctx) => readWebhook(ctx, w, w.orgId),
  fields: (t) => ({
    id: t.exposeID("id"),
    url: t.exposeString("url"),
    events: t.field({ type: [WebhookEventEnum], resolve: (w) => w.events.map((e) => oneOf(WEBHOOK_EVENTS, e, "webhooks.events")) }),
    format: t.field({ type: WebhookFormatEnum, resolve: (w) => oneOf(WEBHOOK_FORMATS, w.format, "webhooks.format") }),
    active: t.exposeBoolean("active"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    deliveries: t.field({
      type: [WebhookDeliveryRef],
      description: "The delivery log, newest first (at most 200).",
      args: { first: t.arg.int({ defaultValue: 50 }) },
      resolve: (w, args, ctx) => listDeliveries(deps(signedIn(ctx)), w.id, args.first ?? 50),
    }),
  }),
});

const CreatedWebhookRef = builder.objectRef<{ webhook: Webhook; secret: string }>("CreateWebhookPayload").implement({
  fields: (t) => ({
    webhook: t.field({ type: WebhookRef, resolve: (p) => p.webhook }),
    secret: t.exposeString("secret", {
      description: "The signing secret, shown once: store it now. Deliveries carry X-Countersign-Signature: sha256=<HMAC-SHA256 of the body>.",
    }),
  }),
});

const CreateWebhookInput = builder.inputType("CreateWebhookInput", {
  fields: (t) => ({
    url: t.string({ required: true, description: "http(s) URL; private and loopback addresses are refused at delivery unless the operator allows them." }),
    events: t.field({ type: [WebhookEventEnum], required: true }),
    format: t.field({ type: WebhookFormatEnum, defaultValue: "json" }),
  }),
});
const UpdateWebhookInput = builder.inputType("UpdateWebhookInput", {
  fields: (t) => ({
    id: t.id({ required: true }),
    url: t.string(),
    events: t.field({ type: [WebhookEventEnum] }),
    format: t.field({ type: WebhookFormatEnum }),
    active: t.boolean({ description: "false: no new events are queued for it and queued ones are not sent." }),
  }),
});

const stripNulls = (input: Record<string, unknown>) => Object.fromEntries(Object.entries(input).filter(([, v]) => v !== null && v !== undefined));

builder.queryFields((t) => ({
  webhooks: t.withAuth(SIGNED_IN).field({
    type: [WebhookRef],
    description: "The organization's webhooks; needs (webhook, read).",
    resolve: (_root, _args, ctx) => listWebhooks(deps(ctx)),
  }),
  webhook: t.withAuth(SIGNED_IN).field({
    type: WebhookRef,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => findReadableWebhook(deps(ctx), String(args.id)).catch(notFoundAsNull),
  }),
}));

builder.mutationFields((t) => ({
  createWebhook: t.withAuth(SIGNED_IN).field({
    type: CreatedWebhookRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Needs (webhook, create). The payload carries the signing secret, once.",
    args: { input: t.arg({ type: CreateWebhookInput, required: true }) },
    resolve: (_root, args, ctx) => createWebhook(deps(ctx), stripNulls(args.input)),
  }),
  updateWebhook: t.withAuth(SIGNED_IN).field({
    type: WebhookRef,
    errors: { types: COMMON_ERRORS },
    description: "Needs (webhook, update). The secret does not change.",
    args: { input: t.arg({ type: UpdateWebhookInput, required: true }) },
    resolve: (_root, args, ctx) => updateWebhook(deps(ctx), stripNulls(args.input)),
  }),
  deleteWebhook: t.withAuth(SIGNED_IN).field({
    type: WebhookRef,
    errors: { types: COMMON_ERRORS },
    description: "Needs (webhook, delete). Its delivery log and queued deliveries go with it.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => deleteWebhook(deps(ctx), String(args.id)),
  }),
  redeliverWebhook: t.withAuth(SIGNED_IN).field({
    type: WebhookDeliveryRef,
    errors: { types: COMMON_ERRORS },
    description: "Needs (webhook, update). Queues the delivery again from its first attempt, with the same event id.",
    args: { deliveryId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => redeliverWebhook(deps(ctx), String(args.deliveryId)),
  }),
}));
