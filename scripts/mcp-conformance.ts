// Runs the official MCP conformance suite's server scenarios against an upstream MCP server
// (the SDK's McpServer) and against the gateway in front of the same upstream, side by side:
//
//   npx tsx scripts/mcp-conformance.ts <path to @modelcontextprotocol/conformance's dist/index.js> [scenario …]
//
// The suite is not a dependency of the project (install it anywhere with npm; 0.1.16 needs
// Node 22's fs.globSync, 0.1.11 runs on Node 20). Its scenarios send no Authorization header,
// so the gateway is reached through a loopback proxy that adds the agent's virtual key. Real
// PostgreSQL (a throwaway bench_ schema), real HTTP.

import { execFile } from "node:child_process";
import { createServer, request, type Server } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { withBenchSchema } from "../bench/lib.js";
import { createCedarGate, DEFAULT_GATEWAY_POLICIES } from "../src/gateway/cedar-gate.js";
import { createGateway } from "../src/gateway/gateway.js";
import { createGatewayHttpHandler } from "../src/gateway/http.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../src/gateway/keys.js";
import { createPostgresGatewayStore } from "../src/gateway/postgres-store.js";
import { createUpstreamPool } from "../src/gateway/upstream.js";

const [cli, ...asked] = process.argv.slice(2);
if (!cli) {
  console.error("usage: npx tsx scripts/mcp-conformance.ts <conformance dist/index.js> [scenario …]");
  process.exit(2);
}
const scenarios = asked.length > 0 ? asked : ["server-initialize", "ping", "tools-list", "tools-call-simple-text", "tools-call-error"];

const listen = (server: Server) => new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)));

function upstreamServer(): Server {
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const mcp = new McpServer({ name: "conformance-upstream", version: "1.0.0" });
        mcp.registerTool("test_simple_text", { description: "Returns a simple text.", annotations: { readOnlyHint: true } }, async () => ({ content: [{ type: "text", text: "This is a simple text response for testing." }] }));
        mcp.registerTool("test_error_handling", { description: "Always fails.", annotations: { readOnlyHint: true } }, async () => ({ isError: true, content: [{ type: "text", text: "This tool intentionally returns an error for testing" }] }));
        mcp.registerTool("add", { description: "Adds two numbers.", inputSchema: { a: z.number(), b: z.number() }, annotations: { readOnlyHint: true } }, async ({ a, b }) => ({ content: [{ type: "text", text: String(a + b) }] }));
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        res.on("close", () => void Promise.all([transport.close(), mcp.close()]).catch(() => {}));
        await mcp.connect(transport);
        await transport.handleRequest(req, res, chunks.length ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown) : undefined);
      })();
    });
  });
}

function run(url: string, scenario: string): Promise<string> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli!, "server", "--url", url, "--scenario", scenario], { timeout: 60_000 }, (error, stdout, stderr) => {
      resolve(`${stdout}${stderr}`.trim() + (error && !stdout ? `\n(exit ${error.code ?? "?"})` : ""));
    });
  });
}

await withBenchSchema(async (db) => {
  const upstream = upstreamServer();
  const upstreamUrl = `http://127.0.0.1:${await listen(upstream)}/mcp`;
  const org = await db.prisma.organization.create({ data: { slug: `conformance-${Date.now()}`, name: "conformance" } });
  const user = await db.prisma.user.create({ data: { email: `owner-${org.id}@conformance.local`, name: "owner" } });
  const stack = await db.prisma.stack.create({ data: { orgId: org.id, name: "s" } });
  const ws = await db.prisma.workspace.create({ data: { orgId: org.id, stackId: stack.id, name: "w", environment: "prod" } });
  await db.prisma.connection.create({ data: { orgId: org.id, workspaceId: ws.id, name: "up", provider: "up", url: upstreamUrl } });
  const key = generateVirtualKey();
  await db.prisma.virtualKey.create({ data: { orgId: org.id, workspaceId: ws.id, name: "k", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: user.id } });
  // The upstream listens on 127.0.0.1: loopback allowed, as an operator would for a local run.
  const upstreams = createUpstreamPool({ addresses: { allowPrivate: true } });
  const gateway = createGateway({
    store: createPostgresGatewayStore(db.prisma, { sql: db.sql }),
    stream: { xadd: async () => Promise.reject(new Error("no stream")) },
    gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
    approvalSecret: "conformance-secret-0123456789abcdef",
    upstreams,
  });
  const handler = createGatewayHttpHandler(gateway);
  const gw = createServer((req, res) => void handler(req, res));
  const gwPort = await listen(gw);
  // The suite sends no Authorization: this proxy adds the agent's key, and nothing else.
  const proxy = createServer((req, res) => {
    const out = request({ host: "127.0.0.1", port: gwPort, path: req.url, method: req.method, headers: { ...req.headers, authorization: `Bearer ${key}` } }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.pipe(out);
  });
  const proxyUrl = `http://127.0.0.1:${await listen(proxy)}/v1/mcp`;
  try {
    for (const scenario of scenarios) {
      console.log(`\n=== ${scenario}: upstream alone (${upstreamUrl})\n${await run(upstreamUrl, scenario)}`);
      console.log(`\n=== ${scenario}: the gateway in front of it (${proxyUrl})\n${await run(proxyUrl, scenario)}`);
    }
  } finally {
    await upstreams.close();
    for (const s of [proxy, gw, upstream]) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  }
});
