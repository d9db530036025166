import type { RuleSnapshot } from "../../domain/approvals/policy.js";
import { providerOfTool } from "../../gateway/store.js";
import type { SqlRunner } from "../../infra/db.js";
import { liveVirtualKeySql } from "../../domain/liveness.js";
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

/**
 * Whether control may mint authority for an approved request NOW (seed 003, "Preflight": "Human
 * authority is checked at token mint"): the same checks the delivery worker runs before it
 * mints, read without locks, for the agent's own status read (GET /gateway/v1/approvals/{id}),
 * which hands the agent the token for its re-issue. Null when it may; otherwise the code that
 * stops it. The gateway still re-applies its own key, connection and Cedar state at the re-issue.
 */
export async function approvalAuthority(sql: SqlRunner, approvalId: string, now: Date = new Date()): Promise<PreflightCode | null> {
  const [request] = await sql.query<{
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
    frozen: boolean;
    archived: boolean;
  }>(
    `SELECT r.id, r."orgId", r."workspaceId", r."virtualKeyId", r."connectionId", r.provider, r.tool, r.status::text AS status,
            r."executionStatus"::text AS "executionStatus", r."expiresAt", r."policySetHash", r."matchedRules",
            w.frozen, (w."archivedAt" IS NOT NULL) AS archived
       FROM approval_requests r JOIN workspaces w ON w.id = r."workspaceId"
      WHERE r.id = $1`,
    [approvalId],
  );
  if (!request) return "approval_not_executable";
  if (request.status !== "approved" || !["pending", "dispatched"].includes(request.executionStatus) || request.archived) return "approval_not_executable";
  if (new Date(request.expiresAt).getTime() <= now.getTime()) return "approval_expired";
  if (request.frozen) return "workspace_frozen";
  if ((await policySetHashOf(sql, request.workspaceId)) !== request.policySetHash) return "policy_changed";
  const votes = await sql.query<{ userId: string; decision: string }>(`SELECT "userId", decision FROM votes WHERE "requestId" = $1`, [request.id]);
  const tally = await currentQuorum(sql, request.orgId, request.matchedRules as RuleSnapshot, votes);
  if (tally.state !== "approved") return "reviewer_authority_changed";
  // As alive as what it stands for: its organization and its creator (src/domain/liveness.ts).
  const [key] = await sql.query<{ workspaceId: string; revoked: boolean }>(
    `SELECT k."workspaceId", NOT ${liveVirtualKeySql("k")} AS revoked FROM virtual_keys k WHERE k.id = $1`,
    [request.virtualKeyId],
  );
  if (!key || key.revoked || key.workspaceId !== request.workspaceId) return "key_unavailable";
  const [connection] = await sql.query<{ workspaceId: string; provider: string; active: boolean }>(
    `SELECT "workspaceId", provider, active FROM connections WHERE id = $1`,
    [request.connectionId],
  );
  if (!connection || connection.workspaceId !== request.workspaceId || !connection.active) return "connection_unavailable";
  if (connection.provider !== (request.provider ?? providerOfTool(request.tool))) return "route_changed";
  return null;
}
