import { z } from "zod";
import { validateStackAuthzGroups } from "../domain/catalog/index.js";
import { ConflictError, NotFoundError, ValidationError } from "../errors.js";
import type { SignedInAuthz } from "../authz/authz.js";
import { namePageQuery } from "../authz/list-filter.js";
import { stackTarget } from "../authz/targets.js";
import type { Database } from "../infra/db.js";
import type { Stack } from "../generated/prisma/client.js";
import { uniqueViolation } from "./prisma-errors.js";

/** Stack and workspace names: what patterns match, so a small, predictable charset. */
export const ResourceName = z
  .string()
  .min(1, "A name is required.")
  .max(100, "A name is at most 100 characters.")
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "A name uses letters, digits, '.', '_', '-' and starts with a letter or digit.");

const LabelKey = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$/, "A label key uses letters, digits, '.', '_', '/', '-'.");
const Labels = z.record(LabelKey, z.string().max(256, "A label value is at most 256 characters.")).refine(
  (labels) => Object.keys(labels).length <= 64,
  "A stack carries at most 64 labels.",
);

export interface StackRow {
  id: string;
  orgId: string;
  name: string;
  authzGroups: string[];
  labels: unknown;
}

import { parseInput } from "./parse.js";

function groupsOrThrow(groups: string[], field = "input.authzGroups"): string[] {
  const result = validateStackAuthzGroups(groups);
  if (result.ok) return [...result.groups];
  throw new ValidationError(
    result.issues.map((i) => ({ field: i.index === null ? field : `${field}.${i.index}`, code: i.code, message: i.message })),
  );
}

const labelMap = (labels: unknown): Record<string, string> =>
  labels && typeof labels === "object" && !Array.isArray(labels) ? (labels as Record<string, string>) : {};

/** Label keys whose value is added, removed or changed between two label sets. */
export function changedLabelKeys(before: Record<string, string>, after: Record<string, string>): string[] {
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...keys].filter((k) => before[k] !== after[k]).sort();
}

async function protectedKeys(db: Database, orgId: string): Promise<Set<string>> {
  const org = await db.prisma.organization.findUniqueOrThrow({ where: { id: orgId }, select: { protectedLabelKeys: true } });
  return new Set(org.protectedLabelKeys);
}

/** A stack of the viewer's org that the viewer may read, or NotFound (never "forbidden"). */
export async function findReadableStack(db: Database, authz: SignedInAuthz, id: string) {
  await authz.requireMember();
  const stack = await db.prisma.stack.findFirst({ where: { id, orgId: authz.viewer.orgId } });
  if (!stack || !(await authz.can(stackTarget(stack, "read")))) throw new NotFoundError("Stack", id);
  return stack;
}

export const CreateStackInput = z.object({
  name: ResourceName,
  description: z.string().max(2000).default(""),
  labels: Labels.default({}),
  authzGroups: z.array(z.string()).default([]),
});

/**
 * Seed 004: the name is chosen under name-axis authority ((stack, create) untargeted or by
 * pattern: "pattern matching applies at create time too"), its groups are assigned in the
 * same write under (stack_authz_group, assign, <name>), protected label keys need
 * (label, update, <key>).
 */
