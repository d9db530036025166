// Behind a proxy, requests without a valid token are limited per CLIENT address: read from
// X-Forwarded-For only when the socket's peer is a configured trusted proxy
// (COUNTERSIGN_TRUSTED_PROXIES), never the proxy's own address for everyone, never a header a
// client wrote itself from an untrusted peer.

import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientAddressResolver } from "../../src/edge/rate-limit.js";
import { loadConfig } from "../../src/infra/config.js";
import { parseTrustedProxies } from "../../src/infra/trusted-proxies.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";

type Case = { peer: string; xff?: string | string[]; trusted: string; client: string; why: string };

// Every way a chain can read; the client is the first address from the right that is not a trusted proxy.
const CASES: Case[] = [
  { peer: "127.0.0.1", xff: "203.0.113.7", trusted: "", client: "127.0.0.1", why: "no trusted proxies: the header is anyone's to write" },
  { peer: "198.51.100.9", xff: "203.0.113.7", trusted: "10.0.0.0/8", client: "198.51.100.9", why: "a peer outside the list is the client, whatever it sends" },
  { peer: "10.1.2.3", xff: "203.0.113.7", trusted: "10.0.0.0/8", client: "203.0.113.7", why: "a trusted proxy's client" },
  { peer: "10.1.2.3", trusted: "10.0.0.0/8", client: "10.1.2.3", why: "a trusted proxy without the header is itself the client" },
  { peer: "10.1.2.3", xff: "6.6.6.6, 203.0.113.7", trusted: "10.0.0.0/8", client: "203.0.113.7", why: "what the client prepended itself is not read" },
  { peer: "10.1.2.3", xff: "203.0.113.7, 10.9.9.9", trusted: "10.0.0.0/8", client: "203.0.113.7", why: "past a chain of trusted proxies" },
  { peer: "10.1.2.3", xff: ["6.6.6.6", "203.0.113.7"], trusted: "10.0.0.0/8", client: "203.0.113.7", why: "several headers read as one list" },
  { peer: "::ffff:10.1.2.3", xff: "203.0.113.7", trusted: "10.0.0.0/8", client: "203.0.113.7", why: "an IPv4 peer on a dual-stack socket" },
  { peer: "::ffff:10.1.2.3", xff: "203.0.113.7", trusted: "::ffff:10.0.0.0/104", client: "203.0.113.7", why: "an IPv4-mapped range" },
  { peer: "fd00::1", xff: "2001:db8::5", trusted: "fd00::/8", client: "2001:db8::5", why: "IPv6" },
  { peer: "fd00::1", xff: "[2001:db8::5]:4711", trusted: "fd00::/8", client: "2001:db8::5", why: "a bracketed IPv6 address with a port" },
  { peer: "10.1.2.3", xff: "203.0.113.7:4711", trusted: "10.0.0.0/8", client: "203.0.113.7", why: "an IPv4 address with a port" },
  { peer: "10.1.2.3", xff: "10.0.0.5", trusted: "10.1.2.3, 10.0.0.5", client: "10.0.0.5", why: "a chain of trusted proxies only: the first of them" },
  { peer: "10.1.2.3", xff: "not-an-address", trusted: "10.0.0.0/8", client: "10.1.2.3", why: "a hop that is no address ends the walk at the last trusted one" },
  { peer: "10.1.2.3", xff: "203.0.113.7, garbage", trusted: "10.0.0.0/8", client: "10.1.2.3", why: "garbage right of a client is not skipped over" },
];

describe("the client address of a request", () => {
  for (const c of CASES) {
    it(`${c.why}: peer ${c.peer}, X-Forwarded-For ${JSON.stringify(c.xff ?? null)}, trusted "${c.trusted}" → ${c.client}`, () => {
      const resolve = clientAddressResolver(parseTrustedProxies(c.trusted));
      expect(resolve({ socket: { remoteAddress: c.peer }, headers: c.xff === undefined ? {} : { "x-forwarded-for": c.xff as string } } as never)).toBe(c.client);
    });
  }

  it("a list entry that is no address or range is refused at start, naming it", () => {
    for (const bad of ["10.0.0.0/33", "proxy.internal", "10.0.0.1/8/2", "*"]) {
      expect(() => loadConfig({ COUNTERSIGN_TRUSTED_PROXIES: `127.0.0.1, ${bad}` })).toThrow(new RegExp(`COUNTERSIGN_TRUSTED_PROXIES: not an IP address or CIDR range: "${bad.replace(/[*./]/g, "\\$&")}"`));
    }
  });
});

