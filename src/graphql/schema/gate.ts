// The apply gate over GraphQL: the evaluation as typed objects (mirroring
// src/domain/gate/types.ts's GateEvaluation), the `gate` query, the GateNotPassedError, and the
// live subscriptions planGate and workspaceGates. What a dashboard and a chatops bot print.
//
// Users and roles an evaluation names are resolved from the snapshot's own `people` (loaded
// once with the evaluation), so delivering one evaluation to many subscribers runs no query per
// subscriber.

import { builder } from "../builder.js";
import { rowQuery } from "./row-query.js";
import { signedIn, type Context, type SignedInContext } from "../context.js";
import { GateNotPassedError } from "../../errors.js";
import {
  GATE_REASON_CODES,
  type BaselineEvaluation,
  type ChangeEvaluation,
  type GateEvaluation,
  type GateReason,
  type GoverningPolicy,
  type RequirementCount,
  type RequirementEvaluation,
  type ReservationEvaluation,
} from "../../domain/gate/index.js";
import { nextGateVersion, snapshotOf, type GateSnapshot, type People, type RoleRow, type UserRow } from "../../services/gate.js";
import { gateHub, type WorkspaceGates } from "../../services/gate-live.js";
import { findReadablePlanHead } from "../../services/plans.js";
import { findReadableWorkspace } from "../../services/workspaces.js";
import { deps, forgetDecidedScopes, memberEmail, notFoundAsNull, SIGNED_IN } from "../helpers.js";
import { RoleRef } from "./access.js";
import { ErrorInterface } from "./errors.js";
import { DIRECT_DELIVERY, type DirectDeliverable, type DirectWriter } from "../shared-events.js";

// ── Enums ─────────────────────────────────────────────────────────────────────────────

export const ChangeActionEnum = builder.enumType("ChangeAction", {
  description: "A resource change's action; Terraform's delete+create is replace.",
  values: {
    CREATE: { value: "create" },
    UPDATE: { value: "update" },
    DELETE: { value: "delete" },
    REPLACE: { value: "replace" },
  } as const,
});

export const PlanStatusEnum = builder.enumType("PlanStatus", {
  description: "planned → applying → applied | failed, or discarded.",
  values: {
    PLANNED: { value: "planned" },
    APPLYING: { value: "applying" },
    APPLIED: { value: "applied" },
    FAILED: { value: "failed" },
    DISCARDED: { value: "discarded" },
  } as const,
});

const GateSourceEnum = builder.enumType("GateSource", {
  values: {
    LIVE: { value: "live", description: "Evaluated now, from the inputs as they stand." },
    STORED: { value: "stored", description: "The evaluation that allowed the apply, stored with the plan." },
  } as const,
});

const GateReasonCodeEnum = builder.enumType("GateReasonCode", {
  values: Object.fromEntries(GATE_REASON_CODES.map((code) => [code.toUpperCase(), { value: code }])) as Record<
    Uppercase<(typeof GATE_REASON_CODES)[number]>,
    { value: (typeof GATE_REASON_CODES)[number] }
  >,
});

export const HolderKindEnum = builder.enumType("ReservationHolderKind", {
  values: { USER: { value: "user" }, ROLE: { value: "role" } } as const,
});

// ── People ────────────────────────────────────────────────────────────────────────────

/** A user id the snapshot could not name (never expected: users are never deleted). */
const unknownUser = (id: string): UserRow => ({ id, name: id, email: "", isServiceAccount: false, createdAt: new Date(0) });

const userOf = (people: People, id: string): UserRow => people.users.get(id) ?? unknownUser(id);
const usersOf = (people: People, ids: readonly string[]) => ids.map((id) => userOf(people, id));
const rolesOf = (people: People, ids: readonly string[]) =>
  ids.map((id) => people.roles.get(id)).filter((r): r is RoleRow => r !== undefined);

