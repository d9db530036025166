// Find, then act: the decision every operation on an existing object makes, over the one
// in-memory check (./check.ts). The check API answers with it too. Kept apart from check.ts so the
// check's hot path stays exactly as measured (docs/benchmarks.md).

import { checkPermission, type CheckResult, type PrincipalGrants, type Target } from "./check.js";
import type { ConcreteAction, ConcreteResourceType } from "./matrix.js";

/**
 * How an operation finds the object it acts on, per (resource_type, action): an operation
 * looks the object up before it authorizes the action, and an object the principal cannot
 * find is NotFound whatever the action's grant says (src/services/find-then-authorize.ts).
 *
 * - "read": the object is found under (resource_type, read) on it; the action is checked second.
 *   A principal holding (stack, update, team-a-*) without read on team-a-1 gets NotFound.
 * - "action": the action's own grant finds it (the workspace family: findWorkspaceFor; the
 *   workspace-scoped gateway families, webhooks, roles, identity sources and members: found in
 *   the organization, then the action is checked; families with no object to find).
 *
 * A create finds its PARENT first: a workspace or a cloud integration is created in a stack
 * the principal must be able to read (CREATE_PARENT); the name itself is checked by the create.
 * test/check/differential.test.ts runs every pair's real operation against this table.
 */
export type FindRule = "read" | "action";

/** Families whose objects are found under read, and the actions exempt from that (found by their own grant). */
const FOUND_BY_READ: ReadonlyMap<ConcreteResourceType, ReadonlySet<ConcreteAction>> = new Map<ConcreteResourceType, ReadonlySet<ConcreteAction>>([
  // read_data: stackOutputs finds a producer stack by name under read_data alone (seed 004,
  // read_data: a consumer stack reads a producer's outputs without reading the stack).
  ["stack", new Set<ConcreteAction>(["create", "read", "read_data"])],
  ["cloud_integration", new Set<ConcreteAction>(["create", "read"])],
  ["resource_policy", new Set<ConcreteAction>(["create", "read"])],
]);

/** The family a create of this family happens in, found under (parent, read) before the create is checked. */
export const CREATE_PARENT: Partial<Record<ConcreteResourceType, "stack">> = { workspace: "stack", cloud_integration: "stack" };

export function findRule(resourceType: ConcreteResourceType, action: ConcreteAction): FindRule {
  const exempt = FOUND_BY_READ.get(resourceType);
  return exempt !== undefined && !exempt.has(action) ? "read" : "action";
}

/** The missing tuple of a decision (the same shape as CheckResult's). */
export type Missing = Extract<CheckResult, { allowed: false }>["missing"];

/**
 * The decision an operation makes: the action's check (checkPermission), after the find. A
 * principal holding the action but unable to find the object is `cannot_find`, with the read
 * tuple it lacks as `missing` (the operation answers NotFound).
 */
export type Decision =
  | CheckResult
  | { readonly allowed: false; readonly reason: "cannot_find"; readonly missing: Missing; readonly findTarget: Target };

/**
 * Finds, then decides — the ONE decision operations and the check API share. `parent`: for a
 * create in CREATE_PARENT, the parent's (stack) target; null when the caller names no parent
 * (a hypothetical create: only the name is checked). At most two in-memory checks, no I/O.
 */
export function decideAction(principal: PrincipalGrants, target: Target, parent: Target | null = null): Decision {
  const result = checkPermission(principal, target);
  if (!result.allowed) return result;
  const find = findTargetOf(target, parent);
  if (find === null) return result;
  const found = checkPermission(principal, find);
  if (found.allowed) return result;
  if (found.reason !== "no_grant") return found;
  return { allowed: false, reason: "cannot_find", missing: found.missing, findTarget: find };
}

/** The target an operation finds the object (or its parent) under before acting; null: none. */
export function findTargetOf(target: Target, parent: Target | null = null): Target | null {
  if (target.action === "create") {
    return parent === null ? null : { resourceType: parent.resourceType, action: "read", matchValue: parent.matchValue, groups: parent.groups };
  }
  return findRule(target.resourceType, target.action) === "read" ? { ...target, action: "read" } : null;
}
