import { randomUUID } from "node:crypto";
import { claimsMatch, verifyApprovalToken, type ApprovalTokenClaims } from "./approval-token.js";
import { argumentHash, canonicalJson, CanonicalJsonError, sha256Hex } from "../domain/canonical.js";
import type { GatewayDeps } from "./deps.js";
import {
  APPROVAL_CLOSED_HTTP_STATUS,
  approvalClosedJsonRpc,
  APPROVAL_REQUIRED_HTTP_STATUS,
  approvalRequiredJsonRpc,
  encodeTicket,
  isClosedApprovalStatus,
  newApprovalTicket,
  NOT_READY_HTTP_STATUS,
  NOT_READY_JSONRPC_CODE,
  NOT_READY_RETRY_AFTER_SECONDS,
  notReadyHttp,
  notReadyJsonRpc,
  type ClosedApprovalStatus,
} from "./errors.js";
import { decide, executeHeld, gateRequest, resolveTool } from "./execute.js";
import { hashVirtualKey } from "./keys.js";
import { GATEWAY_JSONRPC, idempotencyKeySchema, parseToolCall, type GatewayResponse, type ToolCallInput, type ToolCallOutcome } from "./protocol.js";
import { asCallResult, bearer, denied, rejected, rpcError, rpcResult, toolUnavailable, withTimeout, type RpcId } from "./respond.js";
import type { GatewayKey, GatewayRoute, HeldInvocation } from "./store.js";
import { UpstreamError } from "./upstream.js";

// The agent's tools/call: parse, authenticate, route, the re-issue's approval, the Cedar gate,
// then execute, deny, or hold — filing the ticket on the approval stream before the held record.

