import { z } from "zod";
import { ConflictError, InvalidStateError, NotFoundError, PermissionDeniedError, ValidationError } from "../errors.js";
import { findOrCreateUser, issueToken } from "./accounts.js";
import { announceAuthzChange, findRole, rejectPersonalOrg, requireMemberUser, type RoleDeps } from "./roles.js";
import { parseInput } from "./parse.js";
import { DisplayName } from "./input-rules.js";
import { findThenAuthorize } from "./find-then-authorize.js";

const MEMBER = (action: "read" | "create" | "update" | "delete") =>
  ({ resourceType: "member", action, matchValue: null, groups: null }) as const;

export const AddMemberInput = z.object({
  email: z.string().email("Not an email address.").max(320),
  name: DisplayName,
  serviceAccount: z.boolean().default(false),
  /** Blank is refused (never read as "no role"); the GraphQL boundary refuses it first. */
  roleId: z.string().trim().min(1, "A role id must not be blank: leave roleId out for no role.").optional(),
});

/** Adds a person (or a service account, for a chatops bot) to the viewer's org. */
export async function addMember(deps: RoleDeps, raw: unknown) {
  const { db, authz, events } = deps;
  const input = parseInput(AddMemberInput, raw);
  if (input.roleId) {
    const roleId = input.roleId;
    await findThenAuthorize(authz, (orgId) => findRole(db, orgId, roleId), { resourceType: "role", action: "assign", matchValue: null, groups: null });
  }
  await authz.require(MEMBER("create"));
  const orgId = authz.viewer.orgId;
  if (input.roleId) await rejectPersonalOrg(db, orgId, "manual role assignments");
  const membership = await db.prisma.$transaction(async (tx) => {
    // Only this organization's members are looked at: the answer is the same whether or not
    // another organization uses the email (users belong to one organization).
    const existing = await tx.membership.findFirst({ where: { orgId, user: { email: input.email } } });
    if (existing) throw new ConflictError(`${input.email} is already a member.`);
    const user = await findOrCreateUser(tx, orgId, { email: input.email, name: input.name, isServiceAccount: input.serviceAccount });
    const created = await tx.membership.create({ data: { orgId, userId: user.id } });
    if (input.roleId) await tx.roleAssignment.create({ data: { orgId, userId: user.id, roleId: input.roleId } });
    return created;
  });
  announceAuthzChange(events, orgId, "member_added");
  return membership;
}

/** The member in the caller's org (NotFoundError otherwise), then the permission. */
const findMembership = (deps: RoleDeps, userId: string, permission: Parameters<typeof findThenAuthorize>[2] = null) =>
  findThenAuthorize(deps.authz, (orgId) => requireMemberUser(deps.db, orgId, userId), permission);

/** A deactivated member's grants stop at once (every check reads active membership). */
export async function setMemberActive(deps: RoleDeps, userId: string, active: boolean) {
  const membership = await findMembership(deps, userId, MEMBER("update"));
  if (!active && userId === deps.authz.viewer.userId) {
    throw new InvalidStateError("Member", "self", "You cannot deactivate your own membership.");
  }
  const updated = await deps.db.prisma.membership.update({
    where: { id: membership.id },
    data: { deactivatedAt: active ? null : (membership.deactivatedAt ?? new Date()) },
  });
  announceAuthzChange(deps.events, membership.orgId, active ? "member_reactivated" : "member_deactivated");
  return updated;
}

/** super_admin short-circuits every check, so only a super admin grants or removes it. */
export async function setSuperAdmin(deps: RoleDeps, userId: string, value: boolean) {
  const membership = await findMembership(deps, userId);
  if (!(await deps.authz.isSuperAdmin())) {
    throw new PermissionDeniedError(null, "Only a super admin can grant or remove super admin.");
  }
  if (!value && membership.isSuperAdmin) {
    const others = await deps.db.prisma.membership.count({
      where: { orgId: membership.orgId, isSuperAdmin: true, deactivatedAt: null, NOT: { id: membership.id } },
    });
    if (others === 0) throw new InvalidStateError("Member", "last_super_admin", "An organization keeps at least one active super admin.");
  }
  const updated = await deps.db.prisma.membership.update({ where: { id: membership.id }, data: { isSuperAdmin: value } });
  announceAuthzChange(deps.events, membership.orgId, "super_admin_changed");
  return updated;
}

export const CreateTokenInput = z.object({
  name: DisplayName,
  /** Absent means the caller; an empty id is never the caller, it is refused. */
  userId: z.string().min(1, "A user id is required when userId is given.").optional(),
  expiresAt: z.date().optional(),
});

/**
 * A token for yourself, or (with (member, update)) for another member — the way a chatops
 * bot's service account gets one. The plaintext is returned once.
 */
export async function createApiToken(deps: RoleDeps, raw: unknown) {
  const input = parseInput(CreateTokenInput, raw);
  const viewer = deps.authz.viewer;
  await deps.authz.requireMember();
  const userId = input.userId ?? viewer.userId;
  if (userId !== viewer.userId) {
    const m = await findMembership(deps, userId, MEMBER("update"));
    if (m.deactivatedAt) throw new InvalidStateError("Member", "deactivated", "That member is deactivated.");
  }
  if (input.expiresAt && input.expiresAt.getTime() <= Date.now()) {
    throw ValidationError.field("input.expiresAt", "in_past", "expiresAt must be in the future.");
  }
  const { token, apiToken } = await issueToken(deps.db.prisma, { userId, orgId: viewer.orgId, name: input.name, expiresAt: input.expiresAt });
  return { token, apiToken };
}

export async function revokeApiToken(deps: RoleDeps, id: string) {
  const viewer = deps.authz.viewer;
  await deps.authz.requireMember();
  const token = await deps.db.prisma.apiToken.findFirst({ where: { id, orgId: viewer.orgId } });
  if (!token) throw new NotFoundError("ApiToken", id);
  if (token.userId !== viewer.userId) await deps.authz.require(MEMBER("update"));
  const revoked = await deps.db.prisma.apiToken.update({ where: { id }, data: { revokedAt: token.revokedAt ?? new Date() } });
  deps.events.publish("auth:token_revoked", { orgId: token.orgId, tokenId: token.id });
  return revoked;
}

/** Soft delete: every check fails for a deleted organization from then on. */
export async function deleteOrganization(deps: RoleDeps) {
  // The owner of a personal organization may close it too (they are its admin implicitly).
  const principal = await deps.authz.requireMember();
  if (!principal.isSuperAdmin && principal.isOwner !== true) {
    throw new PermissionDeniedError(null, "Only a super admin, or a personal organization's owner, can delete the organization.");
  }
  const org = await deps.db.prisma.organization.update({ where: { id: deps.authz.viewer.orgId }, data: { deletedAt: new Date() } });
  announceAuthzChange(deps.events, org.id, "organization_deleted");
  return org;
}
