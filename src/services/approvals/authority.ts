import type { RuleSnapshot } from "../../domain/approvals/policy.js";
import { providerOfTool } from "../../gateway/store.js";
import type { SqlRunner } from "../../infra/db.js";
import { virtualKeyDeadReasonSql } from "../../domain/liveness.js";
import { policySetHashOf } from "./policies.js";
import { currentQuorum } from "./quorum.js";

export const PREFLIGHT_CODES = [
  "approval_not_executable",
  "approval_expired",
  "workspace_frozen",
  "policy_changed",
  "reviewer_authority_changed",
  "key_unavailable",
  // The held call's route: its connection is gone, moved or inactive, or points at another
  // provider than the one the hold saw (the call is pinned; it never runs elsewhere).
  "connection_unavailable",
  "route_changed",
] as const;
export type PreflightCode = (typeof PREFLIGHT_CODES)[number];

/** What the preflight reads of a held call's request; each caller reads it its own way (with or without locks). */
export type HeldCallRequest = {
  id: string;
  orgId: string;
  workspaceId: string;
  virtualKeyId: string;
  connectionId: string;
  provider: string | null;
  tool: string;
  status: string;
  executionStatus: string;
  expiresAt: Date;
  policySetHash: string;
  matchedRules: unknown;
};

/** The preflight's answer: null code when authority may be minted (with the key's hash), or the code that stops it. */
export type PreflightVerdict =
  | { code: null; keyHash: string }
  | { code: PreflightCode; /** Said more precisely than the code, for the delivery job's lastError. */ detail: string | null };

/**
 * The held-call preflight (seed 003, "Preflight": "Human authority is checked at token mint"), once:
 * whether control may mint authority for an approved request NOW. The delivery worker runs it under
 * the workspace lock before it claims the execution; the agent's status read (approvalAuthority) runs
 * it without locks. `sql` is the caller's runner (its transaction or the pool): every read here
 * goes through it. A check added here is added for both.
 */
export async function preflightHeldCall(
  sql: SqlRunner,
  request: HeldCallRequest,
  workspace: { frozen: boolean; archived: boolean },
  now: Date,
): Promise<PreflightVerdict> {
  const stop = (code: PreflightCode, detail: string | null = null): PreflightVerdict => ({ code, detail });
  if (request.status !== "approved" || !["pending", "dispatched"].includes(request.executionStatus) || workspace.archived) return stop("approval_not_executable");
  if (new Date(request.expiresAt).getTime() <= now.getTime()) return stop("approval_expired");
  if (workspace.frozen) return stop("workspace_frozen");
  if ((await policySetHashOf(sql, request.workspaceId)) !== request.policySetHash) return stop("policy_changed");
  const votes = await sql.query<{ userId: string; decision: string }>(`SELECT "userId", decision FROM votes WHERE "requestId" = $1`, [request.id]);
  const tally = await currentQuorum(sql, request.orgId, request.matchedRules as RuleSnapshot, votes);
  if (tally.state !== "approved") return stop("reviewer_authority_changed");
  // The key as alive as what it stands for: its organization and its creator (src/domain/liveness.ts).
  const [key] = await sql.query<{ workspaceId: string; dead: string | null; keyHash: string }>(
    `SELECT k."workspaceId", ${virtualKeyDeadReasonSql("k")} AS dead, k."keyHash" FROM virtual_keys k WHERE k.id = $1`,
    [request.virtualKeyId],
  );
  if (!key || key.workspaceId !== request.workspaceId) return stop("key_unavailable");
  if (key.dead) return stop("key_unavailable", `the virtual key is not live: ${key.dead}`);
  // The route the hold saw (seed: "resume pins the original concrete tool and connection"): the
  // call is pinned; it never runs elsewhere.
  const [connection] = await sql.query<{ workspaceId: string; provider: string; active: boolean }>(
    `SELECT "workspaceId", provider, active FROM connections WHERE id = $1`,
    [request.connectionId],
  );
  if (!connection || connection.workspaceId !== request.workspaceId || !connection.active) return stop("connection_unavailable");
  if (connection.provider !== (request.provider ?? providerOfTool(request.tool))) return stop("route_changed");
  return { code: null, keyHash: key.keyHash };
}

/**
 * The preflight for the agent's own status read (GET /gateway/v1/approvals/{id}), which hands the
 * agent the token for its re-issue: read without locks. Null when control may mint; otherwise the
 * code that stops it. The gateway still re-applies its own key, connection and Cedar state at the
 * re-issue.
 */
export async function approvalAuthority(sql: SqlRunner, approvalId: string, now: Date = new Date()): Promise<PreflightCode | null> {
  const [request] = await sql.query<HeldCallRequest & { frozen: boolean; archived: boolean }>(
    `SELECT r.id, r."orgId", r."workspaceId", r."virtualKeyId", r."connectionId", r.provider, r.tool, r.status::text AS status,
            r."executionStatus"::text AS "executionStatus", r."expiresAt", r."policySetHash", r."matchedRules",
            w.frozen, (w."archivedAt" IS NOT NULL) AS archived
       FROM approval_requests r JOIN workspaces w ON w.id = r."workspaceId"
      WHERE r.id = $1`,
    [approvalId],
  );
  if (!request) return "approval_not_executable";
  return (await preflightHeldCall(sql, request, request, now)).code;
}
