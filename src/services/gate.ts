// The apply gate, as the services see it: load the gate's input from the database AT EVALUATION
// TIME and hand it to the one evaluator (src/domain/gate/evaluate.ts). Nothing here decides a
// rule; it only reads what the rules consult (seed 000, "The apply gate": "The gate is
// evaluated at apply time, not when the plan was created").
//
// What is read, and when (docs/apply-gate.md, "Services"):
// - the workspace's baseline, the plan's stored changes and approvals, the active reservations
//   and every policy applied to the workspace, as they stand now;
// - who holds (workspace, approve) NOW: each approver's principal is loaded afresh and checked
//   with the one in-memory check (src/domain/catalog/check.ts), super_admin included;
// - every referenced role's CURRENT members (direct assignment or SSO binding, active
//   memberships only) through src/authz/principal.ts's roleMembers.
//
// Every read goes through a SqlRunner, so the same loader serves a plain query (the pool) and
// applyPlan's locked transaction (infra/db.ts's txSql).

import DataLoader from "dataloader";
import { AUTHZ_EPOCH_SQL, loadPrincipals, roleMembers } from "../authz/principal.js";
import { checkPermission, type CompiledPrincipal } from "../domain/catalog/index.js";
import {
  CHANGE_ACTIONS,
  evaluateGate,
  type ChangeAction,
  type GateEvaluation,
  type GateInput,
  type GatePolicy,
  type GateReservation,
  type PolicyRequirement,
  type RequirementCount,
} from "../domain/gate/index.js";
import type { Database, SqlRunner } from "../infra/db.js";
import { workspaceTarget } from "../authz/targets.js";

export type PlanStatus = "planned" | "applying" | "applied" | "failed" | "discarded";

/** What a gate needs to know about the plan and its workspace before reading the inputs. */
export interface PlanHead {
  id: string;
  orgId: string;
  workspaceId: string;
  status: PlanStatus;
  targeted: boolean;
  targets: string[];
  applyEvaluation: unknown;
  workspaceName: string;
  requiredApprovals: number;
  archived: boolean;
  authzGroups: string[];
  submittedById: string;
  /** The workspace's separation-of-duties option, read with the head (at evaluation time). */
  preventSelfApproval: boolean;
}

const HEAD_COLUMNS = `p.id, p."orgId", p."workspaceId", p.status::text AS status, p.targeted, p.targets,
       p."applyEvaluation", w.name AS "workspaceName", w."requiredApprovals",
       (w."archivedAt" IS NOT NULL) AS archived, s."authzGroups", p."submittedById", w."preventSelfApproval"`;

export async function loadPlanHead(sql: SqlRunner, orgId: string, planId: string): Promise<PlanHead | null> {
  const [row] = await sql.query<PlanHead>(
    `SELECT ${HEAD_COLUMNS}
       FROM plans p JOIN workspaces w ON w.id = p."workspaceId" JOIN stacks s ON s.id = w."stackId"
      WHERE p.id = $1 AND p."orgId" = $2`,
    [planId, orgId],
    { prepare: true },
  );
  return row ?? null;
}

/** Heads of the workspace's open plans (planned or applying), oldest first. */
export async function openPlanHeads(sql: SqlRunner, orgId: string, workspaceIds: readonly string[]): Promise<PlanHead[]> {
  if (workspaceIds.length === 0) return [];
  return sql.query<PlanHead>(
    `SELECT ${HEAD_COLUMNS}
       FROM plans p JOIN workspaces w ON w.id = p."workspaceId" JOIN stacks s ON s.id = w."stackId"
      WHERE p."workspaceId" = ANY($1::text[]) AND p."orgId" = $2 AND p.status IN ('planned', 'applying')
      ORDER BY p."createdAt", p.id`,
    [workspaceIds, orgId],
    { prepare: true },
  );
}

/** Heads of the given plans of the org (any state), in no particular order. */
export async function planHeads(sql: SqlRunner, orgId: string, planIds: readonly string[]): Promise<PlanHead[]> {
  if (planIds.length === 0) return [];
  return sql.query<PlanHead>(
    `SELECT ${HEAD_COLUMNS}
       FROM plans p JOIN workspaces w ON w.id = p."workspaceId" JOIN stacks s ON s.id = w."stackId"
      WHERE p.id = ANY($1::text[]) AND p."orgId" = $2`,
    [planIds, orgId],
    { prepare: true },
  );
}

