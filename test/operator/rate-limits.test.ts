// Rate limits and the WebSocket quota: per token (per client address without a valid one),
// 429 + Retry-After over HTTP, RATE_LIMITED over WebSocket; and a load test showing that one
// token's flood leaves another token's latency within a small factor of its unloaded latency.

import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "graphql-ws";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { ops, person, PLAN, READ, seedStack, seedWorkspace } from "../gate/helpers.js";
import { subscribe } from "../gate/ws.js";
import { trackedClient, within } from "./ws.js";

const VIEWER = `query Viewer { viewer { id } }`;
const PLAN_GATE = `subscription($planId: ID!) { planGate(planId: $planId) { planId version } }`;

let t: TestApp;
let base: string;
let org: OrgFixture;
const clients: Client[] = [];

beforeAll(async () => {
  t = await startTestApp({
    env: { COUNTERSIGN_RATE_LIMIT_RPS: "2", COUNTERSIGN_RATE_LIMIT_BURST: "5", COUNTERSIGN_MAX_SUBSCRIPTIONS_PER_TOKEN: "2" },
  });
  base = await t.listen();
  org = await createOrg(t.db);
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await t.close();
});

const post = (token: string | null, query = VIEWER) =>
  fetch(`${base}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ query }),
  });

describe("HTTP rate limit", () => {
  it("a token over its burst gets 429 with Retry-After and RATE_LIMITED; another token is unaffected", async () => {
    const heavy = await addMember(t.db, org.orgId, { role: "admin" });
    const light = await addMember(t.db, org.orgId, { role: "admin" });
    // The first request of a token counts against the address, then against the token.
    expect((await post(heavy.token)).status).toBe(200);
    const statuses: number[] = [];
    let limited: Response | null = null;
    for (let i = 0; i < 8; i++) {
      const res = await post(heavy.token);
      statuses.push(res.status);
      if (res.status === 429) limited ??= res;
      else await res.arrayBuffer();
    }
    expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
    expect(statuses.slice(5)).toContain(429);
    expect(Number(limited!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const body = await limited!.json();
    expect(body.errors[0].extensions.code).toBe("RATE_LIMITED");

    // The other token has its own bucket (its first request is charged to the address, which
    // the heavy token left alone since its first).
    expect((await post(light.token)).status).toBe(200);
    expect((await post(light.token)).status).toBe(200);
  });

  it("requests without a valid token are limited per client address, however many made-up tokens they send", async () => {
    // Wait for the address bucket (spent a little by the previous test) to refill.
    await new Promise((r) => setTimeout(r, 2_600));
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await post(`cs_made-up-${i}`);
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(2);
    const res = await post(null);
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBeTruthy();
  });

  it("health probes are never limited", async () => {
    for (let i = 0; i < 10; i++) expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });
});

describe("WebSocket quota and rate", () => {
  it("a subscribe over the open-subscription cap per token gets RATE_LIMITED; completing one makes room", async () => {
    const m = await addMember(t.db, org.orgId, { role: "admin" });
    await new Promise((r) => setTimeout(r, 2_600)); // the address bucket refills for the connect
    const stackId = (await seedStack(t, org.orgId)).id;
    const w = await seedWorkspace(t, org.orgId, stackId, 1);
    const runner = await person(t, org.orgId, "runner", [READ, PLAN]);
    const plan = await ops(t).submit(runner.token, w.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const { client } = trackedClient(base, m.token);
    clients.push(client);
    const first = subscribe(client, PLAN_GATE, { planId: plan.id }, (d) => d.planGate);
    const second = subscribe(client, PLAN_GATE, { planId: plan.id }, (d) => d.planGate);
    await first.next();
    await second.next();
    const third = subscribe(client, PLAN_GATE, { planId: plan.id }, (d) => d.planGate);
    await within(third.completed, 3_000, "the third subscription being refused");
    expect(JSON.stringify(third.errors)).toContain("RATE_LIMITED");
    expect(third.messages).toEqual([]);

    first.dispose();
    await new Promise((r) => setTimeout(r, 1_000)); // the rate bucket refills too
    const fourth = subscribe(client, PLAN_GATE, { planId: plan.id }, (d) => d.planGate);
    expect((await fourth.next()).planId).toBe(plan.id);
    second.dispose();
    fourth.dispose();
  });

  it("operations over the token's rate get RATE_LIMITED over WebSocket", async () => {
    const m = await addMember(t.db, org.orgId, { role: "admin" });
    await new Promise((r) => setTimeout(r, 2_600));
    const { client } = trackedClient(base, m.token);
    clients.push(client);
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        new Promise<unknown>((resolve) => {
          let last: unknown = null;
          client.subscribe({ query: VIEWER }, { next: (r) => (last = r), error: (e) => resolve(e), complete: () => resolve(last) });
        }),
      ),
    );
    const codes = results.map((r) => JSON.stringify(r));
    expect(codes.filter((c) => c.includes("RATE_LIMITED")).length).toBeGreaterThanOrEqual(2);
    expect(codes.filter((c) => c.includes('"viewer"')).length).toBeGreaterThanOrEqual(1);
  });
});

/** p-th percentile (0–100) of a sample, in ms. */
const percentile = (sample: number[], p: number) => {
  const sorted = [...sample].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};

/**
 * The flooding client, in a process of its own (so its own work does not share the server's
 * event loop, as a real client's would not): `concurrency` loops POST until told to stop on
 * stdin, or for at most `maxMs`; prints {sent, limited} at exit.
 */
const FLOODER = `
const { url, token, concurrency, maxMs } = JSON.parse(process.env.FLOOD);
let flooding = true;
const counts = { sent: 0, limited: 0 };
process.stdin.on("data", () => (flooding = false));
setTimeout(() => (flooding = false), maxMs);
const body = JSON.stringify({ query: "query Viewer { viewer { id } }" });
const headers = { "content-type": "application/json", authorization: "Bearer " + token };
const loops = Array.from({ length: concurrency }, async () => {
  while (flooding) {
    const res = await fetch(url, { method: "POST", headers, body });
    await res.arrayBuffer();
    counts.sent++;
    if (res.status === 429) counts.limited++;
  }
});
Promise.all(loops).then(() => { process.stdout.write(JSON.stringify(counts)); process.exit(0); });
process.stdout.write("started\\n");
`;

/** Low, so that even a flooder slowed down by a busy CI machine sends several times its rate. */
const LOAD_RPS = 3;

describe("load: one token's flood and another token's latency", () => {
  let load: TestApp;
  let loadBase: string;
  beforeAll(async () => {
    load = await startTestApp({ env: { COUNTERSIGN_RATE_LIMIT_RPS: String(LOAD_RPS), COUNTERSIGN_RATE_LIMIT_BURST: String(LOAD_RPS) } });
    loadBase = await load.listen();
  });
  afterAll(() => load.close());

  it("a flood from one token is refused with 429 and leaves the other token's p50/p99 within a small factor", async () => {
    const lorg = await createOrg(load.db);
    const flooder = await addMember(load.db, lorg.orgId, { role: "admin" });
    const quiet = await addMember(load.db, lorg.orgId, { role: "admin" });
    const send = async (token: string) => {
      const res = await fetch(`${loadBase}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: VIEWER }),
      });
      await res.arrayBuffer();
      return res.status;
    };
    /** The quiet token: 15 requests, 400 ms apart (under its rate), each timed. */
    const measure = async () => {
      const times: number[] = [];
      for (let i = 0; i < 15; i++) {
        const started = performance.now();
        expect(await send(quiet.token)).toBe(200);
        times.push(performance.now() - started);
        await new Promise((r) => setTimeout(r, 400));
      }
      return times;
    };
    await send(flooder.token); // known from now on: the flood counts against the token
    await send(quiet.token);
    const before = await measure();

    const child = spawn(process.execPath, ["--input-type=module", "-e", FLOODER], {
      env: { ...process.env, FLOOD: JSON.stringify({ url: `${loadBase}/graphql`, token: flooder.token, concurrency: 4, maxMs: 20_000 }) },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    await within(new Promise<void>((resolve) => child.stdout.on("data", () => out.includes("started") && resolve())), 10_000, "the flooder starting").catch((e) => {
      throw new Error(`${e.message}: ${err}`);
    });
    const floodStarted = performance.now();
    await new Promise((r) => setTimeout(r, 300));
    const during = await measure();
    child.stdin.end("stop\n");
    await within(exited, 25_000, "the flooder stopping");
    const floodSeconds = (performance.now() - floodStarted) / 1000;
    const counts = JSON.parse(out.slice(out.indexOf("started") + "started".length).trim()) as { sent: number; limited: number };
    const after = await measure();

    // The unloaded figure: the worse of before and after (the machine's load drifts).
    const figures = {
      unloadedP50: Math.max(percentile(before, 50), percentile(after, 50)),
      unloadedP99: Math.max(percentile(before, 99), percentile(after, 99)),
      loadedP50: percentile(during, 50),
      loadedP99: percentile(during, 99),
      floodSeconds,
      floodSent: counts.sent,
      floodLimited: counts.limited,
    };
    console.log("rate-limit load test (ms):", JSON.stringify(figures, (_k, v) => (typeof v === "number" ? Math.round(v * 10) / 10 : v)));
    // The flood went well over its rate, and got no more than its burst plus its rate through.
    expect(counts.sent).toBeGreaterThan(2 * LOAD_RPS * floodSeconds);
    expect(counts.sent - counts.limited).toBeLessThanOrEqual(LOAD_RPS + LOAD_RPS * (floodSeconds + 1));
    // Generous on a shared 2-core machine: the flood is refused in the HTTP layer, before any query.
    expect(figures.loadedP50).toBeLessThan(Math.max(5 * figures.unloadedP50, figures.unloadedP50 + 50));
    expect(figures.loadedP99).toBeLessThan(Math.max(10 * figures.unloadedP99, figures.unloadedP99 + 300));
  }, 90_000);
});
