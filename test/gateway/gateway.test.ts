import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mintApprovalToken } from "../../src/gateway/approval-token.js";
import { argumentHash } from "../../src/domain/canonical.js";
import { createCedarGate, DEFAULT_GATEWAY_POLICIES } from "../../src/gateway/cedar-gate.js";
import { decodeTicket, TICKET_TTL_MS } from "../../src/gateway/errors.js";
import { createGateway, derivedIdempotencyKey, RESUME_PATH, type ResumeBody } from "../../src/gateway/gateway.js";
import { hashVirtualKey } from "../../src/gateway/keys.js";
import { createPostgresGatewayStore } from "../../src/gateway/postgres-store.js";
import { APPROVAL_SECRET, createWorld, SERVICE_TOKEN, type World } from "../approvals/world.js";

// Seed 003, the gateway's side: "What the agent sees", "Resume" step 4, "Resuming from the
// agent side". The gateway library on the real PostgreSQL (its store) and the real Redis.

let w: World;
beforeAll(async () => {
  w = await createWorld();
});
afterAll(async () => w?.close());

const args = (repo: string) => ({ repo, force: true });

async function held(repo: string) {
  const response = await w.callTool(args(repo));
  expect(response.outcome.kind).toBe("approval_required");
  return (response.outcome as { approvalId: string }).approvalId;
}

async function tokenFor(approvalId: string, overrides: Partial<Parameters<typeof mintApprovalToken>[1]> = {}, opts: Parameters<typeof mintApprovalToken>[2] = {}) {
  const record = await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId } });
  return mintApprovalToken(
    APPROVAL_SECRET,
    {
      approvalId,
      workspaceId: record.workspaceId,
      keyId: record.virtualKeyId,
      tool: record.tool,
      argumentHash: record.argumentHash,
      idempotencyKey: record.idempotencyKey,
      ...overrides,
    },
    opts,
  );
}

async function resumeBody(approvalId: string, repo: string, overrides: Partial<ResumeBody> = {}): Promise<ResumeBody> {
  const record = await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId } });
  return {
    approval_id: approvalId,
    workspace_id: record.workspaceId,
    virtual_key_id: record.virtualKeyId,
    key_hash: hashVirtualKey(w.keyPlaintext),
    connection_id: record.connectionId,
    tool: record.tool,
    logical_tool: record.logicalTool,
    invocation_id: record.invocationId,
    arguments: args(repo),
    idempotency_key: record.idempotencyKey,
    token: await tokenFor(approvalId),
    ...overrides,
  };
}

const resume = (body: unknown, token = SERVICE_TOKEN) =>
  fetch(`${w.gatewayUrl}${RESUME_PATH}`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify(body) });

