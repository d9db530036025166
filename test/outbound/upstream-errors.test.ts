// An upstream's failure reaches an admin (GraphQL `ToolConnection.tools`) and an agent (the
// gateway's JSON-RPC error) as what failed — never what the upstream answered: no body, no JSON
// key, no message of its own, no redirect target. Real upstreams on loopback (the flag on): a
// real MCP server (the SDK's) whose handlers fail, and HTTP servers that are not MCP at all.

import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUpstreamPool } from "../../src/gateway/upstream.js";
import { createWorld, type World } from "../approvals/world.js";

/** Everything an upstream below answers that must never be passed on. */
const LEAK = /SECRET|secret_|internal_admin|169\.254|ECONN|127\.0\.0\.1|<html/i;

type Behaviour = (req: IncomingMessage, res: ServerResponse, body: any) => void | Promise<void>;

const json = (res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void => {
  res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(value));
};

/** A real MCP server (the SDK's low-level Server) whose tools/list or tools/call answers a JSON-RPC error. */
function failingMcp(failList: boolean): Behaviour {
  return async (req, res, body) => {
    const server = new Server({ name: "failing", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => {
      if (failList) throw new McpError(-32050, "SECRET list failure at db 10.0.0.7", { secret_list_key: "SECRET-LIST" });
      return { tools: [{ name: "boom", inputSchema: { type: "object" as const }, annotations: { readOnlyHint: true } }] };
    });
    server.setRequestHandler(CallToolRequestSchema, async () => {
      throw new McpError(-32050, "SECRET call failure: internal_admin_token=abc", { secret_call_key: "SECRET-CALL" });
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on("close", () => void Promise.all([transport.close(), server.close()]).catch(() => {}));
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  };
}

/** The ways an upstream fails, each with what the gateway may say about it. */
const FAILURES: Record<string, { behaviour: Behaviour; says: string; reason?: string }> = {
  "answers HTTP 500 with a JSON body": { behaviour: (_q, res) => json(res, 500, { secret_key_500: "SECRET-500" }), says: "the upstream answered HTTP 5xx" },
  "answers HTTP 404 with an HTML page": { behaviour: (_q, res) => void res.writeHead(404, { "content-type": "text/html" }).end("<html>SECRET-404</html>"), says: "the upstream answered HTTP 4xx" },
  "answers 200 with JSON that is not JSON-RPC": { behaviour: (_q, res) => json(res, 200, { internal_admin_token: "SECRET-JSON" }), says: "the upstream is not an MCP server (its answer is not MCP)" },
  "answers 200 with an HTML page": { behaviour: (_q, res) => void res.writeHead(200, { "content-type": "text/html" }).end("<html>SECRET-HTML</html>"), says: "the upstream is not an MCP server (its answer is not MCP)" },
  "redirects to the metadata address": { behaviour: (_q, res) => void res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" }).end("SECRET-REDIRECT"), says: "the upstream answered a redirect, which is not followed" },
  "answers initialize with a JSON-RPC error": {
    behaviour: (_q, res, body) => json(res, 200, { jsonrpc: "2.0", id: body?.id ?? null, error: { code: -32601, message: "SECRET init refused by 10.0.0.7", data: { secret_init_key: 1 } } }),
    says: "the upstream is not an MCP server (it refused initialize)",
  },
  "answers tools/list with a result of the wrong shape": {
    behaviour: (_q, res, body): void => {
      if (body?.method === "initialize") return json(res, 200, { jsonrpc: "2.0", id: body.id, result: { protocolVersion: body.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "x", version: "1" } } });
      if (body?.id === undefined) return void res.writeHead(202).end();
      return json(res, 200, { jsonrpc: "2.0", id: body.id, result: { tools: [{ secret_bad_key: "SECRET-SHAPE" }] } });
    },
    says: "the upstream is not an MCP server (its answer is not MCP)",
  },
  "answers a body larger than the gateway buffers": {
    behaviour: (_q, res): void => {
      res.writeHead(200, { "content-type": "application/json" });
      const chunk = Buffer.alloc(1024 * 1024, " ");
      for (let i = 0; i < 17; i++) res.write(chunk);
      res.end("{}");
    },
    says: "the upstream's answer is too large",
  },
  "is a real MCP server whose tools/list fails": { behaviour: failingMcp(true), says: "the upstream answered JSON-RPC error -32050", reason: "upstream_error" },
};

let w: World;
let http: HttpServer;
let base: string;
const pool = createUpstreamPool({ approvalSecret: "upstream-errors-approval-secret-0123456789", addresses: { allowPrivate: true }, defaultTimeoutMs: 3_000 });
const clients: Client[] = [];
const connections = new Map<string, { id: string; name: string }>();

beforeAll(async () => {
  const routes: Record<string, Behaviour> = { ...Object.fromEntries(Object.entries(FAILURES).map(([k, v], i) => [`/f${i}`, v.behaviour])), "/call-fails": failingMcp(false) };
  http = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body: any;
      try {
        body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
      } catch {}
      void (async () => (routes[new URL(req.url ?? "/", "http://x").pathname] ?? ((_q, r) => r.writeHead(404).end()))(req, res, body))();
    });
  });
  await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  w = await createWorld({ gateway: { upstreams: pool } });
  let i = 0;
  for (const key of Object.keys(FAILURES)) {
    const row = await w.db.prisma.connection.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: `up${i}`, provider: "github", url: `${base}/f${i}` } });
    connections.set(key, row);
    i++;
  }
  const refused = await w.db.prisma.connection.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: "closedport", provider: "github", url: "http://127.0.0.1:9/mcp" } });
  connections.set("refuses the connection", refused);
  const callFails = await w.db.prisma.connection.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: "callfails", provider: "github", url: `${base}/call-fails` } });
  connections.set("is a real MCP server whose tools/call fails", callFails);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await pool.close();
  await w?.close();
  await new Promise((r) => http?.close(r));
});

