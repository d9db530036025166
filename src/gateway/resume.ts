import { claimsMatch, verifyApprovalToken } from "./approval-token.js";
import { argumentHash, CanonicalJsonError } from "../domain/canonical.js";
import { sameSecret } from "../domain/signing.js";
import type { GatewayDeps } from "./deps.js";
import { notReadyHttp } from "./errors.js";
import { decide, executeHeld, gateRequest, resolveTool } from "./execute.js";
import { resumeBodySchema, type GatewayResponse, type ResumeOutcome } from "./protocol.js";
import { bearer, digest } from "./respond.js";

// Control's side: the service-authenticated POST /internal/v1/approvals/resume, which re-checks
// the token, the pinned held record and the current key, connection and gate, then executes once.

export async function resume(deps: GatewayDeps, input: { authorization: string | null | undefined; body: unknown }): Promise<GatewayResponse & { outcome: ResumeOutcome }> {
  const { store, now, tokenOptions } = deps;
  const refuse = (status: number, error: string, extra: Record<string, unknown> = {}) => ({
    status,
    headers: {},
    body: { error, retryable: false, ...extra },
    outcome: { kind: "refused" as const, error },
  });
  const service = authenticateService(deps, input);
  if (service === "disabled") return refuse(404, "resume_disabled");
  if (service === "unauthorized") return refuse(401, "service_unauthorized");

  const parsed = resumeBodySchema.safeParse(input.body);
  if (!parsed.success) return refuse(400, "invalid_request", { issues: parsed.error.issues.map((i) => ({ path: i.path.join("."), message: i.message })) });
  const body = parsed.data;

  const verified = await verifyApprovalToken(deps.approvalSecret, body.token, { ...tokenOptions, now: now() });
  if (!verified.ok) return refuse(403, "approval_token_invalid", { reason: verified.reason });
  let hash: string;
  try {
    hash = argumentHash(body.arguments);
  } catch (error) {
    if (error instanceof CanonicalJsonError) return refuse(400, "invalid_request", { issues: [{ path: "arguments", message: error.message }] });
    throw error;
  }
  const matched = claimsMatch(verified.claims, {
    approvalId: body.approval_id,
    workspaceId: body.workspace_id,
    keyId: body.virtual_key_id,
    tool: body.tool,
    argumentHash: hash,
    idempotencyKey: body.idempotency_key,
  });
  if (!matched.ok) return refuse(403, "approval_token_mismatch", { mismatched: matched.mismatched });

  // The exact durable held record (resume never creates an invocation), and the current key
  // and connection, read together.
  const [held, key, connection] = await Promise.all([
    store.findHeld(body.approval_id),
    store.findKeyByHash(body.key_hash),
    store.findConnection(body.connection_id),
  ]);
  if (!held) {
    const nr = notReadyHttp("held_record_missing");
    return { status: nr.status, headers: nr.headers, body: nr.body, outcome: { kind: "not_ready", reason: "held_record_missing" } };
  }
  // Pinned: the original concrete tool, connection, key, invocation and idempotency identity.
  const mismatched = (
    [
      ["workspace_id", held.workspaceId, body.workspace_id],
      ["virtual_key_id", held.virtualKeyId, body.virtual_key_id],
      ["connection_id", held.connectionId, body.connection_id],
      ["tool", held.tool, body.tool],
      ["logical_tool", held.logicalTool, body.logical_tool ?? null],
      ["invocation_id", held.invocationId, body.invocation_id],
      ["argument_hash", held.argumentHash, hash],
      ["idempotency_key", held.idempotencyKey, body.idempotency_key],
    ] as const
  )
    .filter(([, a, b]) => a !== b)
    .map(([field]) => field);
  if (mismatched.length > 0) return refuse(409, "held_record_mismatch", { mismatched });

  // Re-apply the gateway's CURRENT key, workspace, connection and Cedar state. (The connection
  // read is the held record's: connection_id was just required to equal it.)
  if (!key || key.id !== held.virtualKeyId || key.workspaceId !== held.workspaceId || key.revoked) return refuse(403, "key_unavailable");
  if (key.workspace.archived) return refuse(403, "workspace_unavailable");
  if (!connection || connection.workspaceId !== held.workspaceId || !connection.active) return refuse(403, "connection_unavailable");
  // The route is pinned (seed: "changing routes cannot move an approved operation to another
  // provider"): the connection must still point at the provider the hold saw, which is also the
  // provider of the concrete tool. Otherwise refuse; nothing runs anywhere.
  if (connection.provider !== held.provider) return refuse(409, "route_changed", { held_provider: held.provider });
  // The upstream is pinned the same way: a connection now pointing at another url is refused.
  if ((connection.upstream?.url ?? null) !== (held.upstreamUrl ?? null)) return refuse(409, "route_changed", { held_upstream_url: held.upstreamUrl ?? null });
  if (now().getTime() >= held.expiresAt.getTime()) return refuse(410, "approval_expired");
  const logicalTool = held.logicalTool ?? held.tool;
  const upstreamTool = held.tool.slice(held.tool.indexOf(".") + 1);
  const resolved = await resolveTool(deps, { tool: held.tool, upstream: connection.upstream, upstreamTool, override: connection.overrides?.[upstreamTool] ?? null }, { live: true });
  if ("error" in resolved) {
    // Nothing was claimed: the delivery may try again once the upstream is back.
    if (resolved.error === "unknown_tool") return refuse(409, "unknown_tool");
    const retryable = resolved.error.code !== "upstream_error";
    return { status: 503, headers: retryable ? { "Retry-After": "10" } : {}, body: { error: resolved.error.code, retryable, message: resolved.error.message }, outcome: { kind: "not_ready" as const, reason: resolved.error.code } };
  }
  const decision = await decide(deps, key, gateRequest(key, { connectionId: held.connectionId, tool: held.tool }, logicalTool, true, resolved.destructive));
  if (decision.decision !== "allow") return refuse(403, "denied", { reason: decision.decision === "deny" ? decision.reason : "approval_required", policy_ids: decision.policyIds });

  const outcome = await executeHeld(deps, held, body.arguments, resolved.run);
  if (outcome.ok) {
    return {
      status: 200,
      headers: {},
      body: { status: "executed", approval_id: held.approvalId, invocation_id: held.invocationId, replayed: outcome.replayed, result: outcome.result },
      outcome: { kind: "executed", replayed: outcome.replayed },
    };
  }
  if (outcome.inProgress) {
    return { status: 409, headers: { "Retry-After": "5" }, body: { error: "execution_in_progress", retryable: true }, outcome: { kind: "not_ready", reason: "execution_in_progress" } };
  }
  return { status: 502, headers: {}, body: { error: "execution_failed", retryable: false, message: outcome.error }, outcome: { kind: "execution_failed" } };
}

export function authenticateService(deps: GatewayDeps, input: { authorization: string | null | undefined }): "ok" | "unauthorized" | "disabled" {
  const { serviceTokenDigest } = deps;
  if (!serviceTokenDigest) return "disabled";
  const presented = bearer(input.authorization);
  return presented && sameSecret(digest(presented), serviceTokenDigest) ? "ok" : "unauthorized";
}
