import { describe, expect, it } from "vitest";
import {
  approvalRequiredHttp,
  approvalRequiredJsonRpc,
  argumentHash,
  canonicalJson,
  decodeTicket,
  encodeTicket,
  newApprovalTicket,
  notReadyHttp,
  notReadyJsonRpc,
  TICKET_TTL_MS,
  ticketFingerprint,
  type ApprovalTicket,
} from "../../src/gateway/index.js";

// Seed 003, "What the agent sees" and "The inbox".

const NOW = new Date("2026-12-01T12:00:00.000Z");

const ticket = (overrides: Partial<ApprovalTicket> = {}): ApprovalTicket => ({
  ...newApprovalTicket(
    {
      approval_id: "apr_01",
      workspace_id: "ws_01",
      virtual_key_id: "vk_01",
      connection_id: "conn_01",
      tool: "stripe.refund",
      logical_tool: "payments.refund",
      environment: "prod",
      destructive: true,
      arguments: { charge: "ch_1", amount: 12_500 },
      idempotency_key: "idem-01",
      amount_usd: 125,
      invocation_id: "inv_01",
    },
    NOW,
  ),
  ...overrides,
});

/** Encodes a ticket as a producer would, without the encoder's own validation. */
const rawFields = (value: unknown): string[] => ["approval_id", "apr_01", "ticket", JSON.stringify(value)];

describe("approval_required", () => {
  const held = { approvalId: "apr_01", tool: "stripe.refund", expiresAt: new Date(NOW.getTime() + TICKET_TTL_MS) };

  it("is HTTP 423 carrying approval_id, tool, expires_at and the inbox URL when one is configured", () => {
    expect(approvalRequiredHttp({ ...held, inboxUrl: "https://countersign.example/inbox/apr_01" })).toEqual({
      status: 423,
      body: {
        error: "approval_required",
        approval_id: "apr_01",
        tool: "stripe.refund",
        expires_at: "2026-12-02T12:00:00.000Z",
        inbox_url: "https://countersign.example/inbox/apr_01",
      },
    });
    expect(approvalRequiredHttp(held).body).not.toHaveProperty("inbox_url");
  });

  it("is JSON-RPC code -32003 with the same data", () => {
    expect(approvalRequiredJsonRpc(held)).toEqual({
      code: -32003,
      message: "approval_required: stripe.refund is held for review as approval apr_01 (until 2026-12-02T12:00:00.000Z)",
      data: approvalRequiredHttp(held).body,
    });
  });
});

describe("not_ready", () => {
  it("is a retryable HTTP 503 with Retry-After", () => {
    expect(notReadyHttp("approval_stream_unavailable")).toEqual({
      status: 503,
      headers: { "Retry-After": "10" },
      body: { error: "not_ready", reason: "approval_stream_unavailable", retryable: true, retry_after_seconds: 10 },
    });
  });

  it("is JSON-RPC code -32004, retryable", () => {
    expect(notReadyJsonRpc("held_record_missing", 3)).toEqual({
      code: -32004,
      message: "not_ready",
      data: { error: "not_ready", reason: "held_record_missing", retryable: true, retry_after_seconds: 3 },
    });
  });
});

