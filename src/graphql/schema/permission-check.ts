// The permission catalog as a service: the check API for runners, CI jobs and
// deployers; the viewerCan objects a dashboard enables its buttons from; who holds a role through
// direct assignment and through SSO bindings; and which targeting modes each pair accepts.
// Every answer comes from the one in-memory check (src/domain/catalog/check.ts) and the one
// validator (src/domain/catalog/validate.ts). Docs: docs/permissions.md, "The check API".

import DataLoader from "dataloader";
import { builder } from "../builder.js";
import { type Context, viewerOf } from "../context.js";
import { perRequest } from "../request-loaders.js";
import {
  checkPermission,
  FAMILIES,
  PERMISSION_TARGETING,
  resourcePatternToGlob,
  TARGETING_MODES,
  type ConcreteAction,
  type ConcreteResourceType,
  type ModeSupport,
  type PairTargeting,
  type Permission,
  type Target,
  type TargetingRefusal,
} from "../../domain/catalog/index.js";
import { NotFoundError, PermissionDeniedError, UnauthenticatedError, ValidationError } from "../../errors.js";
import type { User } from "../../generated/prisma/client.js";
import { stackTarget, workspaceFamilyTarget } from "../../authz/targets.js";
import { roleHoldings, type LoadedPrincipal, type RoleHolding } from "../../authz/principal.js";
import {
  checkPermissions,
  MAX_PERMISSION_CHECKS,
  type CheckDecision,
  type GrantSource,
  type PermissionCheckAnswer,
} from "../../services/permission-check.js";
import { UserRef } from "./organization.js";
import { CatalogFamily } from "./catalog.js";
import { ApprovalRequestRef } from "./approvals.js";
import { ruleWorkspace, type RuleWorkspace } from "./workspace-rule.js";
import { READ_MEMBERS, SIGNED_IN } from "../helpers.js";

// ── The check API ────────────────────────────────────────────────────────────────────

const PermissionCheckInputRef = builder.inputType("PermissionCheckInput", {
  description:
    "One check: may principalId perform (resourceType, action) on the resource? Name the resource by resourceId " +
    "(stack, workspace, resource_policy, approval_policy, approval_request, virtual_key, connection — or a workspace's id for " +
    "the workspace-scoped families — and webhook; for a workspace or cloud_integration create, the stack's id with matchValue the name " +
    "to create), or describe it by matchValue and groups (a name to create, a label key, " +
    "a runner group name); neither asks \"anywhere?\", which only an untargeted grant satisfies.",
  fields: (t) => ({
    principalId: t.id({ description: "The user checked; yourself when omitted. Anyone else needs (member, check)." }),
    resourceType: t.string({ required: true }),
    action: t.string({ required: true }),
    resourceId: t.id(),
    matchValue: t.string({ description: "The target's match value (the family's matchValue in permissionCatalog)." }),
    groups: t.stringList({ description: "The target's authz groups (families that accept a group only); null = none known." }),
  }),
});

const DecisionEnum = builder.enumType("PermissionCheckDecision", {
  description: "Why a check answered as it did.",
  values: {
    GRANTED: { description: "A grant the principal holds satisfies the seed's three conditions (see grant and via)." },
    SUPER_ADMIN: { description: "The principal is a super admin of this organization." },
    OWNER: { description: "The principal owns this personal organization (admin implicitly)." },
    NO_GRANT: { description: "No grant of the principal's reaches the target: see missing." },
    READ_MISSING: {
      description:
        "The principal holds the action but cannot find the resource: the operation looks it up first, under (resource_type, read) " +
        "for stacks, cloud integrations and resource policies (and for a create in a stack, read on that stack), and answers NotFound. " +
        "missing is the read tuple to grant.",
    },
    NOT_A_MEMBER: { description: "The principal is not an active member of this organization (or no such user)." },
    RESOURCE_NOT_FOUND: { description: "No such resource in this organization that the caller may read." },
  } satisfies Record<CheckDecision, unknown>,
});

