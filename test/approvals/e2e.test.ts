import { Redis } from "ioredis";
import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createIngestWorker } from "../../src/workers/ingest.js";
import { mintApprovalToken } from "../../src/gateway/approval-token.js";
import { createCedarGate, DEFAULT_GATEWAY_POLICIES } from "../../src/gateway/cedar-gate.js";
import { createGateway } from "../../src/gateway/gateway.js";
import { createGatewayHttpHandler } from "../../src/gateway/http.js";
import { createPostgresGatewayStore } from "../../src/gateway/postgres-store.js";
import { DEMO_UPSTREAM_URL } from "../../src/gateway/demo-upstream.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { startTestApp } from "../helpers/harness.js";
import { createOrg } from "../helpers/fixtures.js";
import { APPROVAL_SECRET, createWorld, SERVICE_TOKEN, vote, type World } from "./world.js";

// Seed 003's proof, end to end on the real Redis and PostgreSQL: the gateway library on its own
// HTTP server, Countersign's GraphQL over HTTP and graphql-ws, the ingest and delivery workers.

let w: World;
let baseUrl: string;
const clients: Client[] = [];

beforeAll(async () => {
  w = await createWorld();
  baseUrl = await w.t.listen();
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await w?.close();
});

/** The agent, over HTTP: JSON-RPC tools/call with its virtual key and optional approval headers. */
async function agentCall(args: Record<string, unknown>, headers: Record<string, string> = {}, key = w.keyPlaintext) {
  const response = await fetch(`${w.gatewayUrl}/v1/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}`, ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: "call-1", method: "tools/call", params: { name: "github.delete_repo", arguments: args } }),
  });
  return { status: response.status, body: (await response.json()) as { result?: unknown; error?: { code: number; message: string; data: Record<string, unknown> } } };
}

