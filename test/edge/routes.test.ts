import { afterAll, describe, expect, it } from "vitest";
import { batchOf, deepArrays, deepObjects, foreign, hostileRequests, PAYLOADS, rpc, target, utf8 } from "./hostile.js";
import { MCP_HEADERS, raw, startEdgeWorld, type EdgeWorld, type RawAnswer } from "./world.js";

/**
 * No request ends the process. Every route the server's route table lists (app.routes, the table
 * the server dispatches from: a route added tomorrow is in this test tomorrow) receives every
 * hostile body (./hostile.ts), with and without its credential, on each method it takes and one it does
 * not; after each, the same server answers /readyz 200, a GraphQL `{ viewer { name } }` with a
 * valid token, and an MCP tools/list with a valid virtual key. Nothing may reach the process as an
 * unhandled rejection or an uncaught exception, and no request may be left without an answer.
 */

const escaped: unknown[] = [];
const onEscape = (error: unknown) => escaped.push(error);
process.on("unhandledRejection", onEscape);
process.on("uncaughtException", onEscape);
// Started while the file is collected: the tests below are generated from its route table.
const w: EdgeWorld = await startEdgeWorld();

afterAll(async () => {
  process.off("unhandledRejection", onEscape);
  process.off("uncaughtException", onEscape);
  await w?.close();
});

async function stillServing(): Promise<void> {
  const ready = await raw(w.base, "GET", "/readyz", {}, null);
  expect(ready.status, "/readyz").toBe(200);
  const viewer = await fetch(`${w.base}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${w.apiToken}` },
    body: JSON.stringify({ query: "{ viewer { name } }" }),
  });
  expect(viewer.status, "GraphQL viewer").toBe(200);
  expect(((await viewer.json()) as { data: { viewer: { name: string } } }).data.viewer.name).toBe("Admin");
  const tools = await fetch(`${w.base}/gateway/v1/mcp`, {
    method: "POST",
    headers: { ...MCP_HEADERS, authorization: `Bearer ${w.virtualKey}` },
    body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list", params: {} }),
  });
  expect(tools.status, "gateway tools/list").toBe(200);
  const listed = (await tools.json()) as { result: { tools: { name: string }[] } };
  expect(listed.result.tools.map((t) => t.name)).toContain("github.list_repos");
  expect(escaped, "errors that reached the process").toEqual([]);
  // Nothing was an unexpected failure either: every hostile request got a typed refusal.
  expect(w.errorLines.map((l) => `${l.msg}: ${l.err?.message ?? ""}`), "error-level log lines").toEqual([]);
}

function describeAnswer(a: RawAnswer): string {
  return a.status === null ? `no answer (${a.error})` : `${a.status} ${a.body.slice(0, 200)}`;
}

describe("every mounted route survives hostile requests (the route table, app.routes)", () => {
  it("the table lists the server's routes: probes, metrics, GraphQL, the gateway's three, the dashboard's", () => {
    const paths = w.t.app.routes.map((r) => `${r.methods.join("|")} ${r.path}${r.prefix ? "*" : ""} (${r.owner}, ${r.credential})`);
    for (const path of ["/healthz", "/readyz", "/metrics", "/graphql", "/gateway/v1/mcp", "/gateway/v1/approvals/", "/internal/v1/approvals/resume", "/"]) {
      expect(w.t.app.routes.some((r) => r.path === path), `${path} in ${paths.join("\n")}`).toBe(true);
    }
  });

  it("an unknown path is 404 and a method a route does not take is 405, from the table", async () => {
    const missing = await raw(w.base, "POST", "/no/such/route", { "content-type": "application/json" }, utf8(deepArrays));
    expect(missing.status).toBe(404);
    for (const route of w.t.app.routes) {
      const m = foreign(route);
      const answer = await raw(w.base, m, target(route), {}, null);
      expect(answer.status, `${m} ${target(route)}`).toBe(405);
    }
    await stillServing();
  });

  // One test per route, generated from the table the server dispatches from.
  const named = w.t.app.routes.map((route) => ({ route, name: `${route.methods.join("|")} ${route.path}${route.prefix ? "…" : ""} (${route.owner}, takes ${route.credential})` }));
  it.each(named)("$name: every hostile body, with and without its credential, is answered; the server keeps serving", async ({ route }) => {
    // After each body on each method (with and without the credential), the server still serves.
    let group: string | null = null;
    for (const { method, headers, payload, label } of hostileRequests(w, route)) {
      if (group !== null && group !== `${payload.name} ${method}`) await stillServing();
      group = `${payload.name} ${method}`;
      const answer = await raw(w.base, method, target(route), headers, payload.body, { truncate: payload.truncate });
      if (payload.truncate) {
        // The client went away: nothing to read, but nothing may have escaped either.
        expect(escaped, label).toEqual([]);
        continue;
      }
      expect(answer.status, `${label}: ${describeAnswer(answer)}`).not.toBeNull();
      // A typed refusal or an answer, never an unexpected failure.
      expect(answer.status! < 500, `${label}: ${describeAnswer(answer)}`).toBe(true);
      expect(escaped, label).toEqual([]);
    }
    await stillServing();
  }, 300_000);
});