/**
 * A gate version: `gate_version_seq` is shared by every process, so versions are totally
 * ordered. It is taken BEFORE the inputs are read: a computation started after a change was
 * committed (as every event-driven one is, since events are published after commit) both
 * sees the change and carries a higher version than any computation that started earlier.
 */
export async function nextGateVersion(sql: SqlRunner): Promise<number> {
  const [row] = await sql.query<{ v: number }>(`SELECT nextval('gate_version_seq')::float8 AS v`, [], { prepare: true });
  return Number(row!.v);
}

/**
 * nextGateVersion, with the authz epoch read by the same statement: the live hub keeps
 * principals, users and roles across rounds under it (EpochCache in src/authz/principal.ts).
 */
export async function nextGateVersionAndEpoch(sql: SqlRunner): Promise<{ version: number; authzEpoch: number }> {
  const [row] = await sql.query<{ v: number; e: number }>(
    `SELECT nextval('gate_version_seq')::float8 AS v, ${AUTHZ_EPOCH_SQL} AS e`,
    [],
    { prepare: true },
  );
  return { version: Number(row!.v), authzEpoch: Number(row!.e) };
}

// ---------------------------------------------------------------------------------------------
// Loading the input

interface InputRow {
  changes: { a: string; x: ChangeAction }[];
  approvals: { u: string; t: number }[];
  reservations: { id: string; u: string | null; r: string | null; p: string }[];
  policies: {
    id: string;
    name: string;
    patterns: string[];
    assigned: string[];
    reqs: { action: ChangeAction; count: number | null; users: string[]; roles: string[] }[];
  }[];
}

/** Everything the plan's gate reads except who holds approve, in one round trip. */
const INPUT_SQL = `
SELECT
  (SELECT coalesce(json_agg(json_build_object('a', c.address, 'x', c.action)), '[]'::json)
     FROM resource_changes c WHERE c."planId" = $1) AS changes,
  (SELECT coalesce(json_agg(json_build_object('u', a."userId", 't', extract(epoch FROM a."createdAt") * 1000)), '[]'::json)
     FROM approvals a
     -- An approval counts only while its approver is an active member: a named approver who
     -- is deactivated (or whose membership is gone) stays named, so the list keeps blocking,
     -- but their approval no longer satisfies it. A withdrawn approval counts for nothing.
     JOIN memberships m ON m."orgId" = $3 AND m."userId" = a."userId" AND m."deactivatedAt" IS NULL
    WHERE a."planId" = $1 AND a."withdrawnAt" IS NULL) AS approvals,
  (SELECT coalesce(json_agg(json_build_object('id', r.id, 'u', r."holderUserId", 'r', r."holderRoleId", 'p', r."placedById")), '[]'::json)
     FROM reservations r WHERE r."workspaceId" = $2 AND r."releasedAt" IS NULL) AS reservations,
  (SELECT coalesce(json_agg(json_build_object(
            'id', rp.id, 'name', rp.name, 'patterns', rp."addressPatterns",
            'assigned', (SELECT coalesce(json_agg(pa.address), '[]'::json)
                           FROM resource_policy_assignments pa WHERE pa."policyId" = rp.id AND pa."workspaceId" = $2),
            'reqs', (SELECT coalesce(json_agg(json_build_object(
                        'action', q.action, 'count', q.count,
                        'users', (SELECT coalesce(json_agg(ap."userId"), '[]'::json) FROM policy_approvers ap
                                   WHERE ap."requirementId" = q.id AND ap."userId" IS NOT NULL),
                        'roles', (SELECT coalesce(json_agg(ap."roleId"), '[]'::json) FROM policy_approvers ap
                                   WHERE ap."requirementId" = q.id AND ap."roleId" IS NOT NULL))), '[]'::json)
                       FROM policy_requirements q WHERE q."policyId" = rp.id))), '[]'::json)
     FROM resource_policies rp JOIN resource_policy_workspaces pw ON pw."policyId" = rp.id
    WHERE pw."workspaceId" = $2 AND rp."orgId" = $3) AS policies`;

const AUTO_REQUIREMENT: PolicyRequirement = { count: "auto", approverUserIds: [], approverRoleIds: [] };

function toGatePolicy(row: InputRow["policies"][number]): GatePolicy {
  const requirements = Object.fromEntries(CHANGE_ACTIONS.map((a) => [a, AUTO_REQUIREMENT])) as Record<ChangeAction, PolicyRequirement>;
  for (const req of row.reqs) {
    requirements[req.action] = {
      // NULL is Auto; the CHECK constraint keeps anything but 1..3 out.
      count: (req.count === null ? "auto" : req.count) as RequirementCount,
      approverUserIds: req.users,
      approverRoleIds: req.roles,
    };
  }
  return { id: row.id, name: row.name, assignedAddresses: row.assigned, addressPatterns: row.patterns, requirements };
}

