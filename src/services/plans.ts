// Plans and approvals (seed 000): a runner submits a plan with its resource changes; people
// approve it; anyone holding approve starts the apply once the gate passes; the runner reports
// the result. Plans and approvals are never deleted.
//
// States: planned → applying → applied | failed, or planned → discarded (by a person, by a
// newer plan superseding it, or by archiving the workspace).

import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { PlanOriginKind } from "../generated/prisma/client.js";
import {
  CHANGE_ACTIONS,
  MAX_PLAN_CHANGES,
  parsePlanChanges,
  pickTargets,
  planDiffOf,
  resourceAddressProblem,
  type PlanIssue,
} from "../domain/gate/index.js";
import { checkPermission } from "../domain/catalog/index.js";
import { ConflictError, GateNotPassedError, InvalidStateError, NotFoundError, PermissionDeniedError, ValidationError } from "../errors.js";
import type { Database } from "../infra/db.js";
import {
  isNamedApproverOnPlan,
  loadGateInputs,
  loadPlanHead,
  loadPoliciesAndChanges,
  lockGateAuthzRows,
  lockWorkspaces,
  nextGateVersion,
  principalSource,
  evaluateLive,
  needsNoApproval,
  type PlanHead,
  type StoredEvaluation,
} from "./gate.js";
import { workspaceTarget } from "../authz/targets.js";
import { LOCKING_TX_OPTIONS, txSql } from "../infra/db.js";
import { parseInput } from "./parse.js";
import { enqueuePlanEvent } from "./webhooks.js";
import {
  assertNotArchived,
  findReadableWorkspace,
  findWorkspaceFor,
  lockLiveWorkspace,
  publishGateChange,
  type GateDeps,
} from "./workspaces.js";

export const MAX_TARGETS = 1000;

const targetOfHead = (head: PlanHead, action: Parameters<typeof workspaceTarget>[1]) =>
  workspaceTarget({ name: head.workspaceName, authzGroups: head.authzGroups }, action);

/** A plan of the viewer's org whose workspace the viewer may read, or NotFound. */
export async function findReadablePlanHead(
  deps: Pick<GateDeps, "db" | "authz">,
  planId: string,
  load: (orgId: string, planId: string) => Promise<PlanHead | null> = (orgId, id) => loadPlanHead(deps.db.sql, orgId, id),
): Promise<PlanHead> {
  const { authz } = deps;
  const viewer = (await authz.requireMember()) && authz.viewer;
  const head = await load(viewer.orgId, planId);
  if (!head || !(await authz.can(targetOfHead(head, "read")))) throw new NotFoundError("Plan", planId);
  return head;
}

/** The plan for an action: NotFound unless the viewer can read it or perform the action. */
async function findPlanHeadFor(deps: Pick<GateDeps, "db" | "authz">, planId: string, actions: readonly ("plan" | "approve" | "read")[]) {
  const { db, authz } = deps;
  const viewer = (await authz.requireMember()) && authz.viewer;
  const head = await loadPlanHead(db.sql, viewer.orgId, planId);
  if (!head) throw new NotFoundError("Plan", planId);
  for (const action of actions) if (await authz.can(targetOfHead(head, action))) return head;
  if (!(await authz.can(targetOfHead(head, "read")))) throw new NotFoundError("Plan", planId);
  throw new PermissionDeniedError({ resourceType: "workspace", action: actions[0]!, matchValue: head.workspaceName });
}

function notPlanned(head: { id: string; status: string }, doing: string): InvalidStateError {
  return new InvalidStateError("Plan", head.status, `Plan ${head.id} is ${head.status}; only a planned plan can be ${doing}.`);
}

// ---------------------------------------------------------------------------------------------
// Submitting

/** `resource_changes[3].change.actions` → `input.plan.resource_changes.3.change.actions`. */
function planIssueField(prefix: string, path: string): string {
  if (path === "$") return prefix;
  const dotted = path.replace(/\[(\d+)\]/g, ".$1").replace(/^\./, "");
  return `${prefix}.${dotted}`;
}

