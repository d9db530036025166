// The gateway gate's Cedar policy set per workspace (docs/held-tool-calls.md, "Policy sets per
// workspace"): the set in force and its history on Workspace, saving a version, and simulating a
// call. Logic lives in src/services/approvals/gateway-policies.ts.

import DataLoader from "dataloader";
import { builder } from "../builder.js";
import { COMMON_ERRORS } from "./errors.js";
import { clean } from "./input.js";
import { InvalidStateError, NotFoundError, PermissionDeniedError, UnauthenticatedError, ValidationError } from "../../errors.js";
import {
  canReadPolicySet,
  listGatewayPolicyVersions,
  NAMING_CONVENTION,
  policySetsInForce,
  policyVersionsOfMany,
  saveGatewayPolicySet,
  simulateGatewayCall,
  type GatePolicy,
  type GatePolicyIssue,
  type PolicySetView,
  type PolicyVersionRow,
  type SimulatedRule,
  type Simulation,
} from "../../services/approvals/gateway-policies.js";
import type { Context } from "../context.js";
import { perRequest } from "../request-loaders.js";
import { readableInWorkspace } from "./workspace-rule.js";
import { ApprovalRuleEffectEnum } from "./approvals-policies.js";
import { SIGNED_IN } from "../helpers.js";

/** The set in force per workspace, batched per request. */
const setsInForce = perRequest(
  (ctx: Context) =>
    new DataLoader<{ id: string; orgId: string }, PolicySetView, string>(
      async (workspaces) => {
        const sets = await policySetsInForce(ctx.db, workspaces);
        return workspaces.map((w) => sets.get(w.id)!);
      },
      { cacheKeyFn: (w) => w.id },
    ),
);
function setInForce(ctx: Context, workspace: { id: string; orgId: string }): Promise<PolicySetView> {
  return setsInForce.of(ctx).load(workspace);
}

/** The history per workspace, batched per request and per (first, before). */
const versionLoaders = perRequest((_ctx: Context) => new Map<string, DataLoader<string, PolicyVersionRow[]>>());
function versionsOf(ctx: Context, workspaceId: string, first: number, before: number | null): Promise<PolicyVersionRow[]> {
  const byArgs = versionLoaders.of(ctx);
  const argsKey = `${first}:${before ?? ""}`;
  let loader = byArgs.get(argsKey);
  if (!loader) {
    loader = new DataLoader(async (ids: readonly string[]) => {
      const found = await policyVersionsOfMany(ctx.db, ids, { first, before });
      return ids.map((id) => found.get(id) ?? []);
    });
    byArgs.set(argsKey, loader);
  }
  return loader.load(workspaceId);
}

const AuthorRef = builder.objectRef<{ id: string; name: string }>("GatewayPolicyAuthor").implement({
  description: "Who saved a version.",
  fields: (t) => ({ id: t.exposeID("id"), name: t.exposeString("name") }),
});

const PolicyKindEnum = builder.enumType("GatewayPolicyKind", {
  description: "What the gate does with a call the policy matches (the seed's naming convention).",
  values: {
    PERMIT: { value: "permit", description: "Allows the call, unless a forbid matches too." },
    DENY: { value: "deny", description: "A forbid whose @id does not end in needs-approval: denies; no approval unblocks it." },
    NEEDS_APPROVAL: { value: "needs_approval", description: "A forbid whose @id ends in needs-approval: makes tickets (destructive calls in production)." },
  } as const,
});

const PolicyEffectEnum = builder.enumType("GatewayPolicyEffect", {
  values: { PERMIT: { value: "permit" }, FORBID: { value: "forbid" } } as const,
});

const GatePolicyRef = builder.objectRef<GatePolicy>("GatewayPolicy").implement({
  description: "One policy of a gateway policy set, classified.",
  fields: (t) => ({
    id: t.exposeString("id", { description: "Its @id annotation: unique in the set." }),
    effect: t.field({ type: PolicyEffectEnum, resolve: (p) => p.effect }),
    kind: t.field({ type: PolicyKindEnum, resolve: (p) => p.kind }),
    text: t.exposeString("text"),
    explanation: t.exposeString("explanation"),
  }),
});

const IssueRef = builder.objectRef<GatePolicyIssue>("GatewayPolicyIssue").implement({
  description: "Why a policy text does not parse as a gate policy set.",
  fields: (t) => ({
    code: t.exposeString("code"),
    message: t.exposeString("message"),
    policy: t.exposeInt("policy", { nullable: true, description: "1-based position of the policy in the text, when known." }),
    policyId: t.exposeString("policyId", { nullable: true }),
  }),
});