const GrantSourceKindEnum = builder.enumType("GrantSourceKind", {
  values: {
    DIRECT: { description: "The principal's direct role assignment." },
    SSO_BINDING: { description: "An SSO group binding matching one of the principal's synced groups." },
    OWNER: { description: "The personal organization's owner holds (*, *) implicitly." },
  },
});

// ── Redaction: what a way of holding a role reveals, and who may see it ──────────────

const READ_ROLE: Target = { resourceType: "role", action: "read", matchValue: null, groups: null };
const READ_IDENTITY: Target = { resourceType: "identity_source", action: "read", matchValue: null, groups: null };

/** What the caller may read of the data a way of holding a role reveals: each type's read rule, over the caller's principal. */
interface Sight {
  /** (role, read). */
  readonly roles: boolean;
  /** The roles the caller holds (an active member's): the Role type's rule lets a holder read them. */
  readonly heldRoleIds: readonly string[];
  /** (identity_source, read). */
  readonly identitySources: boolean;
}

const NO_SIGHT: Sight = { roles: false, heldRoleIds: [], identitySources: false };

function sightOf(p: LoadedPrincipal): Sight {
  const member = p.orgExists && !p.orgDeleted && p.membershipActive;
  return { roles: checkPermission(p, READ_ROLE).allowed, heldRoleIds: member ? p.roleIds : [], identitySources: checkPermission(p, READ_IDENTITY).allowed };
}

const callerSight = perRequest((_ctx: Context) => ({ sight: null as Sight | null }));

/**
 * The caller's Sight, decided once per request: at once when the principal is already loaded (the
 * check API's resolver loaded it before any via entry resolves), so the guards below answer each
 * of a batch's entries without a promise; otherwise once the principal is loaded.
 */
function sight(ctx: Context): Sight | Promise<Sight> {
  const memo = callerSight.of(ctx);
  if (memo.sight) return memo.sight;
  if (ctx.viewer === null) return NO_SIGHT;
  return ctx.authz.withPrincipal((p) => (memo.sight = sightOf(p)));
}

const seen = <T>(s: Sight | Promise<Sight>, rule: (s: Sight) => T): T | Promise<T> => (s instanceof Promise ? s.then(rule) : rule(s));

/**
 * A field carrying identity-source data (a binding's id, its identity source, its group key):
 * null unless the caller holds (identity_source, read), as the IdentitySource and
 * IdentityGroupBinding types themselves require. The one rule RoleHolding (Role.effectiveMembers)
 * and GrantSource (checkPermissions.via) share.
 */
export const identitySourceData = {
  authScopes: (_parent: unknown, _args: unknown, ctx: Context) => seen(sight(ctx), (s) => s.identitySources),
  unauthorizedResolver: () => null,
} as const;

/**
 * A field naming a role (its id, key, name): null unless the caller may read that role — the
 * Role type's own rule (src/graphql/schema/access.ts): (role, read), or the caller holds it.
 */
export const roleData = {
  authScopes: (s: { roleId: string | null }, _args: unknown, ctx: Context) =>
    s.roleId === null || seen(sight(ctx), (v) => v.roles || v.heldRoleIds.includes(s.roleId!)),
  unauthorizedResolver: () => null,
} as const;

/** The GrantSource fields carrying each type's data, and the rule guarding them. Every field but `kind` is here. */
export const REVEALING_FIELDS = {
  role: { fields: ["roleId", "roleKey", "roleName"], guard: roleData },
  identity_source: { fields: ["bindingId", "identitySourceId", "identitySourceName", "groupKey"], guard: identitySourceData },
} as const;

/**
 * Which data each way of holding a grant reveals (GrantSourceKind → the types whose read rule
 * guards its fields). test/check/via-redaction.test.ts generates one case per kind of the
 * schema's enum from this table, so a new kind without an entry fails there.
 */