export async function handleToolCall(deps: GatewayDeps, input: ToolCallInput): Promise<GatewayResponse & { outcome: ToolCallOutcome }> {
  const { store, now, log, tokenOptions } = deps;
  const parsed = parseToolCall(input.body);
  if (!parsed.ok) return rejected(parsed.problem.id, 400, parsed.problem.code, parsed.problem.error, parsed.problem.message);
  const call = parsed.call;
  const rpcId: RpcId = call.id;
  const logicalTool = call.name;
  const args = call.arguments ?? {};

  const plaintext = bearer(input.authorization);
  let key: GatewayKey | null = null;
  let route: GatewayRoute | null = null;
  if (plaintext && store.resolveCall) {
    ({ key, route } = await store.resolveCall(hashVirtualKey(plaintext), logicalTool));
  } else if (plaintext) {
    key = await store.findKeyByHash(hashVirtualKey(plaintext));
    route = key ? await store.resolveRoute(key.workspaceId, logicalTool) : null;
  }
  if (!key || key.revoked || key.workspace.archived) return rejected(rpcId, 401, GATEWAY_JSONRPC.unauthorized, "unauthorized", "send a live virtual key as `Authorization: Bearer <key>`");

  if (!route) return rejected(rpcId, 404, GATEWAY_JSONRPC.invalidParams, "unknown_tool", `no connection of this workspace serves ${logicalTool}`);
  if (!route.active) return denied(rpcId, "connection_inactive", []);

  let hash: string;
  try {
    hash = argumentHash(args);
  } catch (error) {
    if (error instanceof CanonicalJsonError) return rejected(rpcId, 400, GATEWAY_JSONRPC.invalidParams, "invalid_params", error.message);
    throw error;
  }
  const explicitKey = input.idempotencyKey ?? (typeof call.meta?.["idempotency_key"] === "string" ? (call.meta["idempotency_key"] as string) : null);
  if (explicitKey !== null && !idempotencyKeySchema.safeParse(explicitKey).success) {
    return rejected(rpcId, 400, GATEWAY_JSONRPC.invalidParams, "invalid_params", "an idempotency key is 1-255 printable ASCII characters");
  }
  const idempotencyKey = explicitKey ?? derivedIdempotencyKey(key, logicalTool, hash);
  const amount = call.meta?.["amount_usd"];
  const amountUsd = typeof amount === "number" && Number.isFinite(amount) && amount >= 0 ? amount : undefined;

  // The agent-side re-issue: approved only when the token verifies and EVERY bound claim
  // matches the live call, and the exact held record still pins this connection. Anything
  // else is approved = false, and the gate issues a new ticket.
  const presented = Boolean(input.approvalId || input.approvalToken);
  let approvedHeld: HeldInvocation | null = null;
  let orphanApproval = false;
  if (input.approvalId && input.approvalToken) {
    const live: ApprovalTokenClaims = {
      approvalId: input.approvalId,
      workspaceId: key.workspaceId,
      keyId: key.id,
      tool: route.tool,
      argumentHash: hash,
      idempotencyKey,
    };
    const verified = await verifyApprovalToken(deps.approvalSecret, input.approvalToken, { ...tokenOptions, now: now() });
    const matched = verified.ok ? claimsMatch(verified.claims, live) : null;
    if (!verified.ok) {
      log.warn({ approvalId: input.approvalId, reason: verified.reason }, "approval token did not verify: approved = false");
    } else if (matched && !matched.ok) {
      log.warn({ approvalId: input.approvalId, mismatched: matched.mismatched }, "approval token claims do not match the call: approved = false");
    } else {
      const held = await store.findHeld(input.approvalId);
      if (!held) orphanApproval = true;
      else if (heldMatchesLive(held, key, route, logicalTool, hash, idempotencyKey)) approvedHeld = held;
      else log.warn({ approvalId: input.approvalId }, "held record does not pin this call: approved = false");
    }
  }
  if (orphanApproval) {
    const nr = notReadyJsonRpc("held_record_missing");
    return { ...rpcError(rpcId, NOT_READY_HTTP_STATUS, nr.code, nr.message, nr.data, notReadyHttp("held_record_missing").headers), outcome: { kind: "not_ready", reason: "held_record_missing" } };
  }

  const resolved = await resolveTool(deps, route, { live: approvedHeld !== null });
  if ("error" in resolved) return toolUnavailable(rpcId, logicalTool, resolved.error);

  const decision = await decide(deps, key, gateRequest(key, route, logicalTool, approvedHeld !== null, resolved.destructive));
  if (decision.decision === "deny") return denied(rpcId, decision.reason, decision.policyIds);
  if (decision.decision === "approval_required") {
    // Idempotent on the idempotency key: a call that already ran is answered with its
    // outcome, never run again and never held again.
    const done = await store.findExecution(key.id, idempotencyKey);
    if (done && done.state !== "Executing") {
      const replay = done.state === "Executed" ? { ok: true as const, replayed: true, result: done.result } : { ok: false as const, inProgress: false, error: done.error ?? "execution failed" };
      return executionResponse(rpcId, done.approvalId, done.invocationId, replay);
    }
    // A plain retry of a call that is already held gets the same ticket back; a call that
    // presented approval headers that did not hold up gets a new one (seed: "re-issues a ticket").
    if (!presented) {
      // A request that has closed answers the identical retry with its status: only a new
      // idempotency key opens a new one.
      const closed = await closedRequest(deps, key, idempotencyKey, hash);
      if (closed) {
        const err = approvalClosedJsonRpc({ status: closed.status, approvalId: closed.approvalId, tool: logicalTool, reason: closed.reason });
        return { ...rpcError(rpcId, APPROVAL_CLOSED_HTTP_STATUS, err.code, err.message, err.data), outcome: { kind: "approval_closed", approvalId: closed.approvalId, status: closed.status } };
      }
      const awaiting = await store.findAwaiting(key.id, idempotencyKey, hash, now());
      if (awaiting && awaiting.connectionId === route.connectionId && awaiting.provider === route.provider && (awaiting.upstreamUrl ?? null) === (route.upstream?.url ?? null) && awaiting.tool === route.tool) {
        return approvalRequired(deps, rpcId, awaiting.approvalId, logicalTool, awaiting.expiresAt, true);
      }
    }
    return hold(deps, key, route, resolved.destructive, logicalTool, args, idempotencyKey, rpcId, amountUsd);
  }

  if (approvedHeld) {
    if (now().getTime() >= approvedHeld.expiresAt.getTime()) return denied(rpcId, "approval_expired", []);
    const outcome = await executeHeld(deps, approvedHeld, args, (a) => resolved.run(a, input.relay));
    return executionResponse(rpcId, approvedHeld.approvalId, approvedHeld.invocationId, outcome);
  }
  // Allowed outright (not held): execute directly — unless the client asked for a task, which
  // only a held call becomes (src/gateway/tasks.ts): refused before anything runs.
  if (input.asTask) return rejected(rpcId, 400, GATEWAY_JSONRPC.methodNotFound, "task_not_supported", `${logicalTool} is not held for approval now, so it does not run as a task: call it without \`task\``);
  const invocationId = `inv_${randomUUID()}`;
  try {
    const result = await resolved.run(args, input.relay);
    return { ...rpcResult(rpcId, result, { invocation_id: invocationId, replayed: false }), outcome: { kind: "executed", replayed: false, approvalId: null, invocationId } };
  } catch (error) {
    if (error instanceof UpstreamError) return toolUnavailable(rpcId, logicalTool, error);
    const message = error instanceof Error ? error.message : String(error);
    return { ...rpcError(rpcId, 502, GATEWAY_JSONRPC.executionFailed, "execution_failed", { error: "execution_failed", message }), outcome: { kind: "execution_failed", approvalId: null } };
  }
}