const PolicySetRef = builder.objectRef<PolicySetView>("GatewayPolicySet").implement({
  description:
    "The Cedar policy set the gateway's gate applies to a workspace's tool calls now: its newest saved version, or the built-in " +
    "default (isDefault) when none was saved. Needs (gateway_policy, read) on the workspace.",
  authScopes: (s, ctx) => readableInWorkspace(ctx, s, "gateway_policy"),
  runScopesOnType: true,
  fields: (t) => ({
    workspaceId: t.exposeID("workspaceId"),
    version: t.exposeInt("version", { description: "0 for the default set. Pass it as expectedVersion to save the next one." }),
    isDefault: t.exposeBoolean("isDefault"),
    policies: t.exposeString("policies", { description: "The Cedar text." }),
    author: t.field({ type: AuthorRef, nullable: true, resolve: (s) => s.author }),
    createdAt: t.expose("createdAt", { type: "DateTime", nullable: true }),
    note: t.exposeString("note", { nullable: true }),
    namingConvention: t.string({ description: "How the gate reads policy ids.", resolve: () => NAMING_CONVENTION }),
    valid: t.boolean({
      description: "False only for a stored text the gate cannot parse now: the gateway then denies every call of the workspace.",
      resolve: (s) => s.check.ok,
    }),
    issues: t.field({ type: [IssueRef], resolve: (s) => (s.check.ok ? [] : s.check.issues) }),
    rules: t.field({ type: [GatePolicyRef], description: "Each policy, in the order written, classified.", resolve: (s) => (s.check.ok ? s.check.policies : []) }),
  }),
});

