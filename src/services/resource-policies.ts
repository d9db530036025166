// Resource policies (seed 000, "Resource policies"): organization-level rules applied to one or
// many workspaces, governing resources by assignment (picked by hand, per workspace) and by
// address patterns; one requirement per action — a count of 1, 2 or 3, or Auto — with named
// approvers (users and roles of the organization). Additive: no carve-outs.
//
// Permissions: the resource_policy family, matched by the policy name. Every write bumps the
// revision (a stale `revision` is a conflict) and publishes gate:changed for every workspace the
// policy applied to before or applies to after, holding those workspace rows meanwhile so an
// apply never starts halfway through a policy edit.

import { z } from "zod";
import type { SignedInAuthz } from "../authz/authz.js";
import { CHANGE_ACTIONS, resourceAddressProblem, validateAddressPattern, type ChangeAction } from "../domain/gate/index.js";
import { ConflictError, NotFoundError, ValidationError, type FieldIssue } from "../errors.js";
import type { Database } from "../infra/db.js";
import { lockWorkspaces } from "./gate.js";
import { LOCKING_TX_OPTIONS, txSql, type Tx } from "../infra/db.js";
import { uniqueViolation } from "./prisma-errors.js";
import { ResourceName } from "./stacks.js";
import { parseInput } from "./parse.js";
import { policiesNamingRoleWhere, usableRoleWhere } from "./roles.js";
import { publishGateChange, type GateDeps } from "./workspaces.js";

export const MAX_POLICY_PATTERNS = 200;
export const MAX_POLICY_WORKSPACES = 500;
export const MAX_POLICY_ASSIGNMENTS = 5000;
export const MAX_NAMED_APPROVERS = 50;

const policyTarget = (name: string | null, action: "create" | "read" | "update" | "delete") =>
  ({ resourceType: "resource_policy", action, matchValue: name, groups: null }) as const;

const Count = z
  .number()
  .int("A count is 1, 2 or 3.")
  .min(1, "There is no count of zero: a policy cannot wave a change through with no approval. Use 1, 2, 3, or Auto (null).")
  .max(3, "A count is 1, 2 or 3.");

const RequirementInput = z.object({
  action: z.enum(CHANGE_ACTIONS),
  /** 1, 2 or 3; null or omitted is Auto (the workspace baseline decides). */
  count: Count.nullable().optional(),
  approverUserIds: z.array(z.string().min(1)).max(MAX_NAMED_APPROVERS).default([]),
  approverRoleIds: z.array(z.string().min(1)).max(MAX_NAMED_APPROVERS).default([]),
});

const Requirements = z
  .array(RequirementInput)
  .max(CHANGE_ACTIONS.length)
  .superRefine((list, ctx) => {
    const seen = new Map<ChangeAction, number>();
    list.forEach((r, i) => {
      const earlier = seen.get(r.action);
      if (earlier !== undefined) {
        ctx.addIssue({ code: "custom", path: [i, "action"], message: `One requirement per action: ${r.action} is also requirements.${earlier}.` });
      }
      seen.set(r.action, i);
    });
  });

const AddressPatterns = z
  .array(z.string())
  .max(MAX_POLICY_PATTERNS, `At most ${MAX_POLICY_PATTERNS} address patterns.`)
  .superRefine((patterns, ctx) => {
    patterns.forEach((pattern, i) => {
      const result = validateAddressPattern(pattern);
      if (!result.ok) for (const message of result.issues) ctx.addIssue({ code: "custom", path: [i], message: `An address pattern ${message}.` });
    });
  });

const Assignment = z.object({
  workspaceId: z.string().min(1),
  address: z.string().superRefine((address, ctx) => {
    const problem = resourceAddressProblem(address);
    if (problem) ctx.addIssue({ code: "custom", message: `An address ${problem}.` });
  }),
});

const Fields = {
  description: z.string().max(2000),
  addressPatterns: AddressPatterns,
  workspaceIds: z.array(z.string().min(1)).max(MAX_POLICY_WORKSPACES, `At most ${MAX_POLICY_WORKSPACES} workspaces.`),
  assignments: z.array(Assignment).max(MAX_POLICY_ASSIGNMENTS, `At most ${MAX_POLICY_ASSIGNMENTS} assignments.`),
  requirements: Requirements,
};

