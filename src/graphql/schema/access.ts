// Members, roles, role assignments, identity sources, SSO group bindings, group sync and
// API tokens: who holds which permission tuples (seed 004). Logic lives in src/services.
import { isThenable } from "@pothos/core";
import { builder, inViewerOrg, readable } from "../builder.js";
import { rowQuery } from "./row-query.js";
import { viewerOf, type Context, type SignedInContext } from "../context.js";
import { COMMON_ERRORS } from "./errors.js";
import { clean } from "./input.js";
import { InvalidStateError, NotFoundError } from "../../errors.js";
import { resourcePatternToGlob } from "../../domain/catalog/index.js";
import { assignRole, createRole, deleteRole, unassignRole, updateRole, usableRoleWhere } from "../../services/roles.js";
import {
  createGroupBinding,
  createIdentitySource,
  deleteGroupBinding,
  deleteIdentitySource,
  syncUserGroups,
  updateGroupBinding,
} from "../../services/identity.js";
import {
  addMember,
  createApiToken,
  deleteOrganization,
  revokeApiToken,
  setMemberActive,
  setSuperAdmin,
} from "../../services/members.js";
import { releaseReservationsOfRole } from "../../services/reservations.js";
import { MembershipRef, OrganizationRef, UserRef } from "./organization.js";
import type { ApiToken } from "../../generated/prisma/client.js";
import { deps, READ_MEMBERS, SIGNED_IN } from "../helpers.js";

const ERRORS = { types: [...COMMON_ERRORS, InvalidStateError] };
const orgOf = (ctx: SignedInContext) => ctx.viewer.orgId;
const NO_TARGET = { matchValue: null, groups: null } as const;
const READ = (resourceType: "role" | "member" | "identity_source") => ({ resourceType, action: "read", ...NO_TARGET }) as const;

/*
 * Every t.prismaField below promises the prisma plugin that its rows were loaded with the `query`
 * it was given: fields beneath (`roles`, `directMembers`, relations) then read from the row
 * itself. Services return rows they loaded their own way, so each mutation reads its row back
 * with the query (by id, one statement); a delete reads it before deleting. A prismaField that
 * ignored its query answered "Unexpected error" for every relation selected under it.
 */
const orThrow = <T>(row: T | null, resource: string, id: string): T => {
  if (row === null) throw new NotFoundError(resource, id);
  return row;
};

const PermissionRef = builder.prismaObject("RolePermission", {
  description: "A permission tuple (resource_type, action, resource_pattern, authz_group).",
  fields: (t) => ({
    resourceType: t.exposeString("resourceType"),
    action: t.exposeString("action"),
    resourcePattern: t.string({
      nullable: true,
      description:
        "The glob (* and ?), as PermissionInput takes it: sending back what you read stores the same tuple. Empty = any resource. " +
        "Null only for a stored pattern no glob compiles to.",
      resolve: (p) => resourcePatternToGlob(p.resourcePattern),
    }),
    likePattern: t.exposeString("resourcePattern", { description: "The canonical SQL LIKE pattern the glob compiles to, as stored; empty = any resource." }),
    authzGroup: t.exposeString("authzGroup", { description: "Exact stack authz group; empty = none." }),
  }),
});

export const RoleRef = builder.prismaObject("Role", {
  description: "A bundle of permission tuples: a built-in system role or an org's custom role. Needs (role, read), or holding it.",
  runScopesOnType: true,
  // Also a role the caller holds: their own roles are not someone else's data.
  // Decided at once when the request's principal is loaded (Authz.check), as the list rules are.
  authScopes: (r, ctx) => {
    const holds = (p: { roleIds: readonly string[] } | null) => p !== null && p.roleIds.includes(r.id);
    const own = () => {
      if (!inViewerOrg(r.orgId, ctx)) return false;
      const member = ctx.authz.memberOrNull();
      return isThenable(member) ? member.then(holds) : holds(member);
    };
    const verdict = readable(ctx, r, r.orgId, READ("role"));
    return isThenable(verdict) ? verdict.then((ok) => ok || own()) : verdict || own();
  },
  fields: (t) => ({
    id: t.exposeID("id"),
    key: t.exposeString("key", { description: "Derived from the name at creation; immutable." }),
    name: t.exposeString("name"),
    description: t.exposeString("description"),
    system: t.exposeBoolean("system"),
    deleted: t.boolean({ resolve: (r) => r.deletedAt !== null }),
    permissions: t.relation("permissions"),
    directMembers: t.field({
      type: [UserRef],
      nullable: true,
      description:
        "Members holding this role by direct assignment in the caller's org. Who holds a role is member data: null " +
        "unless the caller also holds (member, read).",
      authScopes: READ_MEMBERS,
      unauthorizedResolver: () => null,
      // Loaded with the roles themselves (one query for the whole list, no N+1).
      select: (_args, ctx, nested) => ({
        assignments: { where: { orgId: viewerOf(ctx).orgId }, select: { user: nested(true) }, orderBy: { user: { name: "asc" } } },
      }),
      resolve: (role) => role.assignments.map((a) => a.user),
    }),
  }),
});