const PolicyVersionRef = builder.objectRef<PolicyVersionRow>("GatewayPolicyVersion").implement({
  description: "One saved version of a workspace's gateway policy set (never changed or deleted). Needs (gateway_policy, read).",
  authScopes: (v, ctx) => readableInWorkspace(ctx, v, "gateway_policy"),
  runScopesOnType: true,
  fields: (t) => ({
    id: t.exposeID("id"),
    workspaceId: t.exposeID("workspaceId"),
    version: t.exposeInt("version"),
    policies: t.exposeString("policies"),
    author: t.field({ type: AuthorRef, resolve: (v) => v.author }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    note: t.exposeString("note", { nullable: true }),
  }),
});

builder.prismaObjectField("Workspace", "gatewayPolicySet", (t) =>
  t.field({
    type: PolicySetRef,
    nullable: true,
    description: "The gateway policy set in force. Null unless the caller holds (gateway_policy, read) here.",
    select: { stack: { select: { authzGroups: true } } },
    resolve: async (w, _args, ctx) => ((await canReadPolicySet(ctx.authz, w)) ? setInForce(ctx, w) : null),
  }),
);

builder.prismaObjectField("Workspace", "gatewayPolicyVersions", (t) =>
  t.field({
    type: [PolicyVersionRef],
    nullable: true,
    description: "Saved versions, newest first (at most `first`, 1..100; `before`: older than that version). Null unless (gateway_policy, read).",
    args: { first: t.arg.int({ defaultValue: 20 }), before: t.arg.int() },
    select: { stack: { select: { authzGroups: true } } },
    resolve: async (w, args, ctx) =>
      (await canReadPolicySet(ctx.authz, w)) ? versionsOf(ctx, w.id, args.first ?? 20, args.before ?? null) : null,
  }),
);

// ── Saving ───────────────────────────────────────────────────────────────────────────────

const SaveInputRef = builder.inputType("SaveGatewayPolicySetInput", {
  fields: (t) => ({
    workspaceId: t.id({ required: true }),
    policies: t.string({ required: true, description: "Cedar text; every policy carries a unique @id. Validated by cedar-wasm." }),
    expectedVersion: t.int({ description: "The version you read (0 or omitted: the default, nothing saved yet). A stale one is a ConflictError." }),
    note: t.string({ description: "Why: kept with the version." }),
  }),
});

const SavePayloadRef = builder.objectRef<{ policySet: PolicySetView }>("SaveGatewayPolicySetPayload").implement({
  fields: (t) => ({ policySet: t.field({ type: PolicySetRef, resolve: (p) => p.policySet }) }),
});

builder.mutationField("saveGatewayPolicySet", (t) =>
  t.withAuth(SIGNED_IN).field({
    type: SavePayloadRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description:
      "Saves a new version of a workspace's gateway policy set; the gateway applies it from its next call. Owner-only " +
      "((gateway_policy, manage)): a super admin, or a personal organization's owner. A text that does not parse, or a policy " +
      "without a unique @id, is a ValidationError on `policies` carrying Cedar's error and the policy it is in. Held requests " +
      "are not invalidated: every execution re-applies the current set.",
    args: { input: t.arg({ type: SaveInputRef, required: true }) },
    resolve: (_root, args, ctx) => saveGatewayPolicySet({ db: ctx.db, authz: ctx.authz, events: ctx.events }, { ...clean(args.input), workspaceId: String(args.input.workspaceId) }),
  }),
);

builder.queryField("gatewayPolicyVersions", (t) =>
  t.withAuth(SIGNED_IN).field({
    type: [PolicyVersionRef],
    errors: { types: [NotFoundError, PermissionDeniedError, UnauthenticatedError] },
    description: "A workspace's saved gateway policy versions, newest first. Needs (gateway_policy, read).",
    args: { workspaceId: t.arg.id({ required: true }), first: t.arg.int({ defaultValue: 20 }), before: t.arg.int() },
    resolve: (_root, args, ctx) => listGatewayPolicyVersions(ctx, String(args.workspaceId), { first: args.first ?? 20, before: args.before ?? null }),
  }),
);

// ── Simulating ───────────────────────────────────────────────────────────────────────────

const DecisionEnum = builder.enumType("GatewaySimulatedDecision", {
  values: {
    ALLOW: { value: "allow" },
    DENY: { value: "deny" },
    APPROVAL_REQUIRED: { value: "approval_required", description: "Held: a ticket goes to the inbox, reviewed under the approval policies." },
  } as const,
});

const PolicySourceEnum = builder.enumType("GatewayPolicySource", {
  values: { SAVED: { value: "saved" }, DEFAULT: { value: "default" }, DRAFT: { value: "draft", description: "The text passed as `policies`." } } as const,
});

const DestructiveSourceEnum = builder.enumType("GatewayDestructiveSource", {
  values: {
    INPUT: { value: "input", description: "As passed." },
    OVERRIDE: { value: "override", description: "The connection's per-tool override." },
    ANNOTATION: { value: "annotation", description: "The upstream's own MCP annotations (destructiveHint, readOnlyHint), read now." },
    FALLBACK: { value: "fallback", description: "The tool carries neither hint: destructive (fail closed)." },
  } as const,
});

const EvaluationErrorRef = builder.objectRef<{ policyId: string; message: string }>("GatewayEvaluationError").implement({
  fields: (t) => ({ policyId: t.exposeString("policyId"), message: t.exposeString("message") }),
});

// What a simulation reveals beyond the gateway policy set (which simulating needs, read): every
// field of the result, classified by the type whose read rule guards what it shows. A field
// guarded by a family comes back null to a caller who may not read that family on the
// simulated workspace, by the same rule as the type itself (readableInWorkspace for the
// workspace families; (role, read) and (member, read) as Role.directMembers and Membership do).
// test/leaks/simulation.test.ts walks the result type in the schema and fails on a field
// missing here.
type Reveal = "simulation" | "connection" | "approval_policy" | "role" | "member";
export const SIMULATION_FIELDS: Readonly<Record<string, Reveal>> = {
  "GatewaySimulation.decision": "simulation",
  "GatewaySimulation.reason": "simulation",
  "GatewaySimulation.policyIds": "simulation",
  "GatewaySimulation.evaluationErrors": "simulation",
  "GatewaySimulation.policySource": "simulation",
  "GatewaySimulation.policyVersion": "simulation",
  "GatewaySimulation.tool": "simulation",
  "GatewaySimulation.logicalTool": "simulation",
  "GatewaySimulation.connectionId": "connection",
  "GatewaySimulation.destructive": "simulation",
  "GatewaySimulation.destructiveSource": "simulation",
  "GatewaySimulation.environment": "simulation",
  "GatewaySimulation.production": "simulation",
  "GatewaySimulation.argumentHash": "simulation",
  "GatewaySimulation.approval": "simulation",
  "GatewayEvaluationError.policyId": "simulation",
  "GatewayEvaluationError.message": "simulation",
  "GatewaySimulatedApproval.defaultDeny": "simulation",
  "GatewaySimulatedApproval.rules": "approval_policy",
  "GatewaySimulatedApproval.eligibleReviewers": "member",
  "GatewaySimulatedReviewer.id": "member",
  "GatewaySimulatedReviewer.name": "member",
  "GatewaySimulatedRule.policyId": "approval_policy",
  "GatewaySimulatedRule.policyName": "approval_policy",
  "GatewaySimulatedRule.policyRevision": "approval_policy",
  "GatewaySimulatedRule.ruleId": "approval_policy",
  "GatewaySimulatedRule.effect": "approval_policy",
  "GatewaySimulatedRule.count": "approval_policy",
  "GatewaySimulatedRule.roleIds": "approval_policy",
  "GatewaySimulatedRule.userIds": "approval_policy",
  "GatewaySimulatedRule.roles": "role",
  "GatewaySimulatedRule.users": "member",
  "GatewaySimulatedPrincipal.id": "simulation",
  "GatewaySimulatedPrincipal.name": "simulation",
};

/** The simulated workspace, carried down to the nested objects so each field can be authorized. */
type Scope = { orgId: string; workspaceId: string };
type ScopedApproval = NonNullable<Simulation["approval"]> & { scope: Scope };
type ScopedRule = SimulatedRule & { scope: Scope };

async function mayRead(ctx: Context, scope: Scope, reveal: Reveal): Promise<boolean> {
  switch (reveal) {
    case "simulation":
      return true; // simulateGatewayCall required (gateway_policy, read) on the workspace
    case "connection":
    case "approval_policy":
      return readableInWorkspace(ctx, scope, reveal);
    case "role":
    case "member":
      return ctx.authz.can({ resourceType: reveal, action: "read", matchValue: null, groups: null });
  }
}

/** The field's value when the caller may read what it reveals (SIMULATION_FIELDS), else null. */
async function revealed<T>(ctx: Context, scope: Scope, field: string, value: () => T): Promise<T | null> {
  const reveal = SIMULATION_FIELDS[field];
  if (!reveal || !(await mayRead(ctx, scope, reveal))) return null; // unclassified: fail closed
  return value();
}

const ReviewerRef = builder.objectRef<{ id: string; name: string }>("GatewaySimulatedReviewer").implement({
  fields: (t) => ({ id: t.exposeID("id"), name: t.exposeString("name") }),
});

const NamedRef = builder.objectRef<{ id: string; name: string }>("GatewaySimulatedPrincipal").implement({
  description: "A role or a user an approval rule names.",
  fields: (t) => ({ id: t.exposeID("id"), name: t.exposeString("name") }),
});

const SimulatedRuleRef = builder.objectRef<ScopedRule>("GatewaySimulatedRule").implement({
  description:
    "An approval-policy rule the held call would match at ingest (on the tool and the environment name). Only to a caller " +
    "who may read the workspace's approval policies.",
  fields: (t) => ({
    policyId: t.exposeID("policyId"),
    policyName: t.exposeString("policyName"),
    policyRevision: t.exposeInt("policyRevision"),
    ruleId: t.exposeString("ruleId"),
    effect: t.field({ type: ApprovalRuleEffectEnum, resolve: (r) => r.effect }),
    count: t.int({ nullable: true, resolve: (r) => (r.effect === "allow" ? r.count : null) }),
    roleIds: t.stringList({ resolve: (r) => [...r.roles] }),
    userIds: t.stringList({ resolve: (r) => [...r.userIds] }),
    roles: t.field({
      type: [NamedRef],
      nullable: true,
      description: "The roles it selects. Null unless the caller holds (role, read).",
      resolve: (r, _a, ctx) => revealed(ctx, r.scope, "GatewaySimulatedRule.roles", () => r.roleNames),
    }),
    users: t.field({
      type: [NamedRef],
      nullable: true,
      description: "The users it names. Null unless the caller holds (member, read).",
      resolve: (r, _a, ctx) => revealed(ctx, r.scope, "GatewaySimulatedRule.users", () => r.userNames),
    }),
  }),
});

const SimulatedApprovalRef = builder.objectRef<ScopedApproval>("GatewaySimulatedApproval").implement({
  fields: (t) => ({
    defaultDeny: t.exposeBoolean("defaultDeny", { description: "No allow rule matches: the request would close at once (default_deny)." }),
    rules: t.field({
      type: [SimulatedRuleRef],
      nullable: true,
      description: "The approval-policy rules it would match. Null unless the caller holds (approval_policy, read) on the workspace.",
      resolve: (a, _a, ctx) => revealed(ctx, a.scope, "GatewaySimulatedApproval.rules", () => a.rules.map((r) => ({ ...r, scope: a.scope }))),
    }),
    eligibleReviewers: t.field({
      type: [ReviewerRef],
      nullable: true,
      description: "Who could review it now (an allow rule selects them, no deny rule excludes them, they hold (approval_request, decide)). Null unless the caller holds (member, read).",
      resolve: (a, _a, ctx) => revealed(ctx, a.scope, "GatewaySimulatedApproval.eligibleReviewers", () => a.eligibleReviewers),
    }),
  }),
});

const SimulationRef = builder.objectRef<Simulation>("GatewaySimulation").implement({
  description:
    "What the gateway's gate would do with the call now. What it reveals beyond the policy set is authorized as its own type: " +
    "the connection with (connection, read), the approval rules with (approval_policy, read), people with (member, read).",
  fields: (t) => ({
    decision: t.field({ type: DecisionEnum, resolve: (s) => s.decision }),
    reason: t.exposeString("reason", { nullable: true, description: "Why a deny: forbidden, no_policy_matched, policy_set_invalid, connection_inactive, key_unavailable, workspace_unavailable." }),
    policyIds: t.exposeStringList("policyIds", { description: "The policies that decided a deny or a hold." }),
    evaluationErrors: t.field({ type: [EvaluationErrorRef], resolve: (s) => s.evaluationErrors }),
    policySource: t.field({ type: PolicySourceEnum, resolve: (s) => s.policySource }),
    policyVersion: t.exposeInt("policyVersion", { nullable: true, description: "The saved version that decided (0: the default); null for a draft." }),
    tool: t.exposeString("tool", { description: "The concrete tool the call runs as." }),
    logicalTool: t.exposeString("logicalTool"),
    connectionId: t.id({
      nullable: true,
      description: "The connection serving the tool. Null unless the caller holds (connection, read) on the workspace.",
      resolve: (s, _a, ctx) => revealed(ctx, s, "GatewaySimulation.connectionId", () => s.connectionId),
    }),
    destructive: t.exposeBoolean("destructive"),
    destructiveSource: t.field({ type: DestructiveSourceEnum, resolve: (s) => s.destructiveSource }),
    environment: t.exposeString("environment"),
    production: t.exposeBoolean("production"),
    argumentHash: t.exposeString("argumentHash", { description: "The arguments' canonical hash, as a ticket carries it." }),
    approval: t.field({
      type: SimulatedApprovalRef,
      nullable: true,
      resolve: (s) => (s.approval ? { ...s.approval, scope: { orgId: s.orgId, workspaceId: s.workspaceId } } : null),
    }),
  }),
});

const SimulateInputRef = builder.inputType("SimulateGatewayCallInput", {
  fields: (t) => ({
    workspaceId: t.id({ required: true }),
    tool: t.string({ required: true, description: "The tool as the agent calls it: <connection>.<operation>." }),
    arguments: t.field({ type: "JSON", description: "A JSON object: hashed as the gateway hashes it (the gate's context does not carry arguments)." }),
    virtualKeyId: t.id({ description: "The agent's key (the Cedar principal); omitted: a key no policy names." }),
    destructive: t.boolean({ description: "Default: the connection's per-tool override, else the gateway's name classifier." }),
    production: t.boolean({ description: "Default: the workspace's tier." }),
    environment: t.string({ description: "Default: the workspace's environment name." }),
    approved: t.boolean({ description: "Simulate the call carrying a verified approval. Default false." }),
    policies: t.string({ description: "A draft policy text to simulate instead of the saved set." }),
  }),
});

builder.queryField("simulateGatewayCall", (t) =>
  t.withAuth(SIGNED_IN).field({
    type: SimulationRef,
    errors: { types: [ValidationError, NotFoundError, PermissionDeniedError, UnauthenticatedError] },
    description:
      "What the gateway would do now with one tool call: allow; deny and by which policy; or hold it for approval, by which " +
      "policies, with the approval-policy rules that would match it and who could review it. Needs (gateway_policy, read).",
    args: { input: t.arg({ type: SimulateInputRef, required: true }) },
    resolve: (_root, args, ctx) =>
      simulateGatewayCall(ctx, {
        ...clean(args.input),
        workspaceId: String(args.input.workspaceId),
        ...(args.input.virtualKeyId != null ? { virtualKeyId: String(args.input.virtualKeyId) } : {}),
      }),
  }),
);
