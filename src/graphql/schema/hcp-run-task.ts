// HCP Terraform run tasks over GraphQL (docs/integrations.md): the organization's run task, its
// workspace mappings and the record of requests and callbacks. Rules in src/services/hcp-run-task.ts.

import type { HcpRunTask } from "../../generated/prisma/client.js";
import { builder, readable } from "../builder.js";
import { signedIn } from "../context.js";
import { COMMON_ERRORS } from "./errors.js";
import { InvalidStateError } from "../../errors.js";
import {
  addHcpWorkspaceMapping,
  createHcpRunTask,
  deleteHcpRunTask,
  findHcpRunTask,
  hcpMappings,
  hcpRecentRequests,
  removeHcpWorkspaceMapping,
  runTaskPath,
  updateHcpRunTask,
} from "../../services/hcp-run-task.js";
import { webhookTarget } from "../../services/webhooks.js";
import { deps, SIGNED_IN } from "../helpers.js";

export const HcpWorkspaceMappingRef = builder.prismaObject("HcpWorkspaceMapping", {
  description: "An HCP Terraform workspace mapped to a Countersign workspace: its runs' plans are gated there. Needs (webhook, read).",
  runScopesOnType: true,
  authScopes: (m, ctx) => readable(ctx, m, m.orgId, webhookTarget("read")),
  fields: (t) => ({
    id: t.exposeID("id"),
    hcpOrganization: t.exposeString("hcpOrganization", { description: "The HCP Terraform organization's name." }),
    hcpWorkspace: t.exposeString("hcpWorkspace", { description: "The HCP workspace's name, or its id (ws-…)." }),
    workspaceId: t.exposeID("workspaceId", { description: "The Countersign workspace its plans are submitted on." }),
    createdById: t.exposeID("createdById"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

const HcpCallbackAttemptRef = builder.prismaObject("HcpCallbackAttempt", {
  description: "One task-results PATCH sent to HCP Terraform, delivered or not.",
  fields: (t) => ({
    status: t.exposeString("status", { description: "The task result status sent: running, passed or failed." }),
    message: t.exposeString("message"),
    ok: t.exposeBoolean("ok", { description: "HCP answered 2xx." }),
    responseCode: t.exposeInt("responseCode", { nullable: true }),
    error: t.exposeString("error", { nullable: true, description: "What failed (a status, a refused address, a network failure)." }),
    at: t.expose("at", { type: "DateTime" }),
  }),
});

const HcpRunTaskRequestRef = builder.prismaObject("HcpRunTaskRequest", {
  description: "One run task request HCP Terraform sent, and what Countersign told it back.",
  fields: (t) => ({
    id: t.exposeID("id"),
    taskResultId: t.exposeString("taskResultId", { description: "HCP's task result id (taskrs-…)." }),
    runId: t.exposeString("runId"),
    runUrl: t.exposeString("runUrl", { nullable: true }),
    stage: t.exposeString("stage"),
    hcpOrganization: t.exposeString("hcpOrganization"),
    hcpWorkspaceName: t.exposeString("hcpWorkspaceName"),
    workspaceId: t.exposeID("workspaceId", { nullable: true, description: "The mapped Countersign workspace; null when the HCP workspace was not mapped." }),
    planId: t.exposeID("planId", { nullable: true, description: "The plan submitted for the run, once it was." }),
    state: t.exposeString("state", { description: "received (plan still to fetch), tracking (following the gate) or done." }),
    sentStatus: t.exposeString("sentStatus", { nullable: true, description: "The last status HCP took." }),
    sentMessage: t.exposeString("sentMessage", { nullable: true }),
    deadlineAt: t.expose("deadlineAt", { type: "DateTime", description: "When a gate still waiting is reported failed." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    callbacks: t.relation("callbackAttempts", { description: "Every PATCH of task-results, oldest first." }),
  }),
});

export const HcpRunTaskRef = builder.prismaObject("HcpRunTask", {
  description: "The organization's HCP Terraform / Terraform Enterprise run task. Its HMAC key is shown once and never readable back. Needs (webhook, read).",
  runScopesOnType: true,
  authScopes: (r, ctx) => readable(ctx, r, r.orgId, webhookTarget("read")),
  fields: (t) => ({
    id: t.exposeID("id"),
    path: t.string({ description: "The path to give HCP Terraform as the run task's Endpoint URL (after COUNTERSIGN_PUBLIC_URL).", resolve: (r) => runTaskPath(r.id) }),
    url: t.string({
      nullable: true,
      description: "The full Endpoint URL, when the operator set COUNTERSIGN_PUBLIC_URL.",
      resolve: (r, _args, ctx) => (ctx.config.publicUrl ? new URL(runTaskPath(r.id), ctx.config.publicUrl).href : null),
    }),
    configuredById: t.exposeID("configuredById", { description: "The member HCP's plans are submitted as; their rights decide, and a run is refused when they may not plan." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    mappings: t.field({ type: [HcpWorkspaceMappingRef], description: "Oldest first.", resolve: (r, _args, ctx) => hcpMappings(signedIn(ctx).db, r.id) }),
    requests: t.field({
      type: [HcpRunTaskRequestRef],
      description: "The newest requests HCP sent (at most 100), with their callbacks.",
      args: { first: t.arg.int({ defaultValue: 20 }) },
      resolve: (r, args, ctx) => hcpRecentRequests(signedIn(ctx).db, r.id, args.first ?? 20),
    }),
  }),
});

const HcpRunTaskPayloadRef = builder.objectRef<{ runTask: HcpRunTask; hmacKey: string | null }>("HcpRunTaskPayload").implement({
  fields: (t) => ({
    runTask: t.field({ type: HcpRunTaskRef, resolve: (p) => p.runTask }),
    hmacKey: t.string({
      nullable: true,
      description: "The HMAC key, shown once when made (create, or update with rotateHmacKey): give it to HCP Terraform as the run task's HMAC key.",
      resolve: (p) => p.hmacKey,
    }),
  }),
});

const UpdateHcpRunTaskInput = builder.inputType("UpdateHcpRunTaskInput", {
  fields: (t) => ({ rotateHmacKey: t.boolean({ description: "Make a new HMAC key (returned once); the old one stops working at once." }) }),
});
const AddHcpWorkspaceMappingInput = builder.inputType("AddHcpWorkspaceMappingInput", {
  fields: (t) => ({
    hcpOrganization: t.string({ required: true, description: "The HCP Terraform organization's name." }),
    hcpWorkspace: t.string({ required: true, description: "The HCP workspace's name, or its id (ws-…)." }),
    workspaceId: t.id({ required: true, description: "The Countersign workspace; you need (workspace, plan) on it." }),
  }),
});

builder.queryFields((t) => ({
  hcpRunTask: t.withAuth(SIGNED_IN).field({
    type: HcpRunTaskRef,
    nullable: true,
    description: "The organization's HCP Terraform run task, or null; needs (webhook, read).",
    resolve: (_root, _args, ctx) => findHcpRunTask(deps(ctx)),
  }),
}));

builder.mutationFields((t) => ({
  createHcpRunTask: t.withAuth(SIGNED_IN).field({
    type: HcpRunTaskPayloadRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Needs (webhook, create). Makes the run task with a new HMAC key (in the payload, once); you are recorded as the member its plans are submitted as.",
    resolve: (_root, _args, ctx) => createHcpRunTask(deps(ctx)),
  }),
  updateHcpRunTask: t.withAuth(SIGNED_IN).field({
    type: HcpRunTaskPayloadRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Needs (webhook, update). You become the member its plans are submitted as; rotateHmacKey makes a new key.",
    args: { input: t.arg({ type: UpdateHcpRunTaskInput }) },
    resolve: (_root, args, ctx) => updateHcpRunTask(deps(ctx), { rotateHmacKey: args.input?.rotateHmacKey ?? null }),
  }),
  deleteHcpRunTask: t.withAuth(SIGNED_IN).field({
    type: HcpRunTaskRef,
    errors: { types: COMMON_ERRORS },
    description: "Needs (webhook, delete). Its mappings and requests go with it; HCP's requests are refused from then on.",
    resolve: (_root, _args, ctx) => deleteHcpRunTask(deps(ctx)),
  }),
  addHcpWorkspaceMapping: t.withAuth(SIGNED_IN).field({
    type: HcpWorkspaceMappingRef,
    errors: { types: COMMON_ERRORS },
    description: "Needs (webhook, update) and (workspace, plan) on the workspace. Runs of that HCP workspace are gated there.",
    args: { input: t.arg({ type: AddHcpWorkspaceMappingInput, required: true }) },
    resolve: (_root, args, ctx) => addHcpWorkspaceMapping(deps(ctx), { ...args.input, workspaceId: String(args.input.workspaceId) }),
  }),
  removeHcpWorkspaceMapping: t.withAuth(SIGNED_IN).field({
    type: HcpWorkspaceMappingRef,
    errors: { types: COMMON_ERRORS },
    description: "Needs (webhook, update). Runs of that HCP workspace fail (not mapped) from then on.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => removeHcpWorkspaceMapping(deps(ctx), String(args.id)),
  }),
}));
