// Plans over GraphQL: the plan page (one query), submission by a runner, approvals, applying
// through the gate, the runner's result, discarding, and the targeted plan picker. Rules in
// src/services/plans.ts; the gate itself in src/graphql/schema/gate.ts.

import { builder } from "../builder.js";
import { rowQuery } from "./row-query.js";
import { GateNotPassedError } from "../../errors.js";
import {
  MAX_ATTRIBUTES_PER_RESOURCE,
  MAX_PLAN_DIFF_BYTES,
  readAttribute,
  storedPlanDiffOf,
  type AttributeDiff,
  type PickedPolicy,
  type PickedResource,
  type PickTargetsResult,
  type StoredPlanDiff,
  type StoredResourceDiff,
} from "../../domain/gate/index.js";
import { snapshotOf, storedEvaluationOf, type GateSnapshot, type PlanHead } from "../../services/gate.js";
import {
  applyPlan,
  approvePlan,
  discardPlan,
  withdrawApproval,
  findReadablePlanHead,
  reportPlanResult,
  submitPlan,
  targetedPlanPicker,
} from "../../services/plans.js";
import { ChangeActionEnum, GateStatusRef, PlanStatusEnum } from "./gate.js";
import { inReadableWorkspace } from "./workspace.js";
import { ERRORS, notFoundAsNull, deps, loadUser, SIGNED_IN, userNamed } from "../helpers.js";
import { UserRef } from "./organization.js";
import type { Context } from "../context.js";
import type { PlanOriginKind } from "../../generated/prisma/client.js";
import { clean } from "./input.js";

builder.prismaObject("ResourceChange", {
  description: "A resource change the plan proposed, as stored with it.",
  fields: (t) => ({
    address: t.exposeString("address"),
    action: t.field({ type: ChangeActionEnum, resolve: (c) => c.action }),
  }),
});

export const PlanApprovalRef = builder.prismaObject("Approval", {
  name: "PlanApproval",
  description:
    "An approval on a plan: the organization user who gave it and when. Never deleted: a withdrawn approval stays, " +
    "marked with who withdrew it and when, and counts for nothing.",
  fields: (t) => ({
    id: t.exposeID("id"),
    user: t.field({ type: UserRef, resolve: (a, _args, ctx) => userNamed(ctx, a.userId) }),
    approvedAt: t.expose("createdAt", { type: "DateTime" }),
    comment: t.exposeString("comment", { nullable: true, description: "What the approver said with it (at most 2,000 characters)." }),
    withdrawnAt: t.expose("withdrawnAt", {
      type: "DateTime",
      nullable: true,
      description: "When the approver withdrew it; a withdrawn approval is kept and counts for nothing.",
    }),
    withdrawnBy: t.field({
      type: UserRef,
      nullable: true,
      description: "Who withdrew it (the approver themselves).",
      resolve: (a, _args, ctx) => userNamed(ctx, a.withdrawnById),
    }),
  }),
});

// ── What changes ──────────────────────────────────────────────────────────────────────

interface ChangeSummary {
  add: number;
  change: number;
  destroy: number;
  replace: number;
}

function summarize(actions: readonly string[]): ChangeSummary {
  const s: ChangeSummary = { add: 0, change: 0, destroy: 0, replace: 0 };
  for (const a of actions) {
    if (a === "create") s.add++;
    else if (a === "update") s.change++;
    else if (a === "delete") s.destroy++;
    else if (a === "replace") {
      s.replace++;
      s.add++;
      s.destroy++;
    }
  }
  return s;
}

const PlanChangeSummaryRef = builder.objectRef<ChangeSummary>("PlanChangeSummary").implement({
  description: "Plan: <add> to add, <change> to change, <destroy> to destroy, as Terraform counts them.",
  fields: (t) => ({
    add: t.exposeInt("add", { description: "Creates, and the create half of each replace." }),
    change: t.exposeInt("change", { description: "In-place updates." }),
    destroy: t.exposeInt("destroy", { description: "Deletes, and the delete half of each replace." }),
    replace: t.exposeInt("replace", { description: "Replacements (each also counted in add and destroy)." }),
  }),
});