function planIssuesError(prefix: string, issues: readonly PlanIssue[]): ValidationError {
  return new ValidationError(
    issues.map((i) => ({ field: planIssueField(prefix, i.path), code: "invalid_plan", message: `${i.path}: ${i.message}` })),
  );
}

export const MAX_RUN_URL_LENGTH = 2048;

/**
 * The CI run that produced a plan (`plan submit --run-url`): an absolute http(s) URL with a host,
 * no user name or password in it (a link is shown to every plan reader), at most 2,048 characters.
 */
export const RunUrl = z
  .string()
  .max(MAX_RUN_URL_LENGTH, `A run URL is at most ${MAX_RUN_URL_LENGTH} characters.`)
  .superRefine((raw, ctx) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      ctx.addIssue({ code: "custom", message: "A run URL is an absolute http(s) URL, such as https://ci.example.com/runs/42." });
      return;
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") ctx.addIssue({ code: "custom", message: `A run URL is http or https (got ${url.protocol.slice(0, 20)}).` });
    else if (!/^https?:\/\//i.test(raw)) ctx.addIssue({ code: "custom", message: "A run URL starts with http:// or https://." });
    else if (url.hostname === "") ctx.addIssue({ code: "custom", message: "A run URL names a host." });
    if (url.username !== "" || url.password !== "") ctx.addIssue({ code: "custom", message: "A run URL must not carry a user name or password: every plan reader sees it." });
  });

/** The origins a client may claim for its own submission; the others belong to integrations. */
export const CLIENT_PLAN_ORIGINS = ["api", "cli"] as const satisfies readonly PlanOriginKind[];

export const SubmitPlanInput = z
  .object({
    workspaceId: z.string().min(1),
    /** `terraform show -json` output (as a JSON value or its text), or a plain list of { address, action }. */
    plan: z.unknown().optional(),
    /** The plain list, typed. */
    changes: z
      .array(z.object({ address: z.string(), action: z.enum(CHANGE_ACTIONS) }))
      .max(MAX_PLAN_CHANGES, `A plan has at most ${MAX_PLAN_CHANGES} changes.`)
      .optional(),
    targeted: z.boolean().optional(),
    targets: z.array(z.string()).max(MAX_TARGETS, `At most ${MAX_TARGETS} targets.`).default([]),
    runUrl: RunUrl.nullish(),
    /** Which client submitted it: the API (the default) or the CLI. Integrations set their own kind. */
    origin: z.enum(CLIENT_PLAN_ORIGINS).optional(),
  })
  .superRefine((input, ctx) => {
    const given = Number(input.plan !== undefined && input.plan !== null) + Number(input.changes !== undefined);
    if (given !== 1) ctx.addIssue({ code: "custom", path: ["plan"], message: "Give exactly one of plan (Terraform JSON or a list) and changes." });
    input.targets.forEach((target, i) => {
      const problem = resourceAddressProblem(target);
      if (problem) ctx.addIssue({ code: "custom", path: ["targets", i], message: `A target address ${problem}.` });
    });
    if (input.targeted === true && input.targets.length === 0) {
      ctx.addIssue({ code: "custom", path: ["targets"], message: "A targeted plan names its targets." });
    }
    if (input.targeted === false && input.targets.length > 0) {
      ctx.addIssue({ code: "custom", path: ["targeted"], message: "Targets were given for a plan marked untargeted." });
    }
  });

/**
 * (workspace, plan). The changes are parsed all-or-nothing before anything is written: a bad
 * document is a ValidationError naming each JSON path, and nothing is stored. In one
 * transaction, holding the workspace row: the plan and its changes are written and every older
 * planned plan on the workspace is superseded by it.
 */
