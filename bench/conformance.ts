// The MCP conformance suite (@modelcontextprotocol/conformance) against the gateway: every
// `tools-*` server scenario, run once straight at a reference server (bench/conformance/
// reference-server.ts) and once through Countersign's gateway in front of that same server (a
// connection whose url is the reference server, loopback allowed as with
// COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE=1). A row per path: scenarios passed of those run; the
// gateway's row is on target when it passes every scenario the direct run passes. Per-scenario
// results go to stderr. `npm run conformance` runs this module alone.
//
// The suite calls the scenarios' tools by their bare names (`test_simple_text`); the gateway
// serves them as `<connection>.<tool>`. A small proxy between the suite and the gateway adds the
// connection's prefix to tools/call names and takes it off tools/list names — nothing else; every
// other message, header and SSE event passes through as it is.

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createCedarGate, DEFAULT_GATEWAY_POLICIES } from "../src/gateway/cedar-gate.js";
import { createGateway } from "../src/gateway/gateway.js";
import { createGatewayHttpHandler } from "../src/gateway/http.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../src/gateway/keys.js";
import { createPostgresGatewayStore } from "../src/gateway/postgres-store.js";
import { createUpstreamPool } from "../src/gateway/upstream.js";
import { reconcileSystemRoles } from "../src/services/system-roles.js";
import { startReferenceServer } from "./conformance/reference-server.js";
import { log, row, withBenchSchema, type BenchRow } from "./lib.js";

const SECRET = "bench-approval-secret-0123456789abcdef";
const CONNECTION = "ref";
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLI = join(ROOT, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
const NODE20_SHIM = join(ROOT, "bench/conformance/node20-shim.mjs");
const needsShim = Number(process.versions.node.split(".")[0]) < 22;

/** Runs the suite's CLI; resolves with its output. */
function conformance(args: string[], cwd: string): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...(needsShim ? ["--import", NODE20_SHIM] : []), CLI, ...args], { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => (out += c.toString("utf8")));
    child.on("close", () => resolve(out));
  });
}

type Outcome = { passed: boolean; failures: string[] };

/**
 * The suite's server scenarios against `url`, in one run of its CLI (it starts in seconds, the
 * scenarios in milliseconds): each `tools-*` scenario's outcome, passed when it recorded checks
 * and none of them failed. The other scenarios (resources, prompts, …) are not the gateway's.
 */
