// A GitHub custom deployment protection rule over GraphQL (docs/integrations.md): the
// organization's GitHub App, its environment mappings and the requests GitHub sent. Rules in
// src/services/github.ts.

import { builder, readable } from "../builder.js";
import { signedIn } from "../context.js";
import { COMMON_ERRORS } from "./errors.js";
import { InvalidStateError } from "../../errors.js";
import {
  configureGithubIntegration,
  findGithubIntegration,
  githubMappings,
  githubProtectionRequests,
  githubWebhookPath,
  mapGithubEnvironment,
  removeGithubIntegration,
  unmapGithubEnvironment,
} from "../../services/github.js";
import { webhookTarget } from "../../services/webhooks.js";
import { deps, SIGNED_IN } from "../helpers.js";

export const GithubEnvironmentMappingRef = builder.prismaObject("GithubEnvironmentMapping", {
  description: "A repository's environment whose deployments wait for a workspace's gate. Needs (webhook, read).",
  runScopesOnType: true,
  authScopes: (m, ctx) => readable(ctx, m, m.orgId, webhookTarget("read")),
  fields: (t) => ({
    id: t.exposeID("id"),
    repository: t.exposeString("repository", { description: "The repository's full name (owner/name), lower-cased." }),
    environment: t.exposeString("environment", { description: "The environment's name as GitHub has it." }),
    workspaceId: t.exposeID("workspaceId", { description: "The workspace whose plan for the run must pass its gate." }),
    createdById: t.exposeID("createdById"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

export const GithubCallbackAttemptRef = builder.prismaObject("GithubCallbackAttempt", {
  description: "One POST of an answer to GitHub, and what came back.",
  fields: (t) => ({
    id: t.exposeID("id"),
    attempt: t.exposeInt("attempt"),
    state: t.exposeString("state", { description: "approved or rejected." }),
    responseCode: t.exposeInt("responseCode", { nullable: true }),
    error: t.exposeString("error", { nullable: true, description: "What failed (the token, the network, an HTTP status), in Countersign's words." }),
    at: t.expose("at", { type: "DateTime" }),
  }),
});

export const GithubProtectionRequestRef = builder.prismaObject("GithubProtectionRequest", {
  description: "A deployment_protection_rule request GitHub sent, and Countersign's answer to it. Needs (webhook, read).",
  runScopesOnType: true,
  authScopes: (r, ctx) => readable(ctx, r, r.orgId, webhookTarget("read")),
  fields: (t) => ({
    id: t.exposeID("id"),
    repository: t.exposeString("repository"),
    environment: t.exposeString("environment"),
    runId: t.exposeString("runId", { description: "The workflow run GitHub asked about." }),
    runPageUrl: t.exposeString("runPageUrl", { description: "The run's page: the URL `plan submit --run-url` gives for the deployment's plan." }),
    workspaceId: t.exposeID("workspaceId", { nullable: true, description: "null: no mapping named the environment (answered rejected)." }),
    planId: t.exposeID("planId", { nullable: true, description: "The run's plan, once one was submitted." }),
    status: t.exposeString("status", { description: "waiting (for the plan or its gate), queued, delivering, delivered or failed." }),
    state: t.exposeString("state", { nullable: true, description: "approved or rejected, once decided." }),
    comment: t.exposeString("comment", { nullable: true, description: "The comment sent with the answer." }),
    attempts: t.exposeInt("attempts"),
    lastError: t.exposeString("lastError", { nullable: true }),
    decidedAt: t.expose("decidedAt", { type: "DateTime", nullable: true }),
    deliveredAt: t.expose("deliveredAt", { type: "DateTime", nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    callbacks: t.relation("callbacks", { query: { orderBy: { attempt: "asc" } }, description: "Every attempt to deliver the answer, oldest first." }),
  }),
});

export const GithubIntegrationRef = builder.prismaObject("GithubIntegration", {
  description: "The organization's GitHub App for a custom deployment protection rule. Its private key and webhook secret are never readable back. Needs (webhook, read).",
  runScopesOnType: true,
  authScopes: (g, ctx) => readable(ctx, g, g.orgId, webhookTarget("read")),
  fields: (t) => ({
    id: t.exposeID("id"),
    appId: t.exposeString("appId", { description: "The GitHub App's id." }),
    webhookPath: t.string({
      description: "The path to give GitHub as the App's Webhook URL (after COUNTERSIGN_PUBLIC_URL).",
      resolve: (g) => githubWebhookPath(g.id),
    }),
    webhookUrl: t.string({
      nullable: true,
      description: "The full Webhook URL, when the operator set COUNTERSIGN_PUBLIC_URL.",
      resolve: (g, _args, ctx) => (ctx.config.publicUrl ? new URL(githubWebhookPath(g.id), ctx.config.publicUrl).href : null),
    }),
    configuredById: t.exposeID("configuredById"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    mappings: t.field({
      type: [GithubEnvironmentMappingRef],
      description: "The mapped environments, by repository and environment.",
      resolve: (g, _args, ctx) => githubMappings(deps(signedIn(ctx)), g.id),
    }),
    requests: t.field({
      type: [GithubProtectionRequestRef],
      description: "The newest requests GitHub sent (at most 100), newest first.",
      args: { first: t.arg.int({ defaultValue: 20 }) },
      resolve: (g, args, ctx) => githubProtectionRequests(deps(signedIn(ctx)), g.id, args.first ?? 20),
    }),
  }),
});

const ConfigureGithubIntegrationInput = builder.inputType("ConfigureGithubIntegrationInput", {
  fields: (t) => ({
    appId: t.string({ required: true, description: "The GitHub App's App ID (its settings page, About)." }),
    privateKey: t.string({ required: true, description: "The App's private key (the .pem GitHub generated); stored sealed." }),
    webhookSecret: t.string({ required: true, description: "The App's webhook secret (at least 16 characters); stored sealed." }),
  }),
});
const MapGithubEnvironmentInput = builder.inputType("MapGithubEnvironmentInput", {
  fields: (t) => ({
    repository: t.string({ required: true, description: "The repository's full name, owner/name." }),
    environment: t.string({ required: true, description: "The environment's name, as in the workflow's `environment:`." }),
    workspaceId: t.id({ required: true, description: "The workspace whose plan for the run must pass its gate." }),
  }),
});
const UnmapGithubEnvironmentInput = builder.inputType("UnmapGithubEnvironmentInput", {
  fields: (t) => ({ id: t.id({ required: true }) }),
});

builder.queryFields((t) => ({
  githubIntegration: t.withAuth(SIGNED_IN).field({
    type: GithubIntegrationRef,
    nullable: true,
    description: "The organization's GitHub App, or null; needs (webhook, read).",
    resolve: (_root, _args, ctx) => findGithubIntegration(deps(ctx)),
  }),
}));

builder.mutationFields((t) => ({
  configureGithubIntegration: t.withAuth(SIGNED_IN).field({
    type: GithubIntegrationRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Sets the GitHub App: (webhook, create) the first time, (webhook, update) after.",
    args: { input: t.arg({ type: ConfigureGithubIntegrationInput, required: true }) },
    resolve: (_root, args, ctx) => configureGithubIntegration(deps(ctx), args.input),
  }),
  removeGithubIntegration: t.withAuth(SIGNED_IN).field({
    type: GithubIntegrationRef,
    errors: { types: COMMON_ERRORS },
    description: "Needs (webhook, delete). Its mappings and requests go with it; events are refused from then on.",
    resolve: (_root, _args, ctx) => removeGithubIntegration(deps(ctx)),
  }),
  mapGithubEnvironment: t.withAuth(SIGNED_IN).field({
    type: GithubEnvironmentMappingRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Maps a repository's environment to a workspace (webhook, update; the workspace readable). Mapping it again moves it.",
    args: { input: t.arg({ type: MapGithubEnvironmentInput, required: true }) },
    resolve: (_root, args, ctx) => mapGithubEnvironment(deps(ctx), { ...args.input, workspaceId: String(args.input.workspaceId) }),
  }),
  unmapGithubEnvironment: t.withAuth(SIGNED_IN).field({
    type: GithubEnvironmentMappingRef,
    errors: { types: COMMON_ERRORS },
    description: "Ends a mapping (webhook, update): that environment's next deployments are rejected as not configured.",
    args: { input: t.arg({ type: UnmapGithubEnvironmentInput, required: true }) },
    resolve: (_root, args, ctx) => unmapGithubEnvironment(deps(ctx), { id: String(args.input.id) }),
  }),
}));
