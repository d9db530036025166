import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { SignedInAuthz } from "../../authz/authz.js";
import { reviewerEligibility, type RuleSnapshot } from "../../domain/approvals/policy.js";
import { AppError, ConflictError, InvalidStateError, NotFoundError, PermissionDeniedError } from "../../errors.js";
import type { Database } from "../../infra/db.js";
import type { EventBus } from "../../infra/events.js";
import { parseInput } from "../parse.js";
import { policySetHashOf } from "./policies.js";
import { currentQuorum, resolvedSnapshots } from "./quorum.js";
import { inTransaction } from "./sql.js";
import { currentTraceparent } from "../../infra/tracing.js";
import { workspaceFamilyTarget } from "../../authz/targets.js";
import { afterNewestFirst, NEWEST_FIRST, type NewestFirstKey } from "../paging.js";
import { enqueueApprovalRequestEvent } from "../webhooks.js";

/**
 * Held tool calls on the control plane: reading a request, the reviewer's inbox, and voting
 * (seed 003, "Voting"). A vote is accepted only after every recheck of the seed, under the
 * workspace lock and the request lock, in one transaction with its consequences (status,
 * execution status, delivery job).
 */

type Deps = { db: Database; authz: SignedInAuthz; events: EventBus };

const requestInclude = { workspace: { select: { name: true, environment: true, stack: { select: { authzGroups: true } } } } } as const;

/** A request of the viewer's org that the viewer may read, or NotFound (never leaks another org's). */
export async function findReadableRequest({ db, authz }: Omit<Deps, "events">, id: string) {
  await authz.requireMember();
  const request = await db.prisma.approvalRequest.findFirst({ where: { id, orgId: authz.viewer.orgId }, include: requestInclude });
  if (!request) throw new NotFoundError("ApprovalRequest", id);
  await authz.require(workspaceFamilyTarget(request.workspace, "approval_request", "read"));
  return request;
}

/** Like findReadableRequest, but null instead of an error (subscriptions re-check on every event). */
export async function readableRequestOrNull(deps: Omit<Deps, "events">, id: string) {
  // Only "not visible" becomes null; a failed read is an error, not a silent empty answer.
  return findReadableRequest(deps, id).catch((error: unknown) => {
    if (error instanceof AppError) return null;
    throw error;
  });
}

/**
 * Whether the viewer could cast a vote on this request right now (the inbox's test). `snapshot`
 * is the request's rules as they read now (resolvedSnapshots), when the caller has it.
 */
export async function viewerMayDecide(authz: SignedInAuthz, request: { status: string; expiresAt: Date; matchedRules: unknown; workspace: { name: string; stack: { authzGroups: string[] } } }, votedUserIds: readonly string[], snapshot?: RuleSnapshot): Promise<boolean> {
  if (request.status !== "pending" || request.expiresAt.getTime() <= Date.now()) return false;
  const principal = await authz.principal();
  if (votedUserIds.includes(authz.viewer.userId)) return false;
  if (!(await authz.can(workspaceFamilyTarget(request.workspace, "approval_request", "decide")))) return false;
  return reviewerEligibility(snapshot ?? (request.matchedRules as RuleSnapshot), { userId: authz.viewer.userId, roleIds: principal.roleIds }).eligible;
}

/** How many pending requests one read of the inbox scans; a page that stops there says where to go on. */
export const INBOX_SCAN_LIMIT = 1000;

/**
 * The requests the viewer may decide now: pending, unexpired, in a workspace where they hold
 * (approval_request, decide), with an eligible allow rule and no matching deny, not yet voted
 * on by them. Newest first, from after `page.after`: at most `page.first` of them (all that one
 * scan finds when not given). A scan that reaches INBOX_SCAN_LIMIT rows short of a full page has
 * a next page, which starts after `lastScanned`, so a long inbox is paged through, never cut.
 */
export async function inboxRequests(
  { db, authz }: Omit<Deps, "events">,
  filter: { workspaceId?: string | null } = {},
  page: { after?: NewestFirstKey | null; first?: number } = {},
) {
  const principal = await authz.requireMember();
  const viewer = authz.viewer;
  const rows = await db.prisma.approvalRequest.findMany({
    where: {
      orgId: viewer.orgId,
      status: "pending",
      expiresAt: { gt: new Date() },
      votes: { none: { userId: viewer.userId } },
      ...(filter.workspaceId ? { workspaceId: filter.workspaceId } : {}),
      ...afterNewestFirst(page.after ?? null),
    },
    include: requestInclude,
    orderBy: NEWEST_FIRST,
    take: INBOX_SCAN_LIMIT,
  });
  const mayDecideIn = new Map<string, boolean>();
  const result: typeof rows = [];
  const snapshots = await resolvedSnapshots(db.sql, viewer.orgId, rows.map((row) => row.matchedRules as unknown as RuleSnapshot));
  const wanted = page.first ?? Infinity;
  for (const [index, row] of rows.entries()) {
    let allowed = mayDecideIn.get(row.workspaceId);
    if (allowed === undefined) {
      allowed = await authz.can(workspaceFamilyTarget(row.workspace, "approval_request", "decide"));
      mayDecideIn.set(row.workspaceId, allowed);
    }
    if (!allowed) continue;
    if (!reviewerEligibility(snapshots[index]!, { userId: viewer.userId, roleIds: principal.roleIds }).eligible) continue;
    result.push(row);
    if (result.length > wanted) return { rows: result.slice(0, wanted), hasNextPage: true, lastScanned: null };
  }
  const scanEnded = rows.length === INBOX_SCAN_LIMIT;
  return { rows: result, hasNextPage: scanEnded, lastScanned: scanEnded ? rows.at(-1)! : null };
}