const changesOf = (row: InputRow) => row.changes.map((c) => ({ address: c.a, action: c.x }));

/**
 * The plan's changes and the workspace's policies, nothing else (no role members, no
 * principals): what the targeted picker reads. With no such plan, no changes.
 */
export async function loadPoliciesAndChanges(sql: SqlRunner, plan: Pick<PlanHead, "id" | "workspaceId" | "orgId">) {
  const row = await readGateInputs(sql, plan);
  return { policies: row.policies.map(toGatePolicy), changes: changesOf(row) };
}

/** The inputs that do not depend on who holds approve; `approveHolders` is filled in later. */
export interface LoadedInputs {
  input: Omit<GateInput, "approveHolders">;
  approverIds: string[];
}

/** The one read behind loadGateInputs; the live hub starts it beside the plan head's read. */
export type GateInputRead = Promise<InputRow>;

export function readGateInputs(sql: SqlRunner, plan: Pick<PlanHead, "id" | "workspaceId" | "orgId">): GateInputRead {
  return sql.query<InputRow>(INPUT_SQL, [plan.id, plan.workspaceId, plan.orgId], { prepare: true }).then(([row]) => row!);
}

/** `read`, when given, is readGateInputs for the same plan, started after the version was taken. */
export async function loadGateInputs(sql: SqlRunner, head: PlanHead, read: GateInputRead = readGateInputs(sql, head)): Promise<LoadedInputs> {
  const r = await read;
  const policies = r.policies.map(toGatePolicy);
  const reservations: GateReservation[] = r.reservations.map((x) => ({
    id: x.id,
    holder: x.u !== null ? { kind: "user", userId: x.u } : { kind: "role", roleId: x.r as string },
    placedByUserId: x.p,
  }));
  const roleIds = new Set<string>();
  for (const p of policies) for (const a of CHANGE_ACTIONS) for (const id of p.requirements[a].approverRoleIds) roleIds.add(id);
  for (const x of reservations) if (x.holder.kind === "role") roleIds.add(x.holder.roleId);
  const members = await roleMembers(sql, head.orgId, [...roleIds]);
  const approvals = r.approvals.map((a) => ({ userId: a.u, approvedAt: new Date(Number(a.t)) }));
  return {
    input: {
      baseline: head.requiredApprovals,
      changes: changesOf(r),
      policies,
      approvals,
      roleMembers: members,
      reservations,
      excludedSubmitterId: head.preventSelfApproval ? head.submittedById : null,
    },
    approverIds: [...new Set(approvals.map((a) => a.userId))],
  };
}

/** Loads a user's principal; a computation passes one shared per event so each user loads once. */
export type PrincipalSource = (userId: string) => Promise<CompiledPrincipal & { roleIds: string[] }>;

export function principalSource(sql: SqlRunner, orgId: string): PrincipalSource {
  // Requests made in the same tick are loaded in one round trip (loadPrincipals); each user once.
  const loader = new DataLoader<string, CompiledPrincipal & { roleIds: string[] }>(
    async (userIds) => {
      const loaded = await loadPrincipals(sql, orgId, userIds);
      return userIds.map((id) => loaded.get(id) ?? new Error(`no principal for ${id}`));
    },
    { maxBatchSize: 1000 },
  );
  return (userId) => loader.load(userId);
}

/** Who among `userIds` holds (workspace, approve) on the plan's workspace now. */
export async function approveHoldersAmong(
  principals: PrincipalSource,
  head: Pick<PlanHead, "workspaceName" | "authzGroups">,
  userIds: readonly string[],
): Promise<Set<string>> {
  const target = workspaceTarget({ name: head.workspaceName, authzGroups: head.authzGroups }, "approve");
  const checks = await Promise.all(userIds.map(async (id) => [id, checkPermission(await principals(id), target).allowed] as const));
  return new Set(checks.filter(([, allowed]) => allowed).map(([id]) => id));
}

/**
 * Seed 000, "Named approvers": "Being named on a requirement is itself the grant to approve for
 * that policy." True when the user, or a role they hold now, is named on a requirement that
 * governs one of the plan's changes (for that change's action). Which requirements govern the
 * plan is the evaluator's answer: evaluated with no approvals, every requirement with named
 * approvers lists them all as missing.
 */
