import { z } from "zod";
import { ConflictError, NotFoundError } from "../errors.js";
import { announceAuthzChange, findRole, rejectPersonalOrg, requireMemberUser, rolesPerBindingOrThrow, type RoleDeps } from "./roles.js";
import { parseInput } from "./parse.js";
import { DisplayName, KeyText } from "./input-rules.js";
import { uniqueViolation } from "./prisma-errors.js";
import type { Database } from "../infra/db.js";
import { findThenAuthorize } from "./find-then-authorize.js";

const SOURCE = (action: "read" | "create" | "update" | "delete" | "sync") =>
  ({ resourceType: "identity_source", action, matchValue: null, groups: null }) as const;
const ASSIGN = { resourceType: "role", action: "assign", matchValue: null, groups: null } as const;

const GroupKey = KeyText("A group key");

async function findSource(db: Database, orgId: string, id: string) {
  const source = await db.prisma.identitySource.findFirst({ where: { id, orgId } });
  if (!source) throw new NotFoundError("IdentitySource", id);
  return source;
}

async function findBinding(db: Database, orgId: string, id: string) {
  const binding = await db.prisma.identityGroupBinding.findFirst({ where: { id, orgId } });
  if (!binding) throw new NotFoundError("IdentityGroupBinding", id);
  return binding;
}

export async function createIdentitySource({ db, authz }: RoleDeps, raw: unknown) {
  const input = parseInput(
    z.object({ name: DisplayName, kind: z.enum(["saml", "oidc", "scim"]).default("saml") }),
    raw,
    "", // top-level arguments (createIdentitySource(name:, kind:)), not an input object
  );
  await authz.require(SOURCE("create"));
  try {
    return await db.prisma.identitySource.create({ data: { orgId: authz.viewer.orgId, name: input.name, kind: input.kind } });
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`An identity source named ${input.name} already exists.`);
    throw error;
  }
}

export async function deleteIdentitySource({ db, authz, events }: RoleDeps, id: string) {
  const source = await findThenAuthorize(authz, (orgId) => findSource(db, orgId, id), SOURCE("delete"));
  const orgId = authz.viewer.orgId;
  await db.prisma.$transaction([
    db.prisma.identityGroupBinding.deleteMany({ where: { identitySourceId: source.id } }),
    db.prisma.userIdentityGroup.deleteMany({ where: { identitySourceId: source.id } }),
    db.prisma.identitySource.delete({ where: { id: source.id } }),
  ]);
  announceAuthzChange(events, orgId, "identity_source_deleted");
  return source;
}

/** (identity_source, group_key) attaching 1..5 roles; members of the group get their union. */
export async function createGroupBinding({ db, authz, events }: RoleDeps, raw: unknown) {
  const input = parseInput(z.object({ identitySourceId: z.string(), groupKey: GroupKey, roleIds: z.array(z.string()) }), raw);
  const roleIds = rolesPerBindingOrThrow(input.roleIds);
  const source = await findThenAuthorize(
    authz,
    async (orgId) => {
      const found = await findSource(db, orgId, input.identitySourceId);
      for (const roleId of roleIds) await findRole(db, orgId, roleId);
      return found;
    },
    ASSIGN,
  );
  const orgId = authz.viewer.orgId;
  await rejectPersonalOrg(db, orgId, "group bindings");
  try {
    const binding = await db.prisma.identityGroupBinding.create({
      data: { orgId, identitySourceId: source.id, groupKey: input.groupKey, roles: { create: roleIds.map((roleId) => ({ roleId })) } },
    });
    announceAuthzChange(events, orgId, "binding_created");
    return binding;
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`Group ${input.groupKey} of ${source.name} is already bound; update that binding.`);
    throw error;
  }
}

export async function updateGroupBinding({ db, authz, events }: RoleDeps, raw: unknown) {
  const input = parseInput(z.object({ id: z.string(), roleIds: z.array(z.string()) }), raw);
  const roleIds = rolesPerBindingOrThrow(input.roleIds);
  const binding = await findThenAuthorize(
    authz,
    async (orgId) => {
      const found = await findBinding(db, orgId, input.id);
      for (const roleId of roleIds) await findRole(db, orgId, roleId);
      return found;
    },
    ASSIGN,
  );
  const orgId = authz.viewer.orgId;
  const updated = await db.prisma.$transaction(async (tx) => {
    await tx.identityGroupBindingRole.deleteMany({ where: { bindingId: binding.id } });
    await tx.identityGroupBindingRole.createMany({ data: roleIds.map((roleId) => ({ bindingId: binding.id, roleId })) });
    return tx.identityGroupBinding.findUniqueOrThrow({ where: { id: binding.id } });
  });
  announceAuthzChange(events, orgId, "binding_updated");
  return updated;
}

export async function deleteGroupBinding({ db, authz, events }: RoleDeps, id: string) {
  const binding = await findThenAuthorize(authz, (orgId) => findBinding(db, orgId, id), ASSIGN);
  const orgId = authz.viewer.orgId;
  await db.prisma.identityGroupBinding.delete({ where: { id: binding.id } });
  announceAuthzChange(events, orgId, "binding_deleted");
  return binding;
}

/**
 * What a SCIM job or a login hook calls: replaces a user's group keys in one source. Takes
 * effect on the next check; removing a group removes what its bindings granted at once.
 */
export async function syncUserGroups({ db, authz, events }: RoleDeps, raw: unknown) {
  const input = parseInput(
    z.object({ identitySourceId: z.string(), userId: z.string(), groupKeys: z.array(GroupKey).max(1000) }),
    raw,
  );
  const source = await findThenAuthorize(
    authz,
    async (orgId) => {
      const found = await findSource(db, orgId, input.identitySourceId);
      await requireMemberUser(db, orgId, input.userId);
      return found;
    },
    SOURCE("sync"),
  );
  const orgId = authz.viewer.orgId;
  const keys = [...new Set(input.groupKeys)].sort();
  await db.prisma.$transaction([
    db.prisma.userIdentityGroup.deleteMany({ where: { identitySourceId: source.id, userId: input.userId } }),
    db.prisma.userIdentityGroup.createMany({ data: keys.map((groupKey) => ({ identitySourceId: source.id, userId: input.userId, groupKey })) }),
  ]);
  announceAuthzChange(events, orgId, "groups_synced");
  return keys;
}