/** How many decided requests one page of decidedApprovalRequests returns at most. */
export const MAX_DECIDED_PAGE = 100;

/**
 * What became of a held call, in one word (the inbox's decided list): pending while it waits;
 * approved while its delivery is under way; executed or failed once the gateway's receipt says
 * so; denied (a reviewer's deny, or no allow rule at ingest); expired (closed by the sweep, or
 * past its expiry while still pending); invalidated (a policy change closed it).
 */
export type ApprovalOutcome = "pending" | "approved" | "executed" | "failed" | "denied" | "expired" | "invalidated";

export function approvalOutcome(r: { status: string; executionStatus: string; expiresAt: Date }, now = Date.now()): ApprovalOutcome {
  switch (r.status) {
    case "pending":
      return r.expiresAt.getTime() <= now ? "expired" : "pending";
    case "approved":
      return r.executionStatus === "executed" ? "executed" : r.executionStatus === "failed" ? "failed" : "approved";
    case "rejected":
    case "default_deny":
      return "denied";
    case "expired":
      return "expired";
    default:
      return "invalidated";
  }
}

/**
 * Decided held calls the viewer may read ((approval_request, read) on each one's workspace):
 * everything no longer waiting for a vote — approved (then executed or failed), denied, expired,
 * invalidated — most recently changed first, so a call stays visible after the vote with its
 * outcome. Scans at most INBOX_SCAN_LIMIT rows of the organization.
 */
export async function decidedRequests({ db, authz }: Omit<Deps, "events">, filter: { workspaceId?: string | null; first: number }) {
  await authz.requireMember();
  const viewer = authz.viewer;
  const rows = await db.prisma.approvalRequest.findMany({
    where: {
      orgId: viewer.orgId,
      OR: [{ status: { not: "pending" } }, { expiresAt: { lte: new Date() } }],
      ...(filter.workspaceId ? { workspaceId: filter.workspaceId } : {}),
    },
    include: requestInclude,
    orderBy: [{ updatedAt: "desc" }, { id: "asc" }],
    take: INBOX_SCAN_LIMIT,
  });
  const mayRead = new Map<string, boolean>();
  const result: typeof rows = [];
  for (const row of rows) {
    let allowed = mayRead.get(row.workspaceId);
    if (allowed === undefined) {
      allowed = await authz.can(workspaceFamilyTarget(row.workspace, "approval_request", "read"));
      mayRead.set(row.workspaceId, allowed);
    }
    if (allowed) result.push(row);
    if (result.length >= Math.min(Math.max(filter.first, 1), MAX_DECIDED_PAGE)) break;
  }
  return result;
}

const VoteInput = z.object({
  requestId: z.string().min(1).max(200),
  decision: z.enum(["approve", "deny"]),
  expectedRevision: z.int().min(1, "expectedRevision is the request's revision you voted on (1 or more)."),
  comment: z.string().max(2000, "A comment is at most 2000 characters.").nullish(),
});

export type VoteResult = {
  requestId: string;
  vote: { id: string; userId: string; decision: string; comment: string | null; createdAt: Date };
};