export const VIA_REVEALS: Record<GrantSource["kind"], readonly (keyof typeof REVEALING_FIELDS)[]> = {
  DIRECT: ["role"],
  SSO_BINDING: ["role", "identity_source"],
  OWNER: [],
};

const DESCRIPTIONS: Partial<Record<keyof GrantSource, string>> = {
  bindingId: "SSO_BINDING: the binding.",
  groupKey: "SSO_BINDING: the group the binding matches.",
};

const GrantSourceRef = builder.objectRef<GrantSource>("GrantSource").implement({
  description:
    "One way the principal holds a role carrying the grant that matched. The role's id, key and name are null unless the caller may read " +
    "that role ((role, read) or holding it); a binding's details are null without (identity_source, read).",
  // Every field but kind is some type's data, exposed under that type's guard (REVEALING_FIELDS).
  fields: (t) => ({
    kind: t.field({ type: GrantSourceKindEnum, resolve: (s) => s.kind }),
    ...Object.fromEntries(
      Object.values(REVEALING_FIELDS).flatMap(({ fields, guard }) =>
        fields.map((name) => {
          const options = { nullable: true, description: DESCRIPTIONS[name], ...guard } as const;
          return [name, name.endsWith("Id") ? t.exposeID(name, options) : t.exposeString(name, options)];
        }),
      ),
    ),
  }),
});

const CheckedGrantRef = builder.objectRef<Permission>("CheckedGrant").implement({
  description: "The permission tuple that satisfied a check.",
  fields: (t) => ({
    resourceType: t.exposeString("resourceType"),
    action: t.exposeString("action"),
    resourcePattern: t.string({ nullable: true, description: "As a glob (* and ?); empty = any resource.", resolve: (p) => resourcePatternToGlob(p.resourcePattern) }),
    likePattern: t.exposeString("resourcePattern", { description: "The stored LIKE pattern." }),
    authzGroup: t.exposeString("authzGroup"),
  }),
});

type Missing = NonNullable<PermissionCheckAnswer["missing"]>;
const MissingTupleRef = builder.objectRef<Missing>("MissingTuple").implement({
  description: "The target the principal holds no grant for.",
  fields: (t) => ({
    resourceType: t.exposeString("resourceType"),
    action: t.exposeString("action"),
    matchValue: t.exposeString("matchValue", { nullable: true }),
    groups: t.stringList({ nullable: true, resolve: (m) => (m.groups === null ? null : [...m.groups]) }),
  }),
});

const PermissionCheckRef = builder.objectRef<PermissionCheckAnswer>("PermissionCheck").implement({
  description: "One answer of checkPermissions, in the order asked.",
  fields: (t) => ({
    principalId: t.exposeID("principalId"),
    resourceType: t.exposeString("resourceType"),
    action: t.exposeString("action"),
    resourceId: t.exposeID("resourceId", { nullable: true }),
    allowed: t.exposeBoolean("allowed"),
    decision: t.field({ type: DecisionEnum, resolve: (a) => a.decision }),
    grant: t.field({ type: CheckedGrantRef, nullable: true, resolve: (a) => a.grant }),
    via: t.field({ type: [GrantSourceRef], description: "Every role carrying the grant, and how the principal holds it.", resolve: (a) => a.sources }),
    missing: t.field({ type: MissingTupleRef, nullable: true, resolve: (a) => a.missing }),
  }),
});

builder.queryField("checkPermissions", (t) =>
  t.withAuth(SIGNED_IN).field({
    type: [PermissionCheckRef],
    errors: { types: [ValidationError, PermissionDeniedError, NotFoundError, UnauthenticatedError] },
    description:
      `Answers up to ${MAX_PERMISSION_CHECKS} checks with the decision the operations make (find the resource, then check the action), each with its reason. ` +
      "Checking anyone but yourself needs (member, check). A resource must be of your organization and readable by you; " +
      "another organization's principal or resource is answered exactly like one that does not exist.",
    args: { checks: t.arg({ type: [PermissionCheckInputRef], required: true }) },
    resolve: (_root, args, ctx) => checkPermissions({ db: ctx.db, authz: ctx.authz }, args.checks.map((c) => ({ ...c, principalId: c.principalId == null ? null : String(c.principalId), resourceId: c.resourceId == null ? null : String(c.resourceId) }))),
  }),
);