/** A graphql-ws subscriber whose messages arrive in `messages`; `next(pred)` waits for one. */
function subscriber<T>(token: string, query: string, variables: Record<string, unknown>) {
  const client = createClient({ url: `${baseUrl.replace("http", "ws")}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${token}` } });
  clients.push(client);
  const messages: T[] = [];
  const errors: unknown[] = [];
  const waiters: { pred: (m: T) => boolean; resolve: (m: T) => void }[] = [];
  const iterator = client.iterate<Record<string, T>>({ query, variables });
  void (async () => {
    try {
      for await (const result of iterator) {
        if (result.errors) errors.push(result.errors);
        const data = result.data ? (Object.values(result.data)[0] as T) : undefined;
        if (data === undefined) continue;
        messages.push(data);
        for (const waiter of [...waiters]) {
          if (waiter.pred(data)) {
            waiters.splice(waiters.indexOf(waiter), 1);
            waiter.resolve(data);
          }
        }
      }
    } catch (error) {
      errors.push(error);
    }
  })();
  return {
    messages,
    errors,
    next(pred: (m: T) => boolean, timeoutMs = 5_000): Promise<T> {
      const found = messages.find(pred);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no matching message in ${timeoutMs} ms; got ${JSON.stringify(messages)} ${JSON.stringify(errors)}`)), timeoutMs);
        waiters.push({ pred, resolve: (m) => (clearTimeout(timer), resolve(m)) });
      });
    },
    async close() {
      await iterator.return?.();
    },
  };
}

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

type StatusMessage = { id: string; status: string; executionStatus: string; revision: number; votes: { decision: string }[]; delivery: { errorCode: string | null } | null };
const STATUS = `subscription($id: ID!) { approvalRequestStatus(requestId: $id) { id status executionStatus revision votes { decision } delivery { errorCode } } }`;
type InboxMessage = { requests: { id: string }[]; addedIds: string[]; removedIds: string[]; reason: string };
const INBOX = `subscription($w: ID) { approvalInbox(workspaceId: $w) { requests { id } addedIds removedIds reason } }`;

async function heldOverHttp(args: Record<string, unknown>): Promise<string> {
  const held = await agentCall(args);
  expect(held.status).toBe(423);
  expect(held.body.error!.code).toBe(-32003);
  return String(held.body.error!.data["approval_id"]);
}

describe("the held tool call, end to end", () => {
  it("held (423 / -32003), filed by ingest, two reviewers vote while a third watches, delivery mints and dispatches, the gateway executes exactly once", async () => {
    const [r1, r2, watcher] = w.reviewers as [typeof w.reviewers[0], typeof w.reviewers[0], typeof w.reviewers[0]];
    const inbox = subscriber<InboxMessage>(watcher.token, INBOX, { w: w.workspace.id });
    await inbox.next((m) => m.reason === "snapshot");

    const id = await heldOverHttp({ repo: "acme/e2e-main" });
    expect(await w.ingest.tick()).toMatchObject({ inserted: 1 });
    const added = await inbox.next((m) => m.addedIds.includes(id));
    expect(added.reason).toBe("created");

    const status = subscriber<StatusMessage>(watcher.token, STATUS, { id });
    expect(await status.next(() => true)).toMatchObject({ id, status: "PENDING", revision: 1, votes: [] });

    await vote(w, r1, id);
    await status.next((m) => m.revision === 2 && m.votes.length === 1);
    await vote(w, r2, id);
    expect(await status.next((m) => m.status === "APPROVED")).toMatchObject({ executionStatus: "PENDING" });
    expect(w.executions.filter((e) => e.approvalId === id)).toHaveLength(0);

    expect(await w.delivery.tick()).toEqual([{ kind: "delivered", replayed: false }]);
    expect(await status.next((m) => m.executionStatus === "EXECUTED")).toMatchObject({ status: "APPROVED", delivery: { errorCode: null } });
    expect(w.executions.filter((e) => e.approvalId === id)).toHaveLength(1);
    // The agent retries the identical call: answered with the outcome, never run again.
    const retried = await agentCall({ repo: "acme/e2e-main" });
    expect(retried.status).toBe(200);
    expect(w.executions.filter((e) => e.arguments["repo"] === "acme/e2e-main")).toHaveLength(1);
    expect(await w.delivery.tick()).toEqual([]);
    await status.close();
    await inbox.close();
  });

  it("a policy edited mid-vote invalidates the request: no further votes, nothing delivered", async () => {
    const id = await heldOverHttp({ repo: "acme/e2e-policy" });
    await w.ingest.tick();
    const status = subscriber<StatusMessage>(w.reviewers[2]!.token, STATUS, { id });
    await status.next((m) => m.status === "PENDING");
    await vote(w, w.reviewers[0]!, id);
    const edit = await w.t.gql(
      `mutation($input: UpdateApprovalPolicyInput!) { updateApprovalPolicy(input: $input) { ... on MutationUpdateApprovalPolicySuccess { data { invalidatedRequestIds } } ... on Error { code } } }`,
      { input: { id: w.policy.id, expectedRevision: (await w.db.prisma.approvalPolicy.findUniqueOrThrow({ where: { id: w.policy.id } })).revision, rules: [{ id: "prod-github-two", effect: "ALLOW", tools: ["github.*"], environments: ["prod"], roleIds: ["system:approval-reviewer"], count: 3 }] } },
      w.org.adminToken,
    );
    expect(edit.data.updateApprovalPolicy.data.invalidatedRequestIds).toContain(id);
    expect(await status.next((m) => m.status === "INVALIDATED")).toBeTruthy();
    expect(await vote(w, w.reviewers[1]!, id)).toMatchObject({ __typename: "InvalidStateError", state: "invalidated" });
    expect(await w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id } })).toMatchObject({ closeReason: "policy_changed" });
    expect(await w.delivery.tick()).toEqual([]);
    expect(w.executions.some((e) => e.approvalId === id)).toBe(false);
    // Back to two reviewers for the flows below.
    const current = await w.db.prisma.approvalPolicy.findUniqueOrThrow({ where: { id: w.policy.id } });
    await w.t.gql(`mutation($input: UpdateApprovalPolicyInput!) { updateApprovalPolicy(input: $input) { __typename } }`, { input: { id: w.policy.id, expectedRevision: current.revision, rules: [{ id: "prod-github-two", effect: "ALLOW", tools: ["github.*"], environments: ["prod"], roleIds: ["system:approval-reviewer"], count: 2 }] } }, w.org.adminToken);
    await status.close();
  });

  it("a reviewer removed from the role before delivery: reviewer_authority_changed, nothing executes", async () => {
    const id = await heldOverHttp({ repo: "acme/e2e-authority" });
    await w.ingest.tick();
    await vote(w, w.reviewers[0]!, id);
    await vote(w, w.reviewers[1]!, id);
    const status = subscriber<StatusMessage>(w.reviewers[2]!.token, STATUS, { id });
    await status.next((m) => m.status === "APPROVED");
    await w.db.prisma.roleAssignment.deleteMany({ where: { orgId: w.org.orgId, userId: w.reviewers[1]!.userId } });
    try {
      expect(await w.delivery.tick()).toEqual([{ kind: "preflight_failed", code: "reviewer_authority_changed" }]);
      expect(await status.next((m) => m.executionStatus === "FAILED")).toMatchObject({ delivery: { errorCode: "reviewer_authority_changed" } });
      expect(w.executions.some((e) => e.approvalId === id)).toBe(false);
    } finally {
      await w.db.prisma.roleAssignment.create({ data: { orgId: w.org.orgId, userId: w.reviewers[1]!.userId, roleId: "system:approval-reviewer" } });
      await status.close();
    }
  });

  it("an expired ticket is filed closed as expired and takes no votes", async () => {
    const stale = createGateway({
      store: createPostgresGatewayStore(w.db.prisma),
      stream: w.redis,
      streamKey: w.streamKey,
      gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
      approvalSecret: APPROVAL_SECRET,
      upstreams: w.upstreams,
      now: () => new Date(Date.now() - 25 * 3600_000),
    });
    const held = await stale.handleToolCall({ authorization: `Bearer ${w.keyPlaintext}`, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: "acme/e2e-expired" } } } });
    expect(held.status).toBe(423);
    const id = (held.outcome as { approvalId: string }).approvalId;
    await w.ingest.tick();
    expect(await w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: "expired" });
    expect(await vote(w, w.reviewers[0]!, id)).toMatchObject({ __typename: "InvalidStateError", state: "expired" });
  });

  it("a forged or mismatched token gets a new ticket, never an execution", async () => {
    const id = await heldOverHttp({ repo: "acme/e2e-forged" });
    const record = await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId: id } });
    const forged = await mintApprovalToken("a-completely-different-secret-0123456789", {
      approvalId: id, workspaceId: record.workspaceId, keyId: record.virtualKeyId, tool: record.tool, argumentHash: record.argumentHash, idempotencyKey: record.idempotencyKey,
    });
    const mismatched = await mintApprovalToken(APPROVAL_SECRET, {
      approvalId: id, workspaceId: record.workspaceId, keyId: record.virtualKeyId, tool: record.tool, argumentHash: record.argumentHash, idempotencyKey: "not-the-one",
    });
    for (const token of [forged, mismatched]) {
      const r = await agentCall({ repo: "acme/e2e-forged" }, { "x-obol-approval-id": id, "x-obol-approval-token": token });
      expect(r.status).toBe(423);
      expect(r.body.error!.code).toBe(-32003);
      expect(r.body.error!.data["approval_id"]).not.toBe(id);
    }
    expect(w.executions.some((e) => e.arguments["repo"] === "acme/e2e-forged")).toBe(false);
  });

  it("with the stream down nothing is held: not_ready, no held record, nothing in the inbox", async () => {
    const down = new Redis({ host: "127.0.0.1", port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    down.on("error", () => {});
    const gateway = createGateway({ store: createPostgresGatewayStore(w.db.prisma), stream: down, gate: createCedarGate(DEFAULT_GATEWAY_POLICIES), approvalSecret: APPROVAL_SECRET, upstreams: w.upstreams });
    const handler = createGatewayHttpHandler(gateway);
    const { createServer } = await import("node:http");
    const server = createServer((req, res) => void handler(req, res));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    await w.ingest.tick(); // file what earlier tests left on the stream
    const held = await w.db.prisma.gatewayInvocation.count();
    const requests = await w.db.prisma.approvalRequest.count();
    const r = await fetch(`http://127.0.0.1:${port}/v1/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${w.keyPlaintext}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: "acme/e2e-down" } } }),
    });
    expect(r.status).toBe(503);
    expect(((await r.json()) as { error: { code: number; data: { reason: string } } }).error).toMatchObject({ code: -32004, data: { reason: "approval_stream_unavailable" } });
    await w.ingest.tick();
    expect(await w.db.prisma.gatewayInvocation.count()).toBe(held);
    expect(await w.db.prisma.approvalRequest.count()).toBe(requests);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    down.disconnect();
  });

  it("the ingest worker killed between insert and ack: reclaimed by another consumer, filed once, approved and executed once", async () => {
    const id = await heldOverHttp({ repo: "acme/e2e-crash" });
    const crashing = createIngestWorker({ db: w.db, redis: w.redis, events: w.t.events, logger: w.logger, streamKey: w.streamKey, consumer: "e2e-crasher", beforeAck: () => Promise.reject(new Error("killed")) });
    await expect(crashing.tick()).rejects.toThrow("killed");
    const survivor = createIngestWorker({ db: w.db, redis: w.redis, events: w.t.events, logger: w.logger, streamKey: w.streamKey, consumer: "e2e-survivor", claimIdleMs: 0 });
    expect(await survivor.tick()).toMatchObject({ reclaimed: 1, duplicates: 1, inserted: 0 });
    expect(await w.db.prisma.approvalRequest.count({ where: { id } })).toBe(1);
    await vote(w, w.reviewers[0]!, id);
    await vote(w, w.reviewers[1]!, id);
    expect(await w.delivery.tick()).toEqual([{ kind: "delivered", replayed: false }]);
    expect(w.executions.filter((e) => e.approvalId === id)).toHaveLength(1);
  });

  it("subscriptions authorize again on every event: a watcher who loses read access is cut off", async () => {
    const id = await heldOverHttp({ repo: "acme/e2e-reauth" });
    await w.ingest.tick();
    const watcher = w.reviewers[2]!;
    const s = subscriber<StatusMessage>(watcher.token, STATUS, { id });
    await s.next((m) => m.status === "PENDING");
    await w.db.prisma.roleAssignment.deleteMany({ where: { orgId: w.org.orgId, userId: watcher.userId } });
    try {
      await vote(w, w.reviewers[0]!, id);
      await until(() => s.errors.length > 0);
      expect(s.messages.some((m) => m.revision === 2)).toBe(false);
      expect(JSON.stringify(s.errors)).toContain("Missing permission (approval_request, read");
    } finally {
      await w.db.prisma.roleAssignment.create({ data: { orgId: w.org.orgId, userId: watcher.userId, roleId: "system:approval-reviewer" } });
    }
  });

  it("subscriptions authorize on subscribe: another org's request does not exist for the caller", async () => {
    const id = (await w.db.prisma.approvalRequest.findFirstOrThrow({ where: { orgId: w.org.orgId } })).id;
    const other = await createOrg(w.db);
    const s = subscriber<StatusMessage>(other.adminToken, STATUS, { id });
    await until(() => s.errors.length > 0);
    expect(s.messages).toEqual([]);
    expect(JSON.stringify(s.errors)).toContain("was not found");
  });
});

