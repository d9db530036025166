// Gateway speed: an allowed `tools/call` through the gateway (MCP Streamable HTTP in, the
// key + route + override read, Cedar, the pooled upstream client out) beside a direct call to
// the same upstream, side by side: the SDK's own Client on both sides, the calls interleaved in
// short blocks so load on the machine falls on both alike. The upstream runs in a process of its
// own (bench/gateway-upstream.ts), so CPU time is told apart: the agent and the gateway in this
// process, the upstream in its own. Targets: overhead under 2 ms at p50, under 1.5× the direct
// call at p99, and the gateway's own CPU per call at most 1.3× the upstream's own (the work the
// call is for, read in the direct blocks). The CPU of every process through the gateway beside
// direct, and the upstream's own through the gateway beside direct, are rows without a target:
// they say where a change in the whole went. Real PostgreSQL (a throwaway bench_ schema), real HTTP.
//
// Then the agent's status read (GET /v1/approvals/<id>, what an agent waiting for reviewers
// polls) on a held call, beside a bare node:http handler issuing the same three statements (the
// key, then the held record and the approval request at once) over the same driver: target at
// p50 at most 1.5× the bare handler, alternating in blocks as above.

import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createCedarGate, DEFAULT_GATEWAY_POLICIES } from "../src/gateway/cedar-gate.js";
import { createGateway } from "../src/gateway/gateway.js";
import { createGatewayHttpHandler } from "../src/gateway/http.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../src/gateway/keys.js";
import { createPostgresGatewayStore, FIND_HELD_SQL, FIND_KEY_SQL, FIND_OUTCOME_SQL } from "../src/gateway/postgres-store.js";
import { randomUUID } from "node:crypto";
import http from "node:http";
import type { Database } from "../src/infra/db.js";
import { createUpstreamPool } from "../src/gateway/upstream.js";
import { reconcileSystemRoles } from "../src/services/system-roles.js";
import { log, quantile, row, withBenchSchema, type BenchRow } from "./lib.js";

const CALLS = Number(process.env.BENCH_GATEWAY_CALLS ?? 2_000);
const WARMUP = Math.min(200, Math.ceil(CALLS / 5));
const P50_OVERHEAD_MS = 2;
const P99_RATIO = 1.5;
const CPU_RATIO = 1.3;
/** Calls per block: direct and gateway blocks alternate (which goes first alternates too). */
const BLOCK = 20;
const SECRET = "bench-approval-secret-0123456789abcdef";
const STATUS_READS = Number(process.env.BENCH_GATEWAY_STATUS_READS ?? 2_000);
const STATUS_RATIO = 1.5;

type UpstreamChild = { url: string; cpuMicros(): Promise<number>; close(): void };

/** The upstream in its own process (bench/gateway-upstream.ts): its URL, and its CPU time on demand. */
async function startUpstream(): Promise<UpstreamChild> {
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(new URL("./gateway-upstream.ts", import.meta.url))], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout! });
  const waiting: ((line: string) => void)[] = [];
  lines.on("line", (line) => waiting.shift()?.(line));
  const next = () => new Promise<string>((resolve) => waiting.push(resolve));
  const first = await next();
  if (!first.startsWith("url ")) throw new Error(`bench upstream said ${first}`);
  return {
    url: first.slice(4),
    async cpuMicros() {
      const answer = next();
      child.stdin!.write("cpu\n");
      return Number((await answer).slice(4));
    },
    close() {
      child.stdin!.end();
      child.kill();
    },
  };
}

async function client(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const c = new Client({ name: "bench-agent", version: "1.0.0" });
  await c.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return c;
}