// ── viewerCan: what the dashboard enables ────────────────────────────────────────────

const camel = (action: string) => action.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());

/**
 * `<Type>ViewerCan`: one Boolean per action of the family (create aside: it is not done to an
 * existing object), each the in-memory check over the request's principal, loaded once per
 * request — a list of a hundred stacks costs no statement more than one.
 */
function viewerCanType<Row>(name: string, family: ConcreteResourceType, targetOf: (row: Row, action: ConcreteAction) => Target | null) {
  const actions = (FAMILIES[family].actions as readonly ConcreteAction[]).filter((a) => a !== "create");
  return builder.objectRef<{ row: Row }>(name).implement({
    description: `What the caller may do to this ${family}: (${family}, <action>) on it, by the API's own check.`,
    fields: (t) =>
      Object.fromEntries(
        actions.map((action) => [
          camel(action),
          t.boolean({
            description: `(${family}, ${action}) on this ${family}.`,
            // No target (the object's workspace is gone): fail closed.
            resolve: ({ row }, _args, ctx) => {
              const target = targetOf(row, action);
              return target === null ? false : ctx.authz.can(target);
            },
          }),
        ]),
      ),
  });
}

const StackViewerCanRef = viewerCanType<{ name: string; authzGroups: string[] }>("StackViewerCan", "stack", (s, a) => stackTarget(s, a));
builder.prismaObjectField("Stack", "viewerCan", (t) =>
  t.field({ type: StackViewerCanRef, description: "Which stack actions the caller may perform here.", resolve: (row) => ({ row }) }),
);

type InWorkspace = { name: string; stack: { authzGroups: string[] } };
const WorkspaceViewerCanRef = viewerCanType<InWorkspace>("WorkspaceViewerCan", "workspace", (w, a) => workspaceFamilyTarget(w, "workspace", a));
builder.prismaObjectField("Workspace", "viewerCan", (t) =>
  t.field({
    type: WorkspaceViewerCanRef,
    description: "Which workspace actions the caller may perform here.",
    select: { stack: { select: { authzGroups: true } } },
    resolve: (row) => ({ row }),
  }),
);

const ResourcePolicyViewerCanRef = viewerCanType<{ name: string }>("ResourcePolicyViewerCan", "resource_policy", (p, a) => ({
  resourceType: "resource_policy",
  action: a,
  matchValue: p.name,
  groups: null,
}));
builder.prismaObjectField("ResourcePolicy", "viewerCan", (t) =>
  t.field({ type: ResourcePolicyViewerCanRef, description: "Which resource policy actions the caller may perform here.", resolve: (row) => ({ row }) }),
);

// The workspace-scoped families: their workspace (name, stack's groups) is the one the type's read
// rule already loaded for this request (ruleWorkspace), so these cost no statement either.
type ScopedFamily = "approval_policy" | "approval_request" | "virtual_key" | "connection";
const scopedViewerCan = (name: string, family: ScopedFamily) =>
  viewerCanType<RuleWorkspace | null>(name, family, (w, a) => (w === null ? null : workspaceFamilyTarget(w, family, a)));
const inItsWorkspace = async (o: { workspaceId: string }, ctx: Context) => ({ row: await ruleWorkspace(ctx, o.workspaceId) });