/**
 * A person on a gate: who can answer the plan (a role's current members, the eligible approvers).
 * Whoever may read the plan sees their id and name, the same people the reasons name in text;
 * the email is member data and stays behind (member, read) (or is the caller's own).
 */
const GatePersonRef = builder.objectRef<UserRow>("GatePerson").implement({
  description: "A person on a gate: id and name for whoever reads the plan; the email only with (member, read), or your own.",
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    isServiceAccount: t.exposeBoolean("isServiceAccount"),
    email: t.string({
      nullable: true,
      description: "Member data: null unless the caller holds (member, read) or is this person.",
      resolve: (u, _args, ctx) => memberEmail(ctx, u),
    }),
  }),
});

type In<T> = { v: T; p: People };
const wrap = <T>(p: People) => (v: T): In<T> => ({ v, p });

const countOf = (c: RequirementCount): number | null => (c === "auto" ? null : c);

// ── The evaluation ────────────────────────────────────────────────────────────────────

const GoverningPolicyRef = builder.objectRef<GoverningPolicy>("GoverningPolicy").implement({
  description: "A policy governing a change, with its count for the change's action.",
  fields: (t) => ({
    policyId: t.exposeID("policyId"),
    policyName: t.exposeString("policyName"),
    count: t.int({ nullable: true, description: "1, 2 or 3; null when Auto.", resolve: (g) => countOf(g.count) }),
    auto: t.boolean({ resolve: (g) => g.count === "auto" }),
  }),
});

const GateChangeRef = builder.objectRef<ChangeEvaluation>("GateChange").implement({
  description: "One resource change: its governing policies and effective count, or on the baseline.",
  fields: (t) => ({
    address: t.exposeString("address"),
    action: t.field({ type: ChangeActionEnum, resolve: (c) => c.action }),
    governedBy: t.field({ type: [GoverningPolicyRef], resolve: (c) => [...c.governedBy] }),
    effectiveCount: t.exposeInt("effectiveCount", { description: "The strictest explicit count, or the baseline when on it." }),
    onBaseline: t.exposeBoolean("onBaseline", { description: "No policy governs it, or all its policies say Auto." }),
  }),
});

const GateBaselineRef = builder.objectRef<In<BaselineEvaluation>>("GateBaseline").implement({
  fields: (t) => ({
    applies: t.boolean({ description: "At least one change is on the baseline (or the plan has none).", resolve: (b) => b.v.applies }),
    required: t.int({ resolve: (b) => b.v.required }),
    counted: t.int({ description: "Approvals by holders of approve: only these count toward the baseline.", resolve: (b) => b.v.counted }),
    countedApprovers: t.field({ type: [GatePersonRef], resolve: (b) => usersOf(b.p, b.v.countedUserIds) }),
    met: t.boolean({ resolve: (b) => b.v.met }),
    holdingChanges: t.stringList({ description: "The changes holding the plan on the baseline.", resolve: (b) => [...b.v.holdingChanges] }),
  }),
});

const MissingApproversRef = builder.objectRef<In<RequirementEvaluation["missingApprovers"]>>("GateMissingApprovers").implement({
  description: "An approver list still missing: any one of these would do.",
  fields: (t) => ({
    users: t.field({ type: [GatePersonRef], resolve: (m) => usersOf(m.p, m.v.userIds) }),
    roles: t.field({ type: [RoleRef], resolve: (m) => rolesOf(m.p, m.v.roleIds) }),
    eligibleUsers: t.field({
      type: [GatePersonRef],
      description:
        "Everyone whose approval would satisfy the list now: the users plus the roles' current members, by id and name " +
        "(the people the reasons name). Their emails stay member data (GatePerson.email).",
      resolve: (m) => usersOf(m.p, m.v.eligibleUserIds),
    }),
  }),
});

