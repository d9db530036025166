// GET /metrics: Prometheus text on the API port, only to the configured bearer token, with the
// figures an operator watches, each moving with what it counts.

import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "graphql-ws";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { TEST_REDIS_URL } from "../helpers/env.js";
import { ops, person, PLAN, READ, seedStack, seedWorkspace } from "../gate/helpers.js";
import { subscribe } from "../gate/ws.js";
import { trackedClient } from "./ws.js";

const METRICS_TOKEN = "metrics-token-0123456789abcdef";
const STREAM = `test:metrics:${randomUUID()}`;

let t: TestApp;
let base: string;
let org: OrgFixture;
let redis: Redis;
const clients: Client[] = [];

beforeAll(async () => {
  t = await startTestApp({ env: { COUNTERSIGN_METRICS_TOKEN: METRICS_TOKEN, COUNTERSIGN_APPROVAL_STREAM: STREAM } });
  base = await t.listen();
  org = await createOrg(t.db);
  redis = new Redis(TEST_REDIS_URL);
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await redis.del(STREAM);
  redis.disconnect();
  await t.close();
});

async function scrape(): Promise<string> {
  const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/plain");
  return res.text();
}

/** The value of one sample (`name{labels}`), or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const m = /^([a-z_]+)(?:\{(.*)\})? (.+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? "").matchAll(/([a-z_]+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return undefined;
}

describe("GET /metrics", () => {
  it("answers 401 without the configured bearer token, and with a wrong one", async () => {
    expect((await fetch(`${base}/metrics`)).status).toBe(401);
    expect((await fetch(`${base}/metrics`, { headers: { authorization: "Bearer wrong-token-0123456789abcdef" } })).status).toBe(401);
  });

  it("counts operations by name, type and outcome, with a latency histogram", async () => {
    const before = await scrape();
    const ok = (n: string) => sample(n, "countersign_graphql_operations_total", { operation: "MetricsViewer", type: "query", outcome: "ok" }) ?? 0;
    await t.gql(`query MetricsViewer { viewer { id } }`, {}, org.adminToken);
    await t.gql(`query MetricsViewer { viewer { id } }`, {}, org.adminToken);
    await t.gql(`query MetricsViewer { viewer { id } }`, {}, "cs_not-a-token");
    await t.gql(`query MetricsBad { nope }`, {}, org.adminToken);
    const after = await scrape();
    expect(ok(after) - ok(before)).toBe(2);
    expect(sample(after, "countersign_graphql_operations_total", { operation: "MetricsViewer", outcome: "UNAUTHENTICATED" })).toBeGreaterThanOrEqual(1);
    expect(sample(after, "countersign_graphql_operations_total", { operation: "MetricsBad", outcome: "GRAPHQL_VALIDATION_FAILED" })).toBe(1);
    expect(sample(after, "countersign_graphql_operation_duration_seconds_count", { operation: "MetricsViewer", outcome: "ok" })).toBeGreaterThanOrEqual(2);
  });

  it("shows open WebSockets and subscriptions by kind, and gate rounds with their delivery latency", async () => {
    const stackId = (await seedStack(t, org.orgId)).id;
    const w = await seedWorkspace(t, org.orgId, stackId, 1);
    const runner = await person(t, org.orgId, "runner", [READ, PLAN]);
    const plan = await ops(t).submit(runner.token, w.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const { client } = trackedClient(base, org.adminToken);
    clients.push(client);
    const s = subscribe<{ version: number; passed: boolean }>(client, `subscription MetricsGate($p: ID!) { planGate(planId: $p) { version passed } }`, { p: plan.id }, (d) => d.planGate);
    await s.next();
    const open = await scrape();
    // The subscription is counted once, when its subscribe has answered.
    expect(sample(open, "countersign_graphql_operations_total", { operation: "MetricsGate", type: "subscription", outcome: "ok" })).toBe(1);
    expect(sample(open, "countersign_websockets_open")).toBe(1);
    expect(sample(open, "countersign_subscriptions_open", { kind: "planGate" })).toBe(1);
    const rounds = sample(open, "countersign_gate_rounds_total") ?? 0;

    const approver = await person(t, org.orgId, "approver");
    await ops(t).approve(approver.token, plan.id);
    await s.next((m) => m.passed);
    const after = await scrape();
    expect(sample(after, "countersign_gate_rounds_total")).toBeGreaterThan(rounds);
    expect(sample(after, "countersign_gate_delivery_latency_seconds_count")).toBeGreaterThan(0);

    s.dispose();
    await client.dispose();
    await new Promise((r) => setTimeout(r, 200));
    const closed = await scrape();
    expect(sample(closed, "countersign_websockets_open")).toBe(0);
    expect(sample(closed, "countersign_subscriptions_open", { kind: "planGate" })).toBeUndefined();
  });

  it("reads delivery jobs by state, the approval stream's pending and lag, the pool and Redis on scrape", async () => {
    await redis.xgroup("CREATE", STREAM, "countersign-ingest", "$", "MKSTREAM");
    await redis.xadd(STREAM, "*", "k", "1");
    await redis.xadd(STREAM, "*", "k", "2");
    await redis.xadd(STREAM, "*", "k", "3");
    await redis.xreadgroup("GROUP", "countersign-ingest", "probe", "COUNT", 1, "STREAMS", STREAM, ">");
    const text = await scrape();
    expect(sample(text, "countersign_approval_stream_pending", { stream: STREAM })).toBe(1);
    expect(sample(text, "countersign_approval_stream_lag", { stream: STREAM })).toBe(2);
    expect(sample(text, "countersign_redis_up", { client: "events" })).toBe(1);
    expect(sample(text, "countersign_redis_up", { client: "stream" })).toBe(1);
    expect(sample(text, "countersign_db_up")).toBe(1);
    expect(sample(text, "countersign_db_pool_connections", { state: "total" })).toBeGreaterThan(0);
    expect(sample(text, "countersign_scrape_read_ok", { read: "delivery_jobs" })).toBe(1);
    expect(sample(text, "countersign_delivery_jobs", { state: "queued" })).toBe(0);
    expect(sample(text, "countersign_delivery_jobs", { state: "failed" })).toBe(0);
  });

  it("without COUNTERSIGN_METRICS_TOKEN, /metrics is open; each app has its own registry", async () => {
    const other = await startTestApp({ schemaName: t.schemaName });
    try {
      const otherBase = await other.listen();
      await other.gql(`query OnlyOnOther { viewer { id } }`, {}, org.adminToken);
      const res = await fetch(`${otherBase}/metrics`);
      expect(res.status).toBe(200);
      expect(sample(await res.text(), "countersign_graphql_operations_total", { operation: "OnlyOnOther" })).toBe(1);
      expect(sample(await scrape(), "countersign_graphql_operations_total", { operation: "OnlyOnOther" })).toBeUndefined();
    } finally {
      await other.app.close();
    }
  });

  it("counts every refusal of a shared limit by the limit's name: the API's per token, the integrations' per address", async () => {
    const limited = await startTestApp({
      schemaName: t.schemaName,
      env: { COUNTERSIGN_RATE_LIMIT_RPS: "0.001", COUNTERSIGN_RATE_LIMIT_BURST: "1", COUNTERSIGN_INTEGRATION_RATE_LIMIT_RPS: "0.001", COUNTERSIGN_INTEGRATION_RATE_LIMIT_BURST: "1" },
    });
    try {
      const limitedBase = await limited.listen();
      const ask = () =>
        fetch(`${limitedBase}/graphql`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${org.adminToken}` }, body: JSON.stringify({ query: "{ __typename }" }) });
      const post = () => fetch(`${limitedBase}/integrations/github/${randomUUID()}/webhook`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      const refused = async (send: () => Promise<Response>) => {
        const statuses: number[] = [];
        for (let i = 0; i < 5; i++) statuses.push((await send()).status);
        expect(statuses[0]).not.toBe(429);
        expect(statuses.at(-1)).toBe(429);
        return statuses.filter((s) => s === 429).length;
      };
      const graphql = await refused(ask);
      const integration = await refused(post);
      const text = await (await fetch(`${limitedBase}/metrics`)).text();
      expect(sample(text, "countersign_limit_refusals_total", { limit: "graphql" })).toBe(graphql);
      expect(sample(text, "countersign_limit_refusals_total", { limit: "integration" })).toBe(integration);
      expect(sample(text, "countersign_limit_refusals_total", { limit: "gateway" })).toBeUndefined();
    } finally {
      await limited.app.close();
    }
  });
});
