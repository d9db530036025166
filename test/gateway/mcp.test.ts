import { createServer } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sealConnectionCredential } from "../../src/gateway/connection-credential.js";
import { APPROVAL_CLOSED_JSONRPC_CODE, APPROVAL_REQUIRED_JSONRPC_CODE } from "../../src/gateway/errors.js";
import { createCedarGate, DEFAULT_GATEWAY_POLICIES } from "../../src/gateway/cedar-gate.js";
import { APPROVAL_ID_HEADER, APPROVAL_TOKEN_HEADER, createGateway, GATEWAY_JSONRPC } from "../../src/gateway/gateway.js";
import { createGatewayHttpHandler } from "../../src/gateway/http.js";
import { createMcpHandler } from "../../src/gateway/mcp.js";
import { createPostgresGatewayStore } from "../../src/gateway/postgres-store.js";
import type { GatewayStore } from "../../src/gateway/store.js";
import { listConnectionTools, UpstreamError } from "../../src/gateway/tools.js";
import { createUpstreamPool } from "../../src/gateway/upstream.js";
import { APPROVAL_SECRET, createWorld, vote, type World } from "../approvals/world.js";
import { startUpstream, type Upstream } from "../helpers/mcp-upstream.js";

// The gateway: real MCP clients (the SDK's Client on StreamableHTTPClientTransport) talk
// to the gateway, whose connections are real upstream MCP servers (the SDK's McpServer, on real
// HTTP ports) — list, allowed calls, held calls, the vote and the one execution, the agent's
// re-issue with its token, a closed request's retry, an upstream down or slow, the admin's
// overrides over the annotations. Real PostgreSQL and Redis underneath (test/approvals/world.ts).

let w: World;
let upstream: Upstream;
// The test upstreams listen on 127.0.0.1: loopback is allowed, as COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE=1 does.
const pool = createUpstreamPool({ approvalSecret: APPROVAL_SECRET, defaultTimeoutMs: 3_000, addresses: { allowPrivate: true } });
const clients: Client[] = [];

beforeAll(async () => {
  upstream = await startUpstream();
  w = await createWorld({ gateway: { upstreams: pool } });
  // The world's own connection ("github") here has no url: what such a connection answers is checked below.
  await w.db.prisma.connection.update({ where: { id: w.connection.id }, data: { url: null } });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await pool.close();
  await upstream?.close();
  await w?.close();
});

let n = 0;
async function connection(url: string | null = upstream.url, extra: { timeoutMs?: number; credentialSealed?: string; active?: boolean } = {}) {
  n++;
  return w.db.prisma.connection.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: `gh${n}`, provider: "github", url, ...extra } });
}