// Over real sockets: the server listens on 127.0.0.1; a request from 127.0.0.2 comes from the
// trusted proxy, one from 127.0.0.1 from an untrusted peer.
let t: TestApp;
let port: number;
beforeAll(async () => {
  t = await startTestApp({
    env: {
      COUNTERSIGN_RATE_LIMIT_RPS: "0.2",
      COUNTERSIGN_RATE_LIMIT_BURST: "2",
      COUNTERSIGN_GATEWAY_RATE_LIMIT_RPS: "0.2",
      COUNTERSIGN_GATEWAY_RATE_LIMIT_BURST: "2",
      COUNTERSIGN_GATEWAY_EMBEDDED: "on",
      COUNTERSIGN_APPROVAL_SECRET: "trusted-proxies-approval-secret-0123456789abcdef",
      COUNTERSIGN_GATEWAY_SERVICE_TOKEN: "trusted-proxies-service-token-0123456789abcdef",
      COUNTERSIGN_TRUSTED_PROXIES: "127.0.0.2/32",
    },
  });
  port = Number(new URL(await t.listen()).port);
});
afterAll(() => t?.close());

const post = (from: string, xff?: string, path = "/graphql") =>
  new Promise<number>((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, localAddress: from, path, method: "POST", agent: false, headers: { "content-type": "application/json", ...(xff ? { "x-forwarded-for": xff } : {}) } },
      (res) => (res.resume(), resolve(res.statusCode ?? 0)),
    );
    req.on("error", reject);
    req.end(JSON.stringify({ query: "{ __typename }" }));
  });

describe("unauthenticated limits behind a trusted proxy", () => {
  it("each client behind the trusted proxy has its own allowance; the proxy's address is not everyone's", async () => {
    expect([await post("127.0.0.2", "203.0.113.1"), await post("127.0.0.2", "203.0.113.1"), await post("127.0.0.2", "203.0.113.1")]).toEqual([200, 200, 429]);
    // Another client through the same proxy: its own 2.
    expect([await post("127.0.0.2", "203.0.113.2"), await post("127.0.0.2", "203.0.113.2"), await post("127.0.0.2", "203.0.113.2")]).toEqual([200, 200, 429]);
    // A client that prepends an address of its choosing is still counted as itself.
    expect(await post("127.0.0.2", "198.51.100.77, 203.0.113.1")).toBe(429);
  });

  it("an untrusted peer's X-Forwarded-For is ignored: a fresh address per request buys nothing", async () => {
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push(await post("127.0.0.1", `203.0.113.${100 + i}`));
    expect(statuses).toEqual([200, 200, 429, 429]);
  });
});

// The gateway counts a request without a proven virtual key against the same client address.
const GATEWAY = "/gateway/v1/mcp";

describe("the gateway's per-address limit behind a trusted proxy", () => {
  it("each agent behind the trusted proxy has its own allowance; the proxy's address is not everyone's", async () => {
    expect([await post("127.0.0.2", "203.0.113.11", GATEWAY), await post("127.0.0.2", "203.0.113.11", GATEWAY), await post("127.0.0.2", "203.0.113.11", GATEWAY)]).toEqual([401, 401, 429]);
    expect([await post("127.0.0.2", "203.0.113.12", GATEWAY), await post("127.0.0.2", "203.0.113.12", GATEWAY), await post("127.0.0.2", "203.0.113.12", GATEWAY)]).toEqual([401, 401, 429]);
  });

  it("an untrusted peer's X-Forwarded-For is ignored by the gateway too", async () => {
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push(await post("127.0.0.3", `203.0.113.${150 + i}`, GATEWAY));
    expect(statuses).toEqual([401, 401, 429, 429]);
  });
});