export async function voteOnApprovalRequest({ db, authz, events }: Deps, raw: unknown): Promise<VoteResult> {
  const input = parseInput(VoteInput, raw);
  const principal = await authz.requireMember();
  const viewer = authz.viewer;
  const request = await db.prisma.approvalRequest.findFirst({
    where: { id: input.requestId, orgId: viewer.orgId },
    select: { id: true, workspaceId: true, workspace: { select: { id: true, name: true, stack: { select: { authzGroups: true } } } } },
  });
  if (!request) throw new NotFoundError("ApprovalRequest", input.requestId);
  const workspace = request.workspace;
  await authz.require(workspaceFamilyTarget(workspace, "approval_request", "decide"));

  // One transaction on raw SQL (the vote is on the quorum → execute hot path): workspace lock,
  // then request lock, then every recheck, the vote and its consequences.
  const outcome = await inTransaction(db, async (tx) => {
    await tx.query(`SELECT id FROM workspaces WHERE id = $1 FOR UPDATE`, [workspace.id]);
    const [locked] = await tx.query<{ id: string; status: string; revision: number; expiresAt: Date; policySetHash: string; matchedRules: unknown }>(
      `SELECT id, status::text AS status, revision, "expiresAt", "policySetHash", "matchedRules"
         FROM approval_requests WHERE id = $1 FOR UPDATE`,
      [request.id],
    );
    if (!locked) throw new NotFoundError("ApprovalRequest", request.id);

    // The seed's rechecks, in its order.
    if (locked.revision !== input.expectedRevision) {
      throw new ConflictError(`The request is at revision ${locked.revision}, not ${input.expectedRevision}.`, locked.revision);
    }
    if (locked.status !== "pending") {
      throw new InvalidStateError("ApprovalRequest", locked.status, `The request is ${locked.status}; only a pending request takes votes.`);
    }
    if (new Date(locked.expiresAt).getTime() <= Date.now()) {
      throw new InvalidStateError("ApprovalRequest", "expired", "The request has expired.");
    }
    if ((await policySetHashOf(tx, workspace.id)) !== locked.policySetHash) {
      throw new InvalidStateError("ApprovalRequest", "policy_changed", "The workspace's approval policies changed since the request was filed.");
    }
    // As it reads now: a deny rule whose role was deleted excludes everyone (fail closed).
    const [snapshot] = await resolvedSnapshots(tx, viewer.orgId, [locked.matchedRules as RuleSnapshot]);
    const eligibility = reviewerEligibility(snapshot!, { userId: viewer.userId, roleIds: principal.roleIds });
    if (!eligibility.eligible) {
      throw new PermissionDeniedError(
        null,
        eligibility.deniedBy
          ? `Approval rule ${eligibility.deniedBy} excludes you from reviewing this request.`
          : "No approval rule of this request selects you as a reviewer.",
      );
    }
    const previous = await tx.query<{ userId: string; decision: string }>(`SELECT "userId", decision FROM votes WHERE "requestId" = $1`, [locked.id]);
    if (previous.some((v) => v.userId === viewer.userId)) {
      throw new ConflictError("You have already voted on this request.", locked.revision);
    }

    const [vote] = await tx.query<VoteResult["vote"]>(
      `INSERT INTO votes (id, "requestId", "userId", decision, comment) VALUES ($1, $2, $3, $4, $5)
       RETURNING id, "userId", decision, comment, "createdAt"`,
      [randomUUID(), locked.id, viewer.userId, input.decision, input.comment ?? null],
    );
    const tally = await currentQuorum(tx, viewer.orgId, snapshot!, [...previous, { userId: viewer.userId, decision: input.decision }]);
    if (tally.state === "approved") {
      await tx.query(
        `UPDATE approval_requests
            SET revision = revision + 1, status = 'approved', "executionStatus" = 'pending', "decidedAt" = now(), "closeReason" = NULL, "updatedAt" = now()
          WHERE id = $1`,
        [locked.id],
      );
      // The delivery continues this operation's trace (traces on), on whatever node runs it.
      await tx.query(
        `INSERT INTO delivery_jobs (id, "requestId", status, "nextRunAt", "updatedAt", traceparent) VALUES ($1, $2, 'queued', now(), now(), $3)`,
        [randomUUID(), locked.id, currentTraceparent()],
      );
    } else if (tally.state === "rejected") {
      await tx.query(
        `UPDATE approval_requests
            SET revision = revision + 1, status = 'rejected', "closeReason" = 'rejected_by_reviewer', "decidedAt" = now(), "updatedAt" = now()
          WHERE id = $1`,
        [locked.id],
      );
    } else {
      await tx.query(`UPDATE approval_requests SET revision = revision + 1, "updatedAt" = now() WHERE id = $1`, [locked.id]);
    }
    if (tally.state !== "pending") await enqueueApprovalRequestEvent(tx, locked.id, "approval_request.decided");
    return { vote: vote!, state: tally.state };
  });

  events.publish("approval:changed", {
    orgId: viewer.orgId,
    workspaceId: workspace.id,
    requestId: request.id,
    reason: outcome.state === "pending" ? "voted" : outcome.state,
  });
  return { requestId: request.id, vote: outcome.vote };
}

/** Pending requests past their expiry close as expired (run by the delivery worker's tick). */
export async function expireOverdueRequests(db: Database, events: EventBus, now = new Date()): Promise<number> {
  const rows = await db.sql.query<{ id: string; orgId: string; workspaceId: string }>(
    `UPDATE approval_requests
        SET status = 'expired', "closeReason" = 'expired', "decidedAt" = $1, "updatedAt" = $1, revision = revision + 1
      WHERE id IN (
        -- SKIP LOCKED: a row a vote or a policy change holds is theirs to settle; the sweep
        -- never waits on one, so it can never deadlock with them.
        SELECT id FROM approval_requests WHERE status = 'pending' AND "expiresAt" <= $1 FOR UPDATE SKIP LOCKED)
        AND status = 'pending'
      RETURNING id, "orgId", "workspaceId"`,
    [now],
  );
  for (const row of rows) events.publish("approval:changed", { orgId: row.orgId, workspaceId: row.workspaceId, requestId: row.id, reason: "expired" });
  return rows.length;
}