const PlanAttributeDiffRef = builder.objectRef<AttributeDiff>("PlanAttributeDiff").implement({
  description:
    "One changed attribute: before → after as JSON text. A sensitive value is never shown (null, with the flag set, as Terraform " +
    "prints \"(sensitive value)\"); a value known only after apply has no after (afterUnknown).",
  fields: (t) => ({
    path: t.exposeString("path", { description: "tags.Name, ingress[0].from_port, tags[\"kubernetes.io/role\"]." }),
    before: t.exposeString("before", { nullable: true, description: "JSON text; null when absent, null or sensitive." }),
    after: t.exposeString("after", { nullable: true, description: "JSON text; null when absent, null, sensitive or unknown." }),
    beforeSensitive: t.exposeBoolean("beforeSensitive"),
    afterSensitive: t.exposeBoolean("afterSensitive"),
    afterUnknown: t.exposeBoolean("afterUnknown", { description: "Known only after apply." }),
  }),
});

const PlanResourceDiffRef = builder.objectRef<StoredResourceDiff>("PlanResourceDiff").implement({
  fields: (t) => ({
    address: t.exposeString("address"),
    action: t.field({ type: ChangeActionEnum, resolve: (r) => r.action }),
    actions: t.exposeStringList("actions", { description: "Terraform's change.actions, as submitted." }),
    deposed: t.string({ nullable: true, description: "The deposed object's key, for a change to a deposed object.", resolve: (r) => r.deposed ?? null }),
    attributes: t.field({ type: [PlanAttributeDiffRef], description: "Changed attributes only, by path.", resolve: (r) => r.attributes.map(readAttribute) }),
    attributesClipped: t.int({ description: `Changed attributes left out past ${MAX_ATTRIBUTES_PER_RESOURCE} per resource.`, resolve: (r) => r.clipped }),
  }),
});

const PlanDiffRef = builder.objectRef<{ stored: StoredPlanDiff; bytes: number }>("PlanDiff").implement({
  description: `The stored attribute diff (at most ${MAX_PLAN_DIFF_BYTES} bytes of JSON; sensitive values masked before it was stored).`,
  fields: (t) => ({
    resourceCount: t.int({ description: "Resource changes kept in the diff.", resolve: (d) => d.stored.resources.length }),
    truncated: t.int({ description: "Resource changes left out to keep the diff within its bound.", resolve: (d) => d.stored.truncated }),
    bytes: t.exposeInt("bytes"),
    resources: t.field({
      type: [PlanResourceDiffRef],
      description: "By address. `address` picks one; `first` (at most 500, default 100) and `offset` page.",
      args: { address: t.arg.string(), first: t.arg.int(), offset: t.arg.int() },
      resolve: (d, args) => {
        const list = args.address != null ? d.stored.resources.filter((r) => r.address === args.address) : d.stored.resources;
        const offset = Math.max(args.offset ?? 0, 0);
        const first = Math.min(Math.max(args.first ?? 100, 0), 500);
        return list.slice(offset, offset + first);
      },
    }),
  }),
});

const PlanOriginKindEnum = builder.enumType("PlanOriginKind", {
  description: "Where a plan came from.",
  values: {
    API: { value: "api", description: "Submitted through the API." },
    CLI: { value: "cli", description: "Submitted with `countersign plan submit`." },
    HCP_TERRAFORM_RUN: { value: "hcp_terraform_run", description: "Submitted by an HCP Terraform / Terraform Enterprise run task." },
    GITHUB_DEPLOYMENT: { value: "github_deployment", description: "The plan of a GitHub deployment held by Countersign's deployment protection rule." },
  } as const,
});

const PlanSubmitOriginEnum = builder.enumType("PlanSubmitOrigin", {
  description: "The client submitting a plan. The integration kinds of PlanOriginKind are set by the integrations alone.",
  values: { API: { value: "api" }, CLI: { value: "cli" } } as const,
});

const PlanOriginRef = builder.objectRef<{ kind: PlanOriginKind; url: string | null }>("PlanOrigin").implement({
  description: "Where a plan came from, with a link to it (the CI run, the HCP Terraform run, the GitHub Actions run) when known.",
  fields: (t) => ({
    kind: t.field({ type: PlanOriginKindEnum, resolve: (o) => o.kind }),
    url: t.exposeString("url", { nullable: true, description: "An http(s) URL without credentials; null when the submitter gave none." }),
  }),
});