export function isNamedApproverOnPlan(input: Omit<GateInput, "approveHolders">, userId: string, heldRoleIds: readonly string[]): boolean {
  const held = new Set(heldRoleIds);
  const unapproved = evaluateGate({ ...input, approvals: [], approveHolders: new Set() });
  return unapproved.requirements.some(
    (r) => r.missingApprovers.userIds.includes(userId) || r.missingApprovers.roleIds.some((id) => held.has(id)),
  );
}

/**
 * Whether the plan would pass with no approval at all: no reservation, the baseline at 0 (or
 * not applying), and only Auto requirements with no named approvers. Seed 000, "Baseline
 * approvals": a baseline of 0 "means anyone who can see the workspace can apply".
 */
export function needsNoApproval(e: GateEvaluation): boolean {
  return (
    e.reservations.length === 0 &&
    (!e.baseline.applies || e.baseline.required === 0) &&
    e.requirements.every((r) => r.count === "auto" && r.approverListSatisfied && r.namedApproverIds.length === 0)
  );
}

// ---------------------------------------------------------------------------------------------
// People: the users and roles an evaluation names, for display only

export interface UserRow {
  id: string;
  name: string;
  email: string;
  isServiceAccount: boolean;
  createdAt: Date;
}

export interface RoleRow {
  id: string;
  orgId: string | null;
  key: string;
  name: string;
  description: string;
  system: boolean;
  deletedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface People {
  users: ReadonlyMap<string, UserRow>;
  roles: ReadonlyMap<string, RoleRow>;
}

export const NO_PEOPLE: People = { users: new Map(), roles: new Map() };

/** Loads the given users and roles; the live hub passes one that keeps them across rounds. */
export type PeopleSource = (userIds: ReadonlySet<string>, roleIds: ReadonlySet<string>) => Promise<People>;

/** loadPeople on `sql`, as a PeopleSource (as principalSource is for principals). */
export const peopleSource =
  (sql: SqlRunner): PeopleSource =>
  (userIds, roleIds) =>
    loadPeople(sql, userIds, roleIds);

export async function loadPeople(sql: SqlRunner, userIds: Iterable<string>, roleIds: Iterable<string>): Promise<People> {
  const users = [...new Set(userIds)];
  const roles = [...new Set(roleIds)];
  if (users.length === 0 && roles.length === 0) return NO_PEOPLE;
  const [row] = await sql.query<{ users: UserRow[] | null; roles: RoleRow[] | null }>(
    `SELECT
       (SELECT json_agg(u) FROM (SELECT id, name, email, "isServiceAccount", "createdAt" FROM users WHERE id = ANY($1::text[])) u) AS users,
       (SELECT json_agg(r) FROM (SELECT id, "orgId", key, name, description, system, "deletedAt", "createdAt", "updatedAt"
                                   FROM roles WHERE id = ANY($2::text[])) r) AS roles`,
    [users, roles],
    { prepare: true },
  );
  const revive = <T extends { createdAt: unknown }>(x: T): T => ({ ...x, createdAt: new Date(x.createdAt as string) });
  return {
    users: new Map((row?.users ?? []).map((u) => [u.id, revive(u)])),
    roles: new Map(
      (row?.roles ?? []).map((r) => [
        r.id,
        { ...revive(r), updatedAt: new Date(r.updatedAt as unknown as string), deletedAt: r.deletedAt ? new Date(r.deletedAt as unknown as string) : null },
      ]),
    ),
  };
}

/** Every user and role the input names: whoever an evaluation of it can mention. */
export function idsInInput(input: Omit<GateInput, "approveHolders">): { userIds: Set<string>; roleIds: Set<string> } {
  const userIds = new Set<string>(input.approvals.map((a) => a.userId));
  if (input.excludedSubmitterId) userIds.add(input.excludedSubmitterId);
  const roleIds = new Set<string>();
  for (const p of input.policies) {
    for (const a of CHANGE_ACTIONS) {
      for (const id of p.requirements[a].approverUserIds) userIds.add(id);
      for (const id of p.requirements[a].approverRoleIds) roleIds.add(id);
    }
  }
  for (const r of input.reservations) {
    userIds.add(r.placedByUserId);
    if (r.holder.kind === "user") userIds.add(r.holder.userId);
    else roleIds.add(r.holder.roleId);
  }
  for (const members of input.roleMembers.values()) for (const id of members) userIds.add(id);
  return { userIds, roleIds };
}

/** Every user and role an evaluation mentions. */
export function idsInEvaluation(e: GateEvaluation): { userIds: Set<string>; roleIds: Set<string> } {
  const userIds = new Set<string>([...e.countedApproverIds, ...e.ignoredApproverIds, ...e.baseline.countedUserIds]);
  if (e.selfApproval?.submitterId) userIds.add(e.selfApproval.submitterId);
  const roleIds = new Set<string>();
  for (const r of e.requirements) {
    for (const id of [...r.countedUserIds, ...r.namedApproverIds, ...r.missingApprovers.userIds, ...r.missingApprovers.eligibleUserIds]) userIds.add(id);
    for (const id of r.missingApprovers.roleIds) roleIds.add(id);
  }
  for (const r of e.reservations) {
    userIds.add(r.placedByUserId);
    if (r.holder.kind === "user") userIds.add(r.holder.userId);
    else roleIds.add(r.holder.roleId);
    if (r.answeredByUserId) userIds.add(r.answeredByUserId);
    for (const id of r.currentMembers ?? []) userIds.add(id);
  }
  return { userIds, roleIds };
}

// ---------------------------------------------------------------------------------------------
// Snapshots: one evaluation with the version it was taken at

export type GateSource = "live" | "stored";

export interface GateSnapshot {
  planId: string;
  orgId: string;
  workspaceId: string;
  workspaceName: string;
  authzGroups: string[];
  planStatus: PlanStatus;
  /** The message version: nextval('gate_version_seq'), taken before the inputs were read. */
  version: number;
  /**
   * "live": evaluated now from current inputs. "stored": the evaluation that allowed the apply,
   * kept with the plan (seed 000, "Auditing the gate"), for plans past planned.
   */
  source: GateSource;
  /** When the evaluation was taken (for a stored one: when the apply started). */
  evaluatedAt: string;
  /** For a stored evaluation, the version it was taken at; equal to `version` for a live one. */
  evaluatedVersion: number;
  evaluation: GateEvaluation;
  people: People;
}

/** What applyPlan stores in plans.applyEvaluation. */
export interface StoredEvaluation {
  version: number;
  evaluatedAt: string;
  startedById: string;
  evaluation: GateEvaluation;
}

export function storedEvaluationOf(value: unknown): StoredEvaluation | null {
  const v = value as Partial<StoredEvaluation> | null;
  return v && typeof v === "object" && v.evaluation && typeof v.version === "number" ? (v as StoredEvaluation) : null;
}

/** The part of a snapshot that is the plan head's, live or stored alike. */
const snapshotHead = (head: PlanHead) => ({
  planId: head.id,
  orgId: head.orgId,
  workspaceId: head.workspaceId,
  workspaceName: head.workspaceName,
  authzGroups: head.authzGroups,
  planStatus: head.status,
});

/** Evaluates the plan's gate from the inputs as they stand (no stored evaluation consulted). */
export async function evaluateLive(
  sql: SqlRunner,
  head: PlanHead,
  version: number,
  principals: PrincipalSource = principalSource(sql, head.orgId),
  read?: GateInputRead,
  people: PeopleSource = peopleSource(sql),
): Promise<GateSnapshot> {
  const { input, approverIds } = await loadGateInputs(sql, head, read);
  // Names are for the messages only (a chatops bot prints them); they never affect the decision.
  const ids = idsInInput(input);
  const [approveHolders, named] = await Promise.all([approveHoldersAmong(principals, head, approverIds), people(ids.userIds, ids.roleIds)]);
  const evaluation = evaluateGate({
    ...input,
    approveHolders,
    userNames: new Map([...named.users.values()].map((u) => [u.id, u.name])),
    // A deleted role stays named (it blocks, with no members); its name says so.
    roleNames: new Map([...named.roles.values()].map((r) => [r.id, r.deletedAt ? `${r.name} (deleted)` : r.name])),
  });
  return {
    ...snapshotHead(head),
    version,
    source: "live",
    evaluatedAt: new Date().toISOString(),
    evaluatedVersion: version,
    evaluation,
    people: named,
  };
}

/**
 * The gate as a plan page shows it: the stored evaluation for a plan whose apply started (what
 * allowed it, policies edited later notwithstanding), otherwise a live evaluation.
 */
export async function snapshotOf(
  sql: SqlRunner,
  head: PlanHead,
  version: number,
  principals?: PrincipalSource,
  read?: GateInputRead,
  people: PeopleSource = peopleSource(sql),
): Promise<GateSnapshot> {
  const stored = head.status === "planned" ? null : storedEvaluationOf(head.applyEvaluation);
  if (!stored) return evaluateLive(sql, head, version, principals, read, people);
  const ids = idsInEvaluation(stored.evaluation);
  return {
    ...snapshotHead(head),
    version,
    source: "stored",
    evaluatedAt: stored.evaluatedAt,
    evaluatedVersion: stored.version,
    evaluation: stored.evaluation,
    people: await people(ids.userIds, ids.roleIds),
  };
}

// ---------------------------------------------------------------------------------------------
// Serializing against applyPlan

/**
 * Row locks that make every gate-CLOSING change serialize with an apply (docs/apply-gate.md,
 * "Races"). Taken by applyPlan after it has locked the workspace and plan rows, before it reads
 * the inputs. FOR SHARE on the rows that make `userIds` (the approvers and the caller) members,
 * role holders, approve holders or super admins: a concurrent deactivation, unassignment,
 * binding or group-sync removal, role deletion or grant removal touching them waits for the
 * apply to commit, and one already written but uncommitted makes the apply wait and then read
 * its result. Changes that can only OPEN a gate (a new approval, a release, a new member) need
 * no lock here. Reservations, policies and the baseline are serialized by the workspace row
 * lock that their writers take.
 */
export async function lockGateAuthzRows(sql: SqlRunner, orgId: string, workspaceId: string, userIds: readonly string[]): Promise<void> {
  await sql.query(
    `WITH org AS (SELECT id FROM organizations WHERE id = $1 FOR SHARE),
          m AS (SELECT id FROM memberships WHERE "orgId" = $1 AND "userId" = ANY($2::text[]) FOR SHARE),
          ra AS (SELECT id FROM role_assignments WHERE "orgId" = $1 AND "userId" = ANY($2::text[]) FOR SHARE),
          ug AS (SELECT g."userId" FROM user_identity_groups g JOIN identity_sources s ON s.id = g."identitySourceId"
                  WHERE s."orgId" = $1 AND g."userId" = ANY($2::text[]) FOR SHARE OF g),
          b AS (SELECT id FROM identity_group_bindings WHERE "orgId" = $1 FOR SHARE),
          br AS (SELECT br."roleId" FROM identity_group_binding_roles br JOIN identity_group_bindings b2 ON b2.id = br."bindingId"
                  WHERE b2."orgId" = $1 FOR SHARE OF br),
          ap AS (SELECT ap.id FROM policy_approvers ap
                   JOIN policy_requirements q ON q.id = ap."requirementId"
                   JOIN resource_policy_workspaces pw ON pw."policyId" = q."policyId"
                  WHERE pw."workspaceId" = $3 FOR SHARE OF ap)
     SELECT (SELECT count(*) FROM org) + (SELECT count(*) FROM m) + (SELECT count(*) FROM ra) + (SELECT count(*) FROM ug)
          + (SELECT count(*) FROM b) + (SELECT count(*) FROM br) + (SELECT count(*) FROM ap) AS locked`,
    [orgId, userIds, workspaceId],
  );
  // A second statement, so it sees the role set as it is after the waits above.
  await sql.query(
    `WITH held AS (
       SELECT "roleId" FROM role_assignments WHERE "orgId" = $1 AND "userId" = ANY($2::text[])
       UNION
       SELECT br."roleId" FROM user_identity_groups g
         JOIN identity_group_bindings b ON b."identitySourceId" = g."identitySourceId" AND b."groupKey" = g."groupKey"
         JOIN identity_group_binding_roles br ON br."bindingId" = b.id
        WHERE b."orgId" = $1 AND g."userId" = ANY($2::text[])),
          r AS (SELECT id FROM roles WHERE id IN (SELECT "roleId" FROM held) FOR SHARE),
          p AS (SELECT id FROM role_permissions WHERE "roleId" IN (SELECT "roleId" FROM held) FOR SHARE)
     SELECT (SELECT count(*) FROM r) + (SELECT count(*) FROM p) AS locked`,
    [orgId, userIds],
  );
}

/** The workspace row lock every writer of reservations, policies and the baseline takes. */
export async function lockWorkspaces(sql: SqlRunner, workspaceIds: readonly string[]): Promise<void> {
  if (workspaceIds.length === 0) return;
  // Sorted, so two writers locking overlapping sets never deadlock.
  await sql.query(`SELECT id FROM workspaces WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`, [[...workspaceIds].sort()]);
}
