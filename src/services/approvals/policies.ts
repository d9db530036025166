import { z } from "zod";
import type { SignedInAuthz } from "../../authz/authz.js";
import {
  policySetHash,
  validateApprovalPolicySet,
  validateApprovalRules,
  type ApprovalPolicy,
  type ApprovalRule,
} from "../../domain/approvals/policy.js";
import { ConflictError, NotFoundError, ValidationError, type FieldIssue } from "../../errors.js";
import type { Database, SqlRunner } from "../../infra/db.js";
import type { EventBus } from "../../infra/events.js";
import { parseInput } from "../parse.js";
import { uniqueViolation } from "../prisma-errors.js";
import { LOCKING_TX_OPTIONS, type Tx } from "../../infra/db.js";
import { lockWorkspace, workspaceInViewerOrg } from "./workspaces.js";
import { workspaceFamilyTarget } from "../../authz/targets.js";
import type { ApprovalPolicy as ApprovalPolicyRecord, Prisma } from "../../generated/prisma/client.js";
import { recordHoldAuthorityChange } from "../hold-authority.js";

/**
 * Approval policies over GraphQL's services (seed 003, "Approval policies"): managed under
 * (approval_policy, manage), read under (approval_policy, read). Changing, enabling, disabling,
 * creating or deleting an active policy changes the workspace's policy-set hash, and every
 * unexecuted request under the old set closes as invalidated / policy_changed — coarse and
 * fail-closed, as the seed says.
 */

export type PolicyRow = ApprovalPolicyRecord;

export const toDomainPolicy = (row: Pick<PolicyRow, "id" | "revision" | "enabled" | "rules">): ApprovalPolicy => ({
  id: row.id,
  revision: row.revision,
  enabled: row.enabled,
  rules: row.rules as ApprovalRule[],
});

export async function workspacePolicies(tx: Tx, workspaceId: string): Promise<ApprovalPolicy[]> {
  const rows = await tx.approvalPolicy.findMany({ where: { workspaceId }, select: { id: true, revision: true, enabled: true, rules: true } });
  return rows.map(toDomainPolicy);
}

/** The hash the workspace's requests are compared with: its complete active policy set, now. */
export async function currentPolicySetHash(tx: Tx, workspaceId: string): Promise<string> {
  return policySetHash(await workspacePolicies(tx, workspaceId));
}

/** The same hash through raw SQL, for transactions that run on a SqlRunner (votes, delivery preflight). */
export async function policySetHashOf(sql: SqlRunner, workspaceId: string): Promise<string> {
  const rows = await sql.query<Pick<PolicyRow, "id" | "revision" | "enabled" | "rules">>(
    `SELECT id, revision, enabled, rules FROM approval_policies WHERE "workspaceId" = $1`,
    [workspaceId],
  );
  return policySetHash(rows.map(toDomainPolicy));
}

const PolicyName = z
  .string()
  .trim()
  .min(1, "A policy name is required.")
  .max(100, "A policy name is at most 100 characters.")
  .regex(/^[^\s].*$/, "A policy name starts with a visible character.");

const CreateInput = z.object({
  workspaceId: z.string().min(1),
  name: PolicyName,
  enabled: z.boolean().default(true),
  rules: z.array(z.unknown()),
});

const UpdateInput = z.object({
  id: z.string().min(1),
  expectedRevision: z.int().min(1),
  name: PolicyName.optional(),
  enabled: z.boolean().optional(),
  rules: z.array(z.unknown()).optional(),
});

const DeleteInput = z.object({ id: z.string().min(1), expectedRevision: z.int().min(1) });

type Deps = { db: Database; authz: SignedInAuthz; events: EventBus };

function rulesOrThrow(rules: unknown[]): ApprovalRule[] {
  const result = validateApprovalRules(rules);
  if (result.ok) return result.rules;
  throw new ValidationError(
    result.issues.map((issue) => ({ field: ["input", "rules", ...issue.path.map(String)].join("."), code: "invalid_rule", message: issue.message })),
  );
}

/**
 * Every role and user a rule names exists in the caller's organization (a custom role of it that
 * is not deleted, or a built-in role; a member of it): a rule naming anything else could never
 * match. Unknown and another organization's ids get the same answer, so nothing leaks.
 */
async function principalsOrThrow(db: Database, orgId: string, rules: readonly ApprovalRule[]): Promise<void> {
  const roleIds = [...new Set(rules.flatMap((r) => r.roles))];
  const userIds = [...new Set(rules.flatMap((r) => r.userIds))];
  const [roles, members] = await Promise.all([
    roleIds.length === 0
      ? []
      : db.prisma.role.findMany({
          where: { id: { in: roleIds }, deletedAt: null, OR: [{ orgId }, { orgId: null, system: true }] },
          select: { id: true },
        }),
    userIds.length === 0 ? [] : db.prisma.membership.findMany({ where: { orgId, userId: { in: userIds } }, select: { userId: true } }),
  ]);
  const knownRoles = new Set(roles.map((r) => r.id));
  const knownUsers = new Set(members.map((m) => m.userId));
  const issues: FieldIssue[] = [];
  rules.forEach((rule, i) => {
    rule.roles.forEach((id, j) => {
      if (!knownRoles.has(id)) issues.push({ field: `input.rules.${i}.roleIds.${j}`, code: "unknown_role", message: "No role of this organization has this id." });
    });
    rule.userIds.forEach((id, j) => {
      if (!knownUsers.has(id)) issues.push({ field: `input.rules.${i}.userIds.${j}`, code: "unknown_user", message: "No member of this organization has this id." });
    });
  });
  if (issues.length > 0) throw new ValidationError(issues);
}

