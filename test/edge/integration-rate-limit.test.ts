import { afterAll, describe, expect, it } from "vitest";
import { isSignatureCredential } from "../../src/edge/http.js";
import { startEdgeWorld, type EdgeWorld } from "./world.js";

/**
 * Routes third parties post signed bodies to (every route whose credential is a signature, read
 * from the route table, so a new integration's route is covered the day it is added) share an
 * allowance per client address, taken before the body is read (COUNTERSIGN_INTEGRATION_RATE_LIMIT_RPS
 * and _BURST; here one every 5 s, 3 at once). Past it: 429 with Retry-After, where a request within
 * it reaches the route (which refuses the unsigned body itself). Another address keeps its own
 * allowance; the address is X-Forwarded-For's only from a trusted proxy.
 */

const w: EdgeWorld = await startEdgeWorld({
  COUNTERSIGN_INTEGRATION_RATE_LIMIT_RPS: "0.2",
  COUNTERSIGN_INTEGRATION_RATE_LIMIT_BURST: "3",
  COUNTERSIGN_TRUSTED_PROXIES: "127.0.0.1/32, ::1/128",
});
afterAll(() => w.close());

const signed = w.t.app.routes.filter((r) => isSignatureCredential(r.credential));

describe("routes signed by third parties are limited per client address before the body is read", () => {
  it("the route table has such routes", () => {
    expect(signed.length).toBeGreaterThan(0);
  });

  signed.forEach((route, i) => {
    it(`${route.methods.join("|")} ${route.path}${route.prefix ? "…" : ""} (${route.owner})`, async () => {
      const path = route.prefix ? `${route.path}00000000-0000-4000-8000-00000000000${i}/x` : route.path;
      const post = (address: string) =>
        fetch(`${w.base}${path}`, {
          method: route.methods[0]!,
          headers: { "content-type": "application/json", "x-forwarded-for": address },
          body: JSON.stringify({ unsigned: true }),
        });
      const address = `198.51.100.${10 + i}`;
      for (let n = 0; n < 3; n++) {
        const within = await post(address);
        expect(within.status, `request ${n + 1} of the burst`).not.toBe(429);
        expect(within.status).toBeLessThan(500);
      }
      const limited = await post(address);
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(await limited.json()).toMatchObject({ error: "rate_limited" });

      // Another client address has its own allowance.
      const other = await post(`203.0.113.${10 + i}`);
      expect(other.status).not.toBe(429);
      expect(other.status).toBeLessThan(500);
    });
  });
});