export async function createStack(db: Database, authz: SignedInAuthz, raw: unknown) {
  const input = parseInput(CreateStackInput, raw);
  const groups = groupsOrThrow(input.authzGroups);
  const orgId = authz.viewer.orgId;
  await authz.require({ resourceType: "stack", action: "create", matchValue: input.name, groups });
  for (const group of groups) {
    await authz.require({ resourceType: "stack_authz_group", action: "assign", matchValue: group, groups: null });
  }
  const guarded = await protectedKeys(db, orgId);
  for (const key of Object.keys(input.labels).sort()) {
    if (guarded.has(key)) await authz.require({ resourceType: "label", action: "update", matchValue: key, groups: null });
  }
  try {
    return await db.prisma.stack.create({
      data: {
        orgId,
        name: input.name,
        description: input.description,
        labels: input.labels,
        authzGroups: groups,
        groupMembers: { create: groups.map((groupName) => ({ orgId, groupName, stackName: input.name })) },
      },
    });
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A stack named ${input.name} already exists.`);
    throw error;
  }
}

export const UpdateStackInput = z.object({
  id: z.string(),
  name: ResourceName.optional(),
  description: z.string().max(2000).optional(),
  labels: Labels.optional(),
  authzGroups: z.array(z.string()).optional(),
  /**
   * The revision the edit is based on. Required when replacing labels or authzGroups (whole
   * sets: without it one editor silently overwrites another's change); checked when given.
   */
  revision: z.number().int().positive().optional(),
});

/**
 * (stack, update) on the stack as it is; a rename re-checks update against the new name
 * without groups; each group added or removed needs (stack_authz_group, assign, <group>);
 * each protected label key added, removed or re-valued needs (label, update, <key>).
 */
export async function updateStack(db: Database, authz: SignedInAuthz, raw: unknown) {
  const input = parseInput(UpdateStackInput, raw);
  if (input.revision === undefined && (input.labels !== undefined || input.authzGroups !== undefined)) {
    throw ValidationError.field(
      "input.revision",
      "required",
      "Replacing labels or authzGroups replaces the whole set: pass the stack's revision you read, so a concurrent edit is a conflict rather than lost.",
    );
  }
  const stack = await findReadableStack(db, authz, input.id);
  const staleRevision = (current: number) =>
    new ConflictError(`Stack ${stack.name} is at revision ${current}, not ${input.revision ?? stack.revision}: reload it and edit again.`, current);
  if (input.revision !== undefined && input.revision !== stack.revision) throw staleRevision(stack.revision);
  await authz.require(stackTarget(stack, "update"));
  const name = input.name ?? stack.name;
  if (name !== stack.name) {
    await authz.require({ resourceType: "stack", action: "update", matchValue: name, groups: null });
  }
  const groups = input.authzGroups ? groupsOrThrow(input.authzGroups) : stack.authzGroups;
  const before = new Set(stack.authzGroups);
  const after = new Set(groups);
  const touched = [...groups.filter((g) => !before.has(g)), ...stack.authzGroups.filter((g) => !after.has(g))].sort();
  for (const group of touched) {
    await authz.require({ resourceType: "stack_authz_group", action: "assign", matchValue: group, groups: null });
  }
  if (input.labels) {
    const guarded = await protectedKeys(db, stack.orgId);
    for (const key of changedLabelKeys(labelMap(stack.labels), input.labels)) {
      if (guarded.has(key)) await authz.require({ resourceType: "label", action: "update", matchValue: key, groups: null });
    }
  }
  try {
    return await db.prisma.$transaction(async (tx) => {
      // Written only over the revision that was read and authorized above: a change landing
      // in between (another editor, a regrouping) is a conflict, never overwritten.
      const bumped = await tx.stack.updateMany({ where: { id: stack.id, revision: stack.revision }, data: { revision: { increment: 1 } } });
      if (bumped.count === 0) {
        const current = await tx.stack.findUnique({ where: { id: stack.id }, select: { revision: true } });
        if (!current) throw new NotFoundError("Stack", stack.id);
        throw staleRevision(current.revision);
      }
      const updated = await tx.stack.update({
        where: { id: stack.id },
        data: {
          name,
          description: input.description,
          labels: input.labels,
          authzGroups: groups,
        },
      });
      // The list index mirrors (name, groups): rewrite this stack's rows.
      await tx.stackAuthzGroupMember.deleteMany({ where: { stackId: stack.id } });
      if (groups.length) {
        await tx.stackAuthzGroupMember.createMany({
          data: groups.map((groupName) => ({ orgId: stack.orgId, groupName, stackName: name, stackId: stack.id })),
        });
      }
      return updated;
    });
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A stack named ${name} already exists.`);
    throw error;
  }
}

export async function deleteStack(db: Database, authz: SignedInAuthz, id: string) {
  const stack = await findReadableStack(db, authz, id);
  await authz.require(stackTarget(stack, "delete"));
  const workspaces = await db.prisma.workspace.count({ where: { stackId: stack.id } });
  if (workspaces > 0) {
    throw new ConflictError(`Stack ${stack.name} still has ${workspaces} workspace(s); archive and move them first.`);
  }
  const integrations = await db.prisma.cloudIntegration.count({ where: { stackId: stack.id } });
  if (integrations > 0) {
    throw new ConflictError(`Stack ${stack.name} still has ${integrations} cloud integration(s); delete them first.`);
  }
  await db.prisma.stack.delete({ where: { id: stack.id } });
  return stack;
}

/** One ordered page of the stacks the viewer may read, filtered in SQL (src/authz/list-filter.ts). */
export async function listStacks(db: Database, authz: SignedInAuthz, options: { first: number; after: string | null }) {
  const scope = await authz.scope("stack", "read");
  const query = namePageQuery("stack", authz.viewer.orgId, scope, options.after, options.first + 1);
  if (!query) return { rows: [], hasNextPage: false };
  // The page query selects the whole row (t.*).
  const rows = await db.sql.query<Stack>(query.text, query.params);
  return { rows: rows.slice(0, options.first), hasNextPage: rows.length > options.first };
}
