// Ingest speed: the ingest worker files at least 2,000 stream entries per second (beside a
// baseline: raw XREADGROUP + XACK of the same entries with no database work), a held call
// reaches the inbox (the event the inbox subscriptions re-read on) within a second of the
// gateway's answer with the default ingest interval, on Redis and on the embedded default's
// in-process stream and bus, and a vote that reaches quorum gets to the gateway's execute in
// under 100 ms with a shortened delivery interval. Real PostgreSQL (a throwaway bench_ schema)
// and real Redis.

import { createServer } from "node:http";
import { performance } from "node:perf_hooks";
import { Redis } from "ioredis";
import { Authz } from "../src/authz/authz.js";
import type { Viewer } from "../src/auth/authenticate.js";
import { createDeliveryWorker } from "../src/workers/delivery.js";
import { createIngestWorker } from "../src/workers/ingest.js";
import { redisApprovalStream, type ApprovalStream } from "../src/infra/approval-stream.js";
import { createMemoryApprovalStream } from "../src/infra/memory-stream.js";
import { voteOnApprovalRequest } from "../src/services/approvals/requests.js";
import { validateApprovalRules } from "../src/domain/approvals/policy.js";
import { createCedarGate, DEFAULT_GATEWAY_POLICIES } from "../src/gateway/cedar-gate.js";
import { encodeTicket, newApprovalTicket } from "../src/gateway/errors.js";
import { createGateway } from "../src/gateway/gateway.js";
import { createGatewayHttpHandler } from "../src/gateway/http.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../src/gateway/keys.js";
import { createPostgresGatewayStore } from "../src/gateway/postgres-store.js";
import { createUpstreamPool, type UpstreamPool } from "../src/gateway/upstream.js";
import { startUpstream } from "../test/helpers/mcp-upstream.js";
import type { Database } from "../src/infra/db.js";
import { createEventBus, type EventBus } from "../src/infra/events.js";
import { createLogger } from "../src/infra/logger.js";
import type { Prisma } from "../src/generated/prisma/client.js";
import { reconcileSystemRoles, systemRoleId } from "../src/services/system-roles.js";
import { log, quantile, row, withBenchSchema, type BenchRow } from "./lib.js";

const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const ENTRIES = Number(process.env.BENCH_APPROVAL_ENTRIES ?? 10_000);
const VOTES = Number(process.env.BENCH_APPROVAL_VOTES ?? 30);
const INBOX_CALLS = Number(process.env.BENCH_INBOX_CALLS ?? 200);
const INBOX_TARGET_MS = 1_000;
const GATE_CALLS = Number(process.env.BENCH_GATE_CALLS ?? 300);
const INGEST_TARGET = 2_000;
const LATENCY_TARGET_MS = 100;
const DELIVERY_INTERVAL_MS = 25;
const SECRET = "bench-approval-secret-0123456789abcdef";
const SERVICE_TOKEN = "bench-gateway-service-token-0123456789";

type Fixture = Awaited<ReturnType<typeof seed>>;

async function seed(db: Database, upstreamUrl: string, upstreams: UpstreamPool, ran: Map<string, () => void>) {
  await reconcileSystemRoles(db.prisma);
  const org = await db.prisma.organization.create({ data: { slug: `bench-approvals-${Date.now()}`, name: "bench" } });
  const reviewers: Viewer[] = [];
  for (let i = 0; i < 2; i++) {
    const user = await db.prisma.user.create({ data: { email: `reviewer-${i}-${org.id}@bench.local`, name: `reviewer ${i}` } });
    await db.prisma.membership.create({ data: { orgId: org.id, userId: user.id } });
    await db.prisma.roleAssignment.create({ data: { orgId: org.id, userId: user.id, roleId: systemRoleId("approval-reviewer") } });
    reviewers.push({ userId: user.id, orgId: org.id, tokenId: "bench", name: user.name, email: user.email, isServiceAccount: false });
  }
  const stack = await db.prisma.stack.create({ data: { orgId: org.id, name: "bench-stack" } });
  const workspace = await db.prisma.workspace.create({ data: { orgId: org.id, stackId: stack.id, name: "bench-prod", environment: "prod", production: true } });
  const connection = await db.prisma.connection.create({ data: { orgId: org.id, workspaceId: workspace.id, name: "github", provider: "github", url: upstreamUrl } });
  const key = generateVirtualKey();
  const virtualKey = await db.prisma.virtualKey.create({
    data: { orgId: org.id, workspaceId: workspace.id, name: "bench-agent", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: reviewers[0]!.userId },
  });
  const rules = validateApprovalRules([
    { id: "two-reviewers", effect: "allow", tools: ["github.*"], environments: ["prod"], roles: [systemRoleId("approval-reviewer")], count: 2 },
  ]);
  if (!rules.ok) throw new Error("bench rules invalid");
  await db.prisma.approvalPolicy.create({ data: { orgId: org.id, workspaceId: workspace.id, name: "bench", rules: rules.rules as unknown as Prisma.InputJsonValue } });
  return { org, reviewers, workspace, connection, virtualKey, key, upstreams, ran };
}