const GateRequirementRef = builder.objectRef<In<RequirementEvaluation>>("GateRequirement").implement({
  description: "One (policy, action) requirement governing at least one of the plan's changes.",
  fields: (t) => ({
    policyId: t.id({ resolve: (r) => r.v.policyId }),
    policyName: t.string({ resolve: (r) => r.v.policyName }),
    action: t.field({ type: ChangeActionEnum, resolve: (r) => r.v.action }),
    count: t.int({ nullable: true, description: "1, 2 or 3; null when Auto.", resolve: (r) => countOf(r.v.count) }),
    auto: t.boolean({ resolve: (r) => r.v.count === "auto" }),
    changeCount: t.int({ resolve: (r) => r.v.changeCount }),
    counted: t.int({ description: "Approvals counting toward this policy: holders of approve and its named approvers.", resolve: (r) => r.v.counted }),
    countedApprovers: t.field({ type: [GatePersonRef], resolve: (r) => usersOf(r.p, r.v.countedUserIds) }),
    countMet: t.boolean({ resolve: (r) => r.v.countMet }),
    approverListSatisfied: t.boolean({ resolve: (r) => r.v.approverListSatisfied }),
    namedApprovers: t.field({ type: [GatePersonRef], description: "Named approvers who approved.", resolve: (r) => usersOf(r.p, r.v.namedApproverIds) }),
    missingApprovers: t.field({ type: MissingApproversRef, nullable: true, resolve: (r) => (r.v.approverListSatisfied ? null : { v: r.v.missingApprovers, p: r.p }) }),
    satisfied: t.boolean({ resolve: (r) => r.v.satisfied }),
  }),
});

const GateReservationRef = builder.objectRef<In<ReservationEvaluation>>("GateReservation").implement({
  description: "An active reservation and whether it is answered.",
  fields: (t) => ({
    reservationId: t.id({ resolve: (r) => r.v.id }),
    holderKind: t.field({ type: HolderKindEnum, resolve: (r) => r.v.holder.kind }),
    holderUser: t.field({
      type: GatePersonRef,
      nullable: true,
      resolve: (r) => (r.v.holder.kind === "user" ? userOf(r.p, r.v.holder.userId) : null),
    }),
    holderRole: t.field({
      type: RoleRef,
      nullable: true,
      resolve: (r) => (r.v.holder.kind === "role" ? (r.p.roles.get(r.v.holder.roleId) ?? null) : null),
    }),
    placedBy: t.field({ type: GatePersonRef, resolve: (r) => userOf(r.p, r.v.placedByUserId) }),
    answered: t.boolean({ resolve: (r) => r.v.answered }),
    answeredBy: t.field({ type: GatePersonRef, nullable: true, resolve: (r) => (r.v.answeredByUserId ? userOf(r.p, r.v.answeredByUserId) : null) }),
    currentMembers: t.field({
      type: [GatePersonRef],
      nullable: true,
      description:
        "For a role's reservation: the role's members now (read at evaluation time), by id and name (the people the " +
        "reasons name); null for a user's reservation. Their emails stay member data (GatePerson.email).",
      resolve: (r) => (r.v.currentMembers ? usersOf(r.p, r.v.currentMembers) : null),
    }),
  }),
});

const GateReasonRef = builder.objectRef<GateReason>("GateReason").implement({
  description: "Why the gate has not passed, with a stable code.",
  fields: (t) => ({
    code: t.field({ type: GateReasonCodeEnum, resolve: (r) => r.code }),
    message: t.exposeString("message"),
    policyId: t.id({ nullable: true, resolve: (r) => r.policyId ?? null }),
    action: t.field({ type: ChangeActionEnum, nullable: true, resolve: (r) => r.action ?? null }),
    reservationId: t.id({ nullable: true, resolve: (r) => r.reservationId ?? null }),
  }),
});

