import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, ElicitRequestSchema, ErrorCode, ListRootsRequestSchema, LoggingMessageNotificationSchema, McpError, type ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { APPROVAL_REQUIRED_JSONRPC_CODE } from "../../src/gateway/errors.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { capabilitiesOfSession, sessionIdFor } from "../../src/gateway/mcp.js";
import { capabilitySignature, createUpstreamPool, type RelayCapabilities } from "../../src/gateway/upstream.js";
import { APPROVAL_SECRET, createWorld, vote, type World } from "../approvals/world.js";
import { startTalkingUpstream, type TalkingUpstream } from "../helpers/mcp-upstream.js";
import { TEST_REDIS_URL } from "../helpers/env.js";
import { createEventBus, type EventBus } from "../../src/infra/events.js";
import { answerRelay } from "../../src/workers/answer-relay.js";
import { randomUUID } from "node:crypto";

// The two-way call: an upstream that talks during a tools/call (progress, log messages, ping,
// elicitation, sampling, roots — the SDK's McpServer, answering on the call's SSE stream) through
// the gateway to real SDK clients, with and without those capabilities declared; and the same
// upstream reached by the delivery worker for an approved held call, with no client attached.

let w: World;
let upstream: TalkingUpstream;
// A short timeout: an upstream request left unanswered shows as -32009 within it, not as a pass.
const pool = createUpstreamPool({ approvalSecret: APPROVAL_SECRET, defaultTimeoutMs: 2_000, addresses: { allowPrivate: true } });
const clients: Client[] = [];
let conn: string;

beforeAll(async () => {
  upstream = await startTalkingUpstream();
  w = await createWorld({ gateway: { upstreams: pool } });
  const row = await w.db.prisma.connection.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: "talk", provider: "github", url: upstream.url } });
  conn = row.name;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await pool.close();
  await upstream?.close();
  await w?.close();
});

/** An SDK client on the gateway that declares `capabilities` and answers what it declared. */
async function agent(capabilities: ClientCapabilities = {}): Promise<{ client: Client; seen: { method: string; params: unknown }[] }> {
  const seen: { method: string; params: unknown }[] = [];
  const client = new Client({ name: "two-way-agent", version: "1.0.0" }, { capabilities });
  if (capabilities.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (r) => (seen.push({ method: r.method, params: r.params }), { action: "accept", content: { branch: "main" } }));
  }
  if (capabilities.sampling) {
    client.setRequestHandler(CreateMessageRequestSchema, async (r) => (seen.push({ method: r.method, params: r.params }), { role: "assistant", content: { type: "text", text: "two files changed" }, model: "test-model" }));
  }
  if (capabilities.roots) {
    client.setRequestHandler(ListRootsRequestSchema, async (r) => (seen.push({ method: r.method, params: r.params }), { roots: [{ uri: "file:///work/repo", name: "repo" }] }));
  }
  const transport = new StreamableHTTPClientTransport(new URL(`${w.gatewayUrl}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${w.keyPlaintext}` } } });
  await client.connect(transport);
  clients.push(client);
  return { client, seen };
}

const textOf = (result: object) => JSON.parse(((result as { content?: unknown }).content as { text: string }[])[0]!.text) as Record<string, unknown>;
const EVERYTHING: ClientCapabilities = { elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } };

