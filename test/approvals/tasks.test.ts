import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { APPROVAL_CLOSED_JSONRPC_CODE, APPROVAL_REQUIRED_JSONRPC_CODE } from "../../src/gateway/errors.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { RELATED_TASK_META_KEY, TASKS_CAPABILITY } from "../../src/gateway/tasks.js";
import { createWorld, vote, type World } from "./world.js";

// Held calls as MCP tasks (MCP 2025-11-25, "Tasks"), driven with the SDK client's task API
// against a gateway in front of a real upstream MCP server, on the real PostgreSQL and Redis:
// the task is the held call, so it is read, waited on and withdrawn from the database alone.

let w: World;
let otherKey: string;
beforeAll(async () => {
  w = await createWorld({ tasks: { pollIntervalMs: 50, resultWaitMs: 10_000, listPageSize: 3 } });
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
});

describe("bounds", () => {
  it("tasks/result waits at most its bound, then answers not_ready (task_working, retryable) for the still-waiting task", async () => {
    const short = await w.serveGateway({ resultWaitMs: 150 });
    try {
      const client = await agent(w.keyPlaintext, short.url);
      const { task } = await callAsTask(client, "acme/bound-1");
      const error = await rpcError(client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema));
      expect(error.code).toBe(-32004);
      expect(error.data).toMatchObject({ error: "not_ready", reason: "task_working", retryable: true, task_id: task.taskId, _meta: { [RELATED_TASK_META_KEY]: { taskId: task.taskId } } });
      expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe("working");
    } finally {
      await short.close();
    }
  });

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
