// What agents, runners and dashboards repeat is served without Prisma Client: each Prisma query
// is compiled again by its query compiler (about 0.3–0.8 ms of CPU each, measured 2026-12-04),
// which on these paths was most of their cost. Each path is asked once to warm up, then again
// while the database counts its statements: some are sent, none through Prisma. A path added to
// what clients repeat belongs in this list.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorkspacesDocument } from "../src/generated/graphql/graphql.js";
import { createWorld, type World } from "./approvals/world.js";
import { startUpstream, type Upstream } from "./helpers/mcp-upstream.js";
import { addMember, type MemberFixture } from "./helpers/fixtures.js";
import { subscribe, wsClient } from "./gate/ws.js";

let w: World;
let approvalId: string;
/** An upstream of its own: the world's records each call it runs by reading the database itself. */
let plain: Upstream;
let reader: MemberFixture;
let baseUrl: string;
let planId: string;
let taskId: string;
beforeAll(async () => {
  // Held calls as MCP tasks, as Countersign wires them: an agent polls tasks/get.
  w = await createWorld({ tasks: {} });
  baseUrl = await w.t.listen();
  planId = (await w.db.prisma.plan.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, submittedById: w.org.adminId } })).id;
  reader = await addMember(w.db, w.org.orgId, { role: "workspace-reader", name: "a reader" });
  plain = await startUpstream();
  await w.db.prisma.connection.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: "plain", provider: "github", url: plain.url } });
  const held = await w.callTool({ repo: "acme/hot-paths" });
  approvalId = (held.body as { error: { data: { approval_id: string } } }).error.data.approval_id;
  await w.ingest.tick();
  const task = JSON.parse(
    (await gatewayPost({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: "acme/hot-task" }, task: { ttl: 60_000 } } })).body,
  ) as { result: { task: { taskId: string } } };
  taskId = task.result.task.taskId;
  await w.ingest.tick();
});
afterAll(async () => {
  await w?.close();
  await plain?.close();
});

const CHECKS = `query($checks: [PermissionCheckInput!]!) { checkPermissions(checks: $checks) {
  ... on QueryCheckPermissionsSuccess { data { action allowed decision via { kind roleKey } missing { action matchValue } } } ... on Error { code message } } }`;

const gatewayGet = (path: string) =>
  fetch(`${w.gatewayUrl}${path}`, { headers: { authorization: `Bearer ${w.keyPlaintext}` } }).then(async (res) => ({ status: res.status, body: await res.text() }));
const gatewayPost = (body: object) =>
  fetch(`${w.gatewayUrl}/v1/mcp`, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${w.keyPlaintext}` }, body: JSON.stringify(body) }).then(async (res) => ({ status: res.status, body: await res.text() }));
const graphql = async (query: string, variables: Record<string, unknown>, token: string) => {
  const res = await w.t.gql(query, variables, token);
  return { status: res.errors ? 500 : 200, body: JSON.stringify(res) };
};

/** Each path: one request as its client sends it, answered 200 with `expect()` in the body (read after beforeAll). */
const PATHS: Record<string, { send: () => Promise<{ status: number; body: string }>; expect: () => string }> = {
  "GraphQL viewer (every client, every page)": { send: () => graphql("{ viewer { name } }", {}, w.reviewers[0]!.token), expect: () => "reviewer-1" },
  "the check API, a batch (a runner before its actions)": {
    send: () =>
      graphql(
        CHECKS,
        { checks: w.reviewers.flatMap((r) => [{ principalId: r.userId, resourceType: "workspace", action: "read", resourceId: w.workspace.id }, { principalId: r.userId, resourceType: "approval_request", action: "decide", matchValue: w.workspace.name }]) },
        w.org.adminToken,
      ),
    expect: () => '"allowed"',
  },
  "the dashboard's workspace list, as a reader": { send: () => graphql(WorkspacesDocument.toString(), { first: 100 }, reader.token), expect: () => "payments-prod" },
  "the dashboard's workspace list, as an approver who may reserve": { send: () => graphql(WorkspacesDocument.toString(), { first: 100 }, w.org.adminToken), expect: () => "payments-prod" },
  "the gateway: an agent's status read of its held call": { send: () => gatewayGet(`/v1/approvals/${approvalId}`), expect: () => '"status":"pending"' },
  "a dashboard's planGate subscription: connect, init, subscribe, the first status": {
    send: async () => {
      const client = wsClient(baseUrl, reader.token);
      const stream = subscribe(client, `subscription($planId: ID!) { planGate(planId: $planId) { planId version } }`, { planId }, (d) => d.planGate);
      try {
        const first = await stream.next(undefined, 5_000);
        return { status: stream.errors.length ? 500 : 200, body: JSON.stringify({ first, errors: stream.errors }) };
      } finally {
        stream.dispose();
        await client.dispose();
      }
    },
    expect: () => planId,
  },
  "the gateway: an agent's tools/list": {
    send: () => gatewayPost({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
    expect: () => "plain.list_repos",
  },
  "the gateway: an agent's tasks/get of its held call": {
    send: () => gatewayPost({ jsonrpc: "2.0", id: 1, method: "tasks/get", params: { taskId } }),
    expect: () => `"taskId":"${taskId}"`,
  },
  "the gateway: an allowed tools/call": {
    send: () => gatewayPost({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "plain.list_repos", arguments: {} } }),
    expect: () => '"result"',
  },
};

describe("the paths clients repeat send no statement through Prisma", () => {
  it.each(Object.keys(PATHS))("%s", async (name) => {
    const path = PATHS[name]!;
    const first = await path.send();
    expect(first.status, first.body).toBe(200);
    expect(first.body).toContain(path.expect());
    const [all, prisma] = [w.db.statementCount(), w.db.prismaStatementCount()];
    const again = await path.send();
    expect(again.status, again.body).toBe(200);
    expect(w.db.statementCount() - all, "statements sent (the count sees this path)").toBeGreaterThan(0);
    expect(w.db.prismaStatementCount() - prisma, "statements sent through Prisma").toBe(0);
  });

  it("the count tells Prisma's statements from the driver's", async () => {
    const [all, prisma] = [w.db.statementCount(), w.db.prismaStatementCount()];
    await w.db.prisma.workspace.findMany({ where: { id: w.workspace.id } });
    await w.db.sql.query("SELECT 1");
    expect(w.db.statementCount() - all).toBe(2);
    expect(w.db.prismaStatementCount() - prisma).toBe(1);
  });
});