describe("the refusals are typed", () => {
  const post = (path: string, body: Buffer, headers: Record<string, string> = {}) => raw(w.base, "POST", path, { "content-type": "application/json", ...headers }, body);
  const json = (a: RawAnswer) => (a.status === null ? null : (JSON.parse(a.body) as Record<string, any>));
  const key = () => ({ authorization: `Bearer ${w.virtualKey}` });
  const service = () => ({ authorization: `Bearer ${w.credential("service-token")}` });

  it("a body nested past 64 levels is 400 too_deep on the gateway, with its credential; without it, 401 before the body is read", async () => {
    for (const body of [deepArrays, deepObjects, rpc("tools/call", `{"name":"github.list_repos","arguments":${deepObjects}}`)]) {
      for (const accept of [{}, { accept: MCP_HEADERS.accept }] as Array<Record<string, string>>) {
        const answer = await post("/gateway/v1/mcp", utf8(body), { ...key(), ...accept });
        expect(answer.status).toBe(400);
        expect(json(answer)).toMatchObject({ error: "too_deep", max_depth: 64 });
        const stranger = await post("/gateway/v1/mcp", utf8(body), accept);
        expect(stranger.status).toBe(401);
        expect(json(stranger)).toMatchObject({ error: { code: -32001, data: { error: "unauthorized" } } });
      }
      expect(json(await post("/internal/v1/approvals/resume", utf8(body), service()))).toMatchObject({ error: "too_deep" });
      const noToken = await post("/internal/v1/approvals/resume", utf8(body));
      expect(noToken.status).toBe(401);
      expect(json(noToken)).toMatchObject({ error: "service_unauthorized" });
    }
  });

  it("a GraphQL JSON argument nested past 64 levels is BAD_USER_INPUT", async () => {
    const answer = await post("/graphql", utf8(`{"query":"mutation($l: JSON) { createStack(input: { name: \\"edge\\", labels: $l }) { __typename } }","variables":{"l":${deepObjects}}}`), { authorization: `Bearer ${w.apiToken}` });
    expect(answer.status).not.toBeNull();
    expect(json(answer)!.errors[0]).toMatchObject({ extensions: { code: "BAD_USER_INPUT" } });
    expect(json(answer)!.errors[0].message).toContain("64 levels");
  });

  it("invalid UTF-8, a batch over 32 and a body over the limit are 400 invalid_utf8, 400 batch_too_large and 413", async () => {
    const invalid = PAYLOADS.find((p) => p.name === "invalid UTF-8 inside JSON")!.body!;
    expect(json(await post("/gateway/v1/mcp", invalid, key()))).toMatchObject({ error: "invalid_utf8" });
    const batch = await post("/gateway/v1/mcp", utf8(batchOf(33, rpc("tools/list", "{}"))), { ...key(), accept: MCP_HEADERS.accept });
    expect(batch.status).toBe(400);
    expect(json(batch)).toMatchObject({ error: "batch_too_large", max_batch: 32 });
    const big = await post("/gateway/v1/mcp", Buffer.alloc(1024 * 1024 + 1, 0x20), key());
    expect(big.status).toBe(413);
    expect(json(big)).toMatchObject({ error: "payload_too_large" });
  });
});
