import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { APPROVAL_CLOSED_JSONRPC_CODE, APPROVAL_REQUIRED_JSONRPC_CODE } from "../../src/gateway/errors.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { cutTaskWaits } from "../../src/gateway/mcp.js";
import { RELATED_TASK_META_KEY, TASKS_CAPABILITY } from "../../src/gateway/tasks.js";
import { createWorld, vote, type World } from "./world.js";

// Held calls as MCP tasks (MCP 2025-11-25, "Tasks"), driven with the SDK client's task API
// against a gateway in front of a real upstream MCP server, on the real PostgreSQL and Redis:
// the task is the held call, so it is read, waited on and withdrawn from the database alone.

let w: World;
let otherKey: string;
beforeAll(async () => {
  w = await createWorld({ tasks: { pollIntervalMs: 50, listPageSize: 3 } });
  otherKey = generateVirtualKey();
  await w.db.prisma.virtualKey.create({
    data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: "other-agent", keyHash: hashVirtualKey(otherKey), prefix: virtualKeyPrefix(otherKey), createdById: w.org.adminId },
  });
});
afterAll(async () => w?.close());

const clients: Client[] = [];
afterAll(async () => Promise.all(clients.map((c) => c.close().catch(() => {}))));

async function agent(key = w.keyPlaintext, url = w.gatewayUrl): Promise<Client> {
  const client = new Client({ name: "task-agent", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  clients.push(client);
  return client;
}

/** A task-augmented tools/call of github.delete_repo: the CreateTaskResult. */
async function callAsTask(client: Client, repo: string, tool = "github.delete_repo") {
  return client.request({ method: "tools/call", params: { name: tool, arguments: { repo }, task: { ttl: 60_000 } } }, CreateTaskResultSchema);
}

const executionsOf = (approvalId: string) => w.executions.filter((e) => e.approvalId === approvalId);

async function approve(approvalId: string) {
  await w.ingest.tick();
  await vote(w, w.reviewers[0]!, approvalId);
  await vote(w, w.reviewers[1]!, approvalId);
  await w.delivery.tick();
}

async function rpcError(promise: Promise<unknown>): Promise<McpError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(McpError);
  return error as McpError;
}

describe("advertising", () => {
  it("initialize carries capabilities.tasks as an object, and tools/list marks the held tool taskSupport optional, the read-only one not", async () => {
    const client = await agent();
    expect(client.getServerCapabilities()?.tasks).toEqual(TASKS_CAPABILITY);
    const { tools } = await client.listTools();
    expect(tools.find((t) => t.name === "github.delete_repo")?.execution).toEqual({ taskSupport: "optional" });
    expect(tools.find((t) => t.name === "github.list_repos")?.execution).toBeUndefined();
  });
});

describe("the held flow as a task", () => {
  it("call → task working (id = approval id) → get shows the quorum and reviewers → result blocks, then carries the tool's result; the upstream ran it once", async () => {
    const client = await agent();
    const created = await callAsTask(client, "acme/task-1");
    const task = created.task;
    expect(task).toMatchObject({ status: "working", ttl: null, pollInterval: 50 });
    expect(task.taskId).toMatch(/^apr_/);
    expect(await w.db.prisma.gatewayInvocation.findUnique({ where: { approvalId: task.taskId } })).not.toBeNull();
    for (const field of ["createdAt", "lastUpdatedAt"] as const) expect(new Date(task[field]).toISOString()).toBe(task[field]);

    await w.ingest.tick();
    const waiting = await client.experimental.tasks.getTask(task.taskId);
    expect(waiting.status).toBe("working");
    expect(waiting.statusMessage).toBe("waiting for approval: 0 of 2 approvals (rule prod-github-two); reviewers: reviewer-1, reviewer-2, reviewer-3");

    // tasks/result blocks while the reviewers decide; the approval wakes it.
    let settled = false;
    const pending = client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema).finally(() => (settled = true));
    await vote(w, w.reviewers[0]!, task.taskId);
    expect((await client.experimental.tasks.getTask(task.taskId)).statusMessage).toContain("1 of 2 approvals (rule prod-github-two); approved by reviewer-1");
    expect(settled).toBe(false);
    await vote(w, w.reviewers[1]!, task.taskId);
    await w.delivery.tick();
    const result = (await pending) as CallToolResult;
    expect(result.structuredContent).toEqual({ deleted: "acme/task-1" });
    expect(result._meta?.[RELATED_TASK_META_KEY]).toEqual({ taskId: task.taskId });
    expect(executionsOf(task.taskId)).toHaveLength(1);

    const done = await client.experimental.tasks.getTask(task.taskId);
    expect(done).toMatchObject({ taskId: task.taskId, status: "completed", ttl: null, createdAt: task.createdAt });
    expect(Date.parse(done.lastUpdatedAt)).toBeGreaterThanOrEqual(Date.parse(done.createdAt));
    // Read again, and the identical plain call: the stored result, never a second execution.
    expect(((await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)) as CallToolResult).structuredContent).toEqual({ deleted: "acme/task-1" });
    expect((await client.callTool({ name: "github.delete_repo", arguments: { repo: "acme/task-1" } })).structuredContent).toEqual({ deleted: "acme/task-1" });
    expect(executionsOf(task.taskId)).toHaveLength(1);
  });

  it("callToolStream (the SDK's own task loop) ends with the tool's result once approved", async () => {
    const client = await agent();
    await client.listTools(); // the client learns which tools take tasks
    const messages: { type: string; task?: { taskId: string; status: string } }[] = [];
    let created!: (id: string) => void;
    const taskId = new Promise<string>((resolve) => (created = resolve));
    const run = (async () => {
      for await (const message of client.experimental.tasks.callToolStream({ name: "github.delete_repo", arguments: { repo: "acme/stream-1" } })) {
        messages.push(message as never);
        if (message.type === "taskCreated") created(message.task.taskId);
      }
    })();
    const id = await taskId;
    await approve(id);
    await run;
    const last = messages[messages.length - 1] as unknown as { type: string; result: CallToolResult };
    expect(last.type).toBe("result");
    expect(last.result.structuredContent).toEqual({ deleted: "acme/stream-1" });
    expect(messages.filter((m) => m.type === "taskStatus").every((m) => ["working", "completed"].includes(m.task!.status))).toBe(true);
    expect(executionsOf(id)).toHaveLength(1);
  });
});