export const PlanRef = builder.prismaObject("Plan", {
  description:
    "A Terraform plan on a workspace, with its resource changes and approvals. Never deleted. Read as part of its " +
    "workspace: needs (workspace, read) there.",
  runScopesOnType: true,
  authScopes: inReadableWorkspace,
  fields: (t) => ({
    id: t.exposeID("id"),
    workspace: t.relation("workspace"),
    status: t.field({ type: PlanStatusEnum, resolve: (p) => p.status }),
    targeted: t.exposeBoolean("targeted"),
    targets: t.exposeStringList("targets"),
    submittedBy: t.field({ type: UserRef, resolve: (p, _args, ctx) => userNamed(ctx, p.submittedById) }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    discardReason: t.exposeString("discardReason", {
      nullable: true,
      description: "superseded (by a newer plan), discarded (by a person) or workspace_archived.",
    }),
    supersededBy: t.relation("supersededBy", { nullable: true }),
    changeCount: t.relationCount("changes"),
    changes: t.relation("changes", {
      description: "The resource changes, by address.",
      args: { first: t.arg.int(), offset: t.arg.int() },
      query: (args) => ({
        orderBy: { address: "asc" },
        ...(args.first != null ? { take: Math.min(Math.max(args.first, 0), 10_000) } : {}),
        ...(args.offset != null ? { skip: Math.max(args.offset, 0) } : {}),
      }),
    }),
    approvals: t.relation("approvals", {
      description: "Every approval given, withdrawn ones included (marked by withdrawnAt), oldest first.",
      query: { orderBy: [{ createdAt: "asc" }, { id: "asc" }] },
    }),
    applyStartedBy: t.relation("applyStartedBy", { nullable: true }),
    applyStartedAt: t.expose("applyStartedAt", { type: "DateTime", nullable: true }),
    finishedAt: t.expose("finishedAt", { type: "DateTime", nullable: true }),
    resultMessage: t.exposeString("resultMessage", { nullable: true, description: "What the runner reported with an applied or failed result, if anything." }),
    runUrl: t.exposeString("runUrl", {
      nullable: true,
      description: "The CI run that produced the plan (plan submit --run-url): an http(s) URL, at most 2,048 characters.",
    }),
    origin: t.field({
      type: PlanOriginRef,
      description: "Where the plan came from (API, CLI, an HCP Terraform run, a GitHub deployment) and its link.",
      select: { originKind: true, runUrl: true },
      resolve: (p) => ({ kind: p.originKind, url: p.runUrl }),
    }),
    changeSummary: t.field({
      type: PlanChangeSummaryRef,
      description: "Terraform's line: to add, to change, to destroy (a replace counts as one add and one destroy).",
      select: { changes: { select: { action: true } } },
      resolve: (p) => summarize(p.changes.map((c) => c.action)),
    }),
    diff: t.field({
      type: PlanDiffRef,
      nullable: true,
      description:
        "Per resource, the attribute diff of the `terraform show -json` the plan was submitted as, sensitive values masked as " +
        "Terraform masks them. Null for a plan submitted as a list of changes.",
      select: { diff: { select: { diff: true, bytes: true } } },
      resolve: (p) => {
        const stored = p.diff ? storedPlanDiffOf(p.diff.diff) : null;
        return stored && p.diff ? { stored, bytes: p.diff.bytes } : null;
      },
    }),
    storedGate: t.field({
      type: GateStatusRef,
      nullable: true,
      description:
        "The evaluation that allowed the apply, stored with the plan: what was required, policies edited later notwithstanding.",
      // The head comes from the plan row and its workspace, selected with the list's own query
      // (no per-plan head read under Workspace.plans / openPlans).
      select: { workspace: { select: { name: true, requiredApprovals: true, archivedAt: true, preventSelfApproval: true, stack: { select: { authzGroups: true } } } } },
      resolve: async (p, _a, ctx): Promise<GateSnapshot | null> => {
        const stored = storedEvaluationOf(p.applyEvaluation);
        if (!stored) return null;
        const head: PlanHead = {
          id: p.id,
          orgId: p.orgId,
          workspaceId: p.workspaceId,
          status: p.status,
          targeted: p.targeted,
          targets: p.targets,
          applyEvaluation: p.applyEvaluation,
          workspaceName: p.workspace.name,
          requiredApprovals: p.workspace.requiredApprovals,
          archived: p.workspace.archivedAt !== null,
          authzGroups: p.workspace.stack.authzGroups,
          submittedById: p.submittedById,
          preventSelfApproval: p.workspace.preventSelfApproval,
        };
        return snapshotOf(ctx.db.sql, head, stored.version);
      },
    }),
  }),
});

/** A plan a mutation wrote, read back with what the Plan type's rule needs. */
async function planRow(ctx: Context, written: Promise<{ id: string }>) {
  const { id } = await written;
  return ctx.db.prisma.plan.findUniqueOrThrow({ where: { id } });
}

// ── The targeted plan picker ──────────────────────────────────────────────────────────

const PickedPolicyRef = builder.objectRef<PickedPolicy>("PickedPolicy").implement({
  fields: (t) => ({
    policyId: t.exposeID("policyId"),
    policyName: t.exposeString("policyName"),
    count: t.int({ nullable: true, description: "1, 2 or 3; null when Auto or when the resource has no action.", resolve: (p) => (p.count === "auto" || p.count === null ? null : p.count) }),
    auto: t.boolean({ resolve: (p) => p.count === "auto" }),
  }),
});

const PickedResourceRef = builder.objectRef<PickedResource>("PickedResource").implement({
  fields: (t) => ({
    address: t.exposeString("address"),
    action: t.field({
      type: ChangeActionEnum,
      nullable: true,
      description: "The action the workspace's current plan has for it; null when the current plan does not change it.",
      resolve: (r) => r.action,
    }),
    governedBy: t.field({ type: [PickedPolicyRef], resolve: (r) => [...r.governedBy] }),
    count: t.int({ nullable: true, resolve: (r) => r.count }),
    onBaseline: t.exposeBoolean("onBaseline"),
    selectedBy: t.exposeStringList("selectedBy"),
  }),
});

const PickerResultRef = builder
  .objectRef<PickTargetsResult & { workspaceId: string; currentPlanId: string | null }>("TargetedPlanPick")
  .implement({
    description: "Each chosen resource's count before a targeted plan runs, and the total it would need.",
    fields: (t) => ({
      workspaceId: t.exposeID("workspaceId"),
      currentPlanId: t.exposeID("currentPlanId", { nullable: true, description: "The plan whose actions were used." }),
      resources: t.field({ type: [PickedResourceRef], resolve: (r) => [...r.resources] }),
      total: t.exposeInt("total", { description: "The minimum approvals the targeted plan would need, as far as the current plan shows." }),
      baselineApplies: t.exposeBoolean("baselineApplies"),
      holdingChanges: t.exposeStringList("holdingChanges"),
      notes: t.exposeStringList("notes"),
    }),
  });

// ── Queries ───────────────────────────────────────────────────────────────────────────

builder.queryFields((t) => ({
  plan: t.withAuth(SIGNED_IN).prismaField({
    type: "Plan",
    nullable: true,
    description: "A plan the caller may read (the plan page: one query, with its workspace's reservations).",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const head = await findReadablePlanHead(deps(ctx), String(args.id)).catch(notFoundAsNull);
      return head ? ctx.db.prisma.plan.findUnique({ ...rowQuery(query), where: { id: head.id } }) : null;
    },
  }),
  targetedPlanPicker: t.withAuth(SIGNED_IN).field({
    type: PickerResultRef,
    description:
      "Before a targeted plan runs: each chosen resource's count using the action the workspace's current plan has for " +
      "it, and the total. The total can rise once the plan shows what it really changes.",
    args: { workspaceId: t.arg.id({ required: true }), addresses: t.arg.stringList({ required: true }) },
    resolve: (_root, args, ctx) => targetedPlanPicker(deps(ctx), { workspaceId: String(args.workspaceId), addresses: args.addresses }),
  }),
}));

