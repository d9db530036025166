import DataLoader from "dataloader";
import { builder } from "../builder.js";
import { type Context, signedIn, viewerOf, type SignedInContext } from "../context.js";
import { perRequest } from "../request-loaders.js";
import { COMMON_ERRORS } from "./errors.js";
import { InvalidStateError } from "../../errors.js";
import type { ApprovalRequest, DeliveryJob } from "../../generated/prisma/client.js";
import { providerOfTool } from "../../gateway/store.js";
import { reviewerEligibility, type MatchedRule, type QuorumResult, type RuleSnapshot } from "../../domain/approvals/policy.js";
import { currentQuorums, resolvedSnapshots } from "../../services/approvals/quorum.js";
import { approvalOutcome, decidedRequests, findReadableRequest, INBOX_SCAN_LIMIT, inboxRequests, readableRequestOrNull, viewerMayDecide, voteOnApprovalRequest } from "../../services/approvals/requests.js";
import { workspaceInViewerOrg } from "../../services/approvals/workspaces.js";
import { workspaceFamilyTarget } from "../../authz/targets.js";
import { mergeEvents } from "./approvals-events.js";
import { readableInWorkspace, ruleWorkspace } from "./workspace-rule.js";
// The other held-tool-call modules register themselves through this one import.
import "./approvals-gateway.js";
import "./approvals-policies.js";
import { SIGNED_IN } from "../helpers.js";
import { keysetConnection } from "../keyset.js";
import { afterNewestFirst, NEWEST_FIRST, newestFirstKeyOf, parseNewestFirstKey } from "../../services/paging.js";

/**
 * Held tool calls for reviewers (seed 003, "Voting" and "Boundaries"). The request type is
 * CLOSED and credential-free: metadata, decision history, the amount_usd summary — never the
 * arguments, the idempotency key, the payload (snapshot, hashes) or any token; a test walks
 * every field reachable from ApprovalRequest and proves it. Nothing here links to a type
 * another module may grow (User, Workspace): reviewers are shown as their own small type.
 */

// ─── per-request loaders (cleared on every subscription event) ─────────────────────────────

type Loaders = {
  votes: DataLoader<string, VoteRow[]>;
  delivery: DataLoader<string, DeliveryJob | null>;
  keyName: DataLoader<string, string | null>;
  connection: DataLoader<string, { name: string; provider: string } | null>;
  quorum: DataLoader<ApprovalRequest, QuorumResult, string>;
  /** The request's rules as a decision reads them now (a deny rule whose role is gone excludes everyone). */
  snapshot: DataLoader<ApprovalRequest, RuleSnapshot, string>;
};

type VoteRow = { id: string; requestId: string; userId: string; decision: string; comment: string | null; createdAt: Date; user: { id: string; name: string } };

