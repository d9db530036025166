import { clean } from "./input.js";
import { builder } from "../builder.js";
import { readableInWorkspace } from "./workspace-rule.js";
import { COMMON_ERRORS } from "./errors.js";
import { NotFoundError, PermissionDeniedError } from "../../errors.js";
import { notFoundAsNull, SIGNED_IN } from "../helpers.js";
import type { ApprovalRule } from "../../domain/approvals/policy.js";
import {
  createApprovalPolicy,
  deleteApprovalPolicy,
  findReadablePolicy,
  listApprovalPolicies,
  updateApprovalPolicy,
  type PolicyRow,
} from "../../services/approvals/policies.js";

// Approval policies (seed 003): who may review which tools in which environments.

export const ApprovalRuleEffectEnum = builder.enumType("ApprovalRuleEffect", {
  values: { ALLOW: { value: "allow" }, DENY: { value: "deny" } } as const,
});

export const ApprovalRuleRef = builder.objectRef<ApprovalRule>("ApprovalRule").implement({
  description:
    "A reviewer rule. A principal matches when one of their roles is selected or their user id is named; a matching deny excludes that person from reviewing.",
  fields: (t) => ({
    id: t.exposeString("id", { description: "Unique across the workspace's policies." }),
    effect: t.field({ type: ApprovalRuleEffectEnum, resolve: (r) => r.effect }),
    tools: t.exposeStringList("tools", { description: "Tool-name globs; `*` is the only wildcard." }),
    environments: t.exposeStringList("environments", { description: 'Exact environment names, or "*".' }),
    roleIds: t.exposeStringList("roles"),
    userIds: t.exposeStringList("userIds"),
    count: t.int({ nullable: true, description: "Allow rules: distinct eligible approvals this rule needs on its own.", resolve: (r) => (r.effect === "allow" ? (r.count ?? 1) : null) }),
  }),
});

export const ApprovalPolicyRef = builder.prismaObject("ApprovalPolicy", {
  description:
    "A workspace's tool-call review rules. Editing, enabling or disabling an active one invalidates every unexecuted request under the old policy set. " +
    "Needs (approval_policy, read) on its workspace.",
  runScopesOnType: true,
  authScopes: (p, ctx) => readableInWorkspace(ctx, p, "approval_policy"),
  fields: (t) => ({
    id: t.exposeID("id"),
    workspaceId: t.exposeID("workspaceId"),
    name: t.exposeString("name"),
    enabled: t.exposeBoolean("enabled"),
    revision: t.exposeInt("revision", { description: "Pass it as expectedRevision to update or delete." }),
    rules: t.field({ type: [ApprovalRuleRef], resolve: (p) => p.rules as unknown as ApprovalRule[] }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
  }),
});

const ApprovalPolicyPayloadRef = builder
  .objectRef<{ policy: PolicyRow; invalidatedRequestIds: string[] }>("ApprovalPolicyPayload")
  .implement({
    fields: (t) => ({
      policy: t.field({ type: ApprovalPolicyRef, nullable: true, description: "Null unless the caller may read it.", resolve: (p) => p.policy }),
      invalidatedRequestIds: t.exposeIDList("invalidatedRequestIds", {
        description: "Requests this change closed as invalidated (reason policy_changed).",
      }),
    }),
  });

const ApprovalRuleInput = builder.inputType("ApprovalRuleInput", {
  fields: (t) => ({
    id: t.string({ required: true }),
    effect: t.field({ type: ApprovalRuleEffectEnum, required: true }),
    tools: t.stringList({ required: true }),
    environments: t.stringList({ required: true }),
    roleIds: t.stringList({ description: "Role ids whose current members the rule selects." }),
    userIds: t.stringList(),
    count: t.int({ description: "Allow rules only: 1..10, default 1." }),
  }),
});

const CreateApprovalPolicyInput = builder.inputType("CreateApprovalPolicyInput", {
  fields: (t) => ({
    workspaceId: t.id({ required: true }),
    name: t.string({ required: true }),
    enabled: t.boolean({ defaultValue: true }),
    rules: t.field({ type: [ApprovalRuleInput], required: true }),
  }),
});

const UpdateApprovalPolicyInput = builder.inputType("UpdateApprovalPolicyInput", {
  fields: (t) => ({
    id: t.id({ required: true }),
    expectedRevision: t.int({ required: true }),
    name: t.string(),
    enabled: t.boolean(),
    rules: t.field({ type: [ApprovalRuleInput], description: "Replaces every rule." }),
  }),
});

const DeleteApprovalPolicyInput = builder.inputType("DeleteApprovalPolicyInput", {
  fields: (t) => ({ id: t.id({ required: true }), expectedRevision: t.int({ required: true }) }),
});

type RuleInput = { id: string; effect: "allow" | "deny"; tools: string[]; environments: string[]; roleIds?: string[] | null; userIds?: string[] | null; count?: number | null };

/** GraphQL's rule input → the domain's rule shape (validated there). */
const toRules = (rules: RuleInput[]) =>
  rules.map((r) => ({
    id: r.id,
    effect: r.effect,
    tools: r.tools,
    environments: r.environments,
    roles: r.roleIds ?? [],
    userIds: r.userIds ?? [],
    ...(r.count !== null && r.count !== undefined ? { count: r.count } : {}),
  }));


builder.queryFields((t) => ({
  approvalPolicies: t.withAuth(SIGNED_IN).field({
    type: [ApprovalPolicyRef],
    description: "A workspace's approval policies by name; needs (approval_policy, read) on the workspace.",
    args: { workspaceId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => listApprovalPolicies(ctx, String(args.workspaceId)),
  }),
  approvalPolicy: t.withAuth(SIGNED_IN).field({
    type: ApprovalPolicyRef,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => findReadablePolicy(ctx, String(args.id)).catch((error) => notFoundAsNull(error instanceof PermissionDeniedError ? new NotFoundError("ApprovalPolicy", String(args.id)) : error)),
  }),
}));

builder.mutationFields((t) => ({
  createApprovalPolicy: t.withAuth(SIGNED_IN).field({
    type: ApprovalPolicyPayloadRef,
    errors: { types: COMMON_ERRORS },
    description:
      "Owner-only (approval.policy.manage): a super admin, or a personal organization's owner. No role grants it, (*, *) included; admins decide (vote) but do not manage.",
    args: { input: t.arg({ type: CreateApprovalPolicyInput, required: true }) },
    resolve: (_root, args, ctx) => createApprovalPolicy(ctx, { ...args.input, rules: toRules(args.input.rules) }),
  }),
  updateApprovalPolicy: t.withAuth(SIGNED_IN).field({
    type: ApprovalPolicyPayloadRef,
    errors: { types: COMMON_ERRORS },
    description: "Owner-only (approval.policy.manage), as createApprovalPolicy. A stale expectedRevision is a ConflictError carrying the current one.",
    args: { input: t.arg({ type: UpdateApprovalPolicyInput, required: true }) },
    resolve: (_root, args, ctx) =>
      updateApprovalPolicy(ctx, { ...clean(args.input), ...(args.input.rules ? { rules: toRules(args.input.rules) } : {}) }),
  }),
  deleteApprovalPolicy: t.withAuth(SIGNED_IN).field({
    type: ApprovalPolicyPayloadRef,
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: DeleteApprovalPolicyInput, required: true }) },
    resolve: (_root, args, ctx) => deleteApprovalPolicy(ctx, args.input),
  }),
}));
