// A fleet's throughput: the authenticated viewer query, `{ viewer { name } }`, on one API node
// reached directly beside two API nodes behind HAProxy (deploy/haproxy.cfg, the configuration
// docs/operations.md documents and test/operator/fleet.test.ts runs). The nodes are started the
// production way (`node scripts/start.mjs`, COUNTERSIGN_WORKERS=none) on a bench schema and the
// shared Redis; the single node is one of the two, loaded alone. The two cases alternate, with
// the same client (autocannon, same connections, same duration, warm-up first).
//
// Per core: requests answered per CPU-second the serving processes spent (the node alone;
// both nodes and HAProxy), read from /proc, so the figure does not depend on what else the
// machine runs. Requests per second do: the rows are context, with the load average in the log.
// Every response is checked: a 429, an error or a wrong viewer fails the row.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { createOrganizationWithAdmin } from "../src/services/accounts.js";
import { reconcileSystemRoles } from "../src/services/system-roles.js";
import { BENCH_DATABASE_URL, cpuMsOf, freePort, load1, log, row, withBenchSchema, type BenchRow } from "./lib.js";

const CONNECTIONS = Number(process.env.BENCH_FLEET_CONNECTIONS ?? 16);
const SECONDS = Number(process.env.BENCH_FLEET_SECONDS ?? 8);
const WARMUP_SECONDS = Number(process.env.BENCH_FLEET_WARMUP_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_FLEET_ROUNDS ?? 2);
const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const HAPROXY_CFG = fileURLToPath(new URL("../deploy/haproxy.cfg", import.meta.url));
const QUERY = "{ viewer { name } }";
const NAME = "Fleet Bench";

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

async function answers(url: string, token: string): Promise<boolean> {
  try {
    const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify({ query: QUERY }) });
    return res.status === 200 && (await res.text()) === JSON.stringify({ data: { viewer: { name: NAME } } });
  } catch {
    return false;
  }
}