// ── Mutations ─────────────────────────────────────────────────────────────────────────

const PlanChangeInputRef = builder.inputType("PlanChangeInput", {
  fields: (t) => ({
    address: t.string({ required: true }),
    action: t.field({ type: ChangeActionEnum, required: true }),
  }),
});

const SubmitPlanInputRef = builder.inputType("SubmitPlanInput", {
  fields: (t) => ({
    workspaceId: t.id({ required: true }),
    plan: t.field({
      type: "JSON",
      description:
        "The output of `terraform show -json <planfile>` (as JSON or as its text), or a list of { address, action }. " +
        "No-op and read changes are ignored; delete+create is replace.",
    }),
    changes: t.field({ type: [PlanChangeInputRef], description: "The plain list, typed (instead of plan)." }),
    targeted: t.boolean({ description: "Defaults to whether targets were given." }),
    targets: t.stringList({ description: "The -target addresses." }),
    runUrl: t.string({ description: "The CI run that produced the plan: an http(s) URL without credentials, at most 2,048 characters." }),
    origin: t.field({ type: PlanSubmitOriginEnum, description: "The submitting client: API (the default) or CLI." }),
  }),
});

const PlanOutcomeEnum = builder.enumType("PlanOutcome", {
  values: { APPLIED: { value: "applied" }, FAILED: { value: "failed" } } as const,
});

