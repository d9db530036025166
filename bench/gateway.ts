// Gateway speed: an allowed `tools/call` through the gateway (MCP Streamable HTTP in, the
// key + route + override read, Cedar, the pooled upstream client out) beside a direct call to
// the same upstream, side by side: the SDK's own Client on both sides, the calls interleaved
// so load on the machine falls on both alike. Targets: overhead under 2 ms at p50, and under
// 1.5× the direct call at p99. Real PostgreSQL (a throwaway bench_ schema), real HTTP.

import { createServer, type Server } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { createCedarGate, DEFAULT_GATEWAY_POLICIES } from "../src/gateway/cedar-gate.js";
import { createGateway } from "../src/gateway/gateway.js";
import { createGatewayHttpHandler } from "../src/gateway/http.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../src/gateway/keys.js";
import { createPostgresGatewayStore } from "../src/gateway/postgres-store.js";
import { createUpstreamPool } from "../src/gateway/upstream.js";
import { reconcileSystemRoles } from "../src/services/system-roles.js";
import { log, quantile, row, withBenchSchema, type BenchRow } from "./lib.js";

const CALLS = Number(process.env.BENCH_GATEWAY_CALLS ?? 2_000);
const WARMUP = Math.min(200, Math.ceil(CALLS / 5));
const P50_OVERHEAD_MS = 2;
const P99_RATIO = 1.5;
const SECRET = "bench-approval-secret-0123456789abcdef";

/** The upstream: the SDK's McpServer, stateless Streamable HTTP, one server per request (as the gateway). */
async function startUpstream(): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const mcp = new McpServer({ name: "bench-upstream", version: "1.0.0" });
        mcp.registerTool("read_file", { description: "Read a file.", inputSchema: { path: z.string() }, annotations: { readOnlyHint: true } }, async ({ path }) => ({
          content: [{ type: "text", text: `contents of ${path}` }],
          structuredContent: { path, size: path.length },
        }));
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        res.on("close", () => void Promise.all([transport.close(), mcp.close()]).catch(() => {}));
        await mcp.connect(transport);
        await transport.handleRequest(req, res, chunks.length ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown) : undefined);
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`, server };
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
      // CPU time per call (this process: agent client, gateway, upstream): less at the mercy of
      // other processes on the machine than wall time.
      const cpu = { d: 0, g: 0 };
      for (let i = 0; i < WARMUP + CALLS; i++) {
        // Interleaved, alternating which goes first.
        const pair: [(i: number) => Promise<void>, number[]][] = i % 2 === 0 ? [[directCall, d], [gatewayCall, g]] : [[gatewayCall, g], [directCall, d]];
        for (const [call, samples] of pair) {
          const cpuStart = process.cpuUsage();
          const start = process.hrtime.bigint();
          await call(i);
          if (i >= WARMUP) {
            samples.push(Number(process.hrtime.bigint() - start) / 1e6);
            const used = process.cpuUsage(cpuStart);
            cpu[samples === d ? "d" : "g"] += (used.user + used.system) / 1000;
          }
        }
      }
      const ds = [...d].sort((a, b) => a - b);
      const gs = [...g].sort((a, b) => a - b);
      const dp50 = quantile(ds, 0.5);
      const gp50 = quantile(gs, 0.5);
      const dp99 = quantile(ds, 0.99);
      const gp99 = quantile(gs, 0.99);
      const cpuD = cpu.d / CALLS;
      const cpuG = cpu.g / CALLS;
      log(`CPU per call: direct ${cpuD.toFixed(2)} ms, through the gateway ${cpuG.toFixed(2)} ms`);
      log(`tools/call over ${CALLS} calls: direct p50 ${dp50.toFixed(2)} ms p99 ${dp99.toFixed(2)} ms; through the gateway p50 ${gp50.toFixed(2)} ms p99 ${gp99.toFixed(2)} ms`);
      return [
        row("allowed tools/call through the gateway, p50", gp50, "ms", { baseline: { name: "direct to the upstream", value: dp50 } }),
        row("allowed tools/call: gateway overhead at p50 (gateway − direct)", gp50 - dp50, "ms", { max: P50_OVERHEAD_MS }),
        row("allowed tools/call: CPU per call in this process, through the gateway", cpuG, "ms", { baseline: { name: "direct to the upstream", value: cpuD } }),
        row("allowed tools/call through the gateway, p99", gp99, "ms", {
          baseline: { name: "direct to the upstream", value: dp99 },
          target: `< ${P99_RATIO}× direct`,
          pass: gp99 < P99_RATIO * dp99,
        }),
      ];
    } finally {
      await Promise.all([direct.close(), through.close()]).catch(() => {});
      await upstreams.close();
      await new Promise<void>((resolve) => gwServer.close(() => resolve()));
      gwServer.closeAllConnections();
      upstream.server.closeAllConnections();
      await new Promise<void>((resolve) => upstream.server.close(() => resolve()));
    }
  });
}
