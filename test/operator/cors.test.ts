// CORS: only origins in COUNTERSIGN_CORS_ORIGINS get CORS headers, and never
// Access-Control-Allow-Credentials; by default no foreign origin gets any (same origin only).
// graphql-yoga's default would reflect any Origin with credentials allowed.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { loadConfig } from "../../src/infra/config.js";

const ALLOWED = "https://console.example.com";
const OTHER = "https://evil.example.net";

let configured: TestApp;
let byDefault: TestApp;
let configuredBase: string;
let defaultBase: string;
let org: OrgFixture;

beforeAll(async () => {
  configured = await startTestApp({ env: { COUNTERSIGN_CORS_ORIGINS: `${ALLOWED}, https://second.example.com:8443` } });
  byDefault = await startTestApp({ schemaName: configured.schemaName });
  configuredBase = await configured.listen();
  defaultBase = await byDefault.listen();
  org = await createOrg(configured.db);
});
afterAll(async () => {
  await byDefault.app.close();
  await configured.close();
});

const preflight = (base: string, origin: string) =>
  fetch(`${base}/graphql`, {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" },
  });
const post = (base: string, origin: string) =>
  fetch(`${base}/graphql`, {
    method: "POST",
    headers: { origin, "content-type": "application/json", authorization: `Bearer ${org.adminToken}` },
    body: JSON.stringify({ query: "{ viewer { id } }" }),
  });

describe("CORS", () => {
  it("a preflight from an allowed origin gets that origin, the methods and headers, and no credentials", async () => {
    const res = await preflight(configuredBase, ALLOWED);
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(ALLOWED);
    expect(res.headers.get("access-control-allow-methods")).toContain("POST");
    expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("authorization");
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    const second = await preflight(configuredBase, "https://second.example.com:8443");
    expect(second.headers.get("access-control-allow-origin")).toBe("https://second.example.com:8443");
  });

  it("a preflight and a request from an origin not listed get no CORS headers", async () => {
    for (const res of [await preflight(configuredBase, OTHER), await post(configuredBase, OTHER)]) {
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
      expect(res.headers.get("access-control-allow-credentials")).toBeNull();
      await res.arrayBuffer();
    }
    // A look-alike of an allowed origin is another origin.
    const res = await preflight(configuredBase, `${ALLOWED}.evil.example.net`);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("a request from an allowed origin is answered with its origin, no credentials", async () => {
    const res = await post(configuredBase, ALLOWED);
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe(ALLOWED);
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
  });

  it("by default (no list), no origin gets CORS headers: same origin only", async () => {
    for (const origin of [ALLOWED, OTHER, defaultBase]) {
      const res = await preflight(defaultBase, origin);
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
      expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    }
    // The same-origin dashboard still works: a browser needs no CORS headers for it.
    expect((await post(defaultBase, defaultBase)).status).toBe(200);
  });

  it("COUNTERSIGN_CORS_ORIGINS must list origins: no wildcard, no path", () => {
    expect(() => loadConfig({ COUNTERSIGN_CORS_ORIGINS: "*" })).toThrow(/COUNTERSIGN_CORS_ORIGINS/);
    expect(() => loadConfig({ COUNTERSIGN_CORS_ORIGINS: "https://a.example.com/app" })).toThrow(/COUNTERSIGN_CORS_ORIGINS/);
    expect(loadConfig({ COUNTERSIGN_CORS_ORIGINS: "https://a.example.com, http://localhost:5173" }).corsOrigins).toEqual([
      "https://a.example.com",
      "http://localhost:5173",
    ]);
  });
});
