// Reservations (seed 000, "Reservations"): a standing, workspace-scoped claim that every apply
// needs a particular approval — a person's own, or one from any current member of a role —
// until it is released. Never expires; not a Terraform state lock (nothing here touches state).
//
// Who may (seed 000, "Who can reserve" / "Releasing"):
// - reserve for yourself: (workspace, approve);
// - reserve for a role: (workspace, approve) and membership of the role; a super_admin may
//   reserve for any role, member or not; only roles the organization can use (its own custom
//   roles and the built-in ones), never a deleted one; a role already holding one is not
//   offered again;
// - release: the holder of a personal reservation; any current member of a role, for the
//   role's; a super_admin, any in their organization.
// Releases are recorded, not deleted: the row keeps who released it and when.

import { z } from "zod";
import { ConflictError, InvalidStateError, NotFoundError, PermissionDeniedError } from "../errors.js";
import { lockWorkspaces } from "./gate.js";
import { workspaceTarget } from "../authz/targets.js";
import { LOCKING_TX_OPTIONS, txSql, type Tx } from "../infra/db.js";
import { uniqueViolation } from "./prisma-errors.js";
import { findRole, usableRoles } from "./roles.js";
import type { Role } from "../generated/prisma/client.js";
import { parseInput } from "./parse.js";
import { enqueueReservationEvent } from "./webhooks.js";
import {
  assertNotArchived,
  findReadableWorkspace,
  findWorkspaceFor,
  lockLiveWorkspace,
  publishGateChange,
  targetOf,
  type GateDeps,
} from "./workspaces.js";

export const ReserveWorkspaceInput = z.object({
  workspaceId: z.string().min(1),
  /** Reserve for this role; omitted = for yourself. */
  roleId: z.string().min(1).optional(),
});


export async function reserveWorkspace({ db, authz, events }: GateDeps, raw: unknown) {
  const input = parseInput(ReserveWorkspaceInput, raw);
  const workspace = await findWorkspaceFor(db, authz, input.workspaceId, "approve");
  assertNotArchived(workspace);
  const principal = await authz.requireMember();
  const viewer = authz.viewer;
  let holder: { holderUserId: string } | { holderRoleId: string };
  let holderName: string;
  if (input.roleId) {
    const role = await findRole(db, viewer.orgId, input.roleId);
    if (!principal.isSuperAdmin && !principal.roleIds.includes(role.id)) {
      throw new PermissionDeniedError(
        null,
        `Reserving for role ${role.name} requires being a member of it (a super_admin may reserve for any role).`,
      );
    }
    holder = { holderRoleId: role.id };
    holderName = `role ${role.name}`;
  } else {
    holder = { holderUserId: viewer.userId };
    holderName = "you";
  }
  let reservation;
  try {
    reservation = await db.prisma.$transaction(async (tx) => {
      // Placing a reservation can close a gate: serialize with applyPlan on the workspace row.
      await lockLiveWorkspace(tx, workspace.id);
      const placed = await tx.reservation.create({
        data: { orgId: workspace.orgId, workspaceId: workspace.id, placedById: viewer.userId, ...holder },
      });
      await enqueueReservationEvent(tx, placed, "reservation.placed");
      return placed;
    }, LOCKING_TX_OPTIONS);
  } catch (error) {
    // The partial unique indexes: one active reservation per holder per workspace.
    if (uniqueViolation(error)) throw new ConflictError(`Workspace ${workspace.name} is already reserved for ${holderName}.`);
    throw error;
  }
  publishGateChange(events, workspace.orgId, [workspace.id], "reservation_placed");
  return reservation;
}

/** A workspace as the reservation options need it. */
export interface ReservableWorkspace {
  id: string;
  orgId: string;
  name: string;
  archivedAt: Date | null;
  stack: { authzGroups: string[] };
}

/**
 * What the viewer may reserve on each workspace right now, in two queries however many
 * workspaces (a list shows it per row): for yourself when you hold approve and hold no active
 * reservation there; for the roles you are a member of (a super_admin: every role the
 * organization can use) that hold none there. Nothing on an archived workspace.
 */
export async function reservationOptions(
  { db, authz }: Pick<GateDeps, "db" | "authz">,
  workspaces: readonly ReservableWorkspace[],
): Promise<Map<string, { forSelf: boolean; roles: Role[] }>> {
  const principal = await authz.requireMember();
  const viewer = authz.viewer;
  const out = new Map<string, { forSelf: boolean; roles: Role[] }>();
  const open: ReservableWorkspace[] = [];
  for (const w of workspaces) {
    const mayApprove = await authz.can(workspaceTarget({ name: w.name, authzGroups: w.stack.authzGroups }, "approve"));
    if (w.orgId === viewer.orgId && !w.archivedAt && mayApprove) open.push(w);
    else out.set(w.id, { forSelf: false, roles: [] });
  }
  if (open.length === 0) return out;
  // Both read once for the whole list, through the driver: a dashboard's list repeats them.
  const [active, roles] = await Promise.all([
    db.sql.query<{ workspaceId: string; holderUserId: string | null; holderRoleId: string | null }>(
      `SELECT "workspaceId", "holderUserId", "holderRoleId" FROM reservations WHERE "workspaceId" = ANY($1::text[]) AND "releasedAt" IS NULL`,
      [open.map((w) => w.id)],
      { prepare: true },
    ),
    usableRoles(db.sql, viewer.orgId, principal.isSuperAdmin ? null : principal.roleIds),
  ]);
  for (const w of open) {
    const here = active.filter((r) => r.workspaceId === w.id);
    const taken = new Set(here.map((r) => r.holderRoleId).filter((id): id is string => id !== null));
    out.set(w.id, {
      forSelf: !here.some((r) => r.holderUserId === viewer.userId),
      roles: roles.filter((r) => !taken.has(r.id)),
    });
  }
  return out;
}