builder.prismaObject("IdentitySource", {
  description: "An SSO identity source. Needs (identity_source, read).",
  runScopesOnType: true,
  authScopes: (s, ctx) => readable(ctx, s, s.orgId, READ("identity_source")),
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    kind: t.exposeString("kind"),
    bindings: t.relation("bindings"),
  }),
});

builder.prismaObject("IdentityGroupBinding", {
  description: "(identity source, group key) attaching 1..5 roles; the group's members hold their union. Needs (identity_source, read).",
  runScopesOnType: true,
  authScopes: (b, ctx) => readable(ctx, b, b.orgId, READ("identity_source")),
  fields: (t) => ({
    id: t.exposeID("id"),
    groupKey: t.exposeString("groupKey"),
    identitySource: t.relation("identitySource"),
    roles: t.field({
      type: [RoleRef],
      select: (_args, _ctx, nested) => ({ roles: { select: { role: nested(true) }, orderBy: { role: { key: "asc" } } } }),
      resolve: (binding) => binding.roles.map((r) => r.role),
    }),
  }),
});

const ApiTokenRef = builder.prismaObject("ApiToken", {
  description: "A token's metadata. The secret itself is shown once, at creation. Your own, or another member's with (member, read).",
  runScopesOnType: true,
  authScopes: (k, ctx) => (ctx.viewer !== null && k.userId === ctx.viewer.userId ? readable(ctx, k, k.orgId, null) : readable(ctx, k, k.orgId, READ("member"))),
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    prefix: t.exposeString("prefix"),
    user: t.relation("user"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    lastUsedAt: t.expose("lastUsedAt", { type: "DateTime", nullable: true }),
    expiresAt: t.expose("expiresAt", { type: "DateTime", nullable: true }),
    revokedAt: t.expose("revokedAt", { type: "DateTime", nullable: true }),
  }),
});

const CreatedTokenRef = builder.objectRef<{ token: string; apiToken: ApiToken }>("CreatedApiToken").implement({
    fields: (t) => ({
      token: t.exposeString("token", { description: "The secret. Shown once: store it now." }),
      apiToken: t.field({ type: ApiTokenRef, resolve: (p) => p.apiToken }),
    }),
  });

builder.prismaObjectField("Membership", "role", (t) =>
  t.field({
    type: RoleRef,
    nullable: true,
    description: "The member's single direct role.",
    select: (_args, _ctx, nested) => ({ roleAssignment: { select: { role: nested(true) } } }),
    resolve: (m) => m.roleAssignment?.role ?? null,
  }),
);

