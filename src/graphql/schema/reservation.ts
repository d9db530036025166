// Reservations over GraphQL: reserve for yourself or for a role, release, and the roles you may
// reserve for. Rules in src/services/reservations.ts.

import { builder } from "../builder.js";
import { inOrder, rowQuery } from "./row-query.js";
import { HolderKindEnum } from "./gate.js";
import { inReadableWorkspace } from "./workspace.js";
import { ERRORS, deps, loadUser, SIGNED_IN, userNamed } from "../helpers.js";
import { UserRef } from "./organization.js";
import { clean } from "./input.js";
import {
  activeReservationsOfRole,
  mayRelease,
  releaseReservation,
  reservableRoles,
  reserveWorkspace,
} from "../../services/reservations.js";

export const ReservationRef = builder.prismaObject("Reservation", {
  description:
    "A standing claim that every apply on a workspace needs a particular approval: a person's own, or one from any " +
    "current member of a role. Never expires; released rows keep who released them and when. Not a Terraform state lock. " +
    "Read as part of its workspace: needs (workspace, read) there.",
  runScopesOnType: true,
  authScopes: inReadableWorkspace,
  fields: (t) => ({
    id: t.exposeID("id"),
    workspace: t.relation("workspace"),
    holderKind: t.field({ type: HolderKindEnum, resolve: (r) => (r.holderUserId ? "user" : "role") }),
    holderUser: t.field({
      type: UserRef,
      nullable: true,
      description: "The person it is held by (a personal reservation).",
      resolve: (r, _args, ctx) => userNamed(ctx, r.holderUserId),
    }),
    holderRole: t.relation("holderRole", { nullable: true, description: "The role it is held by." }),
    placedBy: t.field({ type: UserRef, resolve: (r, _args, ctx) => userNamed(ctx, r.placedById) }),
    placedAt: t.expose("placedAt", { type: "DateTime" }),
    active: t.boolean({ resolve: (r) => r.releasedAt === null }),
    releasedBy: t.field({ type: UserRef, nullable: true, resolve: (r, _args, ctx) => userNamed(ctx, r.releasedById) }),
    releasedAt: t.expose("releasedAt", { type: "DateTime", nullable: true }),
    releaseReason: t.exposeString("releaseReason", {
      nullable: true,
      description: "released, or role_deleted when the role's deletion released it (the deleting admin is releasedBy).",
    }),
    viewerCanRelease: t.boolean({
      description:
        "Whether the caller may release this reservation now: its holder, a current member of its role, or a super_admin; false once released.",
      resolve: (r, _args, ctx) => {
        const viewer = ctx.authz.viewer;
        if (r.releasedAt !== null || viewer === null) return false;
        // At once from the request's principal when it is loaded (a list's reservations), else when it is.
        return ctx.authz.withPrincipal((p) => mayRelease(p, viewer.userId, r));
      },
    }),
  }),
});

/** A reservation a mutation wrote, read back with what the Reservation type's rule needs. */
async function reservationRow(ctx: Parameters<typeof deps>[0], written: Promise<{ id: string }>) {
  const { id } = await written;
  return ctx.db.prisma.reservation.findUniqueOrThrow({ where: { id } });
}

builder.queryFields((t) => ({
  reservableRoles: t.withAuth(SIGNED_IN).prismaField({
    type: ["Role"],
    description:
      "The roles the caller may reserve the workspace for now: their own roles when they hold (workspace, approve), " +
      "every role of the organization for a super_admin; never one already holding a reservation here.",
    args: { workspaceId: t.arg.id({ required: true }) },
    // Read back with the field's query: fields selected beneath a role are loaded with it.
    resolve: async (query, _root, args, ctx) => {
      const roles = await reservableRoles(deps(ctx), String(args.workspaceId));
      return inOrder(roles, await ctx.db.prisma.role.findMany({ ...rowQuery(query), where: { id: { in: roles.map((r) => r.id) } } }));
    },
  }),
  roleReservations: t.withAuth(SIGNED_IN).prismaField({
    type: ["Reservation"],
    description: "A role's active reservations (what its deletion would release), on workspaces the caller can read.",
    args: { roleId: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const rows = await activeReservationsOfRole(deps(ctx), String(args.roleId));
      return inOrder(rows, await ctx.db.prisma.reservation.findMany({ ...rowQuery(query), where: { id: { in: rows.map((r) => r.id) } } }));
    },
  }),
}));

const ReserveWorkspaceInputRef = builder.inputType("ReserveWorkspaceInput", {
  fields: (t) => ({
    workspaceId: t.id({ required: true }),
    roleId: t.id({ description: "Reserve for this role (requires membership, or super_admin); omit to reserve for yourself." }),
  }),
});

builder.mutationFields((t) => ({
  reserveWorkspace: t.withAuth(SIGNED_IN).field({
    type: ReservationRef,
    errors: ERRORS,
    description:
      "Reserve a workspace for yourself ((workspace, approve)) or for a role ((workspace, approve) and membership; a " +
      "super_admin, any role). A holder already holding one here is a conflict.",
    args: { input: t.arg({ type: ReserveWorkspaceInputRef, required: true }) },
    resolve: (_root, args, ctx) =>
      reservationRow(
        ctx,
        reserveWorkspace(deps(ctx), {
          ...clean(args.input),
          workspaceId: String(args.input.workspaceId),
          ...(args.input.roleId != null ? { roleId: String(args.input.roleId) } : {}),
        }),
      ),
  }),
  releaseReservation: t.withAuth(SIGNED_IN).field({
    type: ReservationRef,
    errors: ERRORS,
    description: "Release your own reservation, your role's (any current member), or any (super_admin). Recorded, not deleted.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => reservationRow(ctx, releaseReservation(deps(ctx), String(args.id))),
  }),
}));
