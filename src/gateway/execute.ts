import { CedarEvaluationError, type GateDecision } from "./cedar-gate.js";
import type { GatewayDeps } from "./deps.js";
import { toJsonValue, type CallResult } from "./respond.js";
import type { GatewayKey, GatewayRoute, HeldInvocation } from "./store.js";
import { classifyTool, UpstreamError, type CallChannel, type DestructiveSource, type UpstreamTool } from "./upstream.js";

// What the hold and the resume share: the gate's request and decision, the tool a call runs on,
// and the once-only execution of a held call.

export function gateRequest(key: GatewayKey, route: { connectionId: string; tool: string }, logicalTool: string, approved: boolean, destructive: boolean) {
  return {
    principal: { type: "VirtualKey", id: key.id },
    action: { type: "Action", id: "tools/call" },
    resource: { type: "Tool", id: route.tool },
    context: { workspace_id: key.workspaceId, connection_id: route.connectionId, logical_tool: logicalTool },
    destructive,
    environment: key.workspace.environment,
    production: key.workspace.production,
    alreadyApproved: approved,
  };
}

export async function decide(deps: GatewayDeps, key: GatewayKey, request: ReturnType<typeof gateRequest>): Promise<GateDecision> {
  const { gates } = deps;
  // The workspace's gate; a set that cannot be read or parsed denies (fail closed).
  const choice = await gates.gateFor(key);
  if (!choice.ok) return { decision: "deny", reason: choice.reason, policyIds: [] };
  try {
    return choice.gate.decide(request);
  } catch (error) {
    // A request Cedar cannot evaluate never authorizes anything.
    if (error instanceof CedarEvaluationError) return { decision: "deny", reason: "forbidden", policyIds: [] };
    throw error;
  }
}

export type ResolvedTool = {
  destructive: boolean;
  source: DestructiveSource;
  /**
   * Runs the call on the upstream with these arguments. `channel` is the caller's stream; without
   * one (an approved call executed by the delivery worker) the upstream's questions are answered
   * with errors at once, so the call finishes.
   */
  run: (args: Record<string, unknown>, channel?: CallChannel | null) => Promise<CallResult>;
};

/**
 * What the call runs on and whether it is destructive. Fails closed: when the upstream's tools
 * cannot be read, the call is not treated as non-destructive, it fails (upstream_unavailable).
 */
export async function resolveTool(
  deps: GatewayDeps,
  route: Pick<GatewayRoute, "tool" | "upstream" | "upstreamTool" | "override">,
  how: { live?: boolean } = {},
): Promise<ResolvedTool | { error: UpstreamError | "unknown_tool" }> {
  const override = route.override ?? null;
  const upstream = route.upstream;
  if (deps.upstreams && upstream?.url) {
    const pool = deps.upstreams;
    const name = route.upstreamTool ?? route.tool.slice(route.tool.indexOf(".") + 1);
    let tool: UpstreamTool | null;
    try {
      tool = await pool.tool(upstream, name);
    } catch (error) {
      if (error instanceof UpstreamError) return { error };
      throw error;
    }
    if (!tool) return { error: "unknown_tool" };
    // Before a held call's execution is claimed (once claimed, a failure is final): the
    // upstream answers now, so an upstream that is down is a retry, not a failed execution.
    if (how.live) {
      try {
        await pool.ping(upstream);
      } catch (error) {
        if (error instanceof UpstreamError) return { error };
        throw error;
      }
    }
    const c = classifyTool(tool, override);
    return { ...c, run: (args, channel) => pool.call(upstream, name, args, channel) };
  }
  return { error: new UpstreamError("upstream_not_configured", upstream?.url ? "this gateway reaches no upstream MCP servers" : "the connection has no upstream MCP server") };
}

/**
 * Runs a held call once per (key, idempotency key). The first caller inserts the execution
 * row and executes; every later caller — another resume, an agent re-issue, a retry after a
 * lost response — replays the stored outcome.
 */
export async function executeHeld(
  deps: GatewayDeps,
  held: HeldInvocation,
  args: Record<string, unknown>,
  run: ResolvedTool["run"],
): Promise<{ ok: true; replayed: boolean; result: unknown } | { ok: false; inProgress: boolean; error: string }> {
  const { store, log } = deps;
  const claim = await store.claimExecution({
    virtualKeyId: held.virtualKeyId,
    idempotencyKey: held.idempotencyKey,
    approvalId: held.approvalId,
    invocationId: held.invocationId,
  });
  if (!claim.claimed) {
    const existing = claim.existing;
    if (existing.state === "Executed") return { ok: true, replayed: true, result: existing.result };
    if (existing.state === "Failed") return { ok: false, inProgress: false, error: existing.error ?? "execution failed" };
    return { ok: false, inProgress: true, error: "execution_in_progress" };
  }
  // Marking the held record runs beside the call: the execution row above is what makes it once.
  const marking = store.setHeldState(held.approvalId, "Executing");
  marking.catch(() => {}); // awaited below; never an unhandled rejection meanwhile
  let result: unknown;
  try {
    // Callers have checked the connection still points at the provider and upstream the hold saw.
    result = await run(args);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    await marking;
    await Promise.all([store.finishExecution(held, { state: "Failed", error: message }), store.setHeldState(held.approvalId, "Failed")]);
    log.warn({ approvalId: held.approvalId, invocationId: held.invocationId, err: message }, "held call failed at the provider");
    return { ok: false, inProgress: false, error: message };
  }
  const stored = toJsonValue(result);
  await marking;
  await Promise.all([store.finishExecution(held, { state: "Executed", result: stored }), store.setHeldState(held.approvalId, "Executed", stored)]);
  log.info({ approvalId: held.approvalId, invocationId: held.invocationId, tool: held.tool }, "held call executed");
  return { ok: true, replayed: false, result: stored };
}
