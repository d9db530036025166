// Resource policies over GraphQL: org-level rules applied to many workspaces (seed 000,
// "Resource policies"). Rules in src/services/resource-policies.ts.

import { builder, readable } from "../builder.js";
import { inOrder, rowQuery } from "./row-query.js";
import { type Context, signedIn } from "../context.js";
import { byName, keysetConnection } from "../keyset.js";
import { ChangeActionEnum } from "./gate.js";
import { UserRef } from "./organization.js";
import { WorkspaceRef, WORKSPACE_RULE_INPUTS } from "./workspace.js";
import { ERRORS, notFoundAsNull, deps, loadUser, SIGNED_IN } from "../helpers.js";
import { clean } from "./input.js";
import { RoleRef } from "./access.js";
import { CHANGE_ACTIONS } from "../../domain/gate/index.js";
import {
  createResourcePolicy,
  deleteResourcePolicy,
  findReadablePolicy,
  listResourcePolicyIds,
  resourcePoliciesNamingRole,
  updateResourcePolicy,
} from "../../services/resource-policies.js";

/** (resource_policy, read, <name>): what reading a policy, or anything of it, needs (docs/apply-gate.md). */
const policyReadable = (ctx: Context, object: object, policy: { orgId: string; name: string }) =>
  readable(ctx, object, policy.orgId, { resourceType: "resource_policy", action: "read", matchValue: policy.name, groups: null });
const POLICY_RULE_INPUTS = { policy: { select: { orgId: true, name: true } } } as const;

builder.prismaObject("PolicyRequirement", {
  description: "A policy's requirement for one action: a count (1, 2 or 3) or Auto, and named approvers.",
  include: POLICY_RULE_INPUTS,
  runScopesOnType: true,
  authScopes: (r, ctx) => policyReadable(ctx, r, r.policy),
  fields: (t) => ({
    action: t.field({ type: ChangeActionEnum, resolve: (r) => r.action }),
    count: t.exposeInt("count", { nullable: true, description: "1, 2 or 3; null is Auto (the workspace baseline decides)." }),
    auto: t.boolean({ resolve: (r) => r.count === null }),
    approverUsers: t.field({
      type: [UserRef],
      description: "Named users: being named is itself the grant to approve for this policy.",
      select: (_args, _ctx, nested) => ({ approvers: { select: { user: nested(true) } } }),
      resolve: (r) => r.approvers.flatMap((a) => (a.user ? [a.user] : [])),
    }),
    approverRoles: t.field({
      type: [RoleRef],
      description:
        "Named roles: any current member counts as a named approver. A deleted role stays named (deleted: true) and " +
        "can never be satisfied; send it back to keep it, leave it out to remove it.",
      select: (_args, _ctx, nested) => ({ approvers: { select: { role: nested(true) } } }),
      resolve: (r) => r.approvers.flatMap((a) => (a.role ? [a.role] : [])),
    }),
    deletedApprovers: t.stringList({
      description: 'What this requirement names that no longer exists, e.g. "deleted role data-team": each one keeps it blocking.',
      select: { approvers: { select: { role: { select: { name: true, deletedAt: true } } } } },
      resolve: (r) => r.approvers.flatMap((a) => (a.role?.deletedAt ? [`deleted role ${a.role.name}`] : [])).sort(),
    }),
  }),
});

builder.prismaObject("ResourcePolicyAssignment", {
  name: "PolicyAssignment",
  description: "A resource picked for a policy by hand, in one workspace. Needs (resource_policy, read) on its policy.",
  include: POLICY_RULE_INPUTS,
  runScopesOnType: true,
  authScopes: (a, ctx) => policyReadable(ctx, a, a.policy),
  fields: (t) => ({
    workspace: t.relation("workspace", { nullable: true, description: "Null unless the caller may read the workspace too." }),
    address: t.exposeString("address"),
  }),
});