export async function run(): Promise<BenchRow[]> {
  return withBenchSchema(async (db) => {
    await reconcileSystemRoles(db.prisma);
    const upstream = await startUpstream();
    const org = await db.prisma.organization.create({ data: { slug: `bench-gateway-${Date.now()}`, name: "bench" } });
    const user = await db.prisma.user.create({ data: { email: `agent-owner-${org.id}@bench.local`, name: "owner" } });
    // A key acts only while its creator is an active member (src/domain/liveness.ts).
    await db.prisma.membership.create({ data: { orgId: org.id, userId: user.id } });
    const stack = await db.prisma.stack.create({ data: { orgId: org.id, name: "bench-stack" } });
    const workspace = await db.prisma.workspace.create({ data: { orgId: org.id, stackId: stack.id, name: "bench-prod", environment: "prod" } });
    await db.prisma.connection.create({ data: { orgId: org.id, workspaceId: workspace.id, name: "files", provider: "files", url: upstream.url } });
    const key = generateVirtualKey();
    await db.prisma.virtualKey.create({ data: { orgId: org.id, workspaceId: workspace.id, name: "bench-agent", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: user.id } });

    // The upstream listens on 127.0.0.1: loopback allowed, as an operator would for a local run.
    const upstreams = createUpstreamPool({ approvalSecret: SECRET, addresses: { allowPrivate: true } });
    const gateway = createGateway({
      store: createPostgresGatewayStore(db.prisma, { sql: db.sql }),
      // An allowed call never writes a ticket.
      stream: { xadd: async () => Promise.reject(new Error("no approval stream in this bench")) },
      gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
      approvalSecret: SECRET,
      upstreams,
    });
    const handler = createGatewayHttpHandler(gateway);
    // A held call of the key's (as the gateway writes it on a hold), for the status read.
    const connection = await db.prisma.connection.findFirstOrThrow({ where: { workspaceId: workspace.id } });
    const approvalId = `apr_${randomUUID()}`;
    await db.prisma.gatewayInvocation.create({
      data: {
        approvalId,
        workspaceId: workspace.id,
        virtualKeyId: (await db.prisma.virtualKey.findFirstOrThrow({ where: { workspaceId: workspace.id } })).id,
        connectionId: connection.id,
        tool: "files.delete_file",
        invocationId: randomUUID(),
        argumentHash: "0".repeat(64),
        idempotencyKey: randomUUID(),
        state: "AwaitingApproval",
        expiresAt: new Date(Date.now() + 3_600_000),
      },
    });
    const gwServer = createServer((req, res) => void handler(req, res));
    await new Promise<void>((resolve) => gwServer.listen(0, "127.0.0.1", resolve));
    const gatewayUrl = `http://127.0.0.1:${(gwServer.address() as { port: number }).port}/v1/mcp`;

    const direct = await client(upstream.url);
    const through = await client(gatewayUrl, { authorization: `Bearer ${key}` });
    try {
      const directCall = async (i: number) => {
        const r = await direct.callTool({ name: "read_file", arguments: { path: `src/${i}.ts` } });
        if (r.isError) throw new Error("direct call failed");
      };
      const gatewayCall = async (i: number) => {
        const r = await through.callTool({ name: "files.read_file", arguments: { path: `src/${i}.ts` } });
        if (r.isError || !r.structuredContent) throw new Error(`gateway call failed: ${JSON.stringify(r)}`);
      };
      const d: number[] = [];
      const g: number[] = [];
      // CPU time per block: this process (the agent, and in gateway blocks the gateway) and the
      // upstream's process, read between blocks.
      const cpu = { here: { d: 0, g: 0 }, upstream: { d: 0, g: 0 } };
      const warmupBlocks = Math.ceil(WARMUP / BLOCK);
      const blocks = warmupBlocks + Math.ceil(CALLS / BLOCK);
      let i = 0;
      for (let b = 0; b < blocks; b++) {
        const order: ["d" | "g", (i: number) => Promise<void>, number[]][] = b % 2 === 0 ? [["d", directCall, d], ["g", gatewayCall, g]] : [["g", gatewayCall, g], ["d", directCall, d]];
        for (const [which, call, samples] of order) {
          const upstreamStart = await upstream.cpuMicros();
          const hereStart = process.cpuUsage();
          for (let k = 0; k < BLOCK; k++) {
            const start = process.hrtime.bigint();
            await call(i++);
            if (b >= warmupBlocks) samples.push(Number(process.hrtime.bigint() - start) / 1e6);
          }
          const here = process.cpuUsage(hereStart);
          const upstreamUsed = (await upstream.cpuMicros()) - upstreamStart;
          if (b >= warmupBlocks) {
            cpu.here[which] += (here.user + here.system) / 1000;
            cpu.upstream[which] += upstreamUsed / 1000;
          }
        }
      }
      const ds = [...d].sort((a, b) => a - b);
      const gs = [...g].sort((a, b) => a - b);
      const dp50 = quantile(ds, 0.5);
      const gp50 = quantile(gs, 0.5);
      const dp99 = quantile(ds, 0.99);
      const gp99 = quantile(gs, 0.99);
      const n = { d: d.length, g: g.length };
      const perCall = {
        direct: (cpu.here.d + cpu.upstream.d) / n.d,
        through: (cpu.here.g + cpu.upstream.g) / n.g,
        // The gateway's own: this process in gateway blocks less the agent's share (direct blocks).
        gateway: cpu.here.g / n.g - cpu.here.d / n.d,
        upstream: cpu.upstream.d / n.d,
        agent: cpu.here.d / n.d,
      };
      log(
        `CPU per call: direct ${perCall.direct.toFixed(2)} ms (agent ${perCall.agent.toFixed(2)}, upstream ${perCall.upstream.toFixed(2)}); ` +
          `through the gateway ${perCall.through.toFixed(2)} ms (the gateway's own ${perCall.gateway.toFixed(2)}, upstream ${(cpu.upstream.g / n.g).toFixed(2)})`,
      );
      log(`tools/call over ${n.g} calls: direct p50 ${dp50.toFixed(2)} ms p99 ${dp99.toFixed(2)} ms; through the gateway p50 ${gp50.toFixed(2)} ms p99 ${gp99.toFixed(2)} ms`);
      const status = await statusReads(db, `${gatewayUrl.replace(/\/mcp$/, "")}/approvals/${approvalId}`, key);
      return [
        ...status,
        row("allowed tools/call through the gateway, p50", gp50, "ms", { baseline: { name: "direct to the upstream", value: dp50 } }),
        row("allowed tools/call: gateway overhead at p50 (gateway − direct)", gp50 - dp50, "ms", { max: P50_OVERHEAD_MS }),
        row("allowed tools/call: the gateway's own CPU per call", perCall.gateway, "ms", {
          baseline: { name: "the upstream's own (direct calls)", value: perCall.upstream },
          target: `≤ ${CPU_RATIO}× the upstream's own`,
          pass: perCall.gateway <= CPU_RATIO * perCall.upstream,
        }),
        // Information, no target: the whole system, and the upstream's own share of it.
        row("allowed tools/call: CPU per call, every process (agent, gateway, upstream)", perCall.through, "ms", { baseline: { name: "direct to the upstream (agent, upstream)", value: perCall.direct } }),
        row("allowed tools/call: the upstream's own CPU per call, through the gateway", cpu.upstream.g / n.g, "ms", { baseline: { name: "direct calls", value: perCall.upstream } }),
        row("allowed tools/call through the gateway, p99", gp99, "ms", {
          baseline: { name: "direct to the upstream", value: dp99 },
          target: `< ${P99_RATIO}× direct`,
          pass: gp99 < P99_RATIO * dp99,
        }),
      ];
    } finally {
      await Promise.all([direct.close(), through.close()]).catch(() => {});
      await upstreams.close();
      gwServer.closeAllConnections();
      await new Promise<void>((resolve) => gwServer.close(() => resolve()));
      upstream.close();
    }
  });
}