/** Ingest throughput, beside the same entries read and acked with no database work. */
async function ingestRows(db: Database, redis: Redis, events: EventBus, f: Fixture, stream: string): Promise<BenchRow[]> {
  const pipeline = redis.pipeline();
  const now = new Date();
  for (let i = 0; i < ENTRIES; i++) {
    const ticket = newApprovalTicket(
      {
        approval_id: `apr_bench_${i}`,
        workspace_id: f.workspace.id,
        virtual_key_id: f.virtualKey.id,
        connection_id: f.connection.id,
        tool: "github.delete_repo",
        environment: "prod",
        destructive: true,
        arguments: { repo: `acme/repo-${i}`, force: true, reason: "cleanup of an abandoned fork" },
        idempotency_key: `idem-${i}`,
        invocation_id: `inv_${i}`,
        amount_usd: i % 1000,
      },
      now,
    );
    pipeline.xadd(stream, "*", ...encodeTicket(ticket));
  }
  await pipeline.exec();
  log(`${ENTRIES} tickets on ${stream}`);

  // Baseline: the same entries through a group of their own, read and acked, nothing else.
  await redis.xgroup("CREATE", stream, "bench-raw", "0");
  const rawStart = performance.now();
  let raw = 0;
  for (;;) {
    const reply = (await redis.xreadgroup("GROUP", "bench-raw", "c", "COUNT", 500, "STREAMS", stream, ">")) as [string, [string, string[]][]][] | null;
    const entries = reply?.[0]?.[1] ?? [];
    if (entries.length === 0) break;
    await redis.xack(stream, "bench-raw", ...entries.map(([id]) => id));
    raw += entries.length;
  }
  const rawPerSecond = raw / ((performance.now() - rawStart) / 1000);

  const logger = createLogger("silent");
  const ingest = createIngestWorker({ db, redis, events, logger, streamKey: stream, batchSize: 500 });
  const start = performance.now();
  const stats = await ingest.tick();
  const seconds = (performance.now() - start) / 1000;
  if (stats.inserted !== ENTRIES) throw new Error(`ingest filed ${stats.inserted} of ${ENTRIES}`);
  const perSecond = ENTRIES / seconds;
  log(`ingest: ${perSecond.toFixed(0)} entries/s (raw read+ack ${rawPerSecond.toFixed(0)}/s)`);
  return [
    row("ingest: stream entries filed per second (decode, bind, match, insert, ack)", perSecond, "entries/s", {
      baseline: { name: "raw XREADGROUP+XACK", value: rawPerSecond },
      target: `≥ ${INGEST_TARGET} entries/s`,
      pass: perSecond >= INGEST_TARGET,
    }),
  ];
}

/**
 * From the gateway's answer to a held call to the `approval:changed` event that files it (what
 * the inbox subscriptions re-read on), with ingest started at its default 10 s interval: only
 * the stream's wake can make this fast. One call at a time, INBOX_CALLS of them.
 */
