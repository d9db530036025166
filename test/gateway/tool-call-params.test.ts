import { describe, expect, it } from "vitest";
import { z } from "zod";
import { parseToolCall, toolCallParams, toolCallSchema } from "../../src/gateway/protocol.js";

// parseToolCall is the one validation of a tools/call on every transport. Its plain checks
// accept the common case without the schemas; they must never accept what the schemas refuse,
// and must answer exactly what the schemas answer. Every field of a valid call is replaced by
// each value of a set of awkward ones, and both verdicts compared.

/** What the schemas alone decide (the validation as it was before the plain checks). */
function bySchemas(body: unknown) {
  const envelope = toolCallSchema.safeParse(body);
  if (!envelope.success) return { ok: false, code: -32600 };
  if (envelope.data.method !== "tools/call") return { ok: false, code: -32601 };
  const params = toolCallParams.safeParse(envelope.data.params ?? {});
  if (!params.success) return { ok: false, code: -32602, message: z.prettifyError(params.error) };
  return { ok: true, id: envelope.data.id ?? null, name: params.data.name, arguments: params.data.arguments, meta: params.data._meta };
}

function byParse(body: unknown) {
  const r = parseToolCall(body);
  if (!r.ok) return { ok: false, code: r.problem.code, ...(r.problem.code === -32602 ? { message: r.problem.message } : {}) };
  return { ok: true, id: r.call.id, name: r.call.name, arguments: r.call.arguments, meta: r.call.meta };
}

const AWKWARD: unknown[] = [
  undefined, null, 0, 1.5, Number.NaN, Infinity, -1, "", " ", "a b", "x".repeat(256), "x".repeat(257), "github.read_file", "\u00a0", "tab\tname",
  true, [], [1], {}, { a: 1 }, Object.create(null), new Date(0), "tools/call", "2.0", "1.0", 2,
];

describe("parseToolCall", () => {
  it("agrees with the schemas on every field of a call replaced by each awkward value", () => {
    const valid = { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "github.read_file", arguments: { path: "a" }, _meta: { idempotency_key: "k" } } };
    const bodies: unknown[] = [valid, ...AWKWARD];
    for (const field of ["jsonrpc", "id", "method", "params"] as const) {
      for (const value of AWKWARD) bodies.push({ ...valid, [field]: value });
    }
    for (const field of ["name", "arguments", "_meta"] as const) {
      for (const value of AWKWARD) bodies.push({ ...valid, params: { ...valid.params, [field]: value } });
    }
    let accepted = 0;
    for (const body of bodies) {
      const expected = bySchemas(body);
      expect(byParse(body), JSON.stringify(body)).toEqual(expected);
      if (expected.ok) accepted++;
    }
    // The table holds both kinds.
    expect(accepted).toBeGreaterThan(10);
    expect(bodies.length - accepted).toBeGreaterThan(40);
  });
});
