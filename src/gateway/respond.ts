import { createHash } from "node:crypto";
import type { GatewayResponse, ToolCallOutcome } from "./protocol.js";
import { GATEWAY_JSONRPC, isPlainObject } from "./protocol.js";
import type { UpstreamError } from "./upstream.js";

// The gateway's answers and the small pure helpers every part of it shares.

export type RpcId = string | number | null;

export function rpcError(id: RpcId, status: number, code: number, message: string, data: unknown, headers: Record<string, string> = {}): GatewayResponse {
  return { status, headers, body: { jsonrpc: "2.0", id, error: { code, message, data } } };
}

/** An MCP `tools/call` result (what an upstream answers; what the gateway stores and replays). */
export type CallResult = { content: unknown[]; structuredContent?: Record<string, unknown>; isError?: boolean; _meta?: Record<string, unknown>; [k: string]: unknown };

/** An upstream's result passes through; any other stored value (a result stored before upstreams) becomes one. */
export function asCallResult(value: unknown): CallResult {
  if (isPlainObject(value) && Array.isArray(value["content"])) return toJsonValue(value) as CallResult;
  const json = toJsonValue(value);
  return { content: [{ type: "text", text: JSON.stringify(json) }], ...(isPlainObject(json) ? { structuredContent: json } : {}), isError: false };
}

export function rpcResult(id: RpcId, result: CallResult, meta: Record<string, unknown>): GatewayResponse {
  return { status: 200, headers: {}, body: { jsonrpc: "2.0", id, result: { ...result, _meta: { ...(isPlainObject(result._meta) ? result._meta : {}), ...meta } } } };
}

/** The standard JSON-RPC codes an upstream's error keeps; any other becomes upstream_error (never one of the gateway's own). */
const PASSED_THROUGH_CODES = new Set([-32600, -32601, -32602, -32603]);

export function toolUnavailable(id: RpcId, tool: string, error: UpstreamError | "unknown_tool"): GatewayResponse & { outcome: ToolCallOutcome } {
  if (error === "unknown_tool") return rejected(id, 404, GATEWAY_JSONRPC.invalidParams, "unknown_tool", `the upstream does not serve ${tool}`);
  const data = { error: error.code, tool, message: error.message, retryable: error.code !== "upstream_error" };
  const outcome = { kind: "upstream_failed" as const, error: error.code };
  switch (error.code) {
    case "upstream_timeout":
      return { ...rpcError(id, 504, GATEWAY_JSONRPC.upstreamTimeout, "upstream_timeout", data), outcome };
    case "upstream_error": {
      const code = error.upstreamCode !== undefined && PASSED_THROUGH_CODES.has(error.upstreamCode) ? error.upstreamCode : GATEWAY_JSONRPC.upstreamError;
      return { ...rpcError(id, 502, code, error.message, { ...data, upstream_code: error.upstreamCode ?? null }), outcome };
    }
    default:
      return { ...rpcError(id, 502, GATEWAY_JSONRPC.upstreamUnavailable, "upstream_unavailable", { ...data, error: "upstream_unavailable", reason: error.code }), outcome };
  }
}


export function rejected(id: RpcId, status: number, code: number, error: string, message: string): GatewayResponse & { outcome: ToolCallOutcome } {
  return { ...rpcError(id, status, code, error, { error, message }), outcome: { kind: "rejected", reason: error } };
}

export function denied(id: RpcId, reason: string, policyIds: string[]): GatewayResponse & { outcome: ToolCallOutcome } {
  return { ...rpcError(id, 403, GATEWAY_JSONRPC.denied, "denied", { error: "denied", reason, policy_ids: policyIds }), outcome: { kind: "denied", reason } };
}



export function bearer(header: string | null | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

export function digest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}


/** Results are stored and replayed as JSON: drop what JSON cannot carry. */
export function toJsonValue(value: unknown): unknown {
  if (value === undefined) return null;
  return JSON.parse(JSON.stringify(value)) as unknown;
}

export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