/**
 * The agent's status read over HTTP (a kept-alive connection) beside a bare node:http handler that
 * issues the same three statements and answers their rows as JSON (what a hand-written endpoint
 * would do), in alternating blocks; the client, its connection and the process are the same.
 */
async function statusReads(db: Database, url: string, key: string): Promise<BenchRow[]> {
  const keyHash = hashVirtualKey(key);
  const approvalId = new URL(url).pathname.split("/").at(-1)!;
  const bare = createServer((_req, res) => {
    void (async () => {
      const [k] = await db.sql.query(FIND_KEY_SQL, [keyHash], { prepare: true });
      const [held, outcome] = await Promise.all([db.sql.query(FIND_HELD_SQL, [approvalId], { prepare: true }), db.sql.query(FIND_OUTCOME_SQL, [approvalId], { prepare: true })]);
      if (!k || held.length !== 1) throw new Error("the status read's statements found no key or no held call");
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ status: "pending", held: held[0], outcome: outcome[0] ?? null }));
    })().catch((error: Error) => res.writeHead(500).end(error.message));
  });
  await new Promise<void>((resolve) => bare.listen(0, "127.0.0.1", resolve));
  const bareUrl = `http://127.0.0.1:${(bare.address() as { port: number }).port}/v1/approvals/${approvalId}`;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
  const reader = (to: string) => {
    const target = new URL(to);
    return () =>
      new Promise<void>((resolve, reject) => {
        const req = http.get({ host: target.hostname, port: target.port, path: target.pathname, agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => (body += chunk));
          res.on("end", () => (res.statusCode === 200 && body.includes('"status":"pending"') ? resolve() : reject(new Error(`status read answered ${res.statusCode}: ${body}`))));
        });
        req.on("error", reject);
      });
  };
  const reads = { gateway: reader(url), bare: reader(bareUrl) };
  const samples = { gateway: [] as number[], bare: [] as number[] };
  const cpu = { gateway: 0, bare: 0 };
  const warmupBlocks = Math.ceil(WARMUP / BLOCK);
  const blocks = warmupBlocks + Math.ceil(STATUS_READS / BLOCK);
  try {
    for (let b = 0; b < blocks; b++) {
      const order: ("gateway" | "bare")[] = b % 2 === 0 ? ["gateway", "bare"] : ["bare", "gateway"];
      for (const which of order) {
        const cpuStart = process.cpuUsage();
        for (let k = 0; k < BLOCK; k++) {
          const start = process.hrtime.bigint();
          await reads[which]();
          if (b >= warmupBlocks) samples[which].push(Number(process.hrtime.bigint() - start) / 1e6);
        }
        const used = process.cpuUsage(cpuStart);
        if (b >= warmupBlocks) cpu[which] += (used.user + used.system) / 1000;
      }
    }
  } finally {
    agent.destroy();
    bare.closeAllConnections();
    await new Promise<void>((resolve) => bare.close(() => resolve()));
  }
  const p50 = { gateway: quantile([...samples.gateway].sort((a, b) => a - b), 0.5), bare: quantile([...samples.bare].sort((a, b) => a - b), 0.5) };
  const perRead = { gateway: cpu.gateway / samples.gateway.length, bare: cpu.bare / samples.bare.length };
  log(
    `status read over ${samples.gateway.length} reads: the gateway p50 ${p50.gateway.toFixed(3)} ms (CPU ${perRead.gateway.toFixed(3)} ms a read, agent and server), ` +
      `a bare handler of the same statements p50 ${p50.bare.toFixed(3)} ms (CPU ${perRead.bare.toFixed(3)} ms)`,
  );
  return [
    row("agent's status read (GET /v1/approvals/<id>), held call, p50", p50.gateway, "ms", {
      baseline: { name: "a bare node:http handler of the same three statements", value: p50.bare },
      target: `≤ ${STATUS_RATIO}× bare`,
      pass: p50.gateway <= STATUS_RATIO * p50.bare,
    }),
    row("agent's status read: CPU per read (agent and server, one process)", perRead.gateway, "ms", { baseline: { name: "the bare handler", value: perRead.bare }, target: "context" }),
  ];
}