describe("approval tickets", () => {
  it("tickets expire 24 hours after creation", () => {
    const t = ticket();
    expect(t.created_at).toBe("2026-12-01T12:00:00.000Z");
    expect(t.expires_at).toBe("2026-12-02T12:00:00.000Z");
    expect(TICKET_TTL_MS).toBe(24 * 60 * 60 * 1000);
    for (const expires_at of ["2026-12-02T12:00:00.001Z", "2026-12-02T11:59:59.999Z"]) {
      const decoded = decodeTicket(rawFields({ ...t, expires_at }));
      expect(decoded).toMatchObject({ ok: false, permanent: true, issues: [{ path: "ticket.expires_at" }] });
    }
  });

  it("encodes as approval_id plus one ticket field of canonical JSON, and decodes back", () => {
    const t = ticket();
    const fields = encodeTicket(t);
    expect(fields).toEqual(["approval_id", "apr_01", "ticket", canonicalJson(t)]);
    expect(decodeTicket(fields)).toEqual({ ok: true, ticket: t });
    expect(decodeTicket({ approval_id: "apr_01", ticket: fields[3] })).toEqual({ ok: true, ticket: t });
  });

  it("binds argument_hash to the hash of the arguments", () => {
    const t = ticket();
    expect(t.argument_hash).toBe(argumentHash(t.arguments));
    const decoded = decodeTicket(rawFields({ ...t, arguments: { charge: "ch_2", amount: 12_500 } }));
    expect(decoded).toMatchObject({ ok: false, permanent: true, issues: [{ path: "ticket.argument_hash" }] });
  });

  it("keeps arguments exactly as sent, own __proto__ keys included", () => {
    const args: Record<string, unknown> = JSON.parse('{"__proto__":{"x":1},"a":2}');
    const t = ticket({ arguments: args, argument_hash: argumentHash(args) });
    const decoded = decodeTicket(encodeTicket(t));
    expect(decoded.ok && Object.keys(decoded.ticket.arguments)).toEqual(["__proto__", "a"]);
  });

  it.each([
    ["a bad id", { workspace_id: "ws 01" }, "ticket.workspace_id"],
    ["a time that is not ISO", { created_at: "yesterday" }, "ticket.created_at"],
    ["a time with an offset", { created_at: "2026-12-01T13:00:00.000+01:00" }, "ticket.created_at"],
    ["a missing field", { connection_id: undefined }, "ticket.connection_id"],
    ["a wrong type", { destructive: "yes" }, "ticket.destructive"],
    ["an unknown field", { api_key: "sk_live" }, "ticket"],
    ["a negative amount", { amount_usd: -1 }, "ticket.amount_usd"],
    ["arguments that are not an object", { arguments: [1, 2] }, "ticket.arguments"],
    ["an argument hash that is not hex", { argument_hash: "XYZ" }, "ticket.argument_hash"],
  ])("rejects %s permanently, naming the field", (_label, overrides, path) => {
    const decoded = decodeTicket(rawFields({ ...ticket(), ...overrides }));
    expect(decoded.ok).toBe(false);
    expect(!decoded.ok && decoded.permanent).toBe(true);
    expect(!decoded.ok && decoded.issues.map((i) => i.path)).toContain(path);
  });

  it("rejects malformed stream entries permanently", () => {
    const json = encodeTicket(ticket())[3];
    expect(decodeTicket(["approval_id", "apr_02", "ticket", json])).toMatchObject({ ok: false, issues: [{ path: "approval_id" }] });
    expect(decodeTicket(["approval_id", "apr_01", "ticket", "{not json"])).toMatchObject({ ok: false, issues: [{ path: "ticket" }] });
    expect(decodeTicket(["approval_id", "apr_01", "ticket"])).toMatchObject({ ok: false, permanent: true });
    expect(decodeTicket(["approval_id", "apr_01"])).toMatchObject({ ok: false, issues: [{ path: "ticket" }] });
    expect(decodeTicket(["approval_id", "apr_01", "ticket", json, "ticket", json])).toMatchObject({ ok: false });
    expect(decodeTicket(["ticket", json])).toMatchObject({ ok: false, issues: [{ path: "approval_id" }] });
  });

  it("refuses to encode an invalid ticket", () => {
    expect(() => encodeTicket(ticket({ argument_hash: "0".repeat(64) }))).toThrow(/argument_hash/);
  });

  it("a repeated approval_id with a different payload has a different fingerprint", () => {
    const a = ticket();
    expect(ticketFingerprint({ ...a })).toBe(ticketFingerprint(a));
    expect(ticketFingerprint({ ...a, environment: "staging" })).not.toBe(ticketFingerprint(a));
    const { amount_usd: _amount, ...withoutAmount } = a;
    expect(ticketFingerprint({ ...withoutAmount, amount_usd: undefined })).toBe(ticketFingerprint(withoutAmount));
  });
});