builder.queryFields((t) => ({
  members: t.withAuth(SIGNED_IN).prismaField({
    type: ["Membership"],
    description: "Members of the caller's organization; needs (member, read).",
    resolve: async (query, _root, _args, ctx) => {
      await ctx.authz.require({ resourceType: "member", action: "read", ...NO_TARGET });
      return ctx.db.prisma.membership.findMany({ ...rowQuery(query), where: { orgId: orgOf(ctx) }, orderBy: { createdAt: "asc" } });
    },
  }),
  roles: t.withAuth(SIGNED_IN).prismaField({
    type: ["Role"],
    description: "The system roles and the org's custom roles; needs (role, read).",
    resolve: async (query, _root, _args, ctx) => {
      await ctx.authz.require({ resourceType: "role", action: "read", ...NO_TARGET });
      return ctx.db.prisma.role.findMany({
        ...rowQuery(query),
        where: usableRoleWhere(orgOf(ctx)),
        orderBy: [{ system: "desc" }, { key: "asc" }],
      });
    },
  }),
  identitySources: t.withAuth(SIGNED_IN).prismaField({
    type: ["IdentitySource"],
    resolve: async (query, _root, _args, ctx) => {
      await ctx.authz.require({ resourceType: "identity_source", action: "read", ...NO_TARGET });
      return ctx.db.prisma.identitySource.findMany({ ...rowQuery(query), where: { orgId: orgOf(ctx) }, orderBy: { name: "asc" } });
    },
  }),
  apiTokens: t.withAuth(SIGNED_IN).prismaField({
    type: ["ApiToken"],
    description: "Your own tokens, or another member's with (member, read).",
    args: { userId: t.arg.id() },
    resolve: async (query, _root, args, ctx) => {
      await ctx.authz.requireMember();
      const userId = args.userId ? String(args.userId) : ctx.viewer.userId;
      if (userId !== ctx.viewer.userId) await ctx.authz.require({ resourceType: "member", action: "read", ...NO_TARGET });
      return ctx.db.prisma.apiToken.findMany({ ...rowQuery(query), where: { orgId: orgOf(ctx), userId }, orderBy: { createdAt: "asc" } });
    },
  }),
}));

const PermissionInputRef = builder.inputType("PermissionInput", {
  description: "A tuple; resourcePattern is a user glob (* and ?), compiled to the canonical LIKE pattern.",
  fields: (t) => ({
    resourceType: t.string({ required: true }),
    action: t.string({ required: true }),
    resourcePattern: t.string(),
    authzGroup: t.string(),
  }),
});

const CreateRoleInput = builder.inputType("CreateRoleInput", {
  fields: (t) => ({
    name: t.string({ required: true }),
    description: t.string(),
    permissions: t.field({ type: [PermissionInputRef], required: true, description: "1..50 tuples." }),
  }),
});
const UpdateRoleInput = builder.inputType("UpdateRoleInput", {
  fields: (t) => ({
    id: t.id({ required: true }),
    name: t.string({ description: "Renames; the key stays." }),
    description: t.string(),
    permissions: t.field({ type: [PermissionInputRef], description: "Replaces the whole set (1..50)." }),
  }),
});
const AddMemberInputRef = builder.inputType("AddMemberInput", {
  fields: (t) => ({
    email: t.string({ required: true }),
    name: t.string({ required: true }),
    serviceAccount: t.boolean({ description: "A chatops bot or CI identity." }),
    roleId: t.id(),
  }),
});
const BindingInput = builder.inputType("CreateGroupBindingInput", {
  fields: (t) => ({
    identitySourceId: t.id({ required: true }),
    groupKey: t.string({ required: true }),
    roleIds: t.idList({ required: true, description: "1..5 roles." }),
  }),
});
const UpdateBindingInput = builder.inputType("UpdateGroupBindingInput", {
  fields: (t) => ({ id: t.id({ required: true }), roleIds: t.idList({ required: true }) }),
});
const SyncInput = builder.inputType("SyncUserGroupsInput", {
  fields: (t) => ({
    identitySourceId: t.id({ required: true }),
    userId: t.id({ required: true }),
    groupKeys: t.stringList({ required: true, description: "The user's whole group set in this source." }),
  }),
});
const CreateTokenInput = builder.inputType("CreateApiTokenInput", {
  fields: (t) => ({
    name: t.string({ required: true }),
    userId: t.id({ description: "Another member (e.g. a service account); needs (member, update)." }),
    expiresAt: t.field({ type: "DateTime" }),
  }),
});

/** A membership a mutation wrote, read back with the field's query. */
const membershipRow = (ctx: Context, query: object, m: { orgId: string; userId: string }) =>
  ctx.db.prisma.membership.findUniqueOrThrow({ ...rowQuery(query), where: { orgId_userId: { orgId: m.orgId, userId: m.userId } } });