export const CreateResourcePolicyInput = z.object({
  name: ResourceName,
  description: Fields.description.default(""),
  addressPatterns: Fields.addressPatterns.default([]),
  workspaceIds: Fields.workspaceIds.default([]),
  assignments: Fields.assignments.default([]),
  requirements: Fields.requirements.default([]),
});

export const UpdateResourcePolicyInput = z.object({
  id: z.string().min(1),
  /** The revision the edit is based on; a stale one is a conflict. */
  revision: z.number().int().positive().optional(),
  name: ResourceName.optional(),
  description: Fields.description.optional(),
  addressPatterns: Fields.addressPatterns.optional(),
  /** Replaces the set of workspaces the policy applies to. */
  workspaceIds: Fields.workspaceIds.optional(),
  /** Replaces every assignment. */
  assignments: Fields.assignments.optional(),
  /** Replaces the requirements of the actions listed; the others are kept. */
  requirements: Fields.requirements.optional(),
});

type RequirementValue = z.infer<typeof RequirementInput>;

/** Checks that referenced workspaces, users and roles exist in the org; issues name the fields. */
async function validateReferences(
  db: Database,
  orgId: string,
  input: { workspaceIds: string[]; assignments: { workspaceId: string }[]; requirements: RequirementValue[] },
  fieldsPresent: { workspaceIds: boolean; assignments: boolean; requirements: boolean },
  /**
   * Approvers the policy names now, per action. Writing back one that has since disappeared (a
   * deleted role, a deactivated member) keeps it: it stays named and unsatisfiable, so a
   * read-modify-write never drops it silently; removing it is an explicit edit.
   */
  namedNow: ReadonlyMap<string, ReadonlySet<string>> = new Map(),
): Promise<void> {
  const issues: FieldIssue[] = [];
  if (fieldsPresent.workspaceIds) {
    const workspaceIds = [...new Set(input.workspaceIds)];
    const workspaces = await db.prisma.workspace.findMany({ where: { orgId, id: { in: workspaceIds } }, select: { id: true } });
    const known = new Set(workspaces.map((w) => w.id));
    input.workspaceIds.forEach((id, i) => {
      if (!known.has(id)) issues.push({ field: `input.workspaceIds.${i}`, code: "not_found", message: `No workspace ${id} in this organization.` });
    });
  }
  const applied = new Set(input.workspaceIds);
  if (fieldsPresent.assignments) {
    input.assignments.forEach((a, i) => {
      if (!applied.has(a.workspaceId)) {
        issues.push({
          field: `input.assignments.${i}.workspaceId`,
          code: "not_applied",
          message: "An assignment is to a workspace the policy applies to; add the workspace to workspaceIds.",
        });
      }
    });
  }
  if (fieldsPresent.requirements) {
    const userIds = [...new Set(input.requirements.flatMap((r) => r.approverUserIds))];
    const roleIds = [...new Set(input.requirements.flatMap((r) => r.approverRoleIds))];
    const [members, roles] = await Promise.all([
      db.prisma.membership.findMany({ where: { orgId, userId: { in: userIds }, deactivatedAt: null }, select: { userId: true } }),
      db.prisma.role.findMany({
        where: { id: { in: roleIds }, ...usableRoleWhere(orgId) },
        select: { id: true },
      }),
    ]);
    const memberIds = new Set(members.map((m) => m.userId));
    const usableRoleIds = new Set(roles.map((r) => r.id));
    input.requirements.forEach((r, i) => {
      r.approverUserIds.forEach((id, j) => {
        if (!memberIds.has(id) && !namedNow.get(r.action)?.has(id)) {
          issues.push({ field: `input.requirements.${i}.approverUserIds.${j}`, code: "not_found", message: `${id} is not an active member of this organization.` });
        }
      });
      r.approverRoleIds.forEach((id, j) => {
        if (!usableRoleIds.has(id) && !namedNow.get(r.action)?.has(id)) {
          issues.push({ field: `input.requirements.${i}.approverRoleIds.${j}`, code: "not_found", message: `No role ${id} in this organization.` });
        }
      });
    });
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

/** The user and role ids each requirement of the policy names now, by action. */
async function namedApprovers(db: Database, policyId: string): Promise<Map<string, Set<string>>> {
  const rows = await db.prisma.policyApprover.findMany({
    where: { requirement: { policyId } },
    select: { userId: true, roleId: true, requirement: { select: { action: true } } },
  });
  const named = new Map<string, Set<string>>();
  for (const row of rows) {
    const set = named.get(row.requirement.action) ?? new Set<string>();
    for (const id of [row.userId, row.roleId]) if (id) set.add(id);
    named.set(row.requirement.action, set);
  }
  return named;
}

async function writeRequirements(tx: Tx, policyId: string, requirements: RequirementValue[]) {
  for (const r of requirements) {
    await tx.policyRequirement.deleteMany({ where: { policyId, action: r.action } });
    const users = [...new Set(r.approverUserIds)];
    const roles = [...new Set(r.approverRoleIds)];
    await tx.policyRequirement.create({
      data: {
        policyId,
        action: r.action,
        count: r.count ?? null,
        approvers: { create: [...users.map((userId) => ({ userId })), ...roles.map((roleId) => ({ roleId }))] },
      },
    });
  }
}

async function writeAssignments(tx: Tx, policyId: string, assignments: { workspaceId: string; address: string }[]) {
  await tx.resourcePolicyAssignment.deleteMany({ where: { policyId } });
  const unique = new Map(assignments.map((a) => [`${a.workspaceId}\u0000${a.address}`, a]));
  if (unique.size > 0) {
    await tx.resourcePolicyAssignment.createMany({ data: [...unique.values()].map((a) => ({ policyId, ...a })) });
  }
}

/** Every action gets a requirement row: those not given are Auto with no named approvers. */
function allFourRequirements(given: RequirementValue[]): RequirementValue[] {
  return CHANGE_ACTIONS.map((action) => given.find((r) => r.action === action) ?? { action, count: null, approverUserIds: [], approverRoleIds: [] });
}

export async function createResourcePolicy({ db, authz, events }: GateDeps, raw: unknown) {
  const input = parseInput(CreateResourcePolicyInput, raw);
  await authz.requireMember();
  const orgId = authz.viewer.orgId;
  // What the input names is looked up in the caller's org first (a foreign id is not_found,
  // never "forbidden"), then the permission is checked.
  await validateReferences(db, orgId, input, { workspaceIds: true, assignments: true, requirements: true });
  await authz.require(policyTarget(input.name, "create"));
  const workspaceIds = [...new Set(input.workspaceIds)];
  let policy;
  try {
    policy = await db.prisma.$transaction(async (tx) => {
      await lockWorkspaces(txSql(tx), workspaceIds);
      const created = await tx.resourcePolicy.create({
        data: {
          orgId,
          name: input.name,
          description: input.description,
          addressPatterns: [...new Set(input.addressPatterns)],
          updatedById: authz.viewer.userId,
          workspaces: { create: workspaceIds.map((workspaceId) => ({ workspaceId })) },
        },
      });
      await writeRequirements(tx, created.id, allFourRequirements(input.requirements));
      await writeAssignments(tx, created.id, input.assignments);
      return created;
    }, LOCKING_TX_OPTIONS);
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A resource policy named ${input.name} already exists.`);
    throw error;
  }
  publishGateChange(events, orgId, workspaceIds, "policy_created");
  return policy;
}

async function findPolicy(db: Database, authz: SignedInAuthz, id: string) {
  await authz.requireMember();
  const policy = await db.prisma.resourcePolicy.findFirst({
    where: { id, orgId: authz.viewer.orgId },
    include: { workspaces: { select: { workspaceId: true } }, assignments: true },
  });
  if (!policy || !(await authz.can(policyTarget(policy.name, "read")))) throw new NotFoundError("ResourcePolicy", id);
  return policy;
}

export async function findReadablePolicy(db: Database, authz: SignedInAuthz, id: string) {
  return findPolicy(db, authz, id);
}

export async function updateResourcePolicy({ db, authz, events }: GateDeps, raw: unknown) {
  const input = parseInput(UpdateResourcePolicyInput, raw);
  const policy = await findPolicy(db, authz, input.id);
  await authz.require(policyTarget(policy.name, "update"));
  const name = input.name ?? policy.name;
  if (name !== policy.name) await authz.require(policyTarget(name, "update"));
  const before = policy.workspaces.map((w) => w.workspaceId);
  const workspaceIds = input.workspaceIds ? [...new Set(input.workspaceIds)] : before;
  const assignments = input.assignments ?? policy.assignments.map((a) => ({ workspaceId: a.workspaceId, address: a.address }));
  await validateReferences(
    db,
    policy.orgId,
    { workspaceIds, assignments, requirements: input.requirements ?? [] },
    { workspaceIds: input.workspaceIds !== undefined, assignments: input.assignments !== undefined, requirements: input.requirements !== undefined },
    input.requirements ? await namedApprovers(db, policy.id) : new Map(),
  );
  const touched = [...new Set([...before, ...workspaceIds])];
  let updated;
  try {
    updated = await db.prisma.$transaction(async (tx) => {
      await lockWorkspaces(txSql(tx), touched);
      const [current] = await txSql(tx).query<{ revision: number }>(`SELECT revision FROM resource_policies WHERE id = $1 FOR UPDATE`, [policy.id]);
      if (!current) throw new NotFoundError("ResourcePolicy", policy.id);
      if (input.revision !== undefined && input.revision !== current.revision) {
        throw new ConflictError(
          `Resource policy ${policy.name} is at revision ${current.revision}, not ${input.revision}: reload it and edit again.`,
          current.revision,
        );
      }
      if (input.workspaceIds) {
        await tx.resourcePolicyWorkspace.deleteMany({ where: { policyId: policy.id } });
        if (workspaceIds.length > 0) {
          await tx.resourcePolicyWorkspace.createMany({ data: workspaceIds.map((workspaceId) => ({ policyId: policy.id, workspaceId })) });
        }
      }
      if (input.assignments || input.workspaceIds) {
        const applied = new Set(workspaceIds);
        await writeAssignments(tx, policy.id, assignments.filter((a) => applied.has(a.workspaceId)));
      }
      if (input.requirements) await writeRequirements(tx, policy.id, input.requirements);
      return tx.resourcePolicy.update({
        where: { id: policy.id },
        data: {
          name,
          description: input.description,
          addressPatterns: input.addressPatterns ? [...new Set(input.addressPatterns)] : undefined,
          revision: { increment: 1 },
          updatedById: authz.viewer.userId,
          changeNote: "",
        },
      });
    }, LOCKING_TX_OPTIONS);
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A resource policy named ${name} already exists.`);
    throw error;
  }
  publishGateChange(events, policy.orgId, touched, "policy_updated");
  return updated;
}

/**
 * Deleting a policy stops it governing anything; plans keep their changes and a started plan
 * keeps the evaluation that allowed it, so the record survives.
 */
export async function deleteResourcePolicy({ db, authz, events }: GateDeps, id: string) {
  const policy = await findPolicy(db, authz, id);
  await authz.require(policyTarget(policy.name, "delete"));
  const touched = policy.workspaces.map((w) => w.workspaceId);
  const deleted = await db.prisma.$transaction(async (tx) => {
    await lockWorkspaces(txSql(tx), touched);
    return tx.resourcePolicy.delete({ where: { id: policy.id } });
  }, LOCKING_TX_OPTIONS);
  publishGateChange(events, policy.orgId, touched, "policy_deleted");
  return deleted;
}

/** One ordered page of the policies the viewer may read, filtered in SQL by (resource_policy, read). */
export async function listResourcePolicyIds(db: Database, authz: SignedInAuthz, options: { first: number; after: string | null }) {
  const scope = await authz.scope("resource_policy", "read");
  if (!scope.unrestricted && scope.patterns.length === 0) return { rows: [], hasNextPage: false };
  const rows = await db.sql.query<{ id: string; name: string }>(
    `SELECT id, name FROM resource_policies
      WHERE "orgId" = $1 AND name COLLATE "C" > $2 AND ($3 OR name LIKE ANY($4::text[]))
      ORDER BY name COLLATE "C" LIMIT $5`,
    [authz.viewer.orgId, options.after ?? "", scope.unrestricted, scope.patterns, options.first + 1],
  );
  return { rows: rows.slice(0, options.first), hasNextPage: rows.length > options.first };
}

/**
 * The policies whose requirements name the role as approver (what its deletion turns into
 * tombstones), that the viewer may read; as roleReservations shows what deletion releases.
 */
export async function resourcePoliciesNamingRole(db: Database, authz: SignedInAuthz, roleId: string) {
  await authz.requireMember();
  const orgId = authz.viewer.orgId;
  const role = await db.prisma.role.findFirst({ where: { id: roleId, OR: [{ orgId }, { orgId: null, system: true }] }, select: { id: true } });
  if (!role) throw new NotFoundError("Role", roleId);
  const rows = await db.prisma.resourcePolicy.findMany({ where: policiesNamingRoleWhere(orgId, role.id), orderBy: { name: "asc" } });
  const visible = [];
  for (const p of rows) if (await authz.can(policyTarget(p.name, "read"))) visible.push(p);
  return visible;
}