const GateSelfApprovalRef = builder.objectRef<In<NonNullable<GateEvaluation["selfApproval"]>>>("GateSelfApproval").implement({
  description:
    "Separation of duties: whether the workspace prevents self-approval, and what that did to this plan. The submitter's " +
    "approval then counts toward no count or approver list; it still answers a reservation held by the submitter.",
  fields: (t) => ({
    prevented: t.boolean({ resolve: (s) => s.v.prevented }),
    submitter: t.field({ type: GatePersonRef, nullable: true, resolve: (s) => (s.v.submitterId ? userOf(s.p, s.v.submitterId) : null) }),
    submitterApproved: t.boolean({ resolve: (s) => s.v.submitterApproved }),
    answersOwnReservation: t.boolean({ resolve: (s) => s.v.answersOwnReservation }),
  }),
});

export const GateEvaluationRef = builder.objectRef<In<GateEvaluation>>("GateEvaluation").implement({
  description: "The whole explanation: per change, per requirement, the baseline, the reservations, the reasons.",
  fields: (t) => ({
    passed: t.boolean({ description: "countMet and reservationsAnswered.", resolve: (e) => e.v.passed }),
    countMet: t.boolean({ resolve: (e) => e.v.countMet }),
    reservationsAnswered: t.boolean({ resolve: (e) => e.v.reservationsAnswered }),
    baseline: t.field({ type: GateBaselineRef, resolve: (e) => ({ v: e.v.baseline, p: e.p }) }),
    changeCount: t.int({ resolve: (e) => e.v.changes.length }),
    changes: t.field({
      type: [GateChangeRef],
      description: "Sorted by address. `onlyOnBaseline` keeps the changes holding the plan on the baseline.",
      args: { onlyOnBaseline: t.arg.boolean({ defaultValue: false }), first: t.arg.int() },
      resolve: (e, args) => {
        const list = args.onlyOnBaseline ? e.v.changes.filter((c) => c.onBaseline) : e.v.changes;
        return args.first != null ? list.slice(0, Math.max(0, args.first)) : [...list];
      },
    }),
    requirements: t.field({ type: [GateRequirementRef], resolve: (e) => e.v.requirements.map(wrap<RequirementEvaluation>(e.p)) }),
    reservations: t.field({ type: [GateReservationRef], resolve: (e) => e.v.reservations.map(wrap<ReservationEvaluation>(e.p)) }),
    approvalsCounted: t.int({ description: "The count so far: distinct users whose approval counts for anything.", resolve: (e) => e.v.approvalsCounted }),
    countedApprovers: t.field({ type: [GatePersonRef], resolve: (e) => usersOf(e.p, e.v.countedApproverIds) }),
    ignoredApprovers: t.field({
      type: [GatePersonRef],
      description:
        "Approved, but now neither hold approve nor are named on a requirement of this plan, or submitted it on a workspace that prevents self-approval.",
      resolve: (e) => usersOf(e.p, e.v.ignoredApproverIds),
    }),
    reasons: t.field({ type: [GateReasonRef], resolve: (e) => [...e.v.reasons] }),
    selfApproval: t.field({
      type: GateSelfApprovalRef,
      description: "The self-approval rule as it applied (not prevented on evaluations stored before the rule existed).",
      resolve: (e) => ({ v: e.v.selfApproval ?? { prevented: false, submitterId: null, submitterApproved: false, answersOwnReservation: false }, p: e.p }),
    }),
    summary: t.string({
      description: "One line for a chatops bot.",
      resolve: (e) => (e.v.passed ? `Gate passed with ${e.v.approvalsCounted} counted approval(s).` : e.v.reasons.map((r) => r.message).join(" ")),
    }),
  }),
});