const ids = (list: readonly (string | number)[]) => list.map(String);

builder.mutationFields((t) => ({
  createRole: t.withAuth(SIGNED_IN).prismaField({
    type: "Role",
    errors: ERRORS,
    args: { input: t.arg({ type: CreateRoleInput, required: true }) },
    resolve: async (query, _r, { input }, ctx) => {
      const role = await createRole(deps(ctx), { name: input.name, description: input.description, permissions: input.permissions.map(clean) });
      return ctx.db.prisma.role.findUniqueOrThrow({ ...rowQuery(query), where: { id: role.id } });
    },
  }),
  updateRole: t.withAuth(SIGNED_IN).prismaField({
    type: "Role",
    errors: ERRORS,
    args: { input: t.arg({ type: UpdateRoleInput, required: true }) },
    resolve: async (query, _r, { input }, ctx) => {
      const role = await updateRole(deps(ctx), {
        id: String(input.id),
        name: input.name,
        description: input.description,
        permissions: input.permissions ? input.permissions.map(clean) : null,
      });
      return ctx.db.prisma.role.findUniqueOrThrow({ ...rowQuery(query), where: { id: role.id } });
    },
  }),
  deleteRole: t.withAuth(SIGNED_IN).prismaField({
    type: "Role",
    errors: ERRORS,
    description: "Cascades through assignments and bindings; releases the role's reservations with you as releaser.",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _r, args, ctx) => {
      const role = await deleteRole(deps(ctx), String(args.id), releaseReservationsOfRole);
      return ctx.db.prisma.role.findUniqueOrThrow({ ...rowQuery(query), where: { id: role.id } });
    },
  }),
  assignRole: t.withAuth(SIGNED_IN).prismaField({
    type: "Membership",
    errors: ERRORS,
    description: "Gives a member their single direct role (replacing any other); needs (role, assign).",
    args: { userId: t.arg.id({ required: true }), roleId: t.arg.id({ required: true }) },
    resolve: async (query, _r, args, ctx) => {
      const a = await assignRole(deps(ctx), { userId: String(args.userId), roleId: String(args.roleId) });
      return ctx.db.prisma.membership.findUniqueOrThrow({ ...rowQuery(query), where: { orgId_userId: { orgId: a.orgId, userId: a.userId } } });
    },
  }),
  unassignRole: t.withAuth(SIGNED_IN).boolean({
    errors: ERRORS,
    args: { userId: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => unassignRole(deps(ctx), String(args.userId)),
  }),
  addMember: t.withAuth(SIGNED_IN).prismaField({
    type: "Membership",
    errors: ERRORS,
    args: { input: t.arg({ type: AddMemberInputRef, required: true }) },
    resolve: async (query, _r, { input }, ctx) => membershipRow(ctx, query, await addMember(deps(ctx), clean(input))),
  }),
  deactivateMember: t.withAuth(SIGNED_IN).prismaField({
    type: "Membership",
    errors: ERRORS,
    description: "The member's grants stop at once; needs (member, update).",
    args: { userId: t.arg.id({ required: true }) },
    resolve: async (query, _r, args, ctx) => membershipRow(ctx, query, await setMemberActive(deps(ctx), String(args.userId), false)),
  }),
  reactivateMember: t.withAuth(SIGNED_IN).prismaField({
    type: "Membership",
    errors: ERRORS,
    args: { userId: t.arg.id({ required: true }) },
    resolve: async (query, _r, args, ctx) => membershipRow(ctx, query, await setMemberActive(deps(ctx), String(args.userId), true)),
  }),
  setSuperAdmin: t.withAuth(SIGNED_IN).prismaField({
    type: "Membership",
    errors: ERRORS,
    args: { userId: t.arg.id({ required: true }), value: t.arg.boolean({ required: true }) },
    resolve: async (query, _r, args, ctx) => membershipRow(ctx, query, await setSuperAdmin(deps(ctx), String(args.userId), args.value)),
  }),
  createIdentitySource: t.withAuth(SIGNED_IN).prismaField({
    type: "IdentitySource",
    errors: ERRORS,
    args: { name: t.arg.string({ required: true }), kind: t.arg.string() },
    resolve: async (query, _r, args, ctx) => {
      const source = await createIdentitySource(deps(ctx), clean(args));
      return ctx.db.prisma.identitySource.findUniqueOrThrow({ ...rowQuery(query), where: { id: source.id } });
    },
  }),
  deleteIdentitySource: t.withAuth(SIGNED_IN).prismaField({
    type: "IdentitySource",
    errors: ERRORS,
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _r, args, ctx) => {
      const id = String(args.id);
      const before = await ctx.db.prisma.identitySource.findFirst({ ...rowQuery(query), where: { id, orgId: orgOf(ctx) } });
      await deleteIdentitySource(deps(ctx), id);
      return orThrow(before, "IdentitySource", id);
    },
  }),
  createGroupBinding: t.withAuth(SIGNED_IN).prismaField({
    type: "IdentityGroupBinding",
    errors: ERRORS,
    args: { input: t.arg({ type: BindingInput, required: true }) },
    resolve: async (query, _r, { input }, ctx) => {
      const binding = await createGroupBinding(deps(ctx), {
        identitySourceId: String(input.identitySourceId),
        groupKey: input.groupKey,
        roleIds: ids(input.roleIds),
      });
      return ctx.db.prisma.identityGroupBinding.findUniqueOrThrow({ ...rowQuery(query), where: { id: binding.id } });
    },
  }),
  updateGroupBinding: t.withAuth(SIGNED_IN).prismaField({
    type: "IdentityGroupBinding",
    errors: ERRORS,
    args: { input: t.arg({ type: UpdateBindingInput, required: true }) },
    resolve: async (query, _r, { input }, ctx) => {
      const binding = await updateGroupBinding(deps(ctx), { id: String(input.id), roleIds: ids(input.roleIds) });
      return ctx.db.prisma.identityGroupBinding.findUniqueOrThrow({ ...rowQuery(query), where: { id: binding.id } });
    },
  }),
  deleteGroupBinding: t.withAuth(SIGNED_IN).prismaField({
    type: "IdentityGroupBinding",
    errors: ERRORS,
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _r, args, ctx) => {
      const id = String(args.id);
      const before = await ctx.db.prisma.identityGroupBinding.findFirst({ ...rowQuery(query), where: { id, orgId: orgOf(ctx) } });
      await deleteGroupBinding(deps(ctx), id);
      return orThrow(before, "IdentityGroupBinding", id);
    },
  }),
  syncUserGroups: t.withAuth(SIGNED_IN).stringList({
    errors: ERRORS,
    description: "Replaces a user's group keys in one identity source (what SCIM or a login hook calls).",
    args: { input: t.arg({ type: SyncInput, required: true }) },
    resolve: (_r, { input }, ctx) =>
      syncUserGroups(deps(ctx), { identitySourceId: String(input.identitySourceId), userId: String(input.userId), groupKeys: input.groupKeys }),
  }),
  createApiToken: t.withAuth(SIGNED_IN).field({
    type: CreatedTokenRef,
    errors: ERRORS,
    args: { input: t.arg({ type: CreateTokenInput, required: true }) },
    resolve: (_r, { input }, ctx) =>
      createApiToken(deps(ctx), { name: input.name, userId: input.userId != null ? String(input.userId) : undefined, expiresAt: input.expiresAt ?? undefined }),
  }),
  revokeApiToken: t.withAuth(SIGNED_IN).prismaField({
    type: "ApiToken",
    errors: ERRORS,
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _r, args, ctx) => {
      const token = await revokeApiToken(deps(ctx), String(args.id));
      return ctx.db.prisma.apiToken.findUniqueOrThrow({ ...rowQuery(query), where: { id: token.id } });
    },
  }),
  deleteOrganization: t.withAuth(SIGNED_IN).prismaField({
    type: "Organization",
    errors: ERRORS,
    description: "Soft-deletes the caller's organization: every check fails for it from then on. Super admin only.",
    resolve: async (query, _r, _a, ctx) => {
      const org = await deleteOrganization(deps(ctx));
      return ctx.db.prisma.organization.findUniqueOrThrow({ ...rowQuery(query), where: { id: org.id } });
    },
  }),
}));

void OrganizationRef;
void MembershipRef;