describe("holding a destructive prod call", () => {
  it("returns approval_required — HTTP 423, JSON-RPC -32003 — with approval_id, tool, expires_at 24 h out and the inbox URL", async () => {
    const before = await w.streamLength();
    const response = await w.callTool(args("acme/hold-1"));
    expect(response.status).toBe(423);
    const error = (response.body as { error: { code: number; message: string; data: Record<string, string> } }).error;
    expect(error.code).toBe(-32003);
    const id = error.data["approval_id"]!;
    // The message names the approval id too: many clients show the message and nothing of the data.
    expect(error.message).toBe(`approval_required: github.delete_repo is held for review as approval ${id} (until ${error.data["expires_at"]})`);
    expect(error.data).toEqual({
      error: "approval_required",
      approval_id: id,
      tool: "github.delete_repo",
      expires_at: expect.any(String),
      inbox_url: `https://countersign.test/inbox/${id}`,
    });
    const record = await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId: id } });
    expect(record.state).toBe("AwaitingApproval");
    expect(record.expiresAt.getTime() - record.createdAt.getTime()).toBe(TICKET_TTL_MS);
    expect(new Date(error.data["expires_at"]!).getTime()).toBe(record.expiresAt.getTime());
    expect(await w.streamLength()).toBe(before + 1);
  });

  it("puts the raw arguments only on the private stream: the held record keeps their hash", async () => {
    const id = await held("acme/hold-secret");
    const entries = await w.redis.xrange(w.streamKey, "-", "+");
    const entry = entries.find(([, fields]) => fields[1] === id)!;
    const decoded = decodeTicket(entry[1]);
    expect(decoded.ok && decoded.ticket.arguments).toEqual(args("acme/hold-secret"));
    const record = await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId: id } });
    expect(JSON.stringify(record)).not.toContain("acme/hold-secret");
    expect(record.argumentHash).toBe(argumentHash(args("acme/hold-secret")));
  });

  it("writes the ticket to the stream before it commits the held record", async () => {
    const order: string[] = [];
    const store = createPostgresGatewayStore(w.db.prisma);
    const gateway = createGateway({
      store: { ...store, createHeld: async (r) => (order.push("commit"), store.createHeld(r)) },
      stream: { xadd: async (...a) => (order.push("xadd"), w.redis.xadd(...(a as [string, string, ...string[]]))) },
      streamKey: w.streamKey,
      gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
      approvalSecret: APPROVAL_SECRET,
      upstreams: w.upstreams,
    });
    const r = await gateway.handleToolCall({ authorization: `Bearer ${w.keyPlaintext}`, body: { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: "acme/order" } } } });
    expect(r.status).toBe(423);
    expect(order).toEqual(["xadd", "commit"]);
  });

  it("with the stream down nothing is held and the call stops as a retryable not_ready", async () => {
    const down = new Redis({ host: "127.0.0.1", port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    down.on("error", () => {});
    const gateway = createGateway({
      store: createPostgresGatewayStore(w.db.prisma),
      stream: down,
      gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
      approvalSecret: APPROVAL_SECRET,
      upstreams: w.upstreams,
    });
    const before = await w.db.prisma.gatewayInvocation.count();
    const r = await gateway.handleToolCall({ authorization: `Bearer ${w.keyPlaintext}`, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: "acme/down" } } } });
    expect(r.status).toBe(503);
    expect(r.headers["Retry-After"]).toBe("10");
    expect((r.body as { error: { code: number; data: unknown } }).error).toEqual({
      code: -32004,
      message: "not_ready",
      data: { error: "not_ready", reason: "approval_stream_unavailable", retryable: true, retry_after_seconds: 10 },
    });
    expect(await w.db.prisma.gatewayInvocation.count()).toBe(before);
    down.disconnect();
  });

  it("a plain retry of the identical call gets the same ticket back, not a second one", async () => {
    const first = await held("acme/retry");
    const before = await w.streamLength();
    const again = await w.callTool(args("acme/retry"));
    expect(again.outcome).toEqual({ kind: "approval_required", approvalId: first, reused: true });
    expect(await w.streamLength()).toBe(before);
  });

  it("a call that is not destructive runs at once; an unknown key is 401; an unknown tool is refused", async () => {
    const count = w.executions.length;
    const ok = await w.callTool({ repo: "acme/x" }, {}, "github.list_repos");
    expect(ok.status).toBe(200);
    expect(w.executions.length).toBe(count + 1);
    expect((await w.callTool({}, { authorization: "Bearer vk_nope" })).status).toBe(401);
    expect((await w.callTool({}, {}, "gitlab.delete_repo")).status).toBe(404);
  });

  it("a deny caused by any other forbid stays a deny", async () => {
    const gateway = createGateway({
      store: createPostgresGatewayStore(w.db.prisma),
      stream: w.redis,
      streamKey: w.streamKey,
      gate: createCedarGate(`@id("permit-all") permit (principal, action, resource);\n@id("no-deletes") forbid (principal, action, resource == Tool::"github.delete_repo");`),
      approvalSecret: APPROVAL_SECRET,
      upstreams: w.upstreams,
    });
    const before = await w.streamLength();
    const r = await gateway.handleToolCall({ authorization: `Bearer ${w.keyPlaintext}`, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: {} } } });
    expect(r.status).toBe(403);
    expect((r.body as { error: { code: number; data: unknown } }).error.data).toEqual({ error: "denied", reason: "forbidden", policy_ids: ["no-deletes"] });
    expect(await w.streamLength()).toBe(before);
  });
});