export const ResourcePolicyRef = builder.prismaObject("ResourcePolicy", {
  description:
    "An organization-level rule applied to one or many workspaces: what an apply touching certain resources needs. " +
    "Governs by assignment and by address pattern (additive; no carve-outs). Needs (resource_policy, read, <name>).",
  runScopesOnType: true,
  authScopes: (p, ctx) => policyReadable(ctx, p, p),
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    description: t.exposeString("description"),
    addressPatterns: t.exposeStringList("addressPatterns", {
      description: "Globs over Terraform addresses: * matches any run of characters, everything else is literal; whole-address match.",
    }),
    revision: t.exposeInt("revision", { description: "Bumped on every edit; pass it back to updateResourcePolicy." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    updatedBy: t.relation("updatedBy", { nullable: true, description: "Who wrote the current revision." }),
    changeNote: t.exposeString("changeNote", {
      description: 'What the current revision recorded when it was not an edit of the policy, e.g. "deleted role data-team"; empty for an edit.',
    }),
    workspaces: t.field({
      type: [WorkspaceRef],
      description: "The workspaces it applies to that the caller may read.",
      select: (_args, _ctx, nested) => ({ workspaces: { select: { workspace: nested({ include: WORKSPACE_RULE_INPUTS }) }, orderBy: { workspaceId: "asc" } } }),
      resolve: (p) => p.workspaces.map((w) => w.workspace),
    }),
    assignments: t.relation("assignments", { query: { orderBy: [{ workspaceId: "asc" }, { address: "asc" }] } }),
    requirements: t.relation("requirements", {
      description: "One per action: create, update, delete, replace.",
      resolve: (query, p, _a, ctx) =>
        ctx.db.prisma.policyRequirement
          .findMany({ ...rowQuery(query), where: { policyId: p.id } })
          .then((rows) => rows.sort((a, b) => CHANGE_ACTIONS.indexOf(a.action) - CHANGE_ACTIONS.indexOf(b.action))),
    }),
  }),
});

builder.prismaObjectField("Workspace", "resourcePolicies", (t) =>
  t.field({
    type: [ResourcePolicyRef],
    description: "The resource policies applied to this workspace that the caller may read.",
    select: (_args, _ctx, nested) => ({ policies: { select: { policy: nested(true) }, orderBy: { policyId: "asc" } } }),
    resolve: (w) => w.policies.map((p) => p.policy),
  }),
);

const ResourcePolicyConnection = builder.connectionObject({ type: ResourcePolicyRef, name: "ResourcePolicyConnection" });

builder.prismaObjectField("Role", "namedByPolicies", (t) =>
  t.field({
    type: [ResourcePolicyRef],
    description: "Resource policies naming this role as approver that you may read: deleting the role leaves them blocking on it.",
    resolve: (role, _a, ctx) => resourcePoliciesNamingRole(ctx.db, signedIn(ctx).authz, role.id),
  }),
);

builder.queryFields((t) => ({
  roleResourcePolicies: t.withAuth(SIGNED_IN).prismaField({
    type: ["ResourcePolicy"],
    description: "The resource policies naming a role as approver (what its deletion leaves blocking), that the caller can read.",
    args: { roleId: t.arg.id({ required: true }) },
    // Read back with the field's query: fields selected beneath a policy are loaded with it.
    resolve: async (query, _root, args, ctx) => {
      const policies = await resourcePoliciesNamingRole(ctx.db, ctx.authz, String(args.roleId));
      return inOrder(policies, await ctx.db.prisma.resourcePolicy.findMany({ ...rowQuery(query), where: { id: { in: policies.map((p) => p.id) } } }));
    },
  }),
  resourcePolicy: t.withAuth(SIGNED_IN).prismaField({
    type: "ResourcePolicy",
    nullable: true,
    description: "Needs (resource_policy, read, <name>).",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const found = await findReadablePolicy(ctx.db, ctx.authz, String(args.id)).catch(notFoundAsNull);
      return found ? ctx.db.prisma.resourcePolicy.findUnique({ ...rowQuery(query), where: { id: found.id } }) : null;
    },
  }),
  resourcePolicies: t.withAuth(SIGNED_IN).field({
    type: ResourcePolicyConnection,
    description: "The policies the caller may read, by name, filtered in SQL by (resource_policy, read).",
    args: { first: t.arg.int({ defaultValue: 50 }), after: t.arg.string() },
    resolve: (_root, args, ctx) =>
      keysetConnection(args, byName, async (request) => {
        const page = await listResourcePolicyIds(ctx.db, ctx.authz, request);
        const rows = page.rows.length
          ? await ctx.db.prisma.resourcePolicy.findMany({ where: { id: { in: page.rows.map((r) => r.id) } } })
          : [];
        const byId = new Map(rows.map((r) => [r.id, r]));
        return { nodes: page.rows.map((r) => byId.get(r.id)).filter((r) => r !== undefined), hasNextPage: page.hasNextPage };
      }),
  }),
}));