describe("the upstream talks during a call", () => {
  it("progress reaches the client under its own token as it happens, log messages too; the answer turns into SSE only then", async () => {
    const { client } = await agent();
    const logs: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params.data));
    const progress: number[] = [];
    const result = await client.callTool({ name: `${conn}.progress`, arguments: {} }, undefined, { onprogress: (p) => void progress.push(p.progress) });
    expect(textOf(result)).toEqual({ done: true });
    expect(progress).toEqual([0, 50, 100]);
    expect(logs).toEqual(["at 0", "at 50", "at 100"]);

    // On the wire: the caller's own token, an SSE stream that ends with the result.
    const raw = await fetch(`${w.gatewayUrl}/v1/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${w.keyPlaintext}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: `${conn}.progress`, arguments: {}, _meta: { progressToken: "mine-1" } } }),
    });
    expect(raw.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = (await raw.text()).split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)) as { id?: number; method?: string; params?: { progressToken?: unknown } });
    expect(events.filter((e) => e.method === "notifications/progress").map((e) => e.params!.progressToken)).toEqual(["mine-1", "mine-1", "mine-1"]);
    expect(events.at(-1)).toMatchObject({ id: 7, result: { content: [{ type: "text" }] } });
    // A call whose upstream says nothing on the way stays a JSON answer.
    const quiet = await fetch(`${w.gatewayUrl}/v1/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${w.keyPlaintext}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: `${conn}.pinger`, arguments: {} } }),
    });
    expect(quiet.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await quiet.json()).toMatchObject({ id: 8, result: { content: [{ type: "text" }] } });
  });

  it("the upstream's ping is answered at once: the call finishes (not -32009)", async () => {
    const { client } = await agent();
    const started = Date.now();
    expect(textOf(await client.callTool({ name: `${conn}.pinger`, arguments: {} }))).toEqual({ pinged: true });
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it("elicitation, sampling and roots round-trip to a client that declared them, and its answers reach the upstream", async () => {
    const { client, seen } = await agent(EVERYTHING);
    expect(textOf(await client.callTool({ name: `${conn}.elicit`, arguments: {} }))).toEqual({ method: "elicitation/create", answer: { action: "accept", content: { branch: "main" } } });
    expect(textOf(await client.callTool({ name: `${conn}.sample`, arguments: {} }))).toMatchObject({ method: "sampling/createMessage", answer: { role: "assistant", content: { text: "two files changed" }, model: "test-model" } });
    expect(textOf(await client.callTool({ name: `${conn}.roots`, arguments: {} }))).toEqual({ method: "roots/list", answer: { roots: [{ uri: "file:///work/repo", name: "repo" }] } });
    expect(seen.map((s) => s.method)).toEqual(["elicitation/create", "sampling/createMessage", "roots/list"]);
    expect(seen[0]!.params).toMatchObject({ message: "Which branch?" });
  });

  it("a client that declared none of them: the upstream gets -32601 for each at once, and the call finishes", async () => {
    const { client } = await agent();
    for (const [tool, method] of [
      ["elicit", "elicitation/create"],
      ["sample", "sampling/createMessage"],
      ["roots", "roots/list"],
    ] as const) {
      const started = Date.now();
      const answer = textOf(await client.callTool({ name: `${conn}.${tool}`, arguments: {} }));
      expect(answer).toMatchObject({ method, error: { code: ErrorCode.MethodNotFound } });
      expect(Date.now() - started).toBeLessThan(1_500);
    }
  });

  it("each capability alone: only the declared one is relayed, the others are -32601", async () => {
    for (const only of ["elicitation", "sampling", "roots"] as const) {
      const { client, seen } = await agent({ [only]: {} });
      const codes: Record<string, number | "answered"> = {};
      for (const tool of ["elicit", "sample", "roots"]) {
        const answer = textOf(await client.callTool({ name: `${conn}.${tool}`, arguments: {} })) as { answer?: unknown; error?: { code: number } };
        codes[tool] = answer.error ? answer.error.code : "answered";
      }
      const relayed = { elicitation: "elicit", sampling: "sample", roots: "roots" }[only];
      expect(codes).toEqual({ elicit: -32601, sample: -32601, roots: -32601, [relayed]: "answered" });
      expect(seen).toHaveLength(1);
    }
  });

  it("a relayed request the client answers with an error: the upstream gets that error", async () => {
    const client = new Client({ name: "refuser", version: "1.0.0" }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async () => {
      throw new McpError(-32050, "the user declined to sample");
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${w.gatewayUrl}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${w.keyPlaintext}` } } }));
    clients.push(client);
    expect(textOf(await client.callTool({ name: `${conn}.sample`, arguments: {} }))).toMatchObject({ error: { code: -32050 } });
  });
});

describe("the session id carries what the client declared", () => {
  it("every combination of the relayable capabilities survives the round trip; an id the gateway did not mint is refused", () => {
    const parts: RelayCapabilities[][] = [
      [{}, { elicitation: { form: {} } }, { elicitation: { url: {} } }, { elicitation: { form: {}, url: {} } }],
      [{}, { sampling: {} }, { sampling: { tools: {} } }, { sampling: { context: {} } }, { sampling: { tools: {}, context: {} } }],
      [{}, { roots: {} }, { roots: { listChanged: true } }],
    ];
    const seen = new Set<string>();
    for (const e of parts[0]!) {
      for (const s of parts[1]!) {
        for (const r of parts[2]!) {
          const caps = { ...e, ...s, ...r };
          const id = sessionIdFor(caps);
          expect(id).toMatch(/^[\x21-\x7e]+$/);
          expect(capabilitiesOfSession(id)).toEqual(caps);
          seen.add(capabilitySignature(caps));
        }
      }
    }
    expect(seen.size).toBe(4 * 5 * 3);
    for (const forged of ["", "abc", "cs1..not-a-uuid", `cs1.e.${crypto.randomUUID()}`, `cs1.x.${crypto.randomUUID()}`, `cs2.ef.${crypto.randomUUID()}`, `cs1.ef.${crypto.randomUUID()}x`]) {
      expect(capabilitiesOfSession(forged)).toBeNull();
    }
  });

  it("initialize hands out one; a request with an id the gateway did not mint is 404 (the SDK client starts over)", async () => {
    const { client } = await agent(EVERYTHING);
    const id = (client.transport as StreamableHTTPClientTransport).sessionId!;
    expect(capabilitiesOfSession(id)).toEqual({ elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } });
    const forged = await fetch(`${w.gatewayUrl}/v1/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${w.keyPlaintext}`, "mcp-session-id": "someone-elses-session" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: `${conn}.pinger`, arguments: {} } }),
    });
    expect(forged.status).toBe(404);
    expect(upstream.runs.get("pinger") ?? 0).toBeGreaterThan(0);
  });

  it("a client's answer sent with another Authorization is not taken: the call still waits for its own client's", async () => {
    await anotherKeyAnswersFirst({ callAt: w.gatewayUrl, answerAt: w.gatewayUrl, otherKeyName: "other-agent" });
  });
});

/**
 * An elicitation call made at `callAt` with the world's key: another live key of the same
 * workspace answers it first (accepted like any response, 202, and dropped), then the caller's own
 * key, both at `answerAt`; the upstream must get the caller's answer.
 */
async function anotherKeyAnswersFirst(where: { callAt: string; answerAt: string; otherKeyName: string; pauseMs?: number }) {
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${w.keyPlaintext}`, "mcp-session-id": sessionIdFor({ elicitation: { form: {} } }) };
  const call = await fetch(`${where.callAt}/v1/mcp`, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: `${conn}.elicit`, arguments: {} } }) });
  const reader = call.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  while (!buffered.includes("\n\n")) {
    const chunk = await reader.read();
    if (chunk.done) throw new Error(`the call ended without asking: ${buffered}`);
    buffered += chunk.value;
  }
  const asked = JSON.parse(buffered.split("\n").find((l) => l.startsWith("data: "))!.slice(6)) as { id: string; method: string };
  expect(asked.method).toBe("elicitation/create");
  const answer = (content: Record<string, unknown>, authorization: string) =>
    fetch(`${where.answerAt}/v1/mcp`, { method: "POST", headers: { ...headers, authorization }, body: JSON.stringify({ jsonrpc: "2.0", id: asked.id, result: { action: "accept", content } }) });
  const other = generateVirtualKey();
  await w.db.prisma.virtualKey.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: where.otherKeyName, keyHash: hashVirtualKey(other), prefix: virtualKeyPrefix(other), createdById: w.org.adminId } });
  expect((await answer({ branch: "evil" }, `Bearer ${other}`)).status).toBe(202);
  if (where.pauseMs) await new Promise((r) => setTimeout(r, where.pauseMs));
  expect((await answer({ branch: "release" }, `Bearer ${w.keyPlaintext}`)).status).toBe(202);
  let rest = buffered;
  for (;;) {
    const chunk = await reader.read();
    if (chunk.done) break;
    rest += chunk.value;
  }
  const last = JSON.parse(rest.trim().split("\n").filter((l) => l.startsWith("data: ")).at(-1)!.slice(6)) as { result: { content: { text: string }[] } };
  expect(JSON.parse(last.result.content[0]!.text)).toEqual({ method: "elicitation/create", answer: { action: "accept", content: { branch: "release" } } });
}

