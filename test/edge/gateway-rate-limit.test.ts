import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, describe, expect, it } from "vitest";
import { RATE_LIMITED_JSONRPC_CODE } from "../../src/gateway/http.js";
import { MCP_HEADERS, startEdgeWorld, type EdgeWorld } from "./world.js";

/**
 * The gateway's rate, per virtual key as GraphQL's is per token (COUNTERSIGN_GATEWAY_RATE_LIMIT_RPS
 * and _BURST; here one every 5 s, 3 at once: slow enough that a loaded machine refills nothing mid-test): over it, HTTP 429 with Retry-After on the plain
 * JSON-RPC POST, the agent's status read and the MCP transport alike. A key counts against itself
 * once it has proved live, and against its client address before; so does a request with no
 * live key at all.
 */

const w: EdgeWorld = await startEdgeWorld({ COUNTERSIGN_GATEWAY_RATE_LIMIT_RPS: "0.2", COUNTERSIGN_GATEWAY_RATE_LIMIT_BURST: "3" });
afterAll(() => w.close());

const MCP = () => `${w.base}/gateway/v1/mcp`;
const call = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.list_repos", arguments: {} } });
const plainCall = (key: string | null) => fetch(MCP(), { method: "POST", headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: call });
const statusRead = (key: string) => fetch(`${w.base}/gateway/v1/approvals/00000000-0000-4000-8000-000000000000`, { headers: { authorization: `Bearer ${key}` } });
const mcpList = (key: string) => fetch(MCP(), { method: "POST", headers: { ...MCP_HEADERS, authorization: `Bearer ${key}` }, body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} }) });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("the gateway's rate limit", () => {
  it("a key over its allowance gets 429 with Retry-After on the plain POST, the status read and the MCP transport; another key is unaffected; the allowance comes back", async () => {
    // First requests of each key are counted against the address (2 of its 3), and prove the keys live.
    expect((await plainCall(w.virtualKey)).status).toBe(200);
    expect((await plainCall(w.otherKey)).status).toBe(200);

    for (let i = 0; i < 3; i++) expect((await plainCall(w.virtualKey)).status).toBe(200);
    const limited = await plainCall(w.virtualKey);
    expect(limited.status).toBe(429);
    const retryAfter = Number(limited.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(await limited.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: RATE_LIMITED_JSONRPC_CODE, data: { error: "rate_limited", retry_after_seconds: retryAfter } } });

    const status = await statusRead(w.virtualKey);
    expect(status.status).toBe(429);
    expect(Number(status.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await status.json()).toMatchObject({ error: "rate_limited" });

    const listed = await mcpList(w.virtualKey);
    expect(listed.status).toBe(429);
    expect(Number(listed.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await listed.json()).toMatchObject({ jsonrpc: "2.0", error: { code: RATE_LIMITED_JSONRPC_CODE } });

    // The SDK's client surfaces it as a transport error carrying the status (what an agent's retry keys on).
    const client = new Client({ name: "busy-agent", version: "1.0.0" });
    const failed = await client
      .connect(new StreamableHTTPClientTransport(new URL(MCP()), { requestInit: { headers: { authorization: `Bearer ${w.virtualKey}` } } }))
      .then(() => null, (e: unknown) => e);
    expect(failed).toBeInstanceOf(StreamableHTTPError);
    expect((failed as StreamableHTTPError).code).toBe(429);
    await client.close().catch(() => {});

    // Another key of the same workspace has its own allowance.
    expect((await plainCall(w.otherKey)).status).toBe(200);
    expect((await statusRead(w.otherKey)).status).toBe(404);

    await sleep(retryAfter * 1000 + 100);
    expect((await plainCall(w.virtualKey)).status).toBe(200);
  });

  it("without a live key, requests are limited per client address; a live key is not charged for them", async () => {
    // The address's allowance is mostly spent by the first test (the keys' first requests): a
    // made-up key gets 401 while any is left, then 429, and never more than the burst of 401s.
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i < 6; i++) {
      const answer = await plainCall(i % 2 ? null : "vk_made-up-key-that-buys-nothing");
      statuses.push(answer.status);
      if (answer.status === 429) retryAfter = answer.headers.get("retry-after");
    }
    expect(statuses.every((s) => s === 401 || s === 429), statuses.join()).toBe(true);
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(3);
    expect(statuses.slice(statuses.indexOf(429))).toEqual(statuses.slice(statuses.indexOf(429)).map(() => 429));
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    // Made-up keys bought no fresh allowance; the live key still has its own.
    expect((await plainCall(w.otherKey)).status).toBe(200);
  });

  it("resume with the service token is the service's own traffic: never limited; without it, counted per address", async () => {
    const resume = (token: string | null) =>
      fetch(`${w.base}/internal/v1/approvals/resume`, { method: "POST", headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: "{}" });
    for (let i = 0; i < 8; i++) expect((await resume(w.credential("service-token"))).status).toBe(400);
    const strangers: number[] = [];
    for (let i = 0; i < 5; i++) strangers.push((await resume("not-the-service-token")).status);
    expect(strangers.every((s) => s === 401 || s === 429), strangers.join()).toBe(true);
    expect(strangers).toContain(429);
  });
});