const RequirementInputRef = builder.inputType("PolicyRequirementInput", {
  fields: (t) => ({
    action: t.field({ type: ChangeActionEnum, required: true }),
    count: t.int({ description: "1, 2 or 3; null or omitted is Auto (the workspace baseline decides). There is no count of zero." }),
    approverUserIds: t.idList({ description: "Named users of the organization." }),
    approverRoleIds: t.idList({ description: "Named roles of the organization." }),
  }),
});

const AssignmentInputRef = builder.inputType("PolicyAssignmentInput", {
  fields: (t) => ({
    workspaceId: t.id({ required: true, description: "A workspace the policy applies to." }),
    address: t.string({ required: true, description: "An exact Terraform address." }),
  }),
});

const CreateInputRef = builder.inputType("CreateResourcePolicyInput", {
  fields: (t) => ({
    name: t.string({ required: true }),
    description: t.string(),
    addressPatterns: t.stringList(),
    workspaceIds: t.idList({ description: "The workspaces it applies to." }),
    assignments: t.field({ type: [AssignmentInputRef] }),
    requirements: t.field({ type: [RequirementInputRef], description: "At most one per action; actions left out are Auto with no approvers." }),
  }),
});

const UpdateInputRef = builder.inputType("UpdateResourcePolicyInput", {
  fields: (t) => ({
    id: t.id({ required: true }),
    revision: t.int({ description: "The revision the edit is based on; a stale one is a ConflictError." }),
    name: t.string(),
    description: t.string(),
    addressPatterns: t.stringList({ description: "Replaces the patterns." }),
    workspaceIds: t.idList({ description: "Replaces the workspaces it applies to." }),
    assignments: t.field({ type: [AssignmentInputRef], description: "Replaces the assignments." }),
    requirements: t.field({ type: [RequirementInputRef], description: "Replaces the requirements of the actions listed." }),
  }),
});

type RequirementArg = { action: string; count?: number | null; approverUserIds?: readonly (string | number)[] | null; approverRoleIds?: readonly (string | number)[] | null };
type AssignmentArg = { workspaceId: string | number; address: string };

const requirementsOf = (list: readonly RequirementArg[] | null | undefined) =>
  list?.map((r) => ({
    action: r.action,
    count: r.count ?? null,
    approverUserIds: (r.approverUserIds ?? []).map(String),
    approverRoleIds: (r.approverRoleIds ?? []).map(String),
  }));
const assignmentsOf = (list: readonly AssignmentArg[] | null | undefined) =>
  list?.map((a) => ({ workspaceId: String(a.workspaceId), address: a.address }));

builder.mutationFields((t) => ({
  createResourcePolicy: t.withAuth(SIGNED_IN).field({
    type: ResourcePolicyRef,
    errors: ERRORS,
    description: "Needs (resource_policy, create, <name>). Applies at once to every open plan on its workspaces.",
    args: { input: t.arg({ type: CreateInputRef, required: true }) },
    resolve: (_root, { input }, ctx) =>
      createResourcePolicy(deps(ctx), {
        ...clean({ name: input.name, description: input.description, addressPatterns: input.addressPatterns }),
        ...clean({
          workspaceIds: input.workspaceIds?.map(String),
          assignments: assignmentsOf(input.assignments),
          requirements: requirementsOf(input.requirements),
        }),
      }),
  }),
  updateResourcePolicy: t.withAuth(SIGNED_IN).field({
    type: ResourcePolicyRef,
    errors: ERRORS,
    description:
      "Needs (resource_policy, update, <name>). Bumps the revision and re-evaluates every open gate on the workspaces it " +
      "applied to or applies to now; plans already applying keep the evaluation that allowed them.",
    args: { input: t.arg({ type: UpdateInputRef, required: true }) },
    resolve: (_root, { input }, ctx) =>
      updateResourcePolicy(deps(ctx), {
        id: String(input.id),
        ...clean({ revision: input.revision, name: input.name, description: input.description, addressPatterns: input.addressPatterns }),
        ...clean({
          workspaceIds: input.workspaceIds?.map(String),
          assignments: assignmentsOf(input.assignments),
          requirements: requirementsOf(input.requirements),
        }),
      }),
  }),
  deleteResourcePolicy: t.withAuth(SIGNED_IN).field({
    type: ResourcePolicyRef,
    errors: ERRORS,
    description: "Needs (resource_policy, delete, <name>).",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => deleteResourcePolicy(deps(ctx), String(args.id)),
  }),
}));
