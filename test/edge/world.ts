// A real Countersign listening on a port, with the embedded gateway mounted, and one of each
// credential its routes take: an API token, a virtual key (of a workspace whose `github`
// connection runs on the in-process demo upstream), the gateway's service token, the metrics token.

import { request } from "node:http";
import { Writable } from "node:stream";
import { createLogger } from "../../src/infra/logger.js";
import { DEMO_UPSTREAM_URL } from "../../src/gateway/demo-upstream.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { isSignatureCredential, type RouteCredential, type SignatureCredential } from "../../src/edge/http.js";
import { createOrg } from "../helpers/fixtures.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";

export const APPROVAL_SECRET = "edge-test-approval-secret-0123456789abcdef";
export const SERVICE_TOKEN = "edge-test-gateway-service-token-0123456789";
export const METRICS_TOKEN = "edge-test-metrics-token-0123456789";

export interface EdgeWorld {
  t: TestApp;
  base: string;
  apiToken: string;
  virtualKey: string;
  /** A second live key of the same workspace. */
  otherKey: string;
  credential(kind: RouteCredential): string | null;
  /** Lines the server logged at error level or above (an unexpected failure is one). */
  errorLines: Array<{ msg: string; err?: { message?: string } }>;
  close(): Promise<void>;
}

export async function startEdgeWorld(env: Record<string, string> = {}): Promise<EdgeWorld> {
  const errorLines: EdgeWorld["errorLines"] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) errorLines.push(JSON.parse(line) as EdgeWorld["errorLines"][number]);
      done();
    },
  });
  const t = await startTestApp({
    logger: createLogger("error", sink),
    env: {
      COUNTERSIGN_GATEWAY_EMBEDDED: "on",
      COUNTERSIGN_APPROVAL_SECRET: APPROVAL_SECRET,
      COUNTERSIGN_GATEWAY_SERVICE_TOKEN: SERVICE_TOKEN,
      COUNTERSIGN_METRICS_TOKEN: METRICS_TOKEN,
      COUNTERSIGN_GATEWAY_RATE_LIMIT_RPS: "0",
      ...env,
    },
  });
  const org = await createOrg(t.db);
  const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: "edge" } });
  const ws = await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: "edge-prod", environment: "prod", production: true } });
  await t.db.prisma.connection.create({ data: { orgId: org.orgId, workspaceId: ws.id, name: "github", provider: "github", url: DEMO_UPSTREAM_URL } });
  const keys: string[] = [];
  for (const name of ["agent", "other-agent"]) {
    const key = generateVirtualKey();
    await t.db.prisma.virtualKey.create({ data: { orgId: org.orgId, workspaceId: ws.id, name, keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: org.adminId } });
    keys.push(key);
  }
  const base = await t.listen();
  const bearers: Record<Exclude<RouteCredential, SignatureCredential>, string | null> = {
    none: null,
    "api-token": org.adminToken,
    "virtual-key": keys[0]!,
    "service-token": SERVICE_TOKEN,
    "metrics-token": METRICS_TOKEN,
  };
  return {
    t,
    base,
    apiToken: org.adminToken,
    virtualKey: keys[0]!,
    otherKey: keys[1]!,
    // A signature credential is signed per request over the body (X-Slack-Signature, …), not a bearer: sent without one.
    credential: (kind) => (isSignatureCredential(kind) ? null : bearers[kind]),
    errorLines,
    close: () => t.close(),
  };
}

export type RawAnswer = { status: number; headers: Record<string, string | string[] | undefined>; body: string } | { status: null; error: string };

/**
 * One request over a raw socket, so the test controls every byte: a body on any method, a
 * Content-Length that promises more than is sent (`truncate`: the client then goes away).
 */
export function raw(base: string, method: string, path: string, headers: Record<string, string>, body: Buffer | null, options: { truncate?: boolean; timeoutMs?: number } = {}): Promise<RawAnswer> {
  const url = new URL(path, base);
  return new Promise((resolve) => {
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname + url.search, method, headers: { ...headers, ...(body ? { "content-length": String(body.length + (options.truncate ? 100 : 0)) } : {}) }, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", (e) => resolve({ status: null, error: e.message }));
      },
    );
    req.setTimeout(options.timeoutMs ?? 15_000, () => req.destroy(new Error("no answer in time")));
    req.on("error", (e) => resolve({ status: null, error: e.message }));
    if (body) req.write(body);
    if (options.truncate) setTimeout(() => req.destroy(new Error("client went away (truncated body)")), 50);
    else req.end();
  });
}

export const MCP_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" } as const;
