import { APPROVAL_TOKEN_TTL_SECONDS, mintApprovalToken } from "./approval-token.js";
import { liveKey, type GatewayDeps } from "./deps.js";
import { idSchema, type ApprovalStatusBody, type ApprovalStatusOutcome, type GatewayResponse } from "./protocol.js";

// The agent's read of its own request: GET /gateway/v1/approvals/{id}.

export async function approvalStatus(deps: GatewayDeps, input: { authorization: string | null | undefined; approvalId: string }): Promise<GatewayResponse & { outcome: ApprovalStatusOutcome }> {
  const { store, now, tokenOptions } = deps;
  const key = await liveKey(deps, input.authorization);
  if (!key) {
    return { status: 401, headers: {}, body: { error: "unauthorized", message: "send a live virtual key as `Authorization: Bearer <key>`" }, outcome: { kind: "unauthorized" } };
  }
  const notFound = { status: 404, headers: {}, body: { error: "not_found", message: "this key made no approval request with that id" }, outcome: { kind: "not_found" as const } };
  if (!idSchema.safeParse(input.approvalId).success) return notFound;
  const at = now();
  const [held, outcome] = await Promise.all([store.findHeld(input.approvalId), store.findApprovalOutcome ? store.findApprovalOutcome(input.approvalId, at) : Promise.resolve(null)]);
  // Only the key that made the request may read it; for any other it does not exist.
  const owner = outcome ?? held;
  if (!owner || owner.virtualKeyId !== key.id || owner.workspaceId !== key.workspaceId) return notFound;
  if (held && (held.virtualKeyId !== key.id || held.workspaceId !== key.workspaceId)) return notFound;

  const tool = held ? (held.logicalTool ?? held.tool) : outcome!.tool;
  let body: ApprovalStatusBody;
  if (outcome) {
    body = {
      approval_id: outcome.approvalId,
      status: outcome.status,
      tool,
      expires_at: outcome.expiresAt.toISOString(),
      decided_at: outcome.decidedAt ? outcome.decidedAt.toISOString() : null,
      execution_status: outcome.executionStatus,
      ...(outcome.reason ? { reason: outcome.reason } : {}),
    };
  } else {
    // Held, not yet in the inbox (ingest files it within seconds): pending until it expires.
    const h = held!;
    // A call its agent cancelled (MCP tasks/cancel) is spent as failed: it never runs.
    const failed = h.state === "Failed" || h.state === "Cancelled";
    body = {
      approval_id: h.approvalId,
      status: failed ? "failed" : h.state === "AwaitingApproval" && h.expiresAt.getTime() <= at.getTime() ? "expired" : h.state === "AwaitingApproval" ? "pending" : "approved",
      tool,
      expires_at: h.expiresAt.toISOString(),
      decided_at: null,
      execution_status: h.state === "Executed" ? "executed" : failed ? "failed" : h.state === "Executing" ? "dispatched" : "none",
      ...(failed ? { reason: h.state === "Cancelled" ? "cancelled" : "execution_failed" } : {}),
    };
  }
  let tokenMinted = false;
  if (outcome && outcome.status === "approved" && outcome.notExecutable === null) {
    // Minted as control's delivery mints it: bound to the approval id, workspace, key, concrete
    // tool, argument hash and idempotency key; short-lived, and never past the request's expiry.
    const ttl = Math.min(APPROVAL_TOKEN_TTL_SECONDS, Math.floor((outcome.expiresAt.getTime() - at.getTime()) / 1000));
    if (ttl > 0) {
      body.approval_token = await mintApprovalToken(
        deps.approvalSecret,
        { approvalId: outcome.approvalId, workspaceId: outcome.workspaceId, keyId: outcome.virtualKeyId, tool: outcome.tool, argumentHash: outcome.argumentHash, idempotencyKey: outcome.idempotencyKey },
        { ...tokenOptions, ttlSeconds: ttl, now: at },
      );
      body.approval_token_expires_at = new Date((Math.floor(at.getTime() / 1000) + ttl) * 1000).toISOString();
      tokenMinted = true;
    }
  } else if (outcome && outcome.status === "approved" && outcome.notExecutable) {
    body.reason = outcome.notExecutable;
  }
  return { status: 200, headers: {}, body, outcome: { kind: "status", status: body.status, tokenMinted } };
}