describe("resume: POST /internal/v1/approvals/resume", () => {
  it("refuses without the service token", async () => {
    const id = await held("acme/auth");
    const body = await resumeBody(id, "acme/auth");
    expect((await resume(body, "wrong-token-wrong-token")).status).toBe(401);
    const none = await fetch(`${w.gatewayUrl}${RESUME_PATH}`, { method: "POST", body: JSON.stringify(body) });
    expect(none.status).toBe(401);
    expect(w.executions.some((e) => e.approvalId === id)).toBe(false);
  });

  it("executes the exact held record once, pinned to its tool and connection; a second resume replays", async () => {
    const id = await held("acme/once");
    const body = await resumeBody(id, "acme/once");
    const [a, b] = await Promise.all([resume(body), resume(body)]);
    const statuses = [a.status, b.status].sort();
    // Two racing resumes: one executes, the other replays it or finds it in flight (retryable).
    expect(statuses[0]).toBe(200);
    const third = await resume(body);
    expect(third.status).toBe(200);
    expect(await third.json()).toMatchObject({ status: "executed", approval_id: id, replayed: true, result: { structuredContent: { deleted: "acme/once" } } });
    const runs = w.executions.filter((e) => e.approvalId === id);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ tool: "github.delete_repo", connectionId: w.connection.id, arguments: args("acme/once") });
    expect((await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId: id } })).state).toBe("Executed");
  });

  it("an orphan ticket (no committed held record) answers a retryable not_ready and never executes", async () => {
    const id = "apr_orphan-1";
    const token = await mintApprovalToken(APPROVAL_SECRET, {
      approvalId: id,
      workspaceId: w.workspace.id,
      keyId: w.virtualKey.id,
      tool: "github.delete_repo",
      argumentHash: argumentHash(args("acme/orphan")),
      idempotencyKey: "idem-orphan",
    });
    const r = await resume({
      approval_id: id,
      workspace_id: w.workspace.id,
      virtual_key_id: w.virtualKey.id,
      key_hash: hashVirtualKey(w.keyPlaintext),
      connection_id: w.connection.id,
      tool: "github.delete_repo",
      invocation_id: "inv_orphan",
      arguments: args("acme/orphan"),
      idempotency_key: "idem-orphan",
      token,
    });
    expect(r.status).toBe(503);
    expect(await r.json()).toEqual({ error: "not_ready", reason: "held_record_missing", retryable: true, retry_after_seconds: 10 });
    expect(await w.db.prisma.gatewayInvocation.findUnique({ where: { approvalId: id } })).toBeNull();
  });

  it("cannot change the destination, the arguments or the key", async () => {
    const id = await held("acme/pinned");
    const other = await w.db.prisma.connection.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: "github2", provider: "github" } });
    const moved = await resume(await resumeBody(id, "acme/pinned", { connection_id: other.id }));
    expect(moved.status).toBe(409);
    expect(await moved.json()).toMatchObject({ error: "held_record_mismatch", mismatched: ["connection_id"] });
    const otherArgs = await resume(await resumeBody(id, "acme/other"));
    expect(otherArgs.status).toBe(403);
    expect(await otherArgs.json()).toMatchObject({ error: "approval_token_mismatch", mismatched: ["argumentHash"] });
    const wrongKey = await resume(await resumeBody(id, "acme/pinned", { key_hash: hashVirtualKey("vk_someone-else") }));
    expect(wrongKey.status).toBe(403);
    expect(await wrongKey.json()).toMatchObject({ error: "key_unavailable" });
    expect(w.executions.some((e) => e.approvalId === id)).toBe(false);
  });

  it("verifies the token: signature, issuer, audience, and expiry with no clock-skew leeway", async () => {
    const id = await held("acme/tokens");
    const forged = await resume(await resumeBody(id, "acme/tokens", { token: (await tokenFor(id)).slice(0, -4) + "AAAA" }));
    expect(await forged.json()).toMatchObject({ error: "approval_token_invalid", reason: "bad_signature" });
    const issuer = await resume(await resumeBody(id, "acme/tokens", { token: await tokenFor(id, {}, { issuer: "someone-else" }) }));
    expect(await issuer.json()).toMatchObject({ error: "approval_token_invalid", reason: "wrong_issuer" });
    const audience = await resume(await resumeBody(id, "acme/tokens", { token: await tokenFor(id, {}, { audience: "another-gateway" }) }));
    expect(await audience.json()).toMatchObject({ error: "approval_token_invalid", reason: "wrong_audience" });
    // Minted one second ago with a one-second life: exp == now, which is already expired.
    const expired = await resume(await resumeBody(id, "acme/tokens", { token: await tokenFor(id, {}, { ttlSeconds: 1, now: new Date(Date.now() - 1000) }) }));
    expect(expired.status).toBe(403);
    expect(await expired.json()).toMatchObject({ error: "approval_token_invalid", reason: "expired" });
    expect(w.executions.some((e) => e.approvalId === id)).toBe(false);
  });

  it("issuer and audience are configurable", async () => {
    const gateway = createGateway({
      store: createPostgresGatewayStore(w.db.prisma),
      stream: w.redis,
      streamKey: w.streamKey,
      gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
      approvalSecret: APPROVAL_SECRET,
      tokenIssuer: "acme-control",
      tokenAudience: "acme-gateway",
      serviceToken: SERVICE_TOKEN,
      upstreams: w.upstreams,
    });
    const id = await held("acme/custom-iss");
    const body = await resumeBody(id, "acme/custom-iss", { token: await tokenFor(id, {}, { issuer: "acme-control", audience: "acme-gateway" }) });
    expect((await gateway.resume({ authorization: `Bearer ${SERVICE_TOKEN}`, body })).status).toBe(200);
    const defaults = await resumeBody(id, "acme/custom-iss");
    expect((await gateway.resume({ authorization: `Bearer ${SERVICE_TOKEN}`, body: defaults })).outcome).toEqual({ kind: "refused", error: "approval_token_invalid" });
  });

  it("re-applies the current key, connection and Cedar state before executing", async () => {
    const id = await held("acme/current");
    await w.db.prisma.connection.update({ where: { id: w.connection.id }, data: { active: false } });
    const inactive = await resume(await resumeBody(id, "acme/current"));
    expect(await inactive.json()).toMatchObject({ error: "connection_unavailable" });
    await w.db.prisma.connection.update({ where: { id: w.connection.id }, data: { active: true } });

    const strict = createGateway({
      store: createPostgresGatewayStore(w.db.prisma),
      stream: w.redis,
      gate: createCedarGate(`@id("permit-all") permit (principal, action, resource);\n@id("freeze-github") forbid (principal, action, resource == Tool::"github.delete_repo");`),
      approvalSecret: APPROVAL_SECRET,
      serviceToken: SERVICE_TOKEN,
      upstreams: w.upstreams,
    });
    const denied = await strict.resume({ authorization: `Bearer ${SERVICE_TOKEN}`, body: await resumeBody(id, "acme/current") });
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({ error: "denied", policy_ids: ["freeze-github"] });
    expect(w.executions.some((e) => e.approvalId === id)).toBe(false);
  });
});

