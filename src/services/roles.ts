import {
  MAX_ROLES_PER_BINDING,
  roleKeyFromName,
  validateCustomRolePermissions,
  type PermissionInput,
} from "../domain/catalog/index.js";
import { ConflictError, InvalidStateError, NotFoundError, ValidationError } from "../errors.js";
import type { SignedInAuthz } from "../authz/authz.js";
import type { Database, SqlRunner } from "../infra/db.js";
import { modelRow } from "../infra/model-rows.js";
import type { Role } from "../generated/prisma/client.js";
import type { EventBus } from "../infra/events.js";
import { lockWorkspaces } from "./gate.js";
import { LOCKING_TX_OPTIONS, txSql, type Tx } from "../infra/db.js";
import { uniqueViolation } from "./prisma-errors.js";
import { publishGateChange } from "./workspaces.js";
import { findThenAuthorize } from "./find-then-authorize.js";

const ROLE = (action: "read" | "create" | "update" | "delete" | "assign") =>
  ({ resourceType: "role", action, matchValue: null, groups: null }) as const;

export interface RoleDeps {
  db: Database;
  authz: SignedInAuthz;
  events: EventBus;
}

/** Seed 004, Notes: personal organizations reject manual assignments, bindings and custom roles. */
async function rejectPersonalOrg(db: Database, orgId: string, what: string) {
  const org = await db.prisma.organization.findUniqueOrThrow({ where: { id: orgId } });
  if (org.personal || org.ownerUserId !== null) {
    throw new InvalidStateError("Organization", "personal", `A personal organization has no ${what}: its owner is admin implicitly.`);
  }
}

function permissionsOrThrow(list: PermissionInput[]) {
  const result = validateCustomRolePermissions(list);
  if (result.ok) return result.permissions;
  throw new ValidationError(
    result.issues.map((i) => ({
      field: i.index === null ? "input.permissions" : `input.permissions.${i.index}.${i.field}`,
      code: i.code,
      message: i.message,
    })),
  );
}

/** The roles an org can use, as a Prisma filter: the system roles and its own live custom roles. */
export const usableRoleWhere = (orgId: string) => ({ deletedAt: null, OR: [{ orgId }, { orgId: null, system: true }] });

/** usableRoleWhere for raw SQL over `roles r`, $1 being the organization's id (test/roles-usable.test.ts holds them together). */
const USABLE_ROLE_SQL = `r."deletedAt" IS NULL AND (r."orgId" = $1 OR (r."orgId" IS NULL AND r.system))`;

/**
 * The roles an organization can use (of `ids` only, when given), by name: one prepared statement,
 * for reads a list repeats (src/services/reservations.ts), without Prisma's query compiler.
 */
export async function usableRoles(sql: SqlRunner, orgId: string, ids: readonly string[] | null): Promise<Role[]> {
  const rows = await sql.query<{ row: Record<string, unknown> }>(
    `SELECT to_json(r) AS row FROM roles r WHERE ${USABLE_ROLE_SQL}${ids === null ? "" : ` AND r.id = ANY($2::text[])`} ORDER BY r.name, r.id`,
    ids === null ? [orgId] : [orgId, ids],
    { prepare: true },
  );
  return rows.map((r) => modelRow<Role>("Role", r.row));
}

/** Any role the viewer's org can use: the system roles and its own live custom roles. */
export async function findRole(db: Database, orgId: string, id: string) {
  const role = await db.prisma.role.findFirst({ where: { id, ...usableRoleWhere(orgId) } });
  if (!role) throw new NotFoundError("Role", id);
  return role;
}

export function announceAuthzChange(events: EventBus, orgId: string, reason: string) {
  events.publish("authz:changed", { orgId, reason });
}