function setOrThrow(policies: ApprovalPolicy[], index: number): void {
  const issues = validateApprovalPolicySet(policies).filter((issue) => issue.path[0] === index);
  if (issues.length === 0) return;
  throw new ValidationError(
    issues.map((issue) => ({ field: ["input", ...issue.path.slice(1).map(String)].join("."), code: "duplicate_rule_id", message: issue.message })),
  );
}

/**
 * Closes every unexecuted request of the workspace whose stored hash is not the new one, and
 * cancels its delivery in the same transaction (seed 003: "Changing or disabling any active
 * approval policy invalidates every unexecuted request"). Unexecuted means: pending; approved
 * with delivery not yet dispatched; and approved with a dispatch that came back unexecuted and
 * waits for a retry (execution `dispatched`, job queued or leased again). Only a call whose
 * dispatch is in flight right now (job `dispatching`) is left alone: it cannot be retracted, and
 * if it comes back unexecuted, the delivery worker closes it the same way before re-queueing
 * (see retry in workers/delivery/settle.ts). The caller holds the workspace lock, which every preflight takes
 * too, so no attempt can start dispatching between this statement and the commit.
 */
export async function invalidateStaleRequests(tx: Tx, workspaceId: string, newHash: string): Promise<string[]> {
  const rows = await tx.$queryRaw<{ id: string }[]>`
    UPDATE approval_requests r
       SET status = 'invalidated', "closeReason" = 'policy_changed', "decidedAt" = now(), "updatedAt" = now(),
           revision = r.revision + 1,
           "executionStatus" = CASE WHEN r."executionStatus" IN ('pending', 'dispatched') THEN 'failed'::"ExecutionStatus" ELSE r."executionStatus" END
     WHERE r."workspaceId" = ${workspaceId}
       AND r."policySetHash" <> ${newHash}
       AND (r.status = 'pending'
            OR (r.status = 'approved' AND r."executionStatus" IN ('none', 'pending'))
            OR (r.status = 'approved' AND r."executionStatus" = 'dispatched'
                AND NOT EXISTS (SELECT 1 FROM delivery_jobs j WHERE j."requestId" = r.id AND j.status = 'dispatching')))
     RETURNING r.id`;
  const ids = rows.map((r) => r.id);
  if (ids.length > 0) {
    await tx.deliveryJob.updateMany({
      where: { requestId: { in: ids }, status: { in: ["queued", "leased"] } },
      data: { status: "failed", errorCode: "policy_changed", leaseOwner: null, leaseExpiresAt: null },
    });
  }
  return ids;
}

function publishInvalidated(events: EventBus, orgId: string, workspaceId: string, ids: string[]): void {
  for (const requestId of ids) events.publish("approval:changed", { orgId, workspaceId, requestId, reason: "invalidated" });
}

export async function listApprovalPolicies({ db, authz }: Omit<Deps, "events">, workspaceId: string) {
  const workspace = await workspaceInViewerOrg(db, authz, workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "approval_policy", "read"));
  return db.prisma.approvalPolicy.findMany({ where: { workspaceId }, orderBy: [{ name: "asc" }] });
}

export async function findReadablePolicy({ db, authz }: Omit<Deps, "events">, id: string) {
  await authz.requireMember();
  const policy = await db.prisma.approvalPolicy.findFirst({ where: { id, orgId: authz.viewer.orgId } });
  if (!policy) throw new NotFoundError("ApprovalPolicy", id);
  const workspace = await workspaceInViewerOrg(db, authz, policy.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "approval_policy", "read"));
  return policy;
}

export async function createApprovalPolicy({ db, authz, events }: Deps, raw: unknown) {
  const input = parseInput(CreateInput, raw);
  const rules = rulesOrThrow(input.rules);
  const workspace = await workspaceInViewerOrg(db, authz, input.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "approval_policy", "manage"));
  await principalsOrThrow(db, workspace.orgId, rules);
  try {
    const { policy, invalidated } = await db.prisma.$transaction(async (tx) => {
      await lockWorkspace(tx, workspace.id);
      const existing = await workspacePolicies(tx, workspace.id);
      const draft: ApprovalPolicy = { id: "(new)", revision: 1, enabled: input.enabled, rules };
      setOrThrow([...existing, draft], existing.length);
      const policy = await tx.approvalPolicy.create({
        data: { orgId: workspace.orgId, workspaceId: workspace.id, name: input.name, enabled: input.enabled, rules: rules as Prisma.InputJsonValue },
      });
      const invalidated = await invalidateStaleRequests(tx, workspace.id, await currentPolicySetHash(tx, workspace.id));
      return { policy, invalidated };
    }, LOCKING_TX_OPTIONS);
    publishInvalidated(events, workspace.orgId, workspace.id, invalidated);
    return { policy, invalidatedRequestIds: invalidated };
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`An approval policy named ${input.name} already exists in this workspace.`);
    throw error;
  }
}