describe("a client that goes away while it is asked", () => {
  it("its stream closes with a relayed request open: the upstream gets -32603 at once and its call finishes", async () => {
    const aborter = new AbortController();
    const before = upstream.asked.length;
    const call = await fetch(`${w.gatewayUrl}/v1/mcp`, {
      method: "POST",
      signal: aborter.signal,
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${w.keyPlaintext}`, "mcp-session-id": sessionIdFor({ sampling: {} }) },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: `${conn}.sample`, arguments: {} } }),
    });
    const reader = call.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = "";
    while (!buffered.includes("sampling/createMessage")) {
      const chunk = await reader.read();
      if (chunk.done) throw new Error(`the call ended without asking: ${buffered}`);
      buffered += chunk.value;
    }
    aborter.abort();
    await vi.waitFor(() => expect(upstream.asked.slice(before)).toContainEqual(expect.objectContaining({ tool: "sample", error: expect.objectContaining({ code: ErrorCode.InternalError }) })), { timeout: 1_500, interval: 20 });
  });
});

describe("an approved held call whose upstream talks, executed with no client attached", () => {
  it("the delivery worker's execution answers the ping and gets -32601 for the elicitation: it finishes, once", async () => {
    const { client } = await agent(EVERYTHING);
    const held = await client.callTool({ name: `${conn}.deploy`, arguments: { env: "prod" } }).catch((e: unknown) => e);
    expect(held).toBeInstanceOf(McpError);
    expect((held as McpError).code).toBe(APPROVAL_REQUIRED_JSONRPC_CODE);
    const approvalId = ((held as McpError).data as { approval_id: string }).approval_id;
    await w.ingest.tick();
    await vote(w, w.reviewers[0]!, approvalId);
    await vote(w, w.reviewers[1]!, approvalId);
    expect(await w.delivery.tick()).toContainEqual({ kind: "delivered", replayed: false });
    expect(upstream.runs.get("deploy")).toBe(1);
    const execution = await w.db.prisma.gatewayExecution.findFirstOrThrow({ where: { approvalId } });
    expect(execution.state).toBe("Executed");
    expect(textOf(execution.result as { content: unknown })).toMatchObject({ deployed: true, question: { error: { code: ErrorCode.MethodNotFound } } });
  });
});

describe("two processes behind a balancer that does not route by session: an answer POSTed to the other one", () => {
  // Each gateway is a process of its own as far as answers go: its own registry of waiting
  // requests (one per MCP handler) and its own event bus on the shared Redis, as two API nodes
  // have. The agent's calls go to the first; its answers (a POST of a JSON-RPC response) to the second.
  type Node = Awaited<ReturnType<World["serveGateway"]>> & { bus: EventBus; relay: ReturnType<typeof answerRelay> };
  const nodes: Node[] = [];
  const channelPrefix = `two-way-${randomUUID()}`;
  async function node(): Promise<Node> {
    const bus = createEventBus({ redisUrl: TEST_REDIS_URL, channelPrefix });
    const relay = answerRelay(bus);
    const served = await w.serveGateway({}, 0, { answers: relay });
    const n = { ...served, bus, relay };
    nodes.push(n);
    return n;
  }
  afterAll(async () => {
    for (const n of nodes) {
      await n.close();
      await n.relay.close();
      await n.bus.close();
    }
  });

  const isAnswer = (body: unknown) => typeof body === "string" && !("method" in (JSON.parse(body) as object));

  it("the SDK client's elicitation answer reaches the upstream through the process that asked", async () => {
    const [asking, other] = [await node(), await node()];
    let relayed = 0;
    const client = new Client({ name: "fleet-agent", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "accept", content: { branch: "fleet" } }));
    const transport = new StreamableHTTPClientTransport(new URL(`${asking.url}/v1/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${w.keyPlaintext}` } },
      fetch: (url, init) => {
        if (init?.method === "POST" && isAnswer(init.body)) return (relayed++, fetch(`${other.url}/v1/mcp`, init));
        return fetch(url, init);
      },
    });
    await client.connect(transport);
    clients.push(client);
    expect(textOf(await client.callTool({ name: `${conn}.elicit`, arguments: {} }))).toEqual({ method: "elicitation/create", answer: { action: "accept", content: { branch: "fleet" } } });
    expect(relayed).toBe(1);
  });

  it("another key's answer crosses too and is not taken there: the call still waits for its own client's", async () => {
    const [asking, other] = [await node(), await node()];
    // A pause gives the wrong answer time to cross before the right one follows it.
    await anotherKeyAnswersFirst({ callAt: asking.url, answerAt: other.url, otherKeyName: "fleet-other-agent", pauseMs: 100 });
  });
});