const ApprovalPolicyViewerCanRef = scopedViewerCan("ApprovalPolicyViewerCan", "approval_policy");
builder.prismaObjectField("ApprovalPolicy", "viewerCan", (t) =>
  t.field({ type: ApprovalPolicyViewerCanRef, description: "manage is owner-only.", resolve: (p, _a, ctx) => inItsWorkspace(p, ctx) }),
);
const ApprovalRequestViewerCanRef = scopedViewerCan("ApprovalRequestViewerCan", "approval_request");
builder.objectField(ApprovalRequestRef, "viewerCan", (t) =>
  t.field({ type: ApprovalRequestViewerCanRef, description: "Whether the caller's grants reach deciding held calls of this workspace (eligibility to vote on this one is the request's own).", resolve: (r, _a, ctx) => inItsWorkspace(r, ctx) }),
);
const VirtualKeyViewerCanRef = scopedViewerCan("VirtualKeyViewerCan", "virtual_key");
builder.prismaObjectField("VirtualKey", "viewerCan", (t) =>
  t.field({ type: VirtualKeyViewerCanRef, resolve: (k, _a, ctx) => inItsWorkspace(k, ctx) }),
);
const ToolConnectionViewerCanRef = scopedViewerCan("ToolConnectionViewerCan", "connection");
builder.prismaObjectField("Connection", "viewerCan", (t) =>
  t.field({ type: ToolConnectionViewerCanRef, resolve: (c, _a, ctx) => inItsWorkspace(c, ctx) }),
);
const WebhookViewerCanRef = viewerCanType<null>("WebhookViewerCan", "webhook", (_w, a) => ({ resourceType: "webhook", action: a, matchValue: null, groups: null }));
builder.prismaObjectField("Webhook", "viewerCan", (t) => t.field({ type: WebhookViewerCanRef, resolve: () => ({ row: null }) }));

// ── Effective membership ─────────────────────────────────────────────────────────────

interface Holding {
  kind: RoleHolding["kind"];
  bindingId: string | null;
  identitySourceId: string | null;
  identitySourceName: string | null;
  groupKey: string | null;
}
interface EffectiveMember {
  user: User;
  via: Holding[];
}

const RoleHoldingRef = builder.objectRef<Holding>("RoleHolding").implement({
  description: "How a member holds a role. The binding's details are identity-source data: null without (identity_source, read).",
  fields: (t) => ({
    kind: t.field({ type: GrantSourceKindEnum, resolve: (h) => h.kind }),
    bindingId: t.exposeID("bindingId", { nullable: true, ...identitySourceData }),
    identitySourceName: t.exposeString("identitySourceName", { nullable: true, ...identitySourceData }),
    groupKey: t.exposeString("groupKey", { nullable: true, ...identitySourceData }),
  }),
});

const EffectiveMemberRef = builder.objectRef<EffectiveMember>("EffectiveRoleMember").implement({
  description: "An active member holding a role, and every way they hold it.",
  fields: (t) => ({
    user: t.field({ type: UserRef, resolve: (m) => m.user }),
    via: t.field({ type: [RoleHoldingRef], resolve: (m) => m.via }),
  }),
});

const effectiveMembers = perRequest(
  (ctx: Context) =>
    new DataLoader<string, EffectiveMember[]>(async (roleIds) => {
      const orgId = viewerOf(ctx).orgId;
      // The one answer to "who holds this role" (src/authz/principal.ts): the same people the check grants.
      const rows = await roleHoldings(ctx.db.sql, orgId, roleIds);
      const userIds = [...new Set(rows.map((r) => r.userId))];
      const users = userIds.length ? await ctx.db.prisma.user.findMany({ where: { id: { in: userIds } } }) : [];
      const byId = new Map(users.map((u) => [u.id, u]));
      const out = new Map<string, Map<string, EffectiveMember>>(roleIds.map((id) => [id, new Map()]));
      for (const r of rows) {
        const user = byId.get(r.userId);
        if (!user) continue;
        const members = out.get(r.roleId)!;
        let m = members.get(r.userId);
        if (!m) members.set(r.userId, (m = { user, via: [] }));
        m.via.push({ kind: r.kind, bindingId: r.bindingId, identitySourceId: r.identitySourceId, identitySourceName: r.identitySourceName, groupKey: r.groupKey });
      }
      return roleIds.map((id) => [...out.get(id)!.values()].sort((a, b) => a.user.name.localeCompare(b.user.name) || a.user.id.localeCompare(b.user.id)));
    }),
);