describe("the gateway mounted on the Countersign server", () => {
  /** A Countersign with the embedded gateway, and a virtual key of a workspace whose `github` runs on the demo upstream. */
  async function mountedGateway(stream: string) {
    const app = await startTestApp({
      env: { COUNTERSIGN_GATEWAY_EMBEDDED: "on", COUNTERSIGN_APPROVAL_SECRET: APPROVAL_SECRET, COUNTERSIGN_GATEWAY_SERVICE_TOKEN: SERVICE_TOKEN, COUNTERSIGN_APPROVAL_STREAM: stream },
    });
    const base = await app.listen();
    const org = await createOrg(app.db);
    const stack = await app.db.prisma.stack.create({ data: { orgId: org.orgId, name: "s" } });
    const ws = await app.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: "w", environment: "prod", production: true } });
    await app.db.prisma.connection.create({ data: { orgId: org.orgId, workspaceId: ws.id, name: "github", provider: "github" } });
    // Its tools run on the process's in-process demo upstream (src/gateway/demo-upstream.ts).
    await app.db.prisma.connection.updateMany({ where: { workspaceId: ws.id, name: "github" }, data: { url: DEMO_UPSTREAM_URL } });
    const key = generateVirtualKey();
    await app.db.prisma.virtualKey.create({ data: { orgId: org.orgId, workspaceId: ws.id, name: "k", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: org.adminId } });
    return { app, base, key };
  }

  it("serves tools/call and the service-authenticated resume beside /graphql", async () => {
    const stream = `stream:approvals:${Math.random().toString(36).slice(2)}`;
    const { app, base, key } = await mountedGateway(stream);
    const redis = new Redis(process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379");
    try {
      const call = await fetch(`${base}/gateway/v1/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: "r" } } }),
      });
      expect(call.status).toBe(423);
      expect(await redis.xlen(stream)).toBe(1);
      const unauthenticated = await fetch(`${base}/internal/v1/approvals/resume`, { method: "POST", body: "{}" });
      expect(unauthenticated.status).toBe(401);
      const malformed = await fetch(`${base}/internal/v1/approvals/resume`, { method: "POST", headers: { authorization: `Bearer ${SERVICE_TOKEN}` }, body: "{}" });
      expect(malformed.status).toBe(400);
    } finally {
      await redis.del(stream);
      redis.disconnect();
      await app.close();
    }
  });

  it("closing the server cuts an agent's tasks/result wait at once, without an answer, instead of waiting out the requests' bound", async () => {
    const stream = `stream:approvals:${Math.random().toString(36).slice(2)}`;
    const { app, base, key } = await mountedGateway(stream);
    const redis = new Redis(process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379");
    try {
      // The MCP transport (what the SDK client speaks), not the plain POST: tasks are MCP 2025-11-25's.
      const rpc = (body: object) =>
        fetch(`${base}/gateway/v1/mcp`, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25", authorization: `Bearer ${key}` },
          body: JSON.stringify({ jsonrpc: "2.0", ...body }),
        });
      const answer = await rpc({ id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: "r" }, task: { ttl: 60_000 } } });
      const created = (await answer.json()) as {
        result: { task: { taskId: string; status: string } };
      };
      expect(created, JSON.stringify(created)).toMatchObject({ result: { task: { status: "working" } } });
      // The agent waits for the result on a stream it can resume (the priming event names the wait).
      const waiting = await rpc({ id: 2, method: "tasks/result", params: { taskId: created.result.task.taskId } });
      expect(waiting.headers.get("content-type")).toMatch(/text\/event-stream/);
      let text = "";
      const read = (async () => {
        const decoder = new TextDecoder();
        for await (const chunk of waiting.body as unknown as AsyncIterable<Uint8Array>) text += decoder.decode(chunk, { stream: true });
      })().catch(() => {});
      await vi.waitFor(() => expect(text).toMatch(/^id: /m));
      // The bound is a minute, longer than this test may take: only the cut lets the close finish.
      await redis.del(stream);
      redis.disconnect();
      await app.close({ requestsMs: 60_000 });
      await read;
      expect(text).not.toMatch(/^data: .*"(result|error)"/m);
    } catch (error) {
      await redis.del(stream);
      redis.disconnect();
      await app.close();
      throw error;
    }
  }, 20_000);
});