export async function submitPlan({ db, authz, events }: GateDeps, raw: unknown, integration?: { origin: PlanOriginKind }) {
  const input = parseInput(SubmitPlanInput, raw);
  const parsed = parsePlanChanges(input.changes ?? input.plan);
  if (!parsed.ok) throw planIssuesError(input.changes ? "input.changes" : "input.plan", parsed.issues);
  const workspace = await findWorkspaceFor(db, authz, input.workspaceId, "plan");
  assertNotArchived(workspace);
  const viewer = authz.viewer;
  const planId = randomUUID();
  // The attribute diff of a `terraform show -json` document, sensitive values masked (none for a list).
  const diff = input.changes ? null : planDiffOf(input.plan);
  const plan = await db.prisma.$transaction(async (tx) => {
    await lockLiveWorkspace(tx, workspace.id);
    const created = await tx.plan.create({
      data: {
        id: planId,
        orgId: workspace.orgId,
        workspaceId: workspace.id,
        targeted: input.targeted ?? input.targets.length > 0,
        targets: [...new Set(input.targets)].sort(),
        submittedById: viewer.userId,
        runUrl: input.runUrl ?? null,
        originKind: integration?.origin ?? input.origin ?? "api",
      },
    });
    if (diff) await tx.planDiff.create({ data: { planId, diff: diff.diff as object, bytes: diff.bytes } });
    if (parsed.changes.length > 0) {
      await tx.resourceChange.createMany({ data: parsed.changes.map((c) => ({ planId, address: c.address, action: c.action })) });
    }
    await tx.plan.updateMany({
      where: { workspaceId: workspace.id, status: "planned", id: { not: planId } },
      data: { status: "discarded", discardReason: "superseded", supersededById: planId },
    });
    await enqueuePlanEvent(tx, workspace.orgId, planId, "plan.needs_approvals", { submittedById: viewer.userId });
    return created;
  }, LOCKING_TX_OPTIONS);
  publishGateChange(events, workspace.orgId, [workspace.id], "plan_submitted");
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Approving

/**
 * Seed 000: approving requires (workspace, approve), or being a named approver on a requirement
 * that governs one of this plan's changes ("Being named on a requirement is itself the grant to
 * approve for that policy"). Only planned plans take approvals. Approving twice returns the same
 * approval; approving after withdrawing adds a new one (the withdrawn row stays). An optional comment (at most
 * 2,000 characters) is kept with the approval; approving again keeps the first one's. The plan row is held FOR SHARE while the approval is written, so an approval never
 * lands on a plan that an apply has just moved on.
 */
export const MAX_APPROVAL_COMMENT = 2000;
const ApprovalComment = z
  .string()
  .max(MAX_APPROVAL_COMMENT, `A comment is at most ${MAX_APPROVAL_COMMENT} characters.`)
  .transform((s) => (s.trim() === "" ? null : s))
  .nullish();

export async function approvePlan({ db, authz, events }: GateDeps, planId: string, rawComment?: unknown) {
  const comment = parseInput(z.object({ comment: ApprovalComment }), { comment: rawComment }, "").comment ?? null;
  const principal = await authz.requireMember();
  const viewer = authz.viewer;
  const head = await loadPlanHead(db.sql, viewer.orgId, planId);
  if (!head) throw new NotFoundError("Plan", planId);
  if (!(await authz.can(targetOfHead(head, "approve")))) {
    const { input } = await loadGateInputs(db.sql, head);
    if (!isNamedApproverOnPlan(input, viewer.userId, principal.roleIds)) {
      if (!(await authz.can(targetOfHead(head, "read")))) throw new NotFoundError("Plan", planId);
      throw new PermissionDeniedError(
        { resourceType: "workspace", action: "approve", matchValue: head.workspaceName },
        `Missing permission (workspace, approve, ${head.workspaceName}), and you are not a named approver on a resource policy governing this plan.`,
      );
    }
  }
  if (head.archived) throw new InvalidStateError("Workspace", "archived", `Workspace ${head.workspaceName} is archived.`);
  const { approval, created } = await db.prisma.$transaction(async (tx) => {
    const sql = txSql(tx);
    const [locked] = await sql.query<{ status: string }>(`SELECT status::text AS status FROM plans WHERE id = $1 FOR SHARE`, [planId]);
    if (!locked || locked.status !== "planned") throw notPlanned({ id: planId, status: locked?.status ?? "unknown" }, "approved");
    const inserted = await sql.query<{ id: string }>(
      `INSERT INTO approvals (id, "planId", "userId", "createdAt", comment) VALUES ($1, $2, $3, now(), $4)
       ON CONFLICT ("planId", "userId") WHERE "withdrawnAt" IS NULL DO NOTHING RETURNING id`,
      [randomUUID(), planId, viewer.userId, comment],
    );
    // The one active approval (a partial unique index); withdrawn ones stay beside it.
    const approval = await tx.approval.findFirstOrThrow({ where: { planId, userId: viewer.userId, withdrawnAt: null } });
    if (inserted.length > 0) await enqueuePlanEvent(tx, head.orgId, planId, "plan.approval_added", { approverId: viewer.userId });
    return { approval, created: inserted.length > 0 };
  }, LOCKING_TX_OPTIONS);
  if (created) publishGateChange(events, head.orgId, [head.workspaceId], "approval");
  return approval;
}

/**
 * An approver retracts their own approval while the plan is planned. The row stays
 * (seed 000: approvals are never deleted) with who withdrew it and when, and counts for nothing
 * from then on: every read that counts approvals skips withdrawn rows. Approving again adds a
 * new row. Only the caller's own approval can be withdrawn: the mutation names the plan, never
 * an approval. NotFound unless the plan is in the caller's organization and the caller can read
 * it or has an active approval on it; InvalidState when the plan is not planned or the caller has
 * no active approval on it.
 *
 * Withdrawing closes the gate, so it serializes with applyPlan on the plan row: the plan is held
 * FOR SHARE while the approval is marked, and applyPlan takes it FOR UPDATE before it reads the
 * approvals, so an apply either sees the withdrawal or the withdrawal finds the plan applying.
 */
export async function withdrawApproval({ db, authz, events }: GateDeps, planId: string) {
  const viewer = (await authz.requireMember()) && authz.viewer;
  const head = await loadPlanHead(db.sql, viewer.orgId, planId);
  if (!head) throw new NotFoundError("Plan", planId);
  if (!(await authz.can(targetOfHead(head, "read")))) {
    // A named approver may approve without reading the workspace; they may take it back too.
    const [own] = await db.sql.query<{ id: string }>(
      `SELECT id FROM approvals WHERE "planId" = $1 AND "userId" = $2 AND "withdrawnAt" IS NULL`,
      [planId, viewer.userId],
    );
    if (!own) throw new NotFoundError("Plan", planId);
  }
  const approval = await db.prisma.$transaction(async (tx) => {
    const sql = txSql(tx);
    const [locked] = await sql.query<{ status: string }>(`SELECT status::text AS status FROM plans WHERE id = $1 FOR SHARE`, [planId]);
    if (!locked || locked.status !== "planned") {
      throw new InvalidStateError(
        "Plan",
        locked?.status ?? "unknown",
        `Plan ${planId} is ${locked?.status ?? "unknown"}; an approval can only be withdrawn while the plan is planned.`,
      );
    }
    const [withdrawn] = await sql.query<{ id: string }>(
      `UPDATE approvals SET "withdrawnAt" = now(), "withdrawnById" = $2
        WHERE "planId" = $1 AND "userId" = $2 AND "withdrawnAt" IS NULL
        RETURNING id`,
      [planId, viewer.userId],
    );
    if (!withdrawn) {
      throw new InvalidStateError("Approval", "not_approved", `You have no active approval on plan ${planId} to withdraw.`);
    }
    await enqueuePlanEvent(tx, head.orgId, planId, "plan.approval_withdrawn", { withdrawnById: viewer.userId });
    return tx.approval.findUniqueOrThrow({ where: { id: withdrawn.id } });
  }, LOCKING_TX_OPTIONS);
  publishGateChange(events, head.orgId, [head.workspaceId], "approval_withdrawn");
  return approval;
}

// ---------------------------------------------------------------------------------------------
// Applying

/**
 * Seed 000, "Applying": re-evaluate and move planned → applying in one transaction.
 * Lock order (every writer follows it, so nothing deadlocks): the workspace row, then the plan
 * row, then the rows that make the approvers and the caller what they are (lockGateAuthzRows).
 * Only then are the inputs read, so the evaluation is of the state at the moment the apply
 * starts; the evaluation is stored with the plan.
 *
 * Who may start it: "Once the gate passes, anyone holding approve may start the apply"; and a
 * plan that needs no approval at all (baseline 0, nothing else asked) may be applied by anyone
 * who can see the workspace ("It defaults to 0, which means anyone who can see the workspace can
 * apply"). A gate that has not passed is GateNotPassedError, whoever asks.
 */
export async function applyPlan({ db, authz, events }: GateDeps, planId: string) {
  const viewer = (await authz.requireMember()) && authz.viewer;
  const head = await findPlanHeadFor({ db, authz }, planId, ["approve", "read"]);
  const stored = await db.prisma.$transaction(async (tx) => {
    const sql = txSql(tx);
    await lockWorkspaces(sql, [head.workspaceId]);
    await sql.query(`SELECT id FROM plans WHERE id = $1 FOR UPDATE`, [planId]);
    const locked = (await loadPlanHead(sql, viewer.orgId, planId))!;
    if (locked.archived) throw new InvalidStateError("Workspace", "archived", `Workspace ${locked.workspaceName} is archived.`);
    if (locked.status !== "planned") throw notPlanned(locked, "applied");
    const [busy] = await sql.query<{ id: string }>(
      `SELECT id FROM plans WHERE "workspaceId" = $1 AND status = 'applying' AND id <> $2 LIMIT 1`,
      [locked.workspaceId, planId],
    );
    if (busy) throw new ConflictError(`Plan ${busy.id} is already applying on ${locked.workspaceName}; wait for its result.`);
    const approvers = await sql.query<{ userId: string }>(`SELECT "userId" FROM approvals WHERE "planId" = $1 AND "withdrawnAt" IS NULL`, [planId]);
    await lockGateAuthzRows(sql, locked.orgId, locked.workspaceId, [...new Set([...approvers.map((a) => a.userId), viewer.userId])]);
    const version = await nextGateVersion(sql);
    const principals = principalSource(sql, locked.orgId);
    const caller = await principals(viewer.userId);
    const snapshot = await evaluateLive(sql, locked, version, principals);
    if (!snapshot.evaluation.passed) throw new GateNotPassedError(snapshot);
    const mayApprove = checkPermission(caller, targetOfHead(locked, "approve"));
    if (!mayApprove.allowed) {
      const mayRead = checkPermission(caller, targetOfHead(locked, "read")).allowed;
      if (!(mayRead && needsNoApproval(snapshot.evaluation))) throw new PermissionDeniedError(mayApprove.missing);
    }
    const record: StoredEvaluation = {
      version,
      evaluatedAt: snapshot.evaluatedAt,
      startedById: viewer.userId,
      evaluation: snapshot.evaluation,
    };
    await sql.query(
      `UPDATE plans SET status = 'applying', "applyEvaluation" = $2::jsonb, "applyStartedById" = $3,
              "applyStartedAt" = now(), "updatedAt" = now()
        WHERE id = $1`,
      [planId, JSON.stringify(record), viewer.userId],
    );
    await enqueuePlanEvent(tx, locked.orgId, planId, "plan.apply_started", { startedById: viewer.userId });
    return record;
  }, LOCKING_TX_OPTIONS);
  publishGateChange(events, head.orgId, [head.workspaceId], "apply_started");
  return { plan: await db.prisma.plan.findUniqueOrThrow({ where: { id: planId } }), stored };
}

export const ReportPlanResultInput = z.object({
  planId: z.string().min(1),
  outcome: z.enum(["applied", "failed"]),
  /** What the runner says about it (terraform's error, a link to the job): shown with the plan. */
  message: z.string().trim().max(4000, "A result message is at most 4,000 characters.").nullish(),
});

/** The runner reports how the apply went: (workspace, plan), applying → applied | failed. */
export async function reportPlanResult({ db, authz, events }: GateDeps, raw: unknown) {
  const input = parseInput(ReportPlanResultInput, raw);
  const head = await findPlanHeadFor({ db, authz }, input.planId, ["plan"]);
  const plan = await db.prisma.$transaction(async (tx) => {
    const sql = txSql(tx);
    const [locked] = await sql.query<{ status: string }>(`SELECT status::text AS status FROM plans WHERE id = $1 FOR UPDATE`, [head.id]);
    if (locked?.status !== "applying") {
      throw new InvalidStateError("Plan", locked?.status ?? "unknown", `Plan ${head.id} is ${locked?.status}; only an applying plan has a result to report.`);
    }
    const finished = await tx.plan.update({ where: { id: head.id }, data: { status: input.outcome, finishedAt: new Date(), resultMessage: input.message || null } });
    await enqueuePlanEvent(tx, head.orgId, head.id, "plan.apply_finished", { outcome: input.outcome, message: input.message || null, reportedById: authz.viewer.userId });
    return finished;
  }, LOCKING_TX_OPTIONS);
  publishGateChange(events, head.orgId, [head.workspaceId], `plan_${input.outcome}`);
  return plan;
}

/** planned → discarded, by (workspace, plan) or (workspace, approve). */
export async function discardPlan({ db, authz, events }: GateDeps, planId: string) {
  const head = await findPlanHeadFor({ db, authz }, planId, ["plan", "approve"]);
  const plan = await db.prisma.$transaction(async (tx) => {
    const sql = txSql(tx);
    const [locked] = await sql.query<{ status: string }>(`SELECT status::text AS status FROM plans WHERE id = $1 FOR UPDATE`, [head.id]);
    if (locked?.status !== "planned") throw notPlanned({ id: head.id, status: locked?.status ?? "unknown" }, "discarded");
    return tx.plan.update({ where: { id: head.id }, data: { status: "discarded", discardReason: "discarded" } });
  }, LOCKING_TX_OPTIONS);
  publishGateChange(events, head.orgId, [head.workspaceId], "plan_discarded");
  return plan;
}

// ---------------------------------------------------------------------------------------------
// The targeted plan picker

export const PickerInput = z.object({
  workspaceId: z.string().min(1),
  addresses: z
    .array(z.string().superRefine((a, ctx) => {
      const problem = resourceAddressProblem(a);
      if (problem) ctx.addIssue({ code: "custom", message: `An address ${problem}.` });
    }))
    .min(1, "Choose at least one resource.")
    .max(MAX_TARGETS, `At most ${MAX_TARGETS} targets.`),
});

/**
 * Seed 000, "A targeted plan": each chosen resource's count before the plan runs, using the
 * action the workspace's current plan has for it. The current plan is the newest untargeted
 * plan that is planned or applying; with none, no chosen resource has an action yet.
 */
export async function targetedPlanPicker(deps: Pick<GateDeps, "db" | "authz">, raw: unknown) {
  const input = parseInput(PickerInput, raw, "input");
  const workspace = await findReadableWorkspace(deps.db, deps.authz, input.workspaceId);
  const [current] = await deps.db.sql.query<{ id: string }>(
    `SELECT id FROM plans WHERE "workspaceId" = $1 AND targeted = false AND status IN ('planned', 'applying')
      ORDER BY "createdAt" DESC, id DESC LIMIT 1`,
    [workspace.id],
  );
  // With no current plan, the plan id matches no change: the policies still load.
  const gate = await loadPoliciesAndChanges(deps.db.sql, { id: current?.id ?? "", orgId: workspace.orgId, workspaceId: workspace.id });
  const result = pickTargets({
    baseline: workspace.requiredApprovals,
    policies: gate.policies,
    currentPlanChanges: gate.changes,
    chosen: input.addresses,
  });
  return { ...result, workspaceId: workspace.id, currentPlanId: current?.id ?? null };
}

/**
 * An integration recognizes a plan a client submitted as its own (a GitHub deployment whose
 * workflow submitted the plan with its run's URL): the plan page then says where it came from.
 * Only integrations call this; a client cannot claim an integration's origin.
 */
export async function setPlanOrigin(db: Database, planId: string, origin: Exclude<PlanOriginKind, (typeof CLIENT_PLAN_ORIGINS)[number]>): Promise<void> {
  await db.prisma.plan.update({ where: { id: planId }, data: { originKind: origin } });
}