/**
 * The roles the viewer may reserve this workspace for right now: none without approve; with
 * it, the roles they are a member of; a super_admin, every role the organization can use.
 * Roles already holding an active reservation here are left out.
 */
export async function reservableRoles({ db, authz }: Pick<GateDeps, "db" | "authz">, workspaceId: string) {
  const workspace = await findReadableWorkspace(db, authz, workspaceId);
  return (await reservationOptions({ db, authz }, [workspace])).get(workspace.id)!.roles;
}

/**
 * Seed 000, Releasing: the holder of a personal reservation releases their own, any current member
 * of a role its role's, a super_admin any. The mutation and Reservation.viewerCanRelease ask this.
 */
export function mayRelease(
  principal: { isSuperAdmin: boolean; roleIds: readonly string[] },
  userId: string,
  r: { holderUserId: string | null; holderRoleId: string | null },
): boolean {
  return (
    principal.isSuperAdmin ||
    (r.holderUserId !== null && r.holderUserId === userId) ||
    (r.holderRoleId !== null && principal.roleIds.includes(r.holderRoleId))
  );
}


export async function releaseReservation({ db, authz, events }: GateDeps, reservationId: string) {
  const principal = await authz.requireMember();
  const viewer = authz.viewer;
  const found = await db.prisma.reservation.findFirst({ where: { id: reservationId, orgId: viewer.orgId } });
  if (!found) throw new NotFoundError("Reservation", reservationId);
  if (!mayRelease(principal, viewer.userId, found)) {
    const who = found.holderUserId
      ? "the person it is held by"
      : "a current member of the role it is held by";
    throw new PermissionDeniedError(null, `Only ${who}, or a super_admin, may release this reservation.`);
  }
  const released = await db.prisma.$transaction(async (tx) => {
    await lockWorkspaces(txSql(tx), [found.workspaceId]);
    const [locked] = await txSql(tx).query<{ releasedAt: Date | null }>(
      `SELECT "releasedAt" FROM reservations WHERE id = $1 FOR UPDATE`,
      [found.id],
    );
    if (locked?.releasedAt) throw new InvalidStateError("Reservation", "released", "This reservation was already released.");
    const released = await tx.reservation.update({
      where: { id: found.id },
      data: { releasedAt: new Date(), releasedById: viewer.userId, releaseReason: "released" },
    });
    await enqueueReservationEvent(tx, released, "reservation.released");
    return released;
  }, LOCKING_TX_OPTIONS);
  publishGateChange(events, found.orgId, [found.workspaceId], "reservation_released");
  return released;
}

/**
 * The role's active reservations, for its settings page ("The role's settings page lists the
 * workspaces first"), limited to workspaces the viewer can read.
 */
export async function activeReservationsOfRole({ db, authz }: Pick<GateDeps, "db" | "authz">, roleId: string) {
  await authz.requireMember();
  const orgId = authz.viewer.orgId;
  const role = await db.prisma.role.findFirst({ where: { id: roleId, OR: [{ orgId }, { orgId: null, system: true }] } });
  if (!role) throw new NotFoundError("Role", roleId);
  const rows = await db.prisma.reservation.findMany({
    where: { orgId, holderRoleId: role.id, releasedAt: null },
    include: { workspace: { include: { stack: { select: { id: true, name: true, authzGroups: true } } } } },
    orderBy: { placedAt: "asc" },
  });
  const visible = [];
  for (const r of rows) if (await authz.can(targetOf(r.workspace, "read"))) visible.push(r);
  return visible;
}

/**
 * Deleting a role releases every reservation it holds; the admin who deletes the role is
 * recorded as the releaser (seed 000, Releasing). Called by deleteRole inside its transaction;
 * returns the workspaces whose gates moved so the caller can publish gate:changed. Needs no
 * workspace lock: a release can only open a gate, never close one.
 */
export async function releaseReservationsOfRole(tx: Tx, roleId: string, releasedById: string) {
  const released = await tx.reservation.updateManyAndReturn({
    where: { holderRoleId: roleId, releasedAt: null },
    data: { releasedAt: new Date(), releasedById, releaseReason: "role_deleted" },
  });
  for (const r of released) await enqueueReservationEvent(tx, r, "reservation.released");
  return { workspaceIds: [...new Set(released.map((r) => r.workspaceId))] };
}