describe("a task that ends without running", () => {
  async function closedTask(repo: string, close: (id: string) => Promise<void>) {
    const client = await agent();
    const { task } = await callAsTask(client, repo);
    await w.ingest.tick();
    await close(task.taskId);
    const got = await client.experimental.tasks.getTask(task.taskId);
    const error = await rpcError(client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema));
    expect(executionsOf(task.taskId)).toHaveLength(0);
    return { got, error, id: task.taskId };
  }

  it("denied by a reviewer: failed, saying rejected; the result is the call's JSON-RPC error -32007 with the related task", async () => {
    const { got, error, id } = await closedTask("acme/deny-1", async (id) => void (await vote(w, w.reviewers[0]!, id, "DENY")));
    expect(got.status).toBe("failed");
    expect(got.statusMessage).toMatch(/^rejected: a reviewer rejected this call/);
    expect(error.code).toBe(APPROVAL_CLOSED_JSONRPC_CODE);
    expect(error.data).toMatchObject({ error: "approval_closed", status: "rejected", approval_id: id, _meta: { [RELATED_TASK_META_KEY]: { taskId: id } } });
  });

  it("expired: failed, saying expired", async () => {
    const { got, error } = await closedTask("acme/expire-1", async (id) => {
      const past = new Date(Date.now() - 1000);
      await w.db.prisma.approvalRequest.update({ where: { id }, data: { expiresAt: past } });
      await w.db.prisma.gatewayInvocation.update({ where: { approvalId: id }, data: { expiresAt: past } });
    });
    expect(got.status).toBe("failed");
    expect(got.statusMessage).toMatch(/^expired: the approval request expired before it was approved/);
    expect(error.data).toMatchObject({ status: "expired" });
  });

  it("invalidated by a policy change: failed, saying invalidated and why (policy_changed)", async () => {
    const { got, error } = await closedTask("acme/invalid-1", async (id) => {
      const policy = await w.db.prisma.approvalPolicy.findUniqueOrThrow({ where: { id: w.policy.id } });
      const edited = await w.t.gql(
        `mutation($input: UpdateApprovalPolicyInput!) { updateApprovalPolicy(input: $input) { __typename ... on MutationUpdateApprovalPolicySuccess { data { invalidatedRequestIds } } } }`,
        { input: { id: policy.id, expectedRevision: policy.revision, name: `${policy.name.split("~")[0]}~${policy.revision + 1}` } },
        w.org.adminToken,
      );
      expect(edited.data.updateApprovalPolicy.data.invalidatedRequestIds).toContain(id);
    });
    expect(got.status).toBe("failed");
    expect(got.statusMessage).toBe("invalidated: the approval policies changed after this call was held (policy_changed)");
    expect(error.data).toMatchObject({ status: "invalidated", reason: "policy_changed" });
  });

  it("cancelled by its agent while waiting: cancelled, its request leaves the inbox as withdrawn (a vote is refused); cancelling again is -32602", async () => {
    const client = await agent();
    const { task } = await callAsTask(client, "acme/cancel-1");
    await w.ingest.tick();
    const cancelled = await client.experimental.tasks.cancelTask(task.taskId);
    expect(cancelled).toMatchObject({ taskId: task.taskId, status: "cancelled" });
    expect(await w.db.prisma.approvalRequest.findUnique({ where: { id: task.taskId }, select: { status: true, closeReason: true } })).toEqual({ status: "withdrawn", closeReason: "withdrawn" });
    expect((await vote(w, w.reviewers[0]!, task.taskId)).__typename).toBe("InvalidStateError");
    await w.delivery.tick();
    expect(executionsOf(task.taskId)).toHaveLength(0);
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe("cancelled");
    expect((await rpcError(client.experimental.tasks.cancelTask(task.taskId))).code).toBe(-32602);
    // The result is what the identical call answers now: its execution is spent as failed.
    const result = await rpcError(client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema));
    expect(result.code).toBe(-32005);
    expect((result.data as { message: string }).message).toContain("cancelled by the agent");
  });
});