async function toolScenarios(url: string): Promise<Map<string, Outcome>> {
  const dir = mkdtempSync(join(tmpdir(), "conformance-"));
  try {
    const out = await conformance(["server", "--url", url, "-o", dir], dir);
    const outcomes = new Map<string, Outcome>();
    for (const entry of readdirSync(dir).sort()) {
      const name = /^server-(tools-[a-z0-9-]+?)-\d{4}-\d\d-\d\dT/.exec(entry)?.[1];
      if (!name || !statSync(join(dir, entry)).isDirectory()) continue;
      const file = join(dir, entry, "checks.json");
      const checks = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as { status: string; errorMessage?: string }[]) : [];
      const failures = checks.filter((c) => c.status === "FAILURE").map((c) => c.errorMessage ?? "failed");
      if (checks.length === 0) failures.push("no checks recorded");
      outcomes.set(name, { passed: failures.length === 0, failures });
    }
    if (outcomes.size === 0) throw new Error(`the conformance suite ran no tools-* scenario: ${out.slice(-500)}`);
    return outcomes;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The name-mapping proxy in front of the gateway (see the header). */
async function startNameProxy(gatewayUrl: string, key: string): Promise<{ url: string; server: Server }> {
  const target = new URL(gatewayUrl);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body = Buffer.concat(chunks);
      let method: unknown;
      if (body.length > 0) {
        try {
          const message = JSON.parse(body.toString("utf8")) as { method?: unknown; params?: { name?: unknown } };
          method = message.method;
          if (method === "tools/call" && typeof message.params?.name === "string") {
            message.params.name = `${CONNECTION}.${message.params.name}`;
            body = Buffer.from(JSON.stringify(message));
          }
        } catch {
          // Not JSON: passed on for the gateway to refuse.
        }
      }
      const headers = { ...req.headers, host: target.host, authorization: `Bearer ${key}`, "content-length": String(body.length) };
      const upstream = request(target, { method: req.method, headers }, (answer) => {
        if (method === "tools/list" && /application\/json/.test(String(answer.headers["content-type"]))) {
          const parts: Buffer[] = [];
          answer.on("data", (c: Buffer) => parts.push(c));
          answer.on("end", () => {
            const message = JSON.parse(Buffer.concat(parts).toString("utf8")) as { result?: { tools?: { name: string }[] } };
            for (const tool of message.result?.tools ?? []) tool.name = tool.name.replace(`${CONNECTION}.`, "");
            const text = JSON.stringify(message);
            res.writeHead(answer.statusCode ?? 502, { ...answer.headers, "content-length": String(Buffer.byteLength(text)) });
            res.end(text);
          });
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on("error", () => res.writeHead(502).end());
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`, server };
}

export async function run(): Promise<BenchRow[]> {
  return withBenchSchema(async (db) => {
    await reconcileSystemRoles(db.prisma);
    const reference = await startReferenceServer();
    const org = await db.prisma.organization.create({ data: { slug: `bench-conformance-${Date.now()}`, name: "bench" } });
    const user = await db.prisma.user.create({ data: { email: `agent-owner-${org.id}@bench.local`, name: "owner" } });
    // A key acts while its creator is a member of its organization.
    await db.prisma.membership.create({ data: { orgId: org.id, userId: user.id } });
    const stack = await db.prisma.stack.create({ data: { orgId: org.id, name: "bench-stack" } });
    const workspace = await db.prisma.workspace.create({ data: { orgId: org.id, stackId: stack.id, name: "bench-prod", environment: "prod", production: true } });
    await db.prisma.connection.create({ data: { orgId: org.id, workspaceId: workspace.id, name: CONNECTION, provider: "reference", url: reference.url } });
    const key = generateVirtualKey();
    await db.prisma.virtualKey.create({ data: { orgId: org.id, workspaceId: workspace.id, name: "conformance", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: user.id } });
    const upstreams = createUpstreamPool({ approvalSecret: SECRET, addresses: { allowPrivate: true } });
    const gateway = createGateway({
      store: createPostgresGatewayStore(db.prisma, { sql: db.sql }),
      // The scenarios' tools are harmless: nothing is held, no ticket is written.
      stream: { xadd: async () => Promise.reject(new Error("no approval stream in this bench")) },
      gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
      approvalSecret: SECRET,
      upstreams,
    });
    const handler = createGatewayHttpHandler(gateway);
    const gwServer = createServer((req, res) => void handler(req, res));
    await new Promise<void>((resolve) => gwServer.listen(0, "127.0.0.1", resolve));
    const proxy = await startNameProxy(`http://127.0.0.1:${(gwServer.address() as { port: number }).port}/v1/mcp`, key);
    try {
      const direct = await toolScenarios(reference.url);
      const through = await toolScenarios(proxy.url);
      const scenarios = [...direct.keys()];
      const failed: Outcome = { passed: false, failures: ["not run"] };
      const mark = (o: Outcome) => (o.passed ? "pass" : `FAIL (${o.failures.join("; ").slice(0, 200)})`);
      for (const name of scenarios) log(`conformance ${name}: direct ${mark(direct.get(name)!)}; through the gateway ${mark(through.get(name) ?? failed)}`);
      const passedDirect = scenarios.filter((s) => direct.get(s)!.passed);
      const passedThrough = scenarios.filter((s) => through.get(s)?.passed);
      const missing = passedDirect.filter((s) => !through.get(s)?.passed);
      if (missing.length > 0) log(`conformance: passed direct but not through the gateway: ${missing.join(", ")}`);
      return [
        row(`tools-* scenarios passed, direct to the reference server (of ${scenarios.length})`, passedDirect.length, "scenarios"),
        row(`tools-* scenarios passed through the gateway (of ${scenarios.length})`, passedThrough.length, "scenarios", {
          baseline: { name: "direct", value: passedDirect.length },
          target: "every scenario the direct run passes",
          pass: missing.length === 0,
        }),
      ];
    } finally {
      await upstreams.close();
      for (const s of [proxy.server, gwServer]) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
      await reference.close();
    }
  });
}
