import { builder, readable } from "../builder.js";
import { rowQuery } from "./row-query.js";
import { viewerOf } from "../context.js";
import { mergeEvents } from "./approvals-events.js";
import { memberEmail, SIGNED_IN } from "../helpers.js";

export const OrganizationRef = builder.prismaObject("Organization", {
  description: "An organization: members, roles, stacks and workspaces live in exactly one.",
  fields: (t) => ({
    id: t.exposeID("id"),
    slug: t.exposeString("slug"),
    name: t.exposeString("name"),
    personal: t.exposeBoolean("personal", {
      description:
        "A personal organization: its owner is admin implicitly; it refuses manual role assignments, group bindings and custom roles (seed 004).",
    }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

export const UserRef = builder.prismaObject("User", {
  description: "A person or a service account (a chatops bot, a CI identity).",
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    email: t.string({
      nullable: true,
      description: "Member data: null unless the caller holds (member, read) or is this person (the caller's own is also viewer.email).",
      resolve: (u, _args, ctx) => memberEmail(ctx, u),
    }),
    isServiceAccount: t.exposeBoolean("isServiceAccount"),
  }),
});

export const MembershipRef = builder.prismaObject("Membership", {
  description: "A member of the organization: your own, or anyone's with (member, read).",
  runScopesOnType: true,
  authScopes: (m, ctx) =>
    readable(ctx, m, m.orgId, ctx.viewer !== null && m.userId === ctx.viewer.userId ? null : { resourceType: "member", action: "read", matchValue: null, groups: null }),
  fields: (t) => ({
    id: t.exposeID("id"),
    user: t.relation("user"),
    isSuperAdmin: t.exposeBoolean("isSuperAdmin"),
    active: t.boolean({ resolve: (m) => m.deactivatedAt === null }),
    deactivatedAt: t.expose("deactivatedAt", { type: "DateTime", nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

const ViewerRef = builder.objectRef<{ userId: string; orgId: string }>("Viewer").implement({
  description: "The caller: the user a token belongs to, in the organization it acts in.",
  fields: (t) => ({
    id: t.exposeID("userId"),
    user: t.prismaField({
      type: "User",
      resolve: (query, v, _args, ctx) => ctx.db.prisma.user.findUniqueOrThrow({ ...rowQuery(query), where: { id: v.userId } }),
    }),
    // authenticate() already read the user with the token: no query of their own.
    name: t.string({ resolve: (_v, _a, ctx) => viewerOf(ctx).name }),
    email: t.string({ resolve: (_v, _a, ctx) => viewerOf(ctx).email }),
    organization: t.prismaField({
      type: "Organization",
      resolve: async (query, v, _a, ctx) => {
        await ctx.authz.requireMember();
        return ctx.db.prisma.organization.findUniqueOrThrow({ ...rowQuery(query), where: { id: v.orgId } });
      },
    }),
    isSuperAdmin: t.boolean({ resolve: (_v, _a, ctx) => ctx.authz.isSuperAdmin() }),
  }),
});

builder.queryField("viewer", (t) =>
  t.withAuth(SIGNED_IN).field({
    type: ViewerRef,
    resolve: async (_root, _args, ctx) => {
      await ctx.authz.requireMember();
      return { userId: ctx.viewer.userId, orgId: ctx.viewer.orgId };
    },
  }),
);

const AuthzChangedRef = builder.objectRef<{ orgId: string; reason: string }>("AuthzChanged").implement({
  description: "Grants or role membership changed in the caller's organization: re-read what you may do.",
  fields: (t) => ({ reason: t.exposeString("reason") }),
});

builder.subscriptionField("authzChanged", (t) =>
  t.withAuth(SIGNED_IN).field({
    type: AuthzChangedRef,
    description: "Fires whenever roles, assignments, bindings, group sync or memberships change in the caller's org.",
    subscribe: async function* (_root, _args, ctx) {
      await ctx.authz.requireMember();
      // mergeEvents: after a bus outage, a "resync" event (what may have changed is unknown).
      for await (const { payload: event } of mergeEvents(ctx, ["authz:changed"])) {
        if (event.orgId !== ctx.viewer.orgId) continue;
        // Authorize on every event: a member removed since subscribing stops receiving.
        ctx.authz.refresh();
        const principal = await ctx.authz.principal();
        if (!principal.orgExists || principal.orgDeleted || !principal.membershipActive) return;
        yield event;
      }
    },
    resolve: (event) => event,
  }),
);
