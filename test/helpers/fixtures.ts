import type { Database } from "../../src/infra/db.js";
import { createOrganizationWithAdmin, issueToken } from "../../src/services/accounts.js";
import { systemRoleId } from "../../src/services/system-roles.js";
import { compileResourcePattern, type Permission } from "../../src/domain/catalog/index.js";

let counter = 0;
const unique = (prefix: string) => `${prefix}-${process.pid}-${++counter}-${Math.random().toString(36).slice(2, 7)}`;

export interface OrgFixture {
  orgId: string;
  adminId: string;
  adminToken: string;
}

/** A new organization whose first member is super admin with the admin role. */
export async function createOrg(db: Database, name = unique("org")): Promise<OrgFixture> {
  const { org, user, token } = await createOrganizationWithAdmin(db.prisma, {
    orgName: name,
    slug: name,
    admin: { email: `${unique("admin")}@test.local`, name: "Admin" },
  });
  return { orgId: org.id, adminId: user.id, adminToken: token };
}

export interface MemberFixture {
  userId: string;
  token: string;
}

/** A member holding a system role (by key), or a fresh custom role of exactly these grants. */
export async function addMember(
  db: Database,
  orgId: string,
  options: { role?: string; grants?: Array<Partial<Permission> & Pick<Permission, "resourceType" | "action">>; name?: string; superAdmin?: boolean } = {},
): Promise<MemberFixture> {
  const user = await db.prisma.user.create({ data: { email: `${unique("user")}@test.local`, name: options.name ?? unique("user") } });
  await db.prisma.membership.create({ data: { orgId, userId: user.id, isSuperAdmin: options.superAdmin ?? false } });
  let roleId: string | null = options.role ? systemRoleId(options.role) : null;
  if (options.grants) {
    const role = await db.prisma.role.create({
      data: {
        orgId,
        key: unique("role"),
        name: unique("Role"),
        permissions: {
          create: options.grants.map((g) => ({
            resourceType: g.resourceType,
            action: g.action,
            resourcePattern: g.resourcePattern ?? "",
            authzGroup: g.authzGroup ?? "",
          })),
        },
      },
    });
    roleId = role.id;
  }
  if (roleId) await db.prisma.roleAssignment.create({ data: { orgId, userId: user.id, roleId } });
  const { token } = await issueToken(db.prisma, { userId: user.id, orgId, name: "test" });
  return { userId: user.id, token };
}

/** A user glob as stored (canonical LIKE), for fixtures that write role_permissions directly. */
export const like = compileResourcePattern;