export const GateStatusRef = builder.objectRef<GateSnapshot>("GateStatus").implement({
  description: "A plan's gate at one version: what a plan page shows and planGate pushes.",
  fields: (t) => ({
    planId: t.exposeID("planId"),
    workspaceId: t.exposeID("workspaceId"),
    workspaceName: t.exposeString("workspaceName"),
    planStatus: t.field({ type: PlanStatusEnum, resolve: (s) => s.planStatus }),
    version: t.float({
      description: "A safe integer from one sequence shared by every server: larger is newer; drop a message older than one you have.",
      resolve: (s) => s.version,
    }),
    source: t.field({ type: GateSourceEnum, resolve: (s) => s.source }),
    evaluatedAt: t.field({ type: "DateTime", resolve: (s) => s.evaluatedAt }),
    evaluatedVersion: t.float({ description: "The version the evaluation was taken at (older than `version` for a stored one).", resolve: (s) => s.evaluatedVersion }),
    passed: t.boolean({ resolve: (s) => s.evaluation.passed }),
    evaluation: t.field({ type: GateEvaluationRef, resolve: (s) => ({ v: s.evaluation, p: s.people }) }),
    plan: t.prismaField({
      type: "Plan",
      description: "The plan itself (one query per message; a dashboard usually needs planStatus only).",
      resolve: (query, s, _args, ctx) => ctx.db.prisma.plan.findUniqueOrThrow({ ...rowQuery(query), where: { id: s.planId } }),
    }),
  }),
});

const WorkspaceGatesRef = builder.objectRef<WorkspaceGates>("WorkspaceGates").implement({
  description: "Every open plan's gate on a workspace, at one version.",
  fields: (t) => ({
    workspaceId: t.exposeID("workspaceId"),
    workspaceName: t.exposeString("workspaceName"),
    version: t.float({ resolve: (w) => w.version }),
    plans: t.field({ type: [GateStatusRef], resolve: (w) => w.plans }),
  }),
});

builder.objectType(GateNotPassedError, {
  name: "GateNotPassedError",
  description: "The apply gate has not passed; `gate` is the evaluation that said so.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof GateNotPassedError,
  fields: (t) => ({
    reasons: t.field({ type: [GateReasonRef], resolve: (e) => [...e.gate.evaluation.reasons] }),
    gate: t.field({ type: GateStatusRef, resolve: (e) => e.gate as GateSnapshot }),
  }),
});

// ── Query and subscriptions ───────────────────────────────────────────────────────────


/** The gate of one plan as the plan page shows it: stored once its apply started, else live. */
export async function gateOf(ctx: Context, planId: string): Promise<GateSnapshot> {
  const head = await findReadablePlanHead(deps(signedIn(ctx)), planId);
  const version = await nextGateVersion(ctx.db.sql);
  return snapshotOf(ctx.db.sql, head, version);
}

