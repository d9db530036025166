// Steps 1 and 2 of a delivery attempt (seed 003, "Resume"): under the workspace lock, check the
// attempt still holds its lease, run the held-call preflight (the same one the authority read
// runs), mint the approval token and mark the job dispatching, in one transaction. Only an
// attempt whose claim committed may call the gateway.

import { mintApprovalToken } from "../../gateway/approval-token.js";
import type { ApprovalTicket } from "../../gateway/errors.js";
import type { Database } from "../../infra/db.js";
import { preflightHeldCall, type HeldCallRequest, type PreflightCode } from "../../services/approvals/authority.js";
import { inTransaction } from "../../services/approvals/sql.js";
import type { Dispatch, LeasedJob } from "./jobs.js";
import { failAttempt } from "./settle.js";

/** What minting the approval token needs. */
export type TokenSettings = {
  approvalSecret: string;
  tokenIssuer?: string;
  tokenAudience?: string;
  /** Approval token lifetime. Default 300 s. */
  tokenTtlSeconds?: number;
};

export type Claim =
  | { kind: "lost_lease" }
  | { kind: "failed"; code: PreflightCode; orgId: string; workspaceId: string }
  | { kind: "dispatch"; dispatch: Dispatch };

export async function claim(db: Database, settings: TokenSettings, job: LeasedJob): Promise<Claim> {
  // The workspace id first (it never changes), so the workspace lock can be taken before the request's.
  const [head] = await db.sql.query<{ workspaceId: string }>(`SELECT "workspaceId" FROM approval_requests WHERE id = $1`, [job.requestId]);
  if (!head) return { kind: "lost_lease" };
  return inTransaction(db, async (tx) => {
    const [workspace] = await tx.query<{ id: string; frozen: boolean; archived: boolean }>(
      `SELECT id, frozen, ("archivedAt" IS NOT NULL) AS archived FROM workspaces WHERE id = $1 FOR UPDATE`,
      [head.workspaceId],
    );
    const [request] = await tx.query<
      HeldCallRequest & { logicalTool: string | null; invocationId: string; idempotencyKey: string; argumentHash: string; requestSnapshot: unknown }
    >(
      `SELECT id, "orgId", "workspaceId", "virtualKeyId", "connectionId", provider, tool, "logicalTool", "invocationId",
              "idempotencyKey", "argumentHash", "requestSnapshot", status::text AS status,
              "executionStatus"::text AS "executionStatus", "expiresAt", "policySetHash", "matchedRules"
         FROM approval_requests WHERE id = $1 FOR UPDATE`,
      [job.requestId],
    );
    const [fenced] = await tx.query<{ fence: number; status: string }>(`SELECT fence, status FROM delivery_jobs WHERE id = $1 FOR UPDATE`, [job.id]);
    if (!request || !workspace || !fenced || fenced.fence !== job.fence || fenced.status !== "leased") return { kind: "lost_lease" as const };

    const verdict = await preflightHeldCall(tx, request, workspace, new Date());
    if (verdict.code !== null) {
      await failAttempt(tx, job.id, request.id, verdict.code, verdict.detail);
      return { kind: "failed" as const, code: verdict.code, orgId: request.orgId, workspaceId: request.workspaceId };
    }

    const ticket = request.requestSnapshot as ApprovalTicket;
    const token = await mintApprovalToken(
      settings.approvalSecret,
      {
        approvalId: request.id,
        workspaceId: request.workspaceId,
        keyId: request.virtualKeyId,
        tool: request.tool,
        argumentHash: request.argumentHash,
        idempotencyKey: request.idempotencyKey,
      },
      {
        ...(settings.tokenIssuer ? { issuer: settings.tokenIssuer } : {}),
        ...(settings.tokenAudience ? { audience: settings.tokenAudience } : {}),
        ...(settings.tokenTtlSeconds ? { ttlSeconds: settings.tokenTtlSeconds } : {}),
      },
    );
    if (request.executionStatus === "pending") {
      await tx.query(`UPDATE approval_requests SET "executionStatus" = 'dispatched', revision = revision + 1, "updatedAt" = now() WHERE id = $1`, [request.id]);
    }
    // In flight from the commit on: a policy change leaves a dispatching job alone (it cannot
    // be retracted) and closes every other unexecuted one (invalidateStaleRequests).
    await tx.query(`UPDATE delivery_jobs SET status = 'dispatching', "updatedAt" = now() WHERE id = $1`, [job.id]);
    return {
      kind: "dispatch" as const,
      dispatch: {
        orgId: request.orgId,
        workspaceId: request.workspaceId,
        body: {
          approval_id: request.id,
          workspace_id: request.workspaceId,
          virtual_key_id: request.virtualKeyId,
          key_hash: verdict.keyHash,
          connection_id: request.connectionId,
          tool: request.tool,
          logical_tool: request.logicalTool,
          invocation_id: request.invocationId,
          arguments: ticket.arguments,
          idempotency_key: request.idempotencyKey,
          token,
        },
      },
    };
  });
}