async function waitFor(what: string, check: () => Promise<boolean>, child?: ChildProcess): Promise<void> {
  for (let i = 0; i < 900; i++) {
    if (child && child.exitCode !== null) throw new Error(`${what}: exited with ${child.exitCode}`);
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what}: not within 90 s`);
}

interface Load {
  rps: number;
  /** Requests answered per CPU-second of the serving processes. */
  perCore: number;
  /** CPU ms per answered request of the last process in the list (HAProxy, in the fleet's case). */
  lastCpuMs: number;
  bad: number;
}

async function load(url: string, token: string, pids: number[], seconds: number): Promise<Load> {
  const before = pids.map(cpuMsOf);
  const result = await autocannon({
    url,
    method: "POST",
    connections: CONNECTIONS,
    duration: seconds,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: QUERY }),
    expectBody: JSON.stringify({ data: { viewer: { name: NAME } } }),
  });
  const spent = pids.map((pid, i) => cpuMsOf(pid) - before[i]!);
  const cpuSeconds = spent.reduce((a, b) => a + b, 0) / 1000;
  return {
    rps: result.requests.average,
    perCore: result["2xx"] / Math.max(0.001, cpuSeconds),
    lastCpuMs: spent.at(-1)! / Math.max(1, result["2xx"]),
    bad: result.non2xx + result.mismatches + result.errors + result.timeouts,
  };
}

export async function run(): Promise<BenchRow[]> {
  if (spawnSync("haproxy", ["-v"]).status !== 0) throw new Error("haproxy is not installed (bash .ci/haproxy)");
  return withBenchSchema(async (db, schema) => {
    await reconcileSystemRoles(db.prisma);
    const { token } = await createOrganizationWithAdmin(db.prisma, { orgName: `fleet-${randomUUID().slice(0, 8)}`, admin: { email: `fleet-${randomUUID()}@bench.local`, name: NAME } });
    const children: ChildProcess[] = [];
    try {
      const [p1, p2, lbPort, statsPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
      const nodes: ChildProcess[] = [];
      for (const port of [p1!, p2!]) {
        const child = spawn(process.execPath, ["scripts/start.mjs"], {
          cwd: ROOT,
          env: {
            ...process.env,
            DATABASE_URL: BENCH_DATABASE_URL,
            DATABASE_SCHEMA: schema,
            REDIS_URL,
            COUNTERSIGN_LIMITS_KEY_PREFIX: `bench:limits:${schema}`,
            COUNTERSIGN_WORKERS: "none",
            COUNTERSIGN_SEED_DEMO: "never",
            COUNTERSIGN_RATE_LIMIT_RPS: "1000000",
            COUNTERSIGN_TRUSTED_PROXIES: "127.0.0.1",
            // No balancer has to see it go: stop at once when the bench is done.
            COUNTERSIGN_DRAIN_UNREADY_MS: "0",
            LOG_LEVEL: process.env.BENCH_FLEET_LOG_LEVEL ?? "info",
            PORT: String(port),
            HOST: "127.0.0.1",
          },
          // One line per operation (LOG_LEVEL info, the default): written, then dropped.
          stdio: ["ignore", "ignore", "inherit"],
        });
        children.push(child);
        nodes.push(child);
        // One after the other: the first builds the server bundle if the sources changed.
        await waitFor(`node on ${port}`, () => answers(`http://127.0.0.1:${port}/graphql`, token), child);
      }
      const haproxy = spawn("haproxy", ["-db", "-f", HAPROXY_CFG], {
        env: {
          PATH: process.env.PATH ?? "",
          COUNTERSIGN_LB_BIND: `127.0.0.1:${lbPort}`,
          COUNTERSIGN_LB_STATS: `127.0.0.1:${statsPort}`,
          COUNTERSIGN_API_1: `127.0.0.1:${p1}`,
          COUNTERSIGN_API_2: `127.0.0.1:${p2}`,
        },
        stdio: ["ignore", "ignore", "inherit"],
      });
      children.push(haproxy);
      const bothUp = async () => {
        const csv = await fetch(`http://127.0.0.1:${statsPort}/stats;csv`).then((r) => r.text(), () => "");
        return csv.split("\n").filter((l) => /^api,api\d,/.test(l) && l.includes(",UP,")).length === 2;
      };
      await waitFor("haproxy with both nodes up", bothUp, haproxy);

      const direct = `http://127.0.0.1:${p1}/graphql`;
      const balanced = `http://127.0.0.1:${lbPort}/graphql`;
      const one = [nodes[0]!.pid!];
      const fleet = [nodes[0]!.pid!, nodes[1]!.pid!, haproxy.pid!];
      log(`fleet: two nodes and HAProxy up; load average ${load1()}`);
      await load(direct, token, one, WARMUP_SECONDS);
      await load(balanced, token, fleet, WARMUP_SECONDS);
      const runs = { one: [] as Load[], two: [] as Load[] };
      for (let r = 0; r < ROUNDS; r++) {
        const a = await load(direct, token, one, SECONDS);
        const b = await load(balanced, token, fleet, SECONDS);
        runs.one.push(a);
        runs.two.push(b);
        log(
          `fleet round ${r + 1}: one node direct ${a.rps.toFixed(0)} req/s (${a.perCore.toFixed(0)} per CPU-second), ` +
            `two nodes behind HAProxy ${b.rps.toFixed(0)} req/s (${b.perCore.toFixed(0)} per CPU-second of nodes + HAProxy); ratio ${(b.rps / a.rps).toFixed(2)}; load average ${load1()}`,
        );
      }
      const bad = [...runs.one, ...runs.two].reduce((n, l) => n + l.bad, 0);
      if (bad > 0) log(`fleet: ${bad} responses were not the expected body`);
      const label = `authenticated { viewer { name } }, ${CONNECTIONS} connections`;
      const oneRps = mean(runs.one.map((l) => l.rps));
      const onePerCore = mean(runs.one.map((l) => l.perCore));
      return [
        row(`${label}, two nodes behind HAProxy (req/s)`, mean(runs.two.map((l) => l.rps)), "req/s", {
          baseline: { name: "one node direct", value: oneRps },
          target: "context (the machine's cores are shared with PostgreSQL, Redis and the client)",
          ...(bad > 0 ? { pass: false } : {}),
        }),
        row(`${label}, two nodes behind HAProxy (req per CPU-second of nodes + HAProxy)`, mean(runs.two.map((l) => l.perCore)), "req/CPU-s", {
          baseline: { name: "one node direct, per CPU-second of the node", value: onePerCore },
          target: "context",
          ...(bad > 0 ? { pass: false } : {}),
        }),
        row(`${label}, HAProxy's own CPU per request`, mean(runs.two.map((l) => l.lastCpuMs)), "ms", {
          baseline: { name: "the node's CPU per request, direct", value: mean(runs.one.map((l) => 1000 / l.perCore)) },
          target: "context",
        }),
      ];
    } finally {
      for (const child of children.reverse()) {
        if (child.exitCode !== null) continue;
        child.kill("SIGTERM");
        await new Promise((r) => child.once("exit", r));
      }
    }
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { formatTable } = await import("./lib.js");
  console.log(formatTable(await run()));
  process.exit(0);
}