describe("the agent-side re-issue", () => {
  it("counts as approved when the token verifies and every bound claim matches: it executes once", async () => {
    const id = await held("acme/agent");
    const token = await tokenFor(id);
    const first = await w.callTool(args("acme/agent"), { approvalId: id, approvalToken: token });
    expect(first.status).toBe(200);
    expect(first.outcome).toMatchObject({ kind: "executed", replayed: false, approvalId: id });
    const again = await w.callTool(args("acme/agent"), { approvalId: id, approvalToken: token });
    expect(again.outcome).toMatchObject({ kind: "executed", replayed: true });
    expect(w.executions.filter((e) => e.approvalId === id)).toHaveLength(1);
  });

  it("a forged or mismatched token falls back to approved = false: a new ticket, never execution", async () => {
    const id = await held("acme/forged");
    const good = await tokenFor(id);
    const record = await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId: id } });
    const cases = {
      forged: { approvalId: id, approvalToken: good.slice(0, -3) + "xyz" },
      otherApprovalHeader: { approvalId: "apr_someone-else", approvalToken: good },
      otherTool: { approvalId: id, approvalToken: await tokenFor(id, { tool: "github.archive_repo" }) },
      otherIdempotencyKey: { approvalId: id, approvalToken: await tokenFor(id, { idempotencyKey: "idem-other" }) },
      otherKey: { approvalId: id, approvalToken: await tokenFor(id, { keyId: "vk-other" }) },
      otherWorkspace: { approvalId: id, approvalToken: await tokenFor(id, { workspaceId: "ws-other" }) },
      otherArguments: { approvalId: id, approvalToken: await tokenFor(id, { argumentHash: argumentHash({ repo: "acme/else" }) }) },
    };
    for (const [name, headers] of Object.entries(cases)) {
      const r = await w.callTool(args("acme/forged"), headers);
      expect(r.status, name).toBe(423);
      expect(r.outcome.kind, name).toBe("approval_required");
      expect((r.outcome as { approvalId: string }).approvalId, name).not.toBe(id);
    }
    expect(record.idempotencyKey).toBe(derivedIdempotencyKey({ id: w.virtualKey.id, workspaceId: w.workspace.id }, "github.delete_repo", argumentHash(args("acme/forged"))));
    expect(w.executions.some((e) => e.arguments["repo"] === "acme/forged")).toBe(false);
  });
});