describe("cancelled before its request reached the inbox", () => {
  it("the call is spent at cancel: the request filed afterwards may be approved, and nothing runs", async () => {
    const client = await agent();
    const { task } = await callAsTask(client, "acme/cancel-early-1");
    expect((await client.experimental.tasks.cancelTask(task.taskId)).status).toBe("cancelled");
    await approve(task.taskId);
    expect(executionsOf(task.taskId)).toHaveLength(0);
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe("cancelled");
  });
});

describe("whose task it is", () => {
  it("another key of the same workspace gets exactly what an unknown id gets, and does not list it", async () => {
    const owner = await agent();
    const { task } = await callAsTask(owner, "acme/mine-1");
    const other = await agent(otherKey);
    for (const id of [task.taskId, "apr_00000000-0000-0000-0000-000000000000"]) {
      for (const call of [() => other.experimental.tasks.getTask(id), () => other.experimental.tasks.getTaskResult(id, CallToolResultSchema), () => other.experimental.tasks.cancelTask(id)]) {
        const error = await rpcError(call());
        expect({ code: error.code, message: error.message.replace(id, "<id>") }).toEqual({ code: -32602, message: "MCP error -32602: Failed to retrieve task: Task not found" });
      }
    }
    expect((await other.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).not.toContain(task.taskId);
    expect((await owner.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toContain(task.taskId);
    expect((await owner.experimental.tasks.getTask(task.taskId)).status).toBe("working");
  });
});

describe("no sessions: the task is in the database", () => {
  it("a gateway restarted while the task waits (a new instance on the same database) answers get and result for it", async () => {
    const first = await w.serveGateway();
    const before = await agent(w.keyPlaintext, first.url);
    const { task } = await callAsTask(before, "acme/restart-1");
    await first.close();

    const second = await w.serveGateway();
    try {
      const after = await agent(w.keyPlaintext, second.url);
      expect((await after.experimental.tasks.getTask(task.taskId)).status).toBe("working");
      const pending = after.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
      await approve(task.taskId);
      expect(((await pending) as CallToolResult).structuredContent).toEqual({ deleted: "acme/restart-1" });
      expect(executionsOf(task.taskId)).toHaveLength(1);
    } finally {
      await second.close();
    }
  });

  it("a drain cuts the resumable waits at once (cutTaskWaits): each client resumes with Last-Event-ID, on this node or another, and gets its result", async () => {
    const node = await w.serveGateway({ keepAliveMs: 20 });
    try {
      const client = await agent(w.keyPlaintext, node.url);
      const { task } = await callAsTask(client, "acme/drain-1");
      const pending = client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
      await vi.waitFor(() => expect(node.gateway.tasks!.openWaits()).toBe(1));
      const raw = rawResult(node.url, w.keyPlaintext, task.taskId);
      await raw.until(() => /^id: /m.test(raw.text()));
      await vi.waitFor(() => expect(node.gateway.tasks!.openWaits()).toBe(2));

      expect(cutTaskWaits(node.gateway)).toBe(2);
      // Both streams end without an answer (the raw one sees no message), and their waits end with them.
      await vi.waitFor(() => expect(node.gateway.tasks!.openWaits()).toBeLessThan(2));
      expect(lastMessage(raw.text())).toBeNull();
      // The SDK client reconnects by itself (here the same node: a balancer would pick another) and waits again.
      await vi.waitFor(() => expect(node.gateway.tasks!.openWaits()).toBe(1), { timeout: 10_000 });
      await approve(task.taskId);
      expect(((await pending) as CallToolResult).structuredContent).toEqual({ deleted: "acme/drain-1" });
      expect(executionsOf(task.taskId)).toHaveLength(1);
      expect(cutTaskWaits(node.gateway)).toBe(0);
    } finally {
      await node.close();
    }
  });

  it("a wait cut by its gateway's restart resumes on the process that comes back: the SDK client reconnects with Last-Event-ID and gets the result as the answer to its original request", async () => {
    const first = await w.serveGateway({ keepAliveMs: 20 });
    const client = await agent(w.keyPlaintext, first.url);
    const { task } = await callAsTask(client, "acme/restart-2");
    const pending = client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    const raw = rawResult(first.url, w.keyPlaintext, task.taskId);
    await raw.until(() => raw.comments() >= 1);
    await vi.waitFor(() => expect(first.gateway.tasks!.openWaits()).toBe(2));
    const eventId = /^id: (\S+)$/m.exec(raw.text())![1]!;
    await first.close();
    // The cut connections end their waits on the old process too.
    await vi.waitFor(() => expect(first.gateway.tasks!.openWaits()).toBe(0));

    // The same address, a new gateway (the SDK client reconnects where it was).
    const second = await w.serveGateway({ keepAliveMs: 20 }, Number(new URL(first.url).port));
    try {
      await vi.waitFor(() => expect(second.gateway.tasks!.openWaits()).toBe(1), { timeout: 10_000 });
      // Another key presenting the same event id learns nothing: the answer unknown ids get.
      const stranger = await fetch(`${second.url}/v1/mcp`, { headers: { authorization: `Bearer ${otherKey}`, accept: "text/event-stream", "last-event-id": eventId } });
      const strangerText = await stranger.text();
      expect(lastMessage(strangerText)).toMatchObject({ id: 7, error: { code: -32602, data: { error: "task_not_found" } } });
      expect(strangerText).not.toContain("acme/restart-2");
      await approve(task.taskId);
      expect(((await pending) as CallToolResult).structuredContent).toEqual({ deleted: "acme/restart-2" });
      expect(executionsOf(task.taskId)).toHaveLength(1);
    } finally {
      await second.close();
    }
  });
});

/**
 * A tasks/result read off the wire (fetch, no SDK), so what the gateway writes while it waits is
 * seen: the SSE comments, the priming event, the final message.
 */
function rawResult(url: string, key: string, taskId: string) {
  const aborter = new AbortController();
  let text = "";
  const seen: (() => void)[] = [];
  const response = fetch(`${url}/v1/mcp`, {
    method: "POST",
    signal: aborter.signal,
    headers: { authorization: `Bearer ${key}`, accept: "application/json, text/event-stream", "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tasks/result", params: { taskId } }),
  });
  const read = (async () => {
    const res = await response;
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      for (const s of seen.splice(0)) s();
    }
  })().catch(() => {});
  const comments = () => text.split("\n").filter((line) => line.startsWith(":")).length;
  return {
    response,
    text: () => text,
    comments,
    /** Resolves once `test` holds of what was read so far (checked at every chunk). */
    async until(test: () => boolean): Promise<void> {
      while (!test()) await Promise.race([new Promise<void>((resolve) => seen.push(resolve)), read]);
    },
    /** The JSON-RPC message the stream ends with. */
    async message(): Promise<{ id: unknown; result?: CallToolResult; error?: { code: number; data?: unknown } }> {
      await read;
      return lastMessage(text) as never;
    },
    abort: () => aborter.abort(),
  };
}

function lastMessage(sse: string): unknown {
  const data = sse.split("\n").filter((line) => line.startsWith("data: ") && line.length > 6).pop();
  return data === undefined ? null : JSON.parse(data.slice(6));
}

/** The world's wake, counting who listens (a waiter's listener and its sweep timer are dropped together). */
function countingWake() {
  let listening = 0;
  return {
    listening: () => listening,
    wake: {
      subscribe(listener: (id: string) => void) {
        listening++;
        const off = w.wake.subscribe(listener);
        let on = true;
        return () => {
          if (on) listening--;
          on = false;
          off();
        };
      },
    },
  };
}

describe("tasks/result blocks until the task ends", () => {
  it("past any bound a request had: an SSE answer that keeps writing while reviewers take their time (a comment per beat, nothing else), then the tool's result", async () => {
    // Every beat and sweep far below what one request used to be allowed (50 s): the wait goes on through many of each.
    const gw = await w.serveGateway({ keepAliveMs: 20, sweepIntervalMs: 20 });
    try {
      const client = await agent(w.keyPlaintext, gw.url);
      const { task } = await callAsTask(client, "acme/block-1");
      await w.ingest.tick();
      const raw = rawResult(gw.url, w.keyPlaintext, task.taskId);
      expect((await raw.response).headers.get("content-type")).toBe("text/event-stream");
      await raw.until(() => raw.comments() >= 10);
      expect(raw.text()).not.toContain("event: message");
      expect(raw.text()).toMatch(/^id: cs-task\.apr_[^\n]+\nretry: \d+\ndata: \n\n/);
      await vote(w, w.reviewers[0]!, task.taskId);
      await raw.until(() => raw.comments() >= 20);
      expect(raw.text()).not.toContain("event: message");
      await vote(w, w.reviewers[1]!, task.taskId);
      await w.delivery.tick();
      const message = await raw.message();
      expect(message.id).toBe(7);
      expect(message.result?.structuredContent).toEqual({ deleted: "acme/block-1" });
      expect(message.result?._meta?.[RELATED_TASK_META_KEY]).toEqual({ taskId: task.taskId });
      expect(executionsOf(task.taskId)).toHaveLength(1);
      expect(gw.gateway.tasks!.openWaits()).toBe(0);
    } finally {
      await gw.close();
    }
  });

  it("a client that asks for progress hears the task's status on each beat, so the SDK client's own request timeout (resetTimeoutOnProgress) never ends the wait", async () => {
    const gw = await w.serveGateway({ keepAliveMs: 20 });
    try {
      const client = await agent(w.keyPlaintext, gw.url);
      const { task } = await callAsTask(client, "acme/block-2");
      await w.ingest.tick();
      const heard: string[] = [];
      let enough!: () => void;
      const heardEnough = new Promise<void>((resolve) => (enough = resolve));
      const pending = client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, {
        timeout: 400,
        resetTimeoutOnProgress: true,
        onprogress: (p) => {
          heard.push(p.message ?? "");
          // Many beats: together far longer than the client's timeout.
          if (heard.length === 60) enough();
        },
      });
      await Promise.race([heardEnough, pending]);
      expect(heard).toHaveLength(60);
      expect(heard[0]).toContain("waiting for approval: 0 of 2 approvals");
      await approve(task.taskId);
      expect(((await pending) as CallToolResult).structuredContent).toEqual({ deleted: "acme/block-2" });
    } finally {
      await gw.close();
    }
  });

  it("a client that goes away ends its wait: its place, its wake listener and its timers are freed", async () => {
    const counting = countingWake();
    const gw = await w.serveGateway({ keepAliveMs: 20, wake: counting.wake });
    try {
      const client = await agent(w.keyPlaintext, gw.url);
      const { task } = await callAsTask(client, "acme/gone-1");
      const raw = rawResult(gw.url, w.keyPlaintext, task.taskId);
      await raw.until(() => raw.comments() >= 1);
      expect(gw.gateway.tasks!.openWaits()).toBe(1);
      expect(counting.listening()).toBe(1);
      raw.abort();
      // The place is given back in the wait's `finally`, which clears the beat; the listener is
      // dropped with the sweep's timer (one function): both counts at 0 say every timer is gone.
      await vi.waitFor(() => expect([gw.gateway.tasks!.openWaits(), counting.listening()]).toEqual([0, 0]));
    } finally {
      await gw.close();
    }
  });

  it("a key revoked while it waits reads nothing when the task ends: the wait answers unauthorized (-32001), not the call's outcome", async () => {
    const doomed = generateVirtualKey();
    const row = await w.db.prisma.virtualKey.create({
      data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: "doomed-agent", keyHash: hashVirtualKey(doomed), prefix: virtualKeyPrefix(doomed), createdById: w.org.adminId },
    });
    const gw = await w.serveGateway({ keepAliveMs: 20 });
    try {
      const client = await agent(doomed, gw.url);
      const { task } = await callAsTask(client, "acme/revoked-1");
      await w.ingest.tick();
      const raw = rawResult(gw.url, doomed, task.taskId);
      await raw.until(() => raw.comments() >= 1);
      await w.db.prisma.virtualKey.update({ where: { id: row.id }, data: { revokedAt: new Date() } });
      await vote(w, w.reviewers[0]!, task.taskId, "DENY"); // the task ends
      const message = await raw.message();
      expect(message.error?.code).toBe(-32001);
      expect(JSON.stringify(message)).not.toContain("rejected");
    } finally {
      await gw.close();
    }
  });

  it("a key may hold only so many open waits per process (typed -32004 task_waits_exhausted past the cap); another key is not counted with it, and a freed place is taken again", async () => {
    const gw = await w.serveGateway({ keepAliveMs: 20, maxWaitsPerKey: 2 });
    try {
      const client = await agent(w.keyPlaintext, gw.url);
      const ids: string[] = [];
      for (const repo of ["acme/cap-1", "acme/cap-2", "acme/cap-3"]) ids.push((await callAsTask(client, repo)).task.taskId);
      const first = rawResult(gw.url, w.keyPlaintext, ids[0]!);
      const second = rawResult(gw.url, w.keyPlaintext, ids[1]!);
      await first.until(() => first.comments() >= 1);
      await second.until(() => second.comments() >= 1);
      const error = await rpcError(client.experimental.tasks.getTaskResult(ids[2]!, CallToolResultSchema));
      expect(error.code).toBe(-32004);
      expect(error.data).toMatchObject({ error: "not_ready", reason: "task_waits_exhausted", retryable: true, max_waits_per_key: 2, task_id: ids[2] });

      const other = await agent(otherKey, gw.url);
      const { task: theirs } = await callAsTask(other, "acme/cap-other");
      const theirWait = rawResult(gw.url, otherKey, theirs.taskId);
      await theirWait.until(() => theirWait.comments() >= 1);

      first.abort();
      await vi.waitFor(() => expect(gw.gateway.tasks!.openWaits()).toBe(2));
      const third = rawResult(gw.url, w.keyPlaintext, ids[2]!);
      await third.until(() => third.comments() >= 1);
      for (const r of [second, theirWait, third]) r.abort();
      await vi.waitFor(() => expect(gw.gateway.tasks!.openWaits()).toBe(0));
    } finally {
      await gw.close();
    }
  });
});