builder.queryField("gate", (t) =>
  t.withAuth(SIGNED_IN).field({
    type: GateStatusRef,
    nullable: true,
    description: "A plan's gate with its whole explanation; null when the plan is not visible.",
    args: { planId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => gateOf(ctx, String(args.planId)).catch(notFoundAsNull),
  }),
);

/**
 * An async iterator that runs `start` on its first next() (as an async generator's body would:
 * a failure rejects that next()) and then hands every next() straight to the hub's queue, with
 * no generator in between: one fewer chain of promise hops per message and subscriber. It takes
 * a direct writer (shared-events.ts) before it starts and hands it to the hub with the queue.
 *
 * A class, not closures: one lives per subscriber for as long as it subscribes, and its methods
 * are shared (arrows kept in properties cost a function, a context and, under tsx's keepNames,
 * a property array each, per subscriber: docs/benchmarks.md, "What a subscriber costs").
 */
class DeferredStream<T> implements AsyncIterableIterator<T>, DirectDeliverable {
  private start: ((direct?: DirectWriter) => Promise<AsyncIterator<T>>) | null;
  private inner: Promise<AsyncIterator<T>> | null = null;
  /** The started iterator, once `inner` has resolved: later next() calls go to it directly. */
  private started: AsyncIterator<T> | null = null;
  private direct: DirectWriter | undefined;
  private finished = false;

  constructor(start: (direct?: DirectWriter) => Promise<AsyncIterator<T>>) {
    this.start = start;
  }

  next(): Promise<IteratorResult<T>> {
    if (this.finished) return Promise.resolve({ value: undefined, done: true });
    if (this.started) return this.started.next();
    if (!this.inner) {
      this.inner = this.start!(this.direct);
      // Started once: what it closed over (the context, the writer) is the hub's to keep now.
      this.start = null;
      this.direct = undefined;
    }
    return this.inner.then(
      (it) => {
        this.started = it;
        return it.next();
      },
      (error) => {
        this.finished = true;
        throw error;
      },
    );
  }

  async return(): Promise<IteratorResult<T>> {
    this.finished = true;
    const it = this.inner ? await this.inner.catch(() => null) : null;
    await it?.return?.();
    return { value: undefined, done: true };
  }

  /** Once started, the hub's queue maps the message itself (shared-events.ts); null before. */
  nextMapped<R>(mapper: { mapMessage(message: unknown): IteratorResult<R> | Promise<IteratorResult<R>> }): Promise<IteratorResult<R>> | null {
    const started = this.started as (AsyncIterator<T> & Pick<DirectDeliverable, "nextMapped">) | null;
    return !this.finished && started?.nextMapped ? started.nextMapped(mapper) : null;
  }

  [DIRECT_DELIVERY](writer: DirectWriter): void {
    if (!this.inner) this.direct = writer;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

function deferredStream<T>(start: (direct?: DirectWriter) => Promise<AsyncIterator<T>>): AsyncIterableIterator<T> & DirectDeliverable {
  return new DeferredStream(start);
}

function planGateStream(ctx: SignedInContext, planId: string): AsyncIterableIterator<GateSnapshot> {
  // Authorized on subscribe; the hub authorizes again on every delivery.
  return deferredStream(async (direct) => {
    const hub = gateHub(ctx.db, ctx.events);
    // The head read is shared with the subscribers to the same plan asking in the same turn.
    const head = await findReadablePlanHead(deps(ctx), planId, (orgId, id) => hub.planHead(orgId, id));
    const queue = await hub.watchPlan(ctx.viewer, head, ctx.authz, direct);
    forgetDecidedScopes(ctx);
    return queue;
  });
}

function workspaceGatesStream(ctx: SignedInContext, workspaceId: string): AsyncIterableIterator<WorkspaceGates> {
  return deferredStream(async (direct) => {
    const workspace = await findReadableWorkspace(ctx.db, ctx.authz, workspaceId);
    const queue = await gateHub(ctx.db, ctx.events).watchWorkspace(
      ctx.viewer,
      { id: workspace.id, orgId: workspace.orgId, name: workspace.name, authzGroups: workspace.stack.authzGroups },
      ctx.authz,
      direct,
    );
    forgetDecidedScopes(ctx);
    return queue;
  });
}

builder.subscriptionFields((t) => ({
  planGate: t.withAuth(SIGNED_IN).field({
    type: GateStatusRef,
    description:
      "The plan's gate, pushed on every change that can move it (approvals, reservations, role membership, policies, " +
      "the baseline, the plan's state). The first message is the current status; every message carries a version. " +
      "Completes after the plan reaches applied, failed or discarded, or when the caller may no longer read it.",
    args: { planId: t.arg.id({ required: true }) },
    subscribe: (_root, args, ctx) => planGateStream(ctx, String(args.planId)),
    resolve: (snapshot) => snapshot,
  }),
  workspaceGates: t.withAuth(SIGNED_IN).field({
    type: WorkspaceGatesRef,
    description: "Every open plan's gate on a workspace, pushed like planGate. The first message is the current status.",
    args: { workspaceId: t.arg.id({ required: true }) },
    subscribe: (_root, args, ctx) => workspaceGatesStream(ctx, String(args.workspaceId)),
    resolve: (message) => message,
  }),
}));