async function agent(): Promise<Client> {
  const client = new Client({ name: "test-agent", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${w.gatewayUrl}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${w.keyPlaintext}` } } }));
  clients.push(client);
  return client;
}

const TOOLS = `query($w: ID!) { toolConnections(workspaceId: $w) { id tools { __typename
  ... on ToolConnectionToolsSuccess { data { name } } ... on UpstreamUnavailableError { code reason message } } } }`;

describe("an upstream's failure is told as what failed, never as what it answered", () => {
  it("the GraphQL tools read: UpstreamUnavailableError with the gateway's words for each failure", async () => {
    const listed = (await w.t.gql(TOOLS, { w: w.workspace.id }, w.org.adminToken)).data.toolConnections as { id: string; tools: any }[];
    const expected = { ...FAILURES, "refuses the connection": { says: "the upstream refused the connection" } } as Record<string, { says: string; reason?: string }>;
    for (const [why, { says, reason }] of Object.entries(expected)) {
      const tools = listed.find((c) => c.id === connections.get(why)!.id)!.tools;
      expect(tools, why).toEqual({ __typename: "UpstreamUnavailableError", code: "UPSTREAM_UNAVAILABLE", reason: reason ?? "upstream_unavailable", message: says });
      expect(JSON.stringify(tools), why).not.toMatch(LEAK);
    }
  });

  it("the gateway's JSON-RPC error for tools/call: the same words, no body, key or message of the upstream's", async () => {
    const client = await agent();
    const cases = [...Object.keys(FAILURES), "refuses the connection", "is a real MCP server whose tools/call fails"];
    for (const why of cases) {
      const { name } = connections.get(why)!;
      const error = await client.callTool({ name: `${name}.boom`, arguments: {} }).then(
        (r) => r,
        (e: unknown) => e,
      );
      expect(error, why).toBeInstanceOf(McpError);
      const e = error as McpError;
      expect(`${e.message} ${JSON.stringify(e.data)}`, why).not.toMatch(LEAK);
      if (why === "is a real MCP server whose tools/call fails") {
        expect(e.data, why).toMatchObject({ error: "upstream_error", message: "the upstream answered JSON-RPC error -32050", upstream_code: -32050 });
      } else {
        expect((e.data as { message: string }).message, why).toMatch(/^the upstream[ ']/);
      }
    }
  });
});