describe("bounds", () => {
  it("tasks/list pages all of the key's tasks newest first with an opaque cursor; a forged cursor is -32602", async () => {
    const client = await agent();
    const pages: string[][] = [];
    const seen: { taskId: string; createdAt: string }[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.experimental.tasks.listTasks(cursor);
      pages.push(page.tasks.map((t) => t.taskId));
      seen.push(...page.tasks);
      cursor = page.nextCursor;
    } while (cursor);
    const held = await w.db.prisma.gatewayInvocation.findMany({ where: { virtualKeyId: w.virtualKey.id }, orderBy: [{ createdAt: "desc" }, { approvalId: "desc" }] });
    expect(held.length).toBeGreaterThan(3);
    expect(pages.length).toBe(Math.ceil(held.length / 3));
    expect(seen.map((t) => t.taskId)).toEqual(held.map((h) => h.approvalId));
    for (const cursor of ["not-a-cursor", Buffer.from(JSON.stringify(["yesterday", "x"])).toString("base64url")]) {
      expect((await rpcError(client.experimental.tasks.listTasks(cursor))).code).toBe(-32602);
    }
  });
});

describe("clients that do not ask for tasks", () => {
  it("a plain callTool of a held call still gets -32003, and its message names the approval id", async () => {
    const client = await agent();
    const error = await rpcError(client.callTool({ name: "github.delete_repo", arguments: { repo: "acme/plain-1" } }));
    expect(error.code).toBe(APPROVAL_REQUIRED_JSONRPC_CODE);
    const id = (error.data as { approval_id: string }).approval_id;
    expect(error.message).toContain(id);
    // The held call is a task all the same: the agent can wait on it by its id.
    expect((await client.experimental.tasks.getTask(id)).status).toBe("working");
  });

  it("a task asked for a call the gate runs outright is refused (-32601) before it runs", async () => {
    const client = await agent();
    const before = w.upstream.calls.get("list_repos") ?? 0;
    const error = await rpcError(client.request({ method: "tools/call", params: { name: "github.list_repos", arguments: {}, task: {} } }, CreateTaskResultSchema));
    expect(error.code).toBe(-32601);
    expect(w.upstream.calls.get("list_repos") ?? 0).toBe(before);
  });
});