/** Writes the ticket, awaits the write, then commits the held record (seed: "What the agent sees"). */
async function hold(
  deps: GatewayDeps,
  key: GatewayKey,
  route: { connectionId: string; provider: string; tool: string; upstream?: { url: string | null } | undefined },
  destructive: boolean,
  logicalTool: string,
  args: Record<string, unknown>,
  idempotencyKey: string,
  rpcId: RpcId,
  amountUsd: number | undefined,
): Promise<GatewayResponse & { outcome: ToolCallOutcome }> {
  const { store, streamKey, writeTimeoutMs, now, log } = deps;
  const approvalId = `apr_${randomUUID()}`;
  const invocationId = `inv_${randomUUID()}`;
  const ticket = newApprovalTicket(
    {
      approval_id: approvalId,
      workspace_id: key.workspaceId,
      virtual_key_id: key.id,
      connection_id: route.connectionId,
      provider: route.provider,
      tool: route.tool,
      ...(logicalTool !== route.tool ? { logical_tool: logicalTool } : {}),
      environment: key.workspace.environment,
      destructive,
      arguments: args,
      idempotency_key: idempotencyKey,
      ...(amountUsd !== undefined ? { amount_usd: amountUsd } : {}),
      invocation_id: invocationId,
    },
    now(),
  );
  const fields = encodeTicket(ticket);
  try {
    await withTimeout(deps.stream.xadd(streamKey, "*", ...fields), writeTimeoutMs);
  } catch (error) {
    log.warn({ approvalId, err: String(error) }, "approval stream write failed: nothing held");
    const nr = notReadyJsonRpc("approval_stream_unavailable");
    return { ...rpcError(rpcId, NOT_READY_HTTP_STATUS, nr.code, nr.message, nr.data, notReadyHttp("approval_stream_unavailable").headers), outcome: { kind: "not_ready", reason: "approval_stream_unavailable" } };
  }
  try {
    await store.createHeld({
      approvalId,
      workspaceId: key.workspaceId,
      virtualKeyId: key.id,
      connectionId: route.connectionId,
      provider: route.provider,
      upstreamUrl: route.upstream?.url ?? null,
      tool: route.tool,
      logicalTool: logicalTool !== route.tool ? logicalTool : null,
      invocationId,
      argumentHash: ticket.argument_hash,
      idempotencyKey,
      createdAt: new Date(ticket.created_at),
      expiresAt: new Date(ticket.expires_at),
      ticket: fields[3],
    });
  } catch (error) {
    // The ticket is on the stream but nothing is held: an orphan. Its resume answers
    // not_ready forever, so it can never create execution authority.
    log.error({ approvalId, err: String(error) }, "held record not committed: the ticket is an orphan");
    const data = { error: "not_ready", reason: "hold_not_committed", retryable: true, retry_after_seconds: NOT_READY_RETRY_AFTER_SECONDS };
    return { ...rpcError(rpcId, NOT_READY_HTTP_STATUS, NOT_READY_JSONRPC_CODE, "not_ready", data, { "Retry-After": String(NOT_READY_RETRY_AFTER_SECONDS) }), outcome: { kind: "not_ready", reason: "hold_not_committed" } };
  }
  return approvalRequired(deps, rpcId, approvalId, logicalTool, ticket.expires_at, false);
}