const ReportPlanResultInputRef = builder.inputType("ReportPlanResultInput", {
  fields: (t) => ({
    planId: t.id({ required: true }),
    outcome: t.field({ type: PlanOutcomeEnum, required: true }),
    message: t.string({ description: "What the runner says about the apply (at most 4,000 characters): terraform's error, a link to the job." }),
  }),
});

builder.mutationFields((t) => ({
  submitPlan: t.withAuth(SIGNED_IN).field({
    type: PlanRef,
    errors: ERRORS,
    description:
      "A runner or CI identity submits a plan: needs (workspace, plan). Bad Terraform JSON is a ValidationError naming " +
      "each path, and nothing is stored. Supersedes the workspace's older planned plan.",
    args: { input: t.arg({ type: SubmitPlanInputRef, required: true }) },
    resolve: (_root, args, ctx) => {
      const { plan, changes, ...rest } = args.input;
      return planRow(
        ctx,
        submitPlan(deps(ctx), {
          ...clean(rest),
          workspaceId: String(args.input.workspaceId),
          ...(plan != null ? { plan } : {}),
          ...(changes != null ? { changes: changes.map((c) => ({ address: c.address, action: c.action })) } : {}),
        }),
      );
    },
  }),
  approvePlan: t.withAuth(SIGNED_IN).field({
    type: PlanApprovalRef,
    errors: ERRORS,
    description:
      "Approve a planned plan: needs (workspace, approve), or being a named approver on a resource policy governing it. " +
      "Approving twice returns the same approval; approving after withdrawing adds a new one. An optional comment (at most " +
      "2,000 characters) is kept with the approval.",
    args: { planId: t.arg.id({ required: true }), comment: t.arg.string({ description: "What the approver says (at most 2,000 characters)." }) },
    resolve: (_root, args, ctx) => approvePlan(deps(ctx), String(args.planId), args.comment),
  }),
  withdrawApproval: t.withAuth(SIGNED_IN).field({
    type: PlanApprovalRef,
    errors: ERRORS,
    description:
      "Withdraw your own approval of a planned plan. The approval is kept, marked withdrawn, and counts for nothing; the " +
      "gate is re-evaluated. InvalidStateError when the plan is not planned or you have no active approval on it.",
    args: { planId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => withdrawApproval(deps(ctx), String(args.planId)),
  }),
  applyPlan: t.withAuth(SIGNED_IN).field({
    type: PlanRef,
    errors: { types: [...ERRORS.types, GateNotPassedError] },
    description:
      "Start the apply: re-evaluates the gate and moves planned → applying in one transaction with the plan locked. " +
      "Needs (workspace, approve). GateNotPassedError carries the evaluation. The evaluation is stored with the plan.",
    args: { planId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => planRow(ctx, applyPlan(deps(ctx), String(args.planId)).then((r) => r.plan)),
  }),
  reportPlanResult: t.withAuth(SIGNED_IN).field({
    type: PlanRef,
    errors: ERRORS,
    description: "The runner reports the apply's outcome: needs (workspace, plan); applying → applied | failed.",
    args: { input: t.arg({ type: ReportPlanResultInputRef, required: true }) },
    resolve: (_root, args, ctx) =>
      planRow(ctx, reportPlanResult(deps(ctx), { planId: String(args.input.planId), outcome: args.input.outcome, message: args.input.message })),
  }),
  discardPlan: t.withAuth(SIGNED_IN).field({
    type: PlanRef,
    errors: ERRORS,
    description: "planned → discarded: needs (workspace, plan) or (workspace, approve). The plan is kept.",
    args: { planId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => planRow(ctx, discardPlan(deps(ctx), String(args.planId))),
  }),
}));