const requestLoaders = perRequest((ctx: Context): Loaders => {
  const prisma = ctx.db.prisma;
  const byId = <T extends { id: string }>(ids: readonly string[], rows: T[]) => {
    const map = new Map(rows.map((r) => [r.id, r]));
    return ids.map((id) => map.get(id) ?? null);
  };
  const votes = new DataLoader<string, VoteRow[]>(async (ids) => {
    const rows = await prisma.vote.findMany({
      where: { requestId: { in: [...ids] } },
      include: { user: { select: { id: true, name: true } } },
      orderBy: [{ createdAt: "asc" }, { id: "asc" }],
    });
    return ids.map((id) => rows.filter((r) => r.requestId === id));
  });
  return {
    votes,
    delivery: new DataLoader(async (ids) => {
      const rows = await prisma.deliveryJob.findMany({ where: { requestId: { in: [...ids] } } });
      return ids.map((id) => rows.find((r) => r.requestId === id) ?? null);
    }),
    keyName: new DataLoader(async (ids) =>
      byId(ids, await prisma.virtualKey.findMany({ where: { id: { in: [...ids] } }, select: { id: true, name: true } })).map((k) => k?.name ?? null),
    ),
    connection: new DataLoader(async (ids) =>
      byId(ids, await prisma.connection.findMany({ where: { id: { in: [...ids] } }, select: { id: true, name: true, provider: true } })),
    ),
    quorum: new DataLoader(
      async (requests) => {
        const allVotes = await votes.loadMany(requests.map((r) => r.id));
        const byOrg = new Map<string, number[]>();
        requests.forEach((r, i) => byOrg.set(r.orgId, [...(byOrg.get(r.orgId) ?? []), i]));
        const results: QuorumResult[] = new Array(requests.length);
        for (const [orgId, indexes] of byOrg) {
          const items = indexes.map((i) => {
            const v = allVotes[i];
            return { snapshot: requests[i]!.matchedRules as unknown as RuleSnapshot, votes: v instanceof Error || !v ? [] : v };
          });
          const tallies = await currentQuorums(ctx.db.sql, orgId, items);
          indexes.forEach((i, k) => (results[i] = tallies[k]!));
        }
        return results;
      },
      { cacheKeyFn: (r) => r.id },
    ),
    snapshot: new DataLoader(
      async (requests) => {
        const results: RuleSnapshot[] = new Array(requests.length);
        const byOrg = new Map<string, number[]>();
        requests.forEach((r, i) => byOrg.set(r.orgId, [...(byOrg.get(r.orgId) ?? []), i]));
        for (const [orgId, indexes] of byOrg) {
          const resolved = await resolvedSnapshots(ctx.db.sql, orgId, indexes.map((i) => requests[i]!.matchedRules as unknown as RuleSnapshot));
          indexes.forEach((i, k) => (results[i] = resolved[k]!));
        }
        return results;
      },
      { cacheKeyFn: (r) => r.id },
    ),
  };
});
const loaders = (ctx: Context): Loaders => requestLoaders.of(ctx);

/** A subscription's context lives across events: forget what it loaded and re-read grants. */
function refreshForEvent(ctx: Context): void {
  ctx.loaders.clear();
  ctx.authz.refresh();
}

// ─── types ────────────────────────────────────────────────────────────────────────────────────

const ApprovalRequestStatusEnum = builder.enumType("ApprovalRequestStatus", {
  values: {
    PENDING: { value: "pending" },
    APPROVED: { value: "approved" },
    REJECTED: { value: "rejected" },
    EXPIRED: { value: "expired" },
    INVALIDATED: { value: "invalidated", description: "Closed by a policy change (closeReason policy_changed): file a new request." },
    DEFAULT_DENY: { value: "default_deny", description: "No allow rule matched the tool and environment at ingest." },
    WITHDRAWN: { value: "withdrawn", description: "Its agent withdrew the held call (MCP tasks/cancel) before it ran: nothing to decide." },
  } as const,
});

const ExecutionStatusEnum = builder.enumType("ApprovalExecutionStatus", {
  description: "Approval is not verification: only the gateway's receipt states the vendor outcome.",
  values: {
    NONE: { value: "none" },
    PENDING: { value: "pending", description: "Approved; a delivery job is queued." },
    DISPATCHED: { value: "dispatched", description: "Preflight passed and the token was minted; the gateway was called." },
    EXECUTED: { value: "executed" },
    FAILED: { value: "failed", description: "See delivery.errorCode." },
  } as const,
});

const ApprovalOutcomeEnum = builder.enumType("ApprovalOutcome", {
  description: "What became of a held call, in one word.",
  values: {
    PENDING: { value: "pending", description: "Waiting for votes." },
    APPROVED: { value: "approved", description: "Approved; the delivery is under way." },
    EXECUTED: { value: "executed", description: "Approved and run: the gateway's receipt says it executed." },
    FAILED: { value: "failed", description: "Approved, but the delivery or the run failed (delivery.errorCode)." },
    DENIED: { value: "denied", description: "A reviewer denied it, or no allow rule matched at ingest." },
    EXPIRED: { value: "expired", description: "Nobody decided before it expired." },
    INVALIDATED: { value: "invalidated", description: "A policy change closed it." },
  } as const,
});