async function inboxRows(db: Database, label: string, stream: ApprovalStream, streamKey: string, events: EventBus, f: Fixture): Promise<BenchRow[]> {
  const logger = createLogger("silent");
  const gateway = createGateway({
    store: createPostgresGatewayStore(db.prisma),
    stream,
    streamKey,
    gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
    approvalSecret: SECRET,
    serviceToken: SERVICE_TOKEN,
    upstreams: f.upstreams,
  });
  const ingest = createIngestWorker({ db, stream, events, logger, streamKey, group: `bench-inbox-${label}` });
  const filedAt = new Map<string, number>();
  const waiters = new Map<string, () => void>();
  const changes = events.subscribe("approval:changed");
  const listening = (async () => {
    for await (const change of changes) {
      if (filedAt.has(change.requestId)) continue;
      filedAt.set(change.requestId, performance.now());
      waiters.get(change.requestId)?.();
    }
  })();
  ingest.start();
  await ingest.watching();
  const samples: number[] = [];
  try {
    for (let i = 0; i < INBOX_CALLS + 5; i++) {
      const held = await gateway.handleToolCall({
        authorization: `Bearer ${f.key}`,
        body: { jsonrpc: "2.0", id: i, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: `acme/inbox-${label}-${i}` } } },
      });
      const answeredAt = performance.now();
      if (held.outcome.kind !== "approval_required") throw new Error(`not held: ${JSON.stringify(held.body)}`);
      const id = held.outcome.approvalId;
      if (!filedAt.has(id)) {
        await Promise.race([
          new Promise<void>((resolve) => waiters.set(id, resolve)),
          new Promise((_, reject) => setTimeout(() => reject(new Error(`not in the inbox in 15 s: ${id}`)), 15_000)),
        ]);
      }
      if (i >= 5) samples.push(filedAt.get(id)! - answeredAt); // the first few warm the JIT and the pools
    }
  } finally {
    await ingest.stop();
    await changes.return?.(undefined);
    await listening.catch(() => {});
  }
  const sorted = [...samples].sort((a, b) => a - b);
  const p50 = quantile(sorted, 0.5);
  const p99 = quantile(sorted, 0.99);
  log(`held → inbox (${label}): p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms over ${samples.length}`);
  return [
    row(`held call → filed in the inbox, ${label}, p50 (ingest interval 10 s)`, p50, "ms", { max: INBOX_TARGET_MS }),
    row(`held call → filed in the inbox, ${label}, p99 (ingest interval 10 s)`, p99, "ms", { max: INBOX_TARGET_MS }),
  ];
}

/** From the vote that reaches quorum to the call running on the upstream MCP server, through the delivery worker and the gateway. */
async function latencyRows(db: Database, redis: Redis, events: EventBus, f: Fixture, stream: string): Promise<BenchRow[]> {
  const logger = createLogger("silent");
  const executedAt = new Map<string, number>();
  const gateway = createGateway({
    store: createPostgresGatewayStore(db.prisma),
    stream: redis,
    streamKey: stream,
    gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
    approvalSecret: SECRET,
    serviceToken: SERVICE_TOKEN,
    upstreams: f.upstreams,
  });
  const handler = createGatewayHttpHandler(gateway);
  const server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  const ingest = createIngestWorker({ db, redis, events, logger, streamKey: stream, group: "bench-latency" });
  const delivery = createDeliveryWorker({
    db,
    events,
    logger,
    approvalSecret: SECRET,
    gatewayUrl: `http://127.0.0.1:${port}`,
    serviceToken: SERVICE_TOKEN,
    intervalMs: DELIVERY_INTERVAL_MS,
  });
  delivery.start();
  const samples: number[] = [];
  try {
    for (let i = 0; i < VOTES + 3; i++) {
      const repo = `acme/latency-${i}`;
      const held = await gateway.handleToolCall({
        authorization: `Bearer ${f.key}`,
        body: { jsonrpc: "2.0", id: i, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo } } },
      });
      if (held.outcome.kind !== "approval_required") throw new Error(`not held: ${JSON.stringify(held.body)}`);
      const id = held.outcome.approvalId;
      await ingest.tick();
      const deps = (viewer: Viewer) => ({ db, events, authz: new Authz(db.sql, viewer) });
      await voteOnApprovalRequest(deps(f.reviewers[0]!), { requestId: id, decision: "approve", expectedRevision: 1 });
      // The upstream sees the arguments (each call's repo is its own), not the approval id.
      const executed = new Promise<void>((resolve) => f.ran.set(repo, () => (executedAt.set(id, performance.now()), resolve())));
      const start = performance.now();
      await voteOnApprovalRequest(deps(f.reviewers[1]!), { requestId: id, decision: "approve", expectedRevision: 2 });
      await Promise.race([executed, new Promise((_, reject) => setTimeout(() => reject(new Error(`not executed in 5 s: ${id}`)), 5_000))]);
      if (i >= 3) samples.push(executedAt.get(id)! - start); // the first few warm the JIT and the pools
    }
  } finally {
    await delivery.stop();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  const sorted = [...samples].sort((a, b) => a - b);
  const p50 = quantile(sorted, 0.5);
  const p99 = quantile(sorted, 0.99);
  log(`vote → execute: p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms over ${samples.length}`);
  return [
    row(`vote reaching quorum → gateway execute, p50 (delivery interval ${DELIVERY_INTERVAL_MS} ms)`, p50, "ms", { max: LATENCY_TARGET_MS }),
    row(`vote reaching quorum → gateway execute, p99 (delivery interval ${DELIVERY_INTERVAL_MS} ms)`, p99, "ms", { max: LATENCY_TARGET_MS }),
  ];
}