/** Every role's effective members in the caller's org, batched per request: two statements for a whole list. */
function effectiveMembersOf(ctx: Context, roleId: string): Promise<EffectiveMember[]> {
  return effectiveMembers.of(ctx).load(roleId);
}

builder.prismaObjectField("Role", "effectiveMembers", (t) =>
  t.field({
    type: [EffectiveMemberRef],
    nullable: true,
    description:
      "Active members of the caller's organization holding this role, by direct assignment, through SSO group bindings, " +
      "and (admin, in a personal organization) as its owner — the same people a permission check grants the role's tuples to, " +
      "with every way each holds it. Member data: null unless the caller holds (member, read).",
    authScopes: READ_MEMBERS,
    unauthorizedResolver: () => null,
    resolve: (role, _args, ctx) => effectiveMembersOf(ctx, role.id),
  }),
);

// ── Targeting modes per pair ─────────────────────────────────────────────────────────

const TargetingModeEnum = builder.enumType("TargetingMode", {
  description: "A permission uses exactly one targeting mode (seed 004, Targeting).",
  values: {
    ANY_RESOURCE: { description: "No pattern, no group: every resource of the type." },
    NAME_PATTERN: { description: "A glob over the family's match value." },
    AUTHZ_GROUP: { description: "An exact stack authz group." },
  } satisfies Record<(typeof TARGETING_MODES)[number], unknown>,
});

const TargetingRefusalRef = builder.objectRef<TargetingRefusal>("TargetingRefusal").implement({
  description: "Why the validator refuses a targeting mode: the same code and message createRole would answer.",
  fields: (t) => ({ code: t.exposeString("code"), message: t.exposeString("message") }),
});

const ModeSupportRef = builder.objectRef<ModeSupport>("TargetingModeSupport").implement({
  fields: (t) => ({
    mode: t.field({ type: TargetingModeEnum, resolve: (m) => m.mode }),
    accepted: t.exposeBoolean("accepted"),
    refusals: t.field({ type: [TargetingRefusalRef], resolve: (m) => [...m.refusals] }),
  }),
});

export const PermissionTargetingRef = builder.objectRef<PairTargeting>("PermissionTargeting").implement({
  description: "One (resource_type, action) pair, wildcards included, with the targeting modes Validate accepts for it.",
  fields: (t) => ({
    resourceType: t.exposeString("resourceType"),
    action: t.exposeString("action"),
    ownerOnly: t.exposeBoolean("ownerOnly", { description: "No grant reaches it in any mode: only the organization's owner." }),
    modes: t.field({ type: [ModeSupportRef], resolve: (p) => [...p.modes] }),
  }),
});

builder.queryField("permissionTargeting", (t) =>
  t.field({
    type: [PermissionTargetingRef],
    description:
      "Every pair a role may name — (*, *), (*, <action>), (<type>, *) and the matrix — with the targeting modes each accepts " +
      "and why the others are refused, read off the validator itself.",
    args: { resourceType: t.arg.string({ description: "Only this resource type's pairs ('*' for the wildcard type)." }) },
    resolve: (_root, args) =>
      args.resourceType == null ? [...PERMISSION_TARGETING] : PERMISSION_TARGETING.filter((p) => p.resourceType === args.resourceType),
  }),
);

builder.objectField(CatalogFamily, "targeting", (t) =>
  t.field({
    type: [PermissionTargetingRef],
    description: "(<type>, *) then each action, with the targeting modes Validate accepts and why it refuses the others.",
    resolve: (family) => PERMISSION_TARGETING.filter((p) => p.resourceType === family.resourceType),
  }),
);