export async function updateApprovalPolicy({ db, authz, events }: Deps, raw: unknown) {
  const input = parseInput(UpdateInput, raw);
  const rules = input.rules === undefined ? undefined : rulesOrThrow(input.rules);
  const current = await findPolicyInOrg(db, authz, input.id);
  const workspace = await workspaceInViewerOrg(db, authz, current.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "approval_policy", "manage"));
  if (rules !== undefined) await principalsOrThrow(db, workspace.orgId, rules);
  try {
    const { policy, invalidated } = await db.prisma.$transaction(async (tx) => {
      await lockWorkspace(tx, workspace.id);
      const locked = await tx.approvalPolicy.findUnique({ where: { id: input.id } });
      if (!locked) throw new NotFoundError("ApprovalPolicy", input.id);
      if (locked.revision !== input.expectedRevision) {
        throw new ConflictError(`The policy is at revision ${locked.revision}, not ${input.expectedRevision}.`, locked.revision);
      }
      const changed =
        (input.name !== undefined && input.name !== locked.name) ||
        (input.enabled !== undefined && input.enabled !== locked.enabled) ||
        rules !== undefined;
      if (!changed) return { policy: locked, invalidated: [] as string[] };
      if (rules !== undefined) {
        const others = (await workspacePolicies(tx, workspace.id)).filter((p) => p.id !== locked.id);
        setOrThrow([...others, { id: locked.id, revision: locked.revision + 1, enabled: input.enabled ?? locked.enabled, rules }], others.length);
      }
      const policy = await tx.approvalPolicy.update({
        where: { id: locked.id },
        data: {
          revision: { increment: 1 },
          ...(input.name !== undefined ? { name: input.name } : {}),
          ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
          ...(rules !== undefined ? { rules: rules as Prisma.InputJsonValue } : {}),
        },
      });
      if (locked.enabled && !policy.enabled) {
        // Owner-only already ((approval_policy, manage)); recorded as a hold-lifting change.
        await recordHoldAuthorityChange(tx, {
          orgId: workspace.orgId,
          workspace,
          kind: "approval_policy.disabled",
          subject: policy.name,
          before: { enabled: true, revision: locked.revision },
          after: { enabled: false, revision: policy.revision },
          actorUserId: authz.viewer.userId,
        });
      }
      const invalidated = await invalidateStaleRequests(tx, workspace.id, await currentPolicySetHash(tx, workspace.id));
      return { policy, invalidated };
    }, LOCKING_TX_OPTIONS);
    publishInvalidated(events, workspace.orgId, workspace.id, invalidated);
    return { policy, invalidatedRequestIds: invalidated };
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`An approval policy named ${input.name ?? ""} already exists in this workspace.`);
    throw error;
  }
}

export async function deleteApprovalPolicy({ db, authz, events }: Deps, raw: unknown) {
  const input = parseInput(DeleteInput, raw);
  const current = await findPolicyInOrg(db, authz, input.id);
  const workspace = await workspaceInViewerOrg(db, authz, current.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "approval_policy", "manage"));
  const { policy, invalidated } = await db.prisma.$transaction(async (tx) => {
    await lockWorkspace(tx, workspace.id);
    const locked = await tx.approvalPolicy.findUnique({ where: { id: input.id } });
    if (!locked) throw new NotFoundError("ApprovalPolicy", input.id);
    if (locked.revision !== input.expectedRevision) {
      throw new ConflictError(`The policy is at revision ${locked.revision}, not ${input.expectedRevision}.`, locked.revision);
    }
    await tx.approvalPolicy.delete({ where: { id: locked.id } });
    await recordHoldAuthorityChange(tx, {
      orgId: workspace.orgId,
      workspace,
      kind: "approval_policy.deleted",
      subject: locked.name,
      before: { enabled: locked.enabled, revision: locked.revision },
      after: {},
      actorUserId: authz.viewer.userId,
    });
    const invalidated = await invalidateStaleRequests(tx, workspace.id, await currentPolicySetHash(tx, workspace.id));
    return { policy: locked, invalidated };
  }, LOCKING_TX_OPTIONS);
  publishInvalidated(events, workspace.orgId, workspace.id, invalidated);
  return { policy, invalidatedRequestIds: invalidated };
}

async function findPolicyInOrg(db: Database, authz: SignedInAuthz, id: string) {
  await authz.requireMember();
  const policy = await db.prisma.approvalPolicy.findFirst({ where: { id, orgId: authz.viewer.orgId } });
  if (!policy) throw new NotFoundError("ApprovalPolicy", id);
  return policy;
}