export async function createRole(
  { db, authz }: RoleDeps,
  input: { name: string; description?: string | null; permissions: PermissionInput[] },
) {
  await authz.require(ROLE("create"));
  const orgId = authz.viewer.orgId;
  await rejectPersonalOrg(db, orgId, "custom roles");
  const keyed = roleKeyFromName(input.name);
  if (!keyed.ok) throw new ValidationError(keyed.issues.map((i) => ({ field: "input.name", code: i.code, message: i.message })));
  const permissions = permissionsOrThrow(input.permissions);
  try {
    return await db.prisma.role.create({
      data: {
        orgId,
        key: keyed.key,
        name: keyed.name,
        description: input.description ?? "",
        permissions: { create: permissions.map((p) => ({ ...p })) },
      },
    });
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A role with key ${keyed.key} already exists.`);
    throw error;
  }
}

/** The key is derived at creation and immutable: a rename keeps it (seed 004, Custom roles). */
export async function updateRole(
  { db, authz, events }: RoleDeps,
  input: { id: string; name?: string | null; description?: string | null; permissions?: PermissionInput[] | null },
) {
  // The input first: a name that can never be right is refused before any lookup.
  const keyed = input.name != null ? roleKeyFromName(input.name) : null;
  if (keyed && !keyed.ok) throw new ValidationError(keyed.issues.map((i) => ({ field: "input.name", code: i.code, message: i.message })));
  const role = await findThenAuthorize(authz, (orgId) => findRole(db, orgId, input.id), ROLE("update"));
  const orgId = authz.viewer.orgId;
  if (role.system) throw new InvalidStateError("Role", "system", `${role.name} is a built-in role; it cannot be edited.`);
  const name = keyed?.ok ? keyed.name : role.name;
  const permissions = input.permissions ? permissionsOrThrow(input.permissions) : null;
  const updated = await db.prisma.$transaction(async (tx) => {
    if (permissions) {
      await tx.rolePermission.deleteMany({ where: { roleId: role.id } });
      await tx.rolePermission.createMany({ data: permissions.map((p) => ({ roleId: role.id, ...p })) });
    }
    return tx.role.update({
      where: { id: role.id },
      data: { name, description: input.description ?? undefined },
    });
  });
  if (permissions) announceAuthzChange(events, orgId, "role_updated");
  return updated;
}

export type ReleaseReservationsOfRole = (tx: Tx, roleId: string, releasedById: string) => Promise<{ workspaceIds: string[] }>;

/**
 * Deleting a custom role cascades through every direct assignment and binding attachment
 * (seed 004) and releases every reservation it holds, with the deleting admin recorded as
 * the releaser (seed 000, Releasing). A binding left with no role is deleted with it.
 */
export async function deleteRole(
  { db, authz, events }: RoleDeps,
  id: string,
  releaseReservationsOfRole: ReleaseReservationsOfRole,
) {
  const role = await findThenAuthorize(authz, (orgId) => findRole(db, orgId, id), ROLE("delete"));
  const orgId = authz.viewer.orgId;
  if (role.system) throw new InvalidStateError("Role", "system", `${role.name} is a built-in role; it cannot be deleted.`);
  const { deleted, workspaceIds } = await db.prisma.$transaction(async (tx) => {
    // Policies naming the role keep naming it (a tombstone: the requirement stays unsatisfiable,
    // like a role with no members) and get a revision recording who deleted it.
    const policyWorkspaceIds = await reviseApproverPoliciesOfDeletedRole(tx, role, authz.viewer.userId);
    const released = await releaseReservationsOfRole(tx, role.id, authz.viewer.userId);
    const workspaceIds = [...new Set([...policyWorkspaceIds, ...released.workspaceIds])];
    await tx.roleAssignment.deleteMany({ where: { roleId: role.id } });
    const attachments = await tx.identityGroupBindingRole.findMany({ where: { roleId: role.id } });
    await tx.identityGroupBindingRole.deleteMany({ where: { roleId: role.id } });
    const bindingIds = [...new Set(attachments.map((a) => a.bindingId))];
    if (bindingIds.length) {
      await tx.identityGroupBinding.deleteMany({ where: { id: { in: bindingIds }, roles: { none: {} } } });
    }
    await tx.rolePermission.deleteMany({ where: { roleId: role.id } });
    const deleted = await tx.role.update({
      where: { id: role.id },
      // The key is freed for a new role; the row stays so released reservations name it.
      data: { deletedAt: new Date(), key: `${role.key}~deleted~${role.id.slice(0, 8)}` },
    });
    return { deleted, workspaceIds };
  }, LOCKING_TX_OPTIONS);
  announceAuthzChange(events, orgId, "role_deleted");
  publishGateChange(events, orgId, workspaceIds, "role_deleted");
  return deleted;
}

/** The org's resource policies whose requirements name the role as approver, by name. */
export function policiesNamingRoleWhere(orgId: string, roleId: string) {
  return { orgId, requirements: { some: { approvers: { some: { roleId } } } } };
}

/**
 * Seed 000: a named approver that disappears must keep blocking. The approver rows stay (the
 * role row is kept, soft-deleted, with no members), and each policy naming the role gets a new
 * revision: bumped, updatedAt, the deleting admin, and the note "deleted role <name>". The
 * policies' workspaces are locked first, so no apply is halfway through its check meanwhile.
 */
async function reviseApproverPoliciesOfDeletedRole(tx: Tx, role: { id: string; orgId: string | null; name: string }, userId: string) {
  if (!role.orgId) return [];
  const policies = await tx.resourcePolicy.findMany({
    where: policiesNamingRoleWhere(role.orgId, role.id),
    select: { id: true, workspaces: { select: { workspaceId: true } } },
  });
  if (policies.length === 0) return [];
  const workspaceIds = [...new Set(policies.flatMap((p) => p.workspaces.map((w) => w.workspaceId)))];
  await lockWorkspaces(txSql(tx), workspaceIds);
  await tx.resourcePolicy.updateMany({
    where: { id: { in: policies.map((p) => p.id) } },
    data: { revision: { increment: 1 }, updatedById: userId, changeNote: `deleted role ${role.name}`, updatedAt: new Date() },
  });
  return workspaceIds;
}

/** The user's membership of the org (active or not), or NotFoundError("Member"). */
export async function requireMemberUser(db: Database, orgId: string, userId: string) {
  const membership = await db.prisma.membership.findUnique({ where: { orgId_userId: { orgId, userId } } });
  if (!membership) throw new NotFoundError("Member", userId);
  return membership;
}

/** Direct user-role assignments are single-role: assigning replaces the user's role. */
export async function assignRole({ db, authz, events }: RoleDeps, input: { userId: string; roleId: string }) {
  const role = await findThenAuthorize(
    authz,
    async (orgId) => {
      await requireMemberUser(db, orgId, input.userId);
      return findRole(db, orgId, input.roleId);
    },
    ROLE("assign"),
  );
  const orgId = authz.viewer.orgId;
  await rejectPersonalOrg(db, orgId, "manual role assignments");
  const assignment = await db.prisma.roleAssignment.upsert({
    where: { orgId_userId: { orgId, userId: input.userId } },
    create: { orgId, userId: input.userId, roleId: role.id },
    update: { roleId: role.id },
  });
  announceAuthzChange(events, orgId, "role_assigned");
  return assignment;
}

export async function unassignRole({ db, authz, events }: RoleDeps, userId: string) {
  await findThenAuthorize(authz, (orgId) => requireMemberUser(db, orgId, userId), ROLE("assign"));
  const orgId = authz.viewer.orgId;
  const { count } = await db.prisma.roleAssignment.deleteMany({ where: { orgId, userId } });
  if (count) announceAuthzChange(events, orgId, "role_unassigned");
  return count > 0;
}

export function rolesPerBindingOrThrow(roleIds: string[]) {
  const unique = [...new Set(roleIds)];
  if (unique.length < 1 || unique.length > MAX_ROLES_PER_BINDING) {
    throw ValidationError.field(
      "input.roleIds",
      unique.length < 1 ? "too_few_roles" : "too_many_roles",
      `A binding attaches between 1 and ${MAX_ROLES_PER_BINDING} roles.`,
    );
  }
  return unique;
}

export { rejectPersonalOrg };