/**
 * An allowed tools/call through a gateway that picks each workspace's saved policy set
 * (the version read with the key, the parsed gate cached under it), beside the same call through
 * a gateway with one fixed gate. The difference is the per-workspace choice on the hot path.
 */
async function gateChoiceRows(db: Database, redis: Redis, f: Fixture, stream: string): Promise<BenchRow[]> {
  await db.prisma.gatewayPolicyVersion.create({
    data: { orgId: f.org.id, workspaceId: f.workspace.id, version: 1, policies: DEFAULT_GATEWAY_POLICIES, authorId: f.reviewers[0]!.userId },
  });
  const common = { store: createPostgresGatewayStore(db.prisma), stream: redis, streamKey: stream, approvalSecret: SECRET, upstreams: f.upstreams };
  const fixed = createGateway({ ...common, gate: createCedarGate(DEFAULT_GATEWAY_POLICIES) });
  const perWorkspace = createGateway(common);
  const call = (gateway: typeof fixed) => async () => {
    const r = await gateway.handleToolCall({ authorization: `Bearer ${f.key}`, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.list_repos", arguments: {} } } });
    if (r.outcome.kind !== "executed") throw new Error(`bench call not executed: ${JSON.stringify(r.body)}`);
  };
  // Interleaved, so load on the machine and JIT warm-up fall on both alike.
  const fixedCall = call(fixed);
  const perWorkspaceCall = call(perWorkspace);
  const samples: { fixed: number[]; perWorkspace: number[] } = { fixed: [], perWorkspace: [] };
  for (let i = 0; i < 30; i++) await Promise.all([fixedCall(), perWorkspaceCall()]);
  for (let i = 0; i < GATE_CALLS; i++) {
    for (const [name, fn] of (i % 2 === 0 ? [["fixed", fixedCall], ["perWorkspace", perWorkspaceCall]] : [["perWorkspace", perWorkspaceCall], ["fixed", fixedCall]]) as [keyof typeof samples, () => Promise<void>][]) {
      const start = performance.now();
      await fn();
      samples[name].push(performance.now() - start);
    }
  }
  const p50 = (xs: number[]) => quantile([...xs].sort((a, b) => a - b), 0.5);
  const baseline = { p50: p50(samples.fixed) };
  const measured = { p50: p50(samples.perWorkspace) };
  log(`gate choice: fixed p50 ${baseline.p50.toFixed(3)} ms, per-workspace p50 ${measured.p50.toFixed(3)} ms over ${GATE_CALLS} calls`);
  return [
    row("gateway allowed call, the workspace's saved set (p50)", measured.p50, "ms", { baseline: { name: "one fixed gate", value: baseline.p50 } }),
  ];
}

export async function run(): Promise<BenchRow[]> {
  return withBenchSchema(async (db, schema) => {
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 3 });
    const events = createEventBus({ redisUrl: REDIS_URL, channelPrefix: schema });
    const ingestStream = `stream:approvals:${schema}:ingest`;
    const latencyStream = `stream:approvals:${schema}:latency`;
    const inboxStream = `stream:approvals:${schema}:inbox`;
    // The embedded default's bus: in the process, no Redis.
    const embeddedEvents = createEventBus({});
    // The connection's tools run on a real upstream MCP server on 127.0.0.1 (allowed for it).
    const ran = new Map<string, () => void>();
    const upstream = await startUpstream({ onCall: (call) => ran.get(String(call.arguments["repo"]))?.() });
    const upstreams = createUpstreamPool({ approvalSecret: SECRET, addresses: { allowPrivate: true } });
    try {
      const fixture = await seed(db, upstream.url, upstreams, ran);
      return [
        ...(await ingestRows(db, redis, events, fixture, ingestStream)),
        ...(await inboxRows(db, "Redis", redisApprovalStream(redis), inboxStream, events, fixture)),
        ...(await inboxRows(db, "in-process", createMemoryApprovalStream(), inboxStream, embeddedEvents, fixture)),
        ...(await latencyRows(db, redis, events, fixture, latencyStream)),
        ...(await gateChoiceRows(db, redis, fixture, latencyStream)),
      ];
    } finally {
      await redis.del(ingestStream, latencyStream, inboxStream).catch(() => 0);
      redis.disconnect();
      await events.close();
      await embeddedEvents.close();
      await upstreams.close();
      await upstream.close();
    }
  });
}