/** An MCP client on the gateway with the agent's key (and any extra headers). */
async function agent(headers: Record<string, string> = {}, key = w.keyPlaintext): Promise<Client> {
  const client = new Client({ name: "test-agent", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${w.gatewayUrl}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}`, ...headers } } });
  await client.connect(transport);
  clients.push(client);
  return client;
}

async function rpcError(promise: Promise<unknown>): Promise<McpError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof McpError) return error;
    throw error;
  }
  throw new Error(`expected an MCP error, got ${JSON.stringify(await promise)}`);
}

const heldData = (e: McpError) => e.data as { error: string; approval_id: string; tool: string; expires_at: string; inbox_url?: string };
const fileAll = () => w.ingest.tick();

describe("tools/list and allowed calls through a real MCP client", () => {
  it("initialize and ping work; tools/list returns the active connections' upstream tools, namespaced, with their schemas and annotations", async () => {
    const gh = await connection();
    const idle = await connection(upstream.url, { active: false });
    const client = await agent();
    expect(client.getServerVersion()).toMatchObject({ name: "countersign-gateway" });
    await expect(client.ping()).resolves.toBeDefined();
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining([`${gh.name}.delete_repo`, `${gh.name}.read_file`, `${gh.name}.plain_tool`]));
    expect(names.some((x) => x.startsWith(`${idle.name}.`))).toBe(false);
    // The connection without a url ("github", the world's) serves no MCP tools.
    expect(names.some((x) => x.startsWith("github."))).toBe(false);
    const del = tools.find((t) => t.name === `${gh.name}.delete_repo`)!;
    expect(del.inputSchema).toMatchObject({ type: "object", properties: { repo: { type: "string" } } });
    expect(del.annotations).toMatchObject({ destructiveHint: true });
  });

  it("an allowed call (read-only in prod) runs on the upstream and returns its result", async () => {
    const gh = await connection();
    const client = await agent();
    const before = upstream.calls.get("read_file") ?? 0;
    const result = await client.callTool({ name: `${gh.name}.read_file`, arguments: { path: "README.md" } });
    expect(result.structuredContent).toEqual({ path: "README.md", content: "contents of README.md" });
    expect(result.isError).toBeFalsy();
    expect(result._meta).toMatchObject({ replayed: false });
    expect(upstream.calls.get("read_file")).toBe(before + 1);
  });

  it("an upstream's error result passes through as a result; unknown tools, inactive connections and malformed arguments are clear errors", async () => {
    const gh = await connection();
    const idle = await connection(upstream.url, { active: false });
    const client = await agent();
    const failed = await client.callTool({ name: `${gh.name}.fails`, arguments: {} });
    expect(failed.isError).toBe(true);
    expect(failed.content).toEqual([{ type: "text", text: "the upstream says no" }]);

    const unknown = await rpcError(client.callTool({ name: `${gh.name}.no_such_tool`, arguments: {} }));
    expect(unknown.code).toBe(GATEWAY_JSONRPC.invalidParams);
    expect(unknown.data).toMatchObject({ error: "unknown_tool" });
    const noConnection = await rpcError(client.callTool({ name: "nowhere.read_file", arguments: {} }));
    expect(noConnection.data).toMatchObject({ error: "unknown_tool" });
    const inactive = await rpcError(client.callTool({ name: `${idle.name}.read_file`, arguments: { path: "x" } }));
    expect(inactive.code).toBe(GATEWAY_JSONRPC.denied);
    expect(inactive.data).toMatchObject({ error: "denied", reason: "connection_inactive" });

    // Arguments that are not an object: the transport's own JSON-RPC answer, on HTTP 200.
    const raw = await fetch(`${w.gatewayUrl}/v1/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${w.keyPlaintext}`, "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: `${gh.name}.read_file`, arguments: "not an object" } }),
    });
    expect(raw.status).toBe(200);
    expect(((await raw.json()) as { error: { code: number } }).error.code).toBe(-32602);
    // Arguments the upstream's schema refuses: the upstream's answer, and nothing ran.
    const before = upstream.calls.get("read_file") ?? 0;
    const invalid = await client.callTool({ name: `${gh.name}.read_file`, arguments: { path: 42 } }).catch((e: unknown) => e);
    if (invalid instanceof McpError) expect(invalid.code).toBe(-32602);
    else expect((invalid as { isError?: boolean }).isError).toBe(true);
    expect(upstream.calls.get("read_file") ?? 0).toBe(before);
  });

  it("the hot path's one statement answers the same on the driver as through Prisma (key, tier, route, upstream, override)", async () => {
    const gh = await connection(upstream.url, { timeoutMs: 1234 });
    await w.db.prisma.connectionToolOverride.create({ data: { orgId: w.org.orgId, connectionId: gh.id, tool: "read_file", destructive: true, updatedById: w.org.adminId } });
    const viaPrisma = createPostgresGatewayStore(w.db.prisma);
    const viaDriver = createPostgresGatewayStore(w.db.prisma, { sql: w.db.sql });
    const hash = w.virtualKey.keyHash;
    const a = await viaPrisma.resolveCall!(hash, `${gh.name}.read_file`);
    const b = await viaDriver.resolveCall!(hash, `${gh.name}.read_file`);
    expect(b).toEqual(a);
    expect(a.key).toMatchObject({ id: w.virtualKey.id, workspaceId: w.workspace.id, revoked: false, workspace: { environment: "prod", archived: false, policyVersion: 0 } });
    expect(a.route).toMatchObject({ connectionId: gh.id, provider: "github", tool: "github.read_file", upstreamTool: "read_file", override: true, upstream: { url: upstream.url, timeoutMs: 1234, credentialSealed: null } });
    // The same version string the resume path's connection read gives (one cached client for both).
    expect(a.route!.upstream!.updatedAt).toBe((await viaPrisma.findConnection(gh.id))!.upstream!.updatedAt);
    expect((await viaDriver.resolveCall!(hash, `${gh.name}.delete_repo`)).route).toMatchObject({ override: null });
    expect(await viaDriver.resolveCall!(hash, "nowhere.read_file")).toMatchObject({ key: { id: w.virtualKey.id }, route: null });
    expect(await viaDriver.resolveCall!("0".repeat(64), `${gh.name}.read_file`)).toEqual({ key: null, route: null });
  });

  it("a client without a live key is refused at the transport (401)", async () => {
    await expect(agent({}, "vk_not-a-key")).rejects.toThrow();
  });

  it("a sealed credential is presented to the upstream; one the gateway cannot open is never replaced by none", async () => {
    const guarded = await startUpstream({ credential: "Bearer upstream-secret" });
    try {
      const ok = await connection(guarded.url, { credentialSealed: sealConnectionCredential(APPROVAL_SECRET, "Bearer upstream-secret") });
      const wrong = await connection(guarded.url, { credentialSealed: sealConnectionCredential("another-secret-entirely-0123456789", "Bearer upstream-secret") });
      const client = await agent();
      const result = await client.callTool({ name: `${ok.name}.read_file`, arguments: { path: "a" } });
      expect(result.structuredContent).toMatchObject({ path: "a" });
      const refused = await rpcError(client.callTool({ name: `${wrong.name}.read_file`, arguments: { path: "a" } }));
      expect(refused.code).toBe(GATEWAY_JSONRPC.upstreamUnavailable);
      expect(guarded.calls.get("read_file")).toBe(1);
    } finally {
      await guarded.close();
    }
  });
});

describe("held calls through a real MCP client", () => {
  it("a destructive call in prod is held: -32003 with approval_id, tool, expires_at and the inbox URL; nothing runs", async () => {
    const gh = await connection();
    const client = await agent();
    const before = upstream.calls.get("delete_repo") ?? 0;
    const streamBefore = await w.streamLength();
    const held = await rpcError(client.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/held" } }));
    expect(held.code).toBe(APPROVAL_REQUIRED_JSONRPC_CODE);
    const data = heldData(held);
    expect(data).toMatchObject({ error: "approval_required", tool: `${gh.name}.delete_repo`, inbox_url: `https://countersign.test/inbox/${data.approval_id}` });
    expect(Date.parse(data.expires_at) - Date.now()).toBeGreaterThan(23 * 3600_000);
    expect(await w.streamLength()).toBe(streamBefore + 1);
    expect(upstream.calls.get("delete_repo") ?? 0).toBe(before);
    const record = await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId: data.approval_id } });
    expect(record).toMatchObject({ state: "AwaitingApproval", upstreamUrl: upstream.url, tool: "github.delete_repo", connectionId: gh.id });
    // The plain retry gets the same ticket.
    const again = await rpcError(client.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/held" } }));
    expect(heldData(again).approval_id).toBe(data.approval_id);
  });

  it("vote, then the agent's re-issue with the token (requestInit headers) executes on the upstream exactly once; delivery and retries replay", async () => {
    const gh = await connection();
    const client = await agent();
    const held = heldData(await rpcError(client.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/once" } })));
    await fileAll();
    await vote(w, w.reviewers[0]!, held.approval_id);
    await vote(w, w.reviewers[1]!, held.approval_id);
    const status = (await (await fetch(`${w.gatewayUrl}/v1/approvals/${held.approval_id}`, { headers: { authorization: `Bearer ${w.keyPlaintext}` } })).json()) as { status: string; approval_token: string };
    expect(status.status).toBe("approved");
    const before = upstream.calls.get("delete_repo") ?? 0;

    const approved = await agent({ [APPROVAL_ID_HEADER]: held.approval_id, [APPROVAL_TOKEN_HEADER]: status.approval_token });
    const [first, second] = await Promise.all([
      approved.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/once" } }).catch((e: unknown) => e),
      approved.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/once" } }).catch((e: unknown) => e),
    ]);
    const results = [first, second].filter((r): r is { structuredContent: Record<string, unknown>; _meta: Record<string, unknown> } => !(r instanceof Error));
    expect(results.length).toBeGreaterThanOrEqual(1);
    expect(results[0]!.structuredContent).toMatchObject({ deleted: "acme/once" });
    expect(upstream.calls.get("delete_repo")).toBe(before + 1);

    // Delivery finds it executed and replays; so does the plain retry (same stored result).
    await w.delivery.tick();
    const retried = await client.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/once" } });
    expect(retried._meta).toMatchObject({ approval_id: held.approval_id, replayed: true });
    expect(retried.structuredContent).toEqual(results[0]!.structuredContent);
    expect(upstream.calls.get("delete_repo")).toBe(before + 1);
  });

  it("vote, then delivery resumes on the real upstream once; the agent's re-issue replays", async () => {
    const gh = await connection();
    const client = await agent();
    const held = heldData(await rpcError(client.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/delivered" } })));
    await fileAll();
    const before = upstream.calls.get("delete_repo") ?? 0;
    await vote(w, w.reviewers[0]!, held.approval_id);
    await vote(w, w.reviewers[1]!, held.approval_id);
    expect(await w.delivery.tick()).toContainEqual({ kind: "delivered", replayed: false });
    expect(upstream.calls.get("delete_repo")).toBe(before + 1);
    const record = await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId: held.approval_id } });
    expect(record.state).toBe("Executed");
    expect(record.result).toMatchObject({ structuredContent: { deleted: "acme/delivered" } });

    const status = (await (await fetch(`${w.gatewayUrl}/v1/approvals/${held.approval_id}`, { headers: { authorization: `Bearer ${w.keyPlaintext}` } })).json()) as { approval_token: string; execution_status: string };
    expect(status.execution_status).toBe("executed");
    const reissue = await agent({ [APPROVAL_ID_HEADER]: held.approval_id, [APPROVAL_TOKEN_HEADER]: status.approval_token });
    const replay = await reissue.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/delivered" } });
    expect(replay._meta).toMatchObject({ replayed: true, approval_id: held.approval_id });
    expect(upstream.calls.get("delete_repo")).toBe(before + 1);
  });

  it("a closed request's identical retry is approval_closed (-32007), never held again", async () => {
    const gh = await connection();
    const client = await agent();
    const held = heldData(await rpcError(client.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/rejected" } })));
    await fileAll();
    await vote(w, w.reviewers[0]!, held.approval_id, "DENY");
    const streamBefore = await w.streamLength();
    const retry = await rpcError(client.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/rejected" } }));
    expect(retry.code).toBe(APPROVAL_CLOSED_JSONRPC_CODE);
    expect(retry.data).toMatchObject({ error: "approval_closed", status: "rejected", approval_id: held.approval_id });
    expect(await w.streamLength()).toBe(streamBefore);
  });

  it("a connection pointed at another upstream after the hold: the gateway refuses route_changed, the re-issue is held again, nothing runs", async () => {
    const other = await startUpstream();
    try {
      const gh = await connection();
      const client = await agent();
      const held = heldData(await rpcError(client.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/moved" } })));
      await fileAll();
      let token = "";
      await vote(w, w.reviewers[0]!, held.approval_id);
      await vote(w, w.reviewers[1]!, held.approval_id);
      token = ((await (await fetch(`${w.gatewayUrl}/v1/approvals/${held.approval_id}`, { headers: { authorization: `Bearer ${w.keyPlaintext}` } })).json()) as { approval_token: string }).approval_token;
      await w.db.prisma.connection.update({ where: { id: gh.id }, data: { url: other.url } });
      const before = upstream.calls.get("delete_repo") ?? 0;
      expect(await w.delivery.tick()).toContainEqual({ kind: "failed", code: "gateway_route_changed" });
      const reissue = await agent({ [APPROVAL_ID_HEADER]: held.approval_id, [APPROVAL_TOKEN_HEADER]: token });
      const again = await rpcError(reissue.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/moved" } }));
      expect(again.code).toBe(APPROVAL_REQUIRED_JSONRPC_CODE);
      expect(heldData(again).approval_id).not.toBe(held.approval_id);
      expect(upstream.calls.get("delete_repo") ?? 0).toBe(before);
      expect(other.calls.get("delete_repo") ?? 0).toBe(0);
    } finally {
      await other.close();
    }
  });
});

describe("destructive: annotations, overrides and the fallback", () => {
  it("an admin's override wins over the annotations, both ways, at the next call; a tool without hints is destructive (fallback)", async () => {
    const gh = await connection();
    const client = await agent();
    // Fallback: no hints → held.
    const plain = await rpcError(client.callTool({ name: `${gh.name}.plain_tool`, arguments: { x: 1 } }));
    expect(plain.code).toBe(APPROVAL_REQUIRED_JSONRPC_CODE);

    await w.db.prisma.connectionToolOverride.create({ data: { orgId: w.org.orgId, connectionId: gh.id, tool: "delete_repo", destructive: false, updatedById: w.org.adminId } });
    await w.db.prisma.connectionToolOverride.create({ data: { orgId: w.org.orgId, connectionId: gh.id, tool: "read_file", destructive: true, updatedById: w.org.adminId } });
    await w.db.prisma.connectionToolOverride.create({ data: { orgId: w.org.orgId, connectionId: gh.id, tool: "plain_tool", destructive: false, updatedById: w.org.adminId } });
    const before = upstream.calls.get("delete_repo") ?? 0;
    const ran = await client.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/overridden" } });
    expect(ran.structuredContent).toMatchObject({ deleted: "acme/overridden" });
    expect(upstream.calls.get("delete_repo")).toBe(before + 1);
    const read = await rpcError(client.callTool({ name: `${gh.name}.read_file`, arguments: { path: "secret" } }));
    expect(read.code).toBe(APPROVAL_REQUIRED_JSONRPC_CODE);
    expect((await client.callTool({ name: `${gh.name}.plain_tool`, arguments: { x: 2 } })).structuredContent).toEqual({ x: 2 });

    // tools/list shows what the gate will do; listConnectionTools says why.
    const listed = (await client.listTools()).tools;
    expect(listed.find((t) => t.name === `${gh.name}.read_file`)!.annotations).toMatchObject({ destructiveHint: true, readOnlyHint: false });
    const info = await listConnectionTools(gh, { upstreams: pool, overrides: await w.db.prisma.connectionToolOverride.findMany({ where: { connectionId: gh.id } }) });
    const by = Object.fromEntries(info.map((t) => [t.upstreamName, t]));
    expect(by["delete_repo"]).toMatchObject({ name: `${gh.name}.delete_repo`, destructiveHint: true, destructive: false, destructiveSource: "override" });
    expect(by["read_file"]).toMatchObject({ readOnlyHint: true, destructive: true, destructiveSource: "override" });
    expect(by["fails"]).toMatchObject({ destructive: false, destructiveSource: "annotation" });
    expect(by["slow"]).toMatchObject({ destructive: false, destructiveSource: "annotation" });
    const fresh = await listConnectionTools(gh, { approvalSecret: APPROVAL_SECRET, addresses: { allowPrivate: true } });
    expect(fresh.find((t) => t.upstreamName === "plain_tool")).toMatchObject({ destructive: true, destructiveSource: "fallback" });
  });
});

describe("upstream failures", () => {
  it("an upstream that is down: left out of tools/list, and a call fails upstream_unavailable — never run or held as non-destructive", async () => {
    const gone = await startUpstream();
    const gh = await connection(gone.url);
    await gone.close();
    const client = await agent();
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names.some((x) => x.startsWith(`${gh.name}.`))).toBe(false);
    const streamBefore = await w.streamLength();
    for (const tool of ["read_file", "delete_repo"]) {
      const failed = await rpcError(client.callTool({ name: `${gh.name}.${tool}`, arguments: { path: "x", repo: "x" } }));
      expect(failed.code).toBe(GATEWAY_JSONRPC.upstreamUnavailable);
      expect(failed.data).toMatchObject({ error: "upstream_unavailable", retryable: true });
    }
    expect(await w.streamLength()).toBe(streamBefore);
    await expect(listConnectionTools(gh, { upstreams: pool })).rejects.toBeInstanceOf(UpstreamError);
    // A connection without a url: upstream_unavailable (not configured), nothing held.
    const none = await connection(null);
    const bare = createGateway({ store: createPostgresGatewayStore(w.db.prisma), stream: w.redis, streamKey: w.streamKey, gate: createCedarGate(DEFAULT_GATEWAY_POLICIES), approvalSecret: APPROVAL_SECRET, upstreams: pool });
    const noUrl = await bare.handleToolCall({ authorization: `Bearer ${w.keyPlaintext}`, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: `${none.name}.delete_repo`, arguments: {} } } });
    expect(noUrl.status).toBe(502);
    expect(noUrl.body).toMatchObject({ error: { code: GATEWAY_JSONRPC.upstreamUnavailable, data: { error: "upstream_unavailable", reason: "upstream_not_configured" } } });
    expect(await w.streamLength()).toBe(streamBefore);
  });

  it("an upstream that comes back is reconnected; a slow one times out (-32009) at the connection's timeoutMs", async () => {
    const flaky = await startUpstream();
    const port = new URL(flaky.url).port;
    const gh = await connection(flaky.url, { timeoutMs: 300 });
    const client = await agent();
    expect((await client.callTool({ name: `${gh.name}.read_file`, arguments: { path: "1" } })).structuredContent).toMatchObject({ path: "1" });
    await flaky.close();
    expect((await rpcError(client.callTool({ name: `${gh.name}.read_file`, arguments: { path: "2" } }))).code).toBe(GATEWAY_JSONRPC.upstreamUnavailable);
    // Back on the same port: the next call reconnects.
    const back = await startUpstream({ port: Number(port) });
    try {
      expect((await client.callTool({ name: `${gh.name}.read_file`, arguments: { path: "3" } })).structuredContent).toMatchObject({ path: "3" });
      const started = Date.now();
      const slow = await rpcError(client.callTool({ name: `${gh.name}.slow`, arguments: {} }));
      expect(slow.code).toBe(GATEWAY_JSONRPC.upstreamTimeout);
      expect(Date.now() - started).toBeLessThan(950);
    } finally {
      await back.close();
    }
  });

  it("a stateful upstream that forgot its sessions (restarted): the call is sent once more on a new session, and runs once", async () => {
    const sessions = new Map<string, StreamableHTTPServerTransport>();
    let runs = 0;
    const stateful = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        void (async () => {
          const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown) : undefined;
          const id = req.headers["mcp-session-id"];
          if (typeof id === "string") {
            const known = sessions.get(id);
            if (!known) return void res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
            return known.handleRequest(req, res, body);
          }
          const mcp = new McpServer({ name: "stateful", version: "1.0.0" });
          mcp.registerTool("count", { annotations: { readOnlyHint: true } }, async () => ({ content: [{ type: "text", text: String(++runs) }] }));
          const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => crypto.randomUUID(), enableJsonResponse: true, onsessioninitialized: (sid) => void sessions.set(sid, transport) });
          await mcp.connect(transport);
          await transport.handleRequest(req, res, body);
        })();
      });
    });
    await new Promise<void>((resolve) => stateful.listen(0, "127.0.0.1", resolve));
    try {
      const gh = await connection(`http://127.0.0.1:${(stateful.address() as { port: number }).port}/mcp`);
      const client = await agent();
      expect((await client.callTool({ name: `${gh.name}.count`, arguments: {} })).content).toEqual([{ type: "text", text: "1" }]);
      expect(sessions.size).toBe(1);
      sessions.clear(); // the upstream restarted
      expect((await client.callTool({ name: `${gh.name}.count`, arguments: {} })).content).toEqual([{ type: "text", text: "2" }]);
      expect(sessions.size).toBe(1);
      expect(runs).toBe(2);
    } finally {
      stateful.closeAllConnections();
      await new Promise<void>((resolve) => stateful.close(() => resolve()));
    }
  });

  it("an upstream down when the approved call is delivered: nothing is claimed, delivery retries, and it runs once when the upstream is back", async () => {
    const flaky = await startUpstream();
    const port = Number(new URL(flaky.url).port);
    const gh = await connection(flaky.url);
    const client = await agent();
    const held = heldData(await rpcError(client.callTool({ name: `${gh.name}.delete_repo`, arguments: { repo: "acme/later" } })));
    await fileAll();
    await flaky.close(); // its tools list is still cached: the delivery's liveness check finds it down
    await vote(w, w.reviewers[0]!, held.approval_id);
    await vote(w, w.reviewers[1]!, held.approval_id);
    const first = await w.delivery.tick();
    expect(first).toContainEqual(expect.objectContaining({ kind: "retry" }));
    expect(await w.db.prisma.gatewayExecution.count({ where: { approvalId: held.approval_id } })).toBe(0);
    const back = await startUpstream({ port });
    try {
      await w.db.prisma.deliveryJob.updateMany({ where: { requestId: held.approval_id }, data: { nextRunAt: new Date() } });
      expect(await w.delivery.tick()).toContainEqual({ kind: "delivered", replayed: false });
      expect(back.calls.get("delete_repo")).toBe(1);
    } finally {
      await back.close();
    }
  });

  it("the plain JSON-RPC POST keeps its HTTP statuses beside the MCP transport: 423 for a held call", async () => {
    const gh = await connection();
    const res = await fetch(`${w.gatewayUrl}/v1/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${w.keyPlaintext}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: `${gh.name}.delete_repo`, arguments: { repo: "acme/plain" } } }),
    });
    expect(res.status).toBe(423);
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(APPROVAL_REQUIRED_JSONRPC_CODE);
  });
});

describe("how often a message reads the key", () => {
  it("behind the route a known key is not read again for initialize, notifications or ping, once for tools/list and tools/call; the handler mounted alone reads it for every message", async () => {
    const gh = await connection();
    const base = createPostgresGatewayStore(w.db.prisma, { sql: w.db.sql });
    let reads = 0;
    const store: GatewayStore = {
      ...base,
      findKeyByHash: (hash) => (reads++, base.findKeyByHash(hash)),
      resolveCall: (hash, tool) => (reads++, base.resolveCall!(hash, tool)),
    };
    const gateway = createGateway({
      store,
      stream: { xadd: () => Promise.reject(new Error("no stream here")) },
      gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
      approvalSecret: APPROVAL_SECRET,
      upstreams: pool,
    });
    const routed = createGatewayHttpHandler(gateway);
    const alone = createMcpHandler(gateway);
    const server = createServer((req, res) => {
      if (req.url?.startsWith("/alone")) {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => void alone(req, res, chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined));
        return;
      }
      void routed(req, res).then((served) => served || res.writeHead(404).end());
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const base_ = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const connect = async (url: string) => {
      const client = new Client({ name: "test-agent", version: "1.0.0" });
      await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${w.keyPlaintext}` } } }));
      clients.push(client);
      return client;
    };
    const counted = async (fn: () => Promise<unknown>) => {
      const before = reads;
      await fn();
      return reads - before;
    };
    try {
      let viaRoute!: Client;
      // initialize (the route proves the key), notifications/initialized (the client sends it
      // without waiting: counted with the ping after it) and ping: one read in all.
      expect(await counted(async () => ((viaRoute = await connect(`${base_}/v1/mcp`)), await viaRoute.ping()))).toBe(1);
      expect(await counted(() => viaRoute.ping())).toBe(0);
      expect(await counted(() => viaRoute.listTools())).toBe(1);
      expect(await counted(() => viaRoute.callTool({ name: `${gh.name}.read_file`, arguments: { path: "a" } }))).toBe(1);

      let viaHandler!: Client;
      // initialize, notifications/initialized and ping each read it (and the client's GET for a stream, refused 405).
      expect(await counted(async () => ((viaHandler = await connect(`${base_}/alone`)), await viaHandler.ping()))).toBeGreaterThanOrEqual(3);
      expect(await counted(() => viaHandler.ping())).toBe(1);
      expect(await counted(() => viaHandler.listTools())).toBe(2);
      expect(await counted(() => viaHandler.callTool({ name: `${gh.name}.read_file`, arguments: { path: "a" } }))).toBe(1);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
