import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, describe, expect, it } from "vitest";
import type { HttpRoute } from "../../src/edge/http.js";
import { MCP_HEADERS, raw, startEdgeWorld, type EdgeWorld } from "./world.js";

/**
 * MCP 2025-11-25, Streamable HTTP, "Security Warning": servers must validate the Origin header
 * and answer 403 when it is present and not allowed (DNS rebinding: a page in the agent's browser
 * must not reach a gateway on localhost or an internal network). Generated over the gateway's
 * routes in the server's route table × {no Origin, a configured origin, the server's own origin
 * (COUNTERSIGN_PUBLIC_URL), a foreign origin, `null`}, each with a valid credential, so the only
 * thing that can refuse is the Origin. The tools route is tried as the MCP fast path (one
 * tools/call), through the SDK transport (tools/list) and as the plain JSON-RPC POST.
 */

const ALLOWED = "https://agents.example.com";
const OWN = "https://countersign.example.com";
const w: EdgeWorld = await startEdgeWorld({ COUNTERSIGN_GATEWAY_ALLOWED_ORIGINS: `${ALLOWED}, http://localhost:5173`, COUNTERSIGN_PUBLIC_URL: `${OWN}/some/path` });
afterAll(() => w.close());

const ORIGINS: Array<{ name: string; origin: string | null; allowed: boolean }> = [
  { name: "no Origin (an agent, not a browser)", origin: null, allowed: true },
  { name: "a configured origin", origin: ALLOWED, allowed: true },
  { name: "the server's own origin (COUNTERSIGN_PUBLIC_URL)", origin: OWN, allowed: true },
  { name: "a foreign origin", origin: "http://evil.example.com", allowed: false },
  { name: "a foreign origin that differs only by port", origin: "https://agents.example.com:8443", allowed: false },
  { name: "the opaque origin `null`", origin: "null", allowed: false },
];

type Probe = { name: string; method: string; path: string; headers: Record<string, string>; body: string | null };

/** Valid requests for a gateway route, with the credential it takes. */
function probes(route: HttpRoute): Probe[] {
  const bearer = route.credential === "service-token" ? w.credential("service-token")! : w.virtualKey;
  const auth = { authorization: `Bearer ${bearer}` };
  if (route.credential === "service-token") return [{ name: "resume", method: "POST", path: route.path, headers: { "content-type": "application/json", ...auth }, body: "{}" }];
  if (route.prefix) return [{ name: "status read", method: "GET", path: `${route.path}00000000-0000-4000-8000-000000000000`, headers: auth, body: null }];
  const call = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.list_repos", arguments: {} } });
  return [
    { name: "MCP fast path (tools/call)", method: "POST", path: route.path, headers: { ...MCP_HEADERS, ...auth }, body: call },
    { name: "MCP transport (tools/list)", method: "POST", path: route.path, headers: { ...MCP_HEADERS, ...auth }, body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} }) },
    { name: "plain JSON-RPC POST", method: "POST", path: route.path, headers: { "content-type": "application/json", ...auth }, body: call },
  ];
}

const gatewayRoutes = w.t.app.routes.filter((r) => r.owner === "gateway");
const cases = gatewayRoutes.flatMap((route) => probes(route).flatMap((probe) => ORIGINS.map((o) => ({ ...o, probe, label: `${probe.method} ${probe.path} (${probe.name}) with ${o.name}` }))));

describe("the gateway validates Origin on every route before anything else", () => {
  it("the server mounts the gateway's three routes", () => {
    expect(gatewayRoutes.map((r) => r.path).sort()).toEqual(["/gateway/v1/approvals/", "/gateway/v1/mcp", "/internal/v1/approvals/resume"]);
  });

  it.each(cases)("$label", async ({ probe, origin, allowed }) => {
    const headers = { ...probe.headers, ...(origin !== null ? { origin } : {}) };
    const answer = await raw(w.base, probe.method, probe.path, headers, probe.body === null ? null : Buffer.from(probe.body));
    if (answer.status === null) throw new Error(answer.error);
    if (allowed) {
      expect(answer.status, answer.body).not.toBe(403);
      // The request itself was served: the tools answer 200, an unknown request 404, an empty resume 400.
      expect([200, 400, 404]).toContain(answer.status);
      return;
    }
    expect(answer.status, answer.body).toBe(403);
    const body = JSON.parse(answer.body) as Record<string, any>;
    if (probe.path.endsWith("/mcp")) expect(body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32000, data: { error: "origin_not_allowed" } } });
    else expect(body).toMatchObject({ error: "origin_not_allowed" });
  });

  it("the SDK's own client, sent from a foreign page, fails to connect with HTTP 403", async () => {
    const client = new Client({ name: "browser-page", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${w.base}/gateway/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${w.virtualKey}`, origin: "http://evil.example.com" } } });
    const failed = await client.connect(transport).then(
      () => null,
      (e: unknown) => e,
    );
    expect(failed).toBeInstanceOf(StreamableHTTPError);
    expect((failed as StreamableHTTPError).code).toBe(403);
    await client.close().catch(() => {});
  });
});