function approvalRequired(deps: GatewayDeps, rpcId: RpcId, approvalId: string, tool: string, expiresAt: Date | string, reused: boolean) {
  const inboxUrl = deps.inboxUrl?.replaceAll("{approval_id}", encodeURIComponent(approvalId));
  const err = approvalRequiredJsonRpc({ approvalId, tool, expiresAt, inboxUrl });
  return { ...rpcError(rpcId, APPROVAL_REQUIRED_HTTP_STATUS, err.code, err.message, err.data), outcome: { kind: "approval_required" as const, approvalId, reused } };
}

/** The identical call's latest request, when it has closed. */
async function closedRequest(deps: GatewayDeps, key: GatewayKey, idempotencyKey: string, hash: string): Promise<{ approvalId: string; status: ClosedApprovalStatus; reason: string | null } | null> {
  const { store, now } = deps;
  if (!store.findLatestHeld || !store.findApprovalOutcome) return null;
  const latest = await store.findLatestHeld(key.id, idempotencyKey, hash);
  if (!latest || latest.state !== "AwaitingApproval") return null; // executions answer for themselves
  const at = now();
  const outcome = await store.findApprovalOutcome(latest.approvalId, at);
  if (outcome && outcome.virtualKeyId === key.id && isClosedApprovalStatus(outcome.status)) return { approvalId: latest.approvalId, status: outcome.status, reason: outcome.reason };
  // Held, never filed, and past its 24 hours: expired all the same.
  if (!outcome && latest.expiresAt.getTime() <= at.getTime()) return { approvalId: latest.approvalId, status: "expired", reason: null };
  return null;
}

function executionResponse(
  rpcId: RpcId,
  approvalId: string,
  invocationId: string,
  outcome: Awaited<ReturnType<typeof executeHeld>>,
): GatewayResponse & { outcome: ToolCallOutcome } {
  if (outcome.ok) {
    return { ...rpcResult(rpcId, asCallResult(outcome.result), { invocation_id: invocationId, approval_id: approvalId, replayed: outcome.replayed }), outcome: { kind: "executed", replayed: outcome.replayed, approvalId, invocationId } };
  }
  if (outcome.inProgress) {
    return { ...rpcError(rpcId, 409, GATEWAY_JSONRPC.executionInProgress, "execution_in_progress", { error: "execution_in_progress", retryable: true }), outcome: { kind: "not_ready", reason: "execution_in_progress" } };
  }
  return { ...rpcError(rpcId, 502, GATEWAY_JSONRPC.executionFailed, "execution_failed", { error: "execution_failed", message: outcome.error }), outcome: { kind: "execution_failed", approvalId } };
}

function heldMatchesLive(
  held: HeldInvocation,
  key: GatewayKey,
  route: { connectionId: string; provider: string; tool: string; upstream?: { url: string | null } | undefined },
  logicalTool: string,
  hash: string,
  idempotencyKey: string,
): boolean {
  return (
    held.workspaceId === key.workspaceId &&
    held.virtualKeyId === key.id &&
    held.connectionId === route.connectionId &&
    held.provider === route.provider &&
    // The upstream is pinned too: a connection now pointing elsewhere is not the held call's route.
    (held.upstreamUrl ?? null) === (route.upstream?.url ?? null) &&
    held.tool === route.tool &&
    (held.logicalTool ?? held.tool) === logicalTool &&
    held.argumentHash === hash &&
    held.idempotencyKey === idempotencyKey
  );
}

/**
 * Without an explicit key, the identical call always derives the same one, so the agent's
 * re-issue of "the identical tools/call" matches the token's bound idempotency key.
 */
export function derivedIdempotencyKey(key: Pick<GatewayKey, "id" | "workspaceId">, logicalTool: string, argHash: string): string {
  return `auto-${sha256Hex(canonicalJson({ workspace: key.workspaceId, key: key.id, tool: logicalTool, argument_hash: argHash }))}`;
}
