import { generateToken, hashToken, tokenPrefix } from "../auth/tokens.js";
import type { PrismaClient } from "../infra/db.js";
import type { Tx } from "../infra/db.js";
import { systemRoleId } from "./system-roles.js";

/** Issues a token for a user in an org; the plaintext is returned once and never stored. */
export async function issueToken(
  db: Tx | PrismaClient,
  input: { userId: string; orgId: string; name: string; token?: string; expiresAt?: Date | null },
): Promise<{ id: string; token: string; apiToken: Awaited<ReturnType<PrismaClient["apiToken"]["create"]>> }> {
  const token = input.token ?? generateToken();
  const row = await db.apiToken.create({
    data: {
      userId: input.userId,
      orgId: input.orgId,
      name: input.name,
      tokenHash: hashToken(token),
      prefix: tokenPrefix(token),
      expiresAt: input.expiresAt ?? null,
    },
  });
  return { id: row.id, token, apiToken: row };
}

/**
 * The organization's own user with this email, created with these details if it has none. A
 * user row belongs to one organization: the same email in another organization is another
 * row, so adding it never reveals that it exists elsewhere, nor that row's name or id
 * (docs/permissions.md, "Users belong to one organization").
 */
export async function findOrCreateUser(tx: Tx, orgId: string, input: { email: string; name: string; isServiceAccount?: boolean }) {
  return (
    (await tx.user.findUnique({ where: { orgId_email: { orgId, email: input.email } } })) ??
    (await tx.user.create({ data: { orgId, email: input.email, name: input.name, isServiceAccount: input.isServiceAccount } }))
  );
}

export function slugify(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 60) || "org";
}

/** A new organization with its first member as super admin holding the admin role. */
export async function createOrganizationWithAdmin(
  prisma: PrismaClient,
  input: { orgName: string; slug?: string; admin: { email: string; name: string }; token?: string },
) {
  return prisma.$transaction(async (tx) => {
    const org = await tx.organization.create({ data: { name: input.orgName, slug: input.slug ?? slugify(input.orgName) } });
    const user = await findOrCreateUser(tx, org.id, input.admin);
    await tx.membership.create({ data: { orgId: org.id, userId: user.id, isSuperAdmin: true } });
    await tx.roleAssignment.create({ data: { orgId: org.id, userId: user.id, roleId: systemRoleId("admin") } });
    const token = await issueToken(tx, { userId: user.id, orgId: org.id, name: "bootstrap", token: input.token });
    return { org, user, token: token.token };
  });
}

/**
 * A personal organization (seed 004, Notes): `owner` is its owner and only member. The owner is
 * admin implicitly (src/authz/principal.ts gives the organization's owner the (*, *) grant: the
 * seed's RoleService.GrantAdminRoleInTx on creation), so no role assignment is written, and the
 * organization refuses manual assignments, group bindings and custom roles from then on
 * (services/roles.ts, and triggers in the database). Flag and owner are written together, in
 * one transaction with the membership and the owner's first token.
 */
export async function createPersonalOrganization(
  db: Tx | PrismaClient,
  input: { orgName: string; slug: string; owner: { email: string; name: string }; token?: string },
) {
  const run = async (tx: Tx) => {
    const org = await tx.organization.create({ data: { name: input.orgName, slug: input.slug } });
    const owner = await findOrCreateUser(tx, org.id, { email: input.owner.email, name: input.owner.name });
    const personal = await tx.organization.update({ where: { id: org.id }, data: { personal: true, ownerUserId: owner.id } });
    await tx.membership.create({ data: { orgId: org.id, userId: owner.id } });
    const token = await issueToken(tx, { userId: owner.id, orgId: org.id, name: "personal", token: input.token });
    return { org: personal, owner, token: token.token };
  };
  return "$transaction" in db ? db.$transaction(run) : run(db);
}