const VoteDecisionEnum = builder.enumType("ApprovalVoteDecision", {
  values: { APPROVE: { value: "approve" }, DENY: { value: "deny", description: "A permitted reviewer's deny closes the request." } } as const,
});

const QuorumStateEnum = builder.enumType("ApprovalQuorumState", {
  values: { PENDING: { value: "pending" }, APPROVED: { value: "approved" }, REJECTED: { value: "rejected" } } as const,
});

const ReviewerRef = builder.objectRef<{ id: string; name: string }>("ApprovalReviewer").implement({
  description: "A reviewer as the decision history shows them.",
  fields: (t) => ({ id: t.exposeID("id"), name: t.exposeString("name") }),
});

const VoteRef = builder.objectRef<VoteRow>("ApprovalVote").implement({
  fields: (t) => ({
    id: t.exposeID("id"),
    reviewer: t.field({ type: ReviewerRef, resolve: (v) => v.user }),
    decision: t.field({ type: VoteDecisionEnum, resolve: (v) => (v.decision === "deny" ? "deny" : "approve") }),
    comment: t.exposeString("comment", { nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

const MatchedRuleRef = builder.objectRef<MatchedRule>("ApprovalMatchedRule").implement({
  description: "A rule as it matched the request at ingest: the immutable snapshot votes are counted against.",
  fields: (t) => ({
    policyId: t.exposeID("policyId"),
    policyRevision: t.exposeInt("policyRevision"),
    ruleId: t.exposeString("ruleId"),
    effect: t.string({ resolve: (r) => r.effect }),
    count: t.int({ nullable: true, resolve: (r) => (r.effect === "allow" ? r.count : null) }),
    tools: t.stringList({ resolve: (r) => [...r.tools] }),
    environments: t.stringList({ resolve: (r) => [...r.environments] }),
    roleIds: t.stringList({ resolve: (r) => [...r.roles] }),
    userIds: t.stringList({ resolve: (r) => [...r.userIds] }),
  }),
});

const PolicyRevisionRef = builder.objectRef<{ policyId: string; revision: number }>("ApprovalPolicyRevision").implement({
  fields: (t) => ({ policyId: t.exposeID("policyId"), revision: t.exposeInt("revision") }),
});

const RuleTallyRef = builder.objectRef<QuorumResult["perRule"][number]>("ApprovalRuleTally").implement({
  description: "One allow rule's distinct eligible approvals against its own count (votes are never pooled across rules).",
  fields: (t) => ({
    policyId: t.exposeID("policyId"),
    ruleId: t.exposeString("ruleId"),
    count: t.exposeInt("count"),
    approvals: t.exposeInt("approvals"),
  }),
});

const QuorumRef = builder.objectRef<QuorumResult>("ApprovalQuorum").implement({
  description: "The tally with every voter's CURRENT memberships: a reviewer who lost their role no longer counts.",
  fields: (t) => ({
    state: t.field({ type: QuorumStateEnum, resolve: (q) => q.state }),
    satisfiedRuleId: t.exposeString("satisfiedRuleId", { nullable: true }),
    rules: t.field({ type: [RuleTallyRef], resolve: (q) => q.perRule }),
  }),
});

const EligibilityRef = builder.objectRef<{ eligible: boolean; allowRuleIds: string[]; deniedBy?: string }>("ApprovalEligibility").implement({
  fields: (t) => ({
    eligible: t.exposeBoolean("eligible"),
    allowRuleIds: t.exposeStringList("allowRuleIds"),
    deniedByRuleId: t.string({ nullable: true, resolve: (e) => e.deniedBy ?? null }),
  }),
});

const DeliveryRef = builder.objectRef<DeliveryJob>("ApprovalDelivery").implement({
  description: "The delivery job of an approved request.",
  fields: (t) => ({
    status: t.exposeString("status", { description: "queued | leased | dispatching (the resume call is in flight) | delivered | failed" }),
    attempts: t.exposeInt("attempts"),
    errorCode: t.exposeString("errorCode", {
      nullable: true,
      description:
        "approval_not_executable, approval_expired, workspace_frozen, policy_changed, reviewer_authority_changed, key_unavailable, connection_unavailable, route_changed (the connection points at another provider than the hold saw), execution_failed, delivery_exhausted, or gateway_<error>.",
    }),
    nextRunAt: t.expose("nextRunAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
  }),
});

export const ApprovalRequestRef = builder.objectRef<ApprovalRequest>("ApprovalRequest").implement({
  description:
    "A held tool call awaiting review. Closed and credential-free: reviewers confirm the underlying request in their own system of record. " +
    "Needs (approval_request, read) on its workspace.",
  runScopesOnType: true,
  authScopes: (r, ctx) => readableInWorkspace(ctx, r, "approval_request"),
  fields: (t) => ({
    id: t.exposeID("id", { description: "The gateway's approval_id." }),
    workspaceId: t.exposeID("workspaceId"),
    workspaceName: t.string({ nullable: true, resolve: async (r, _a, ctx) => (await ruleWorkspace(ctx, r.workspaceId))?.name ?? null }),
    environment: t.exposeString("environment"),
    tool: t.exposeString("tool", { description: "The concrete tool that would run." }),
    logicalTool: t.exposeString("logicalTool", { nullable: true, description: "The name the agent called, when it differs." }),
    agentKeyName: t.string({ nullable: true, description: "The name of the virtual key the agent called with.", resolve: (r, _a, ctx) => loaders(ctx).keyName.load(r.virtualKeyId) }),
    connectionName: t.string({ nullable: true, resolve: async (r, _a, ctx) => (await loaders(ctx).connection.load(r.connectionId))?.name ?? null }),
    connectionProvider: t.string({
      nullable: true,
      description: "The connection's provider now (null once the connection is deleted). The call runs only where providerAtHold says.",
      resolve: async (r, _a, ctx) => (await loaders(ctx).connection.load(r.connectionId))?.provider ?? null,
    }),
    providerAtHold: t.string({
      description: "The provider the call was held on. Delivery is pinned to it: a connection pointing elsewhere now fails the delivery with route_changed.",
      resolve: (r) => r.provider ?? providerOfTool(r.tool),
    }),
    amountUsd: t.exposeFloat("amountUsd", { nullable: true, description: "The ticket's numeric amount_usd summary, when it carried one." }),
    status: t.field({ type: ApprovalRequestStatusEnum, resolve: (r) => r.status }),
    closeReason: t.exposeString("closeReason", { nullable: true }),
    outcome: t.field({
      type: ApprovalOutcomeEnum,
      description: "What became of it: pending, approved (delivery under way), executed, failed, denied, expired or invalidated.",
      resolve: (r) => approvalOutcome(r),
    }),
    executionStatus: t.field({ type: ExecutionStatusEnum, resolve: (r) => r.executionStatus }),
    revision: t.exposeInt("revision", { description: "Pass it as expectedRevision when voting." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    expiresAt: t.expose("expiresAt", { type: "DateTime" }),
    decidedAt: t.expose("decidedAt", { type: "DateTime", nullable: true }),
    votes: t.field({ type: [VoteRef], description: "The decision history, oldest first.", resolve: (r, _a, ctx) => loaders(ctx).votes.load(r.id) }),
    matchedRules: t.field({ type: [MatchedRuleRef], resolve: (r) => r.matchedRules as unknown as MatchedRule[] }),
    policyRevisions: t.field({
      type: [PolicyRevisionRef],
      description: "The revision of every active policy when the request was filed.",
      resolve: (r) => Object.entries(r.policyRevisions as Record<string, number>).map(([policyId, revision]) => ({ policyId, revision })),
    }),
    quorum: t.field({ type: QuorumRef, resolve: (r, _a, ctx) => loaders(ctx).quorum.load(r) }),
    delivery: t.field({ type: DeliveryRef, nullable: true, resolve: (r, _a, ctx) => loaders(ctx).delivery.load(r.id) }),
    viewerEligibility: t.field({
      type: EligibilityRef,
      description: "Whether the policy snapshot lets the caller review (a matching deny rule excludes them).",
      resolve: async (r, _a, ctx) => {
        const [principal, snapshot] = await Promise.all([ctx.authz.principal(), loaders(ctx).snapshot.load(r)]);
        return reviewerEligibility(snapshot, { userId: viewerOf(ctx).userId, roleIds: principal.roleIds });
      },
    }),
    viewerCanVote: t.boolean({
      description: "Pending, unexpired, (approval_request, decide) held, an eligible allow rule, and no vote of the caller's yet.",
      resolve: async (r, _a, ctx) => {
        const [workspace, votes, snapshot] = await Promise.all([ruleWorkspace(ctx, r.workspaceId), loaders(ctx).votes.load(r.id), loaders(ctx).snapshot.load(r)]);
        if (!workspace) return false;
        return viewerMayDecide(signedIn(ctx).authz, { ...r, workspace }, votes.map((v) => v.userId), snapshot);
      },
    }),
  }),
});

const ApprovalRequestConnection = builder.connectionObject({ type: ApprovalRequestRef, name: "ApprovalRequestConnection" });

const InboxUpdateRef = builder
  .objectRef<{ requests: ApprovalRequest[]; addedIds: string[]; removedIds: string[]; reason: string; changedRequestId: string | null }>("ApprovalInboxUpdate")
  .implement({
    description: "The caller's inbox after a change: first the current state, then one message per change.",
    fields: (t) => ({
      requests: t.field({ type: [ApprovalRequestRef], description: "Every request the caller may decide now, newest first.", resolve: (u) => u.requests }),
      addedIds: t.exposeIDList("addedIds", { description: "New in the inbox since the previous message (all of them in the first)." }),
      removedIds: t.exposeIDList("removedIds"),
      reason: t.exposeString("reason", { description: "snapshot, created, voted, approved, rejected, expired, invalidated, authz_changed…" }),
      changedRequestId: t.exposeID("changedRequestId", { nullable: true }),
    }),
  });

const VotePayloadRef = builder.objectRef<{ requestId: string; vote: { id: string } }>("VoteOnApprovalRequestPayload").implement({
  fields: (t) => ({
    request: t.field({
      type: ApprovalRequestRef,
      resolve: (p, _a, ctx) => ctx.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id: p.requestId } }),
    }),
    vote: t.field({
      type: VoteRef,
      resolve: (p, _a, ctx) => ctx.db.prisma.vote.findUniqueOrThrow({ where: { id: p.vote.id }, include: { user: { select: { id: true, name: true } } } }),
    }),
  }),
});

const VoteInput = builder.inputType("VoteOnApprovalRequestInput", {
  fields: (t) => ({
    requestId: t.id({ required: true }),
    decision: t.field({ type: VoteDecisionEnum, required: true }),
    expectedRevision: t.int({ required: true, description: "The request revision the vote was cast on; a stale one is a ConflictError (409)." }),
    comment: t.string(),
  }),
});

// ─── queries ──────────────────────────────────────────────────────────────────────────────────

builder.queryFields((t) => ({
  approvalRequest: t.withAuth(SIGNED_IN).field({
    type: ApprovalRequestRef,
    nullable: true,
    description: "A held tool call; needs (approval_request, read) on its workspace. Null when not visible.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => readableRequestOrNull(ctx, String(args.id)),
  }),
  approvalInbox: t.withAuth(SIGNED_IN).field({
    type: ApprovalRequestConnection,
    description:
      "The requests the caller may decide now (pending, unexpired, eligible, not yet voted), newest first, by keyset cursors: " +
      "voting on one page moves no other request across the cursor. A page may be short, even empty, with hasNextPage when " +
      `one read scanned ${INBOX_SCAN_LIMIT.toLocaleString("en")} pending requests; endCursor goes on from there.`,
    args: { workspaceId: t.arg.id(), first: t.arg.int({ description: "Default 50, at most 100." }), after: t.arg.string() },
    resolve: (_root, args, ctx) =>
      keysetConnection(args, newestFirstKeyOf, async ({ first, after }) => {
        const workspaceId = args.workspaceId ? String(args.workspaceId) : null;
        const page = await inboxRequests(ctx, { workspaceId }, { first, after: parseNewestFirstKey(after) });
        return { nodes: page.rows, hasNextPage: page.hasNextPage, lastScanned: page.lastScanned && newestFirstKeyOf(page.lastScanned) };
      }),
  }),
  decidedApprovalRequests: t.withAuth(SIGNED_IN).field({
    type: [ApprovalRequestRef],
    description:
      "Held calls no longer waiting for a vote (executed, failed, denied, expired, invalidated, or approved and under way) in " +
      "workspaces where the caller holds (approval_request, read), most recently changed first: a call stays visible after the " +
      "vote with its outcome. `first` at most 100 (default 20).",
    args: { workspaceId: t.arg.id(), first: t.arg.int() },
    resolve: (_root, args, ctx) =>
      decidedRequests(ctx, { workspaceId: args.workspaceId ? String(args.workspaceId) : null, first: args.first ?? 20 }),
  }),
  approvalRequests: t.withAuth(SIGNED_IN).field({
    type: ApprovalRequestConnection,
    description: "A workspace's requests, newest first, by keyset cursors (first: default 50, at most 100); needs (approval_request, read) on the workspace.",
    args: {
      workspaceId: t.arg.id({ required: true }),
      statuses: t.arg({ type: [ApprovalRequestStatusEnum] }),
      first: t.arg.int(),
      after: t.arg.string(),
    },
    resolve: async (_root, args, ctx) => {
      const workspace = await workspaceInViewerOrg(ctx.db, ctx.authz, String(args.workspaceId));
      await ctx.authz.require(workspaceFamilyTarget(workspace, "approval_request", "read"));
      return keysetConnection(args, newestFirstKeyOf, async ({ first, after }) => {
        const rows = await ctx.db.prisma.approvalRequest.findMany({
          where: {
            workspaceId: workspace.id,
            ...(args.statuses?.length ? { status: { in: args.statuses } } : {}),
            ...afterNewestFirst(parseNewestFirstKey(after)),
          },
          orderBy: NEWEST_FIRST,
          take: first + 1,
        });
        return { nodes: rows.slice(0, first), hasNextPage: rows.length > first };
      });
    },
  }),
}));

// ─── the vote ─────────────────────────────────────────────────────────────────────────────────

builder.mutationField("voteOnApprovalRequest", (t) =>
  t.withAuth(SIGNED_IN).field({
    type: VotePayloadRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description:
      "Needs (approval_request, decide) on the workspace (approval.decide) and an eligible allow rule. Rechecked under the workspace and request locks: expectedRevision (ConflictError with currentRevision), pending and unexpired (InvalidStateError), the same policy-set hash (InvalidStateError policy_changed), eligibility (PermissionDeniedError), not already voted (ConflictError). Quorum approves and queues delivery; a permitted reviewer's deny closes the request.",
    args: { input: t.arg({ type: VoteInput, required: true }) },
    resolve: (_root, args, ctx) => voteOnApprovalRequest(ctx, args.input),
  }),
);

// ─── subscriptions ────────────────────────────────────────────────────────────────────────────

builder.subscriptionFields((t) => ({
  approvalRequestStatus: t.withAuth(SIGNED_IN).field({
    type: ApprovalRequestRef,
    description: "A request's state: first its current state, then every change. Authorized on subscribe and again on every event.",
    args: { requestId: t.arg.id({ required: true }) },
    subscribe: async (_root, args, ctx) => {
      const requestId = String(args.requestId);
      const events = mergeEvents(ctx, ["approval:changed", "authz:changed"]);
      try {
        const first = await findReadableRequest(ctx, requestId);
        return requestStatusStream(ctx, requestId, first, events);
      } catch (error) {
        await events.return();
        throw error;
      }
    },
    resolve: (row) => row,
  }),
  approvalInbox: t.withAuth(SIGNED_IN).field({
    type: InboxUpdateRef,
    description: "The caller's inbox: first the requests they may decide now, then the inbox again after every change to it.",
    args: { workspaceId: t.arg.id() },
    subscribe: async (_root, args, ctx) => {
      const workspaceId = args.workspaceId ? String(args.workspaceId) : null;
      const events = mergeEvents(ctx, ["approval:changed", "authz:changed"]);
      try {
        if (workspaceId) await workspaceInViewerOrg(ctx.db, ctx.authz, workspaceId);
        const { rows: first } = await inboxRequests(ctx, { workspaceId });
        return inboxStream(ctx, workspaceId, first, events);
      } catch (error) {
        await events.return();
        throw error;
      }
    },
    resolve: (update) => update,
  }),
}));

type Merged = ReturnType<typeof mergeEvents<"approval:changed" | "authz:changed">>;

async function* requestStatusStream(ctx: SignedInContext, requestId: string, first: ApprovalRequest, events: Merged): AsyncGenerator<ApprovalRequest> {
  try {
    yield first;
    let lastRevision = first.revision;
    for await (const event of events) {
      if (event.payload.orgId !== ctx.viewer.orgId) continue;
      if (event.topic === "approval:changed" && event.payload.requestId !== requestId) continue;
      refreshForEvent(ctx);
      // Re-authorized on every event: losing read access ends the subscription.
      const row = await findReadableRequest(ctx, requestId);
      if (event.topic === "authz:changed" && row.revision === lastRevision) continue;
      lastRevision = row.revision;
      yield row;
    }
  } finally {
    await events.return();
  }
}

async function* inboxStream(ctx: SignedInContext, workspaceId: string | null, first: ApprovalRequest[], events: Merged) {
  try {
    let current = first;
    yield { requests: current, addedIds: current.map((r) => r.id), removedIds: [] as string[], reason: "snapshot", changedRequestId: null as string | null };
    for await (const event of events) {
      if (event.payload.orgId !== ctx.viewer.orgId) continue;
      if (event.topic === "approval:changed" && workspaceId && event.payload.workspaceId !== workspaceId) continue;
      refreshForEvent(ctx);
      const { rows: next } = await inboxRequests(ctx, { workspaceId });
      const before = new Map(current.map((r) => [r.id, r.revision]));
      const after = new Map(next.map((r) => [r.id, r.revision]));
      const addedIds = next.filter((r) => !before.has(r.id)).map((r) => r.id);
      const removedIds = current.filter((r) => !after.has(r.id)).map((r) => r.id);
      const changed = next.some((r) => before.has(r.id) && before.get(r.id) !== r.revision);
      current = next;
      if (addedIds.length === 0 && removedIds.length === 0 && !changed) continue;
      yield {
        requests: next,
        addedIds,
        removedIds,
        reason: event.topic === "approval:changed" ? event.payload.reason : "authz_changed",
        changedRequestId: event.topic === "approval:changed" ? event.payload.requestId : null,
      };
    }
  } finally {
    await events.return();
  }
}

