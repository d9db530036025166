import { SYSTEM_ROLES, permissionKey, reconcileSystemRole, type Permission } from "../domain/catalog/index.js";
import type { PrismaClient } from "../infra/db.js";

/** System roles are shared by every organization and have fixed ids. */
export const systemRoleId = (key: string) => `system:${key}`;

/**
 * Converges the built-in roles at start, idempotently: a system role drifting in the
 * database (a row added, removed, or given a group) converges back (seed 004, Built-in roles).
 */
export async function reconcileSystemRoles(prisma: PrismaClient): Promise<{ added: number; removed: number }> {
  // Every start runs this; on a converged database (every restart) one read answers it instead
  // of a transaction per role. Any difference takes the transactional path below.
  if (await systemRolesConverged(prisma)) return { added: 0, removed: 0 };
  let added = 0;
  let removed = 0;
  for (const role of SYSTEM_ROLES) {
    const id = systemRoleId(role.key);
    await prisma.$transaction(async (tx) => {
      await tx.role.upsert({
        where: { id },
        create: { id, key: role.key, name: role.name, description: role.description, system: true },
        update: { name: role.name, description: role.description, system: true, orgId: null },
      });
      const current = await tx.rolePermission.findMany({ where: { roleId: id } });
      const diff = reconcileSystemRole(current as Permission[], role.permissions);
      const removeKeys = new Set(diff.remove.map(permissionKey));
      const removeIds = current.filter((p) => removeKeys.has(permissionKey(p as Permission))).map((p) => p.id);
      if (removeIds.length) await tx.rolePermission.deleteMany({ where: { id: { in: removeIds } } });
      if (diff.add.length) {
        await tx.rolePermission.createMany({ data: diff.add.map((p) => ({ roleId: id, ...p })) });
      }
      added += diff.add.length;
      removed += removeIds.length;
    });
  }
  return { added, removed };
}

/** True when every system role's row and permissions already match the catalog (read only). */
async function systemRolesConverged(prisma: PrismaClient): Promise<boolean> {
  const rows = await prisma.role.findMany({
    where: { id: { in: SYSTEM_ROLES.map((r) => systemRoleId(r.key)) } },
    select: {
      id: true,
      name: true,
      description: true,
      system: true,
      orgId: true,
      permissions: { select: { resourceType: true, action: true, resourcePattern: true, authzGroup: true } },
    },
  });
  const byId = new Map(rows.map((r) => [r.id, r]));
  return SYSTEM_ROLES.every((role) => {
    const row = byId.get(systemRoleId(role.key));
    if (!row || row.name !== role.name || row.description !== role.description || !row.system || row.orgId !== null) return false;
    const diff = reconcileSystemRole(row.permissions as Permission[], role.permissions);
    return diff.add.length === 0 && diff.remove.length === 0;
  });
}
