// What traces cost a request: two Countersign servers (`node scripts/start.mjs`, the production
// command, one bench schema), one exporting traces over OTLP/HTTP (http/protobuf, the default)
// to a receiver in this process and one with no endpoint, loaded alternately by the same bounded
// client (autocannon, same connections, same duration, warm-up first) with the authenticated
// `{ viewer { name } }`.
//
// The row is each server's own CPU time per answered request (from /proc, so what else the
// machine runs does not enter it): traced ÷ untraced, target ≤ 1.25×. The receiver counts what it
// got, so a run whose spans never arrived says so instead of looking cheap.

import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { generateToken, hashToken, tokenPrefix } from "../src/auth/tokens.js";
import type { Database } from "../src/infra/db.js";
import { BENCH_DATABASE_URL, cpuMsOf, freePort, load1, log, row, withBenchSchema, type BenchRow } from "./lib.js";

const CONNECTIONS = Number(process.env.BENCH_TRACING_CONNECTIONS ?? 8);
const SECONDS = Number(process.env.BENCH_TRACING_SECONDS ?? 6);
const WARMUP_SECONDS = Number(process.env.BENCH_TRACING_WARMUP_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_TRACING_ROUNDS ?? 3);
const TARGET = 1.25;
const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const VIEWER_NAME = "Bench Viewer";
const QUERY = "{ viewer { name } }";
const EXPECT = JSON.stringify({ data: { viewer: { name: VIEWER_NAME } } });
const ROOT = fileURLToPath(new URL("..", import.meta.url));

async function seed(db: Database): Promise<string> {
  const org = await db.prisma.organization.create({ data: { slug: `bench-${randomUUID().slice(0, 8)}`, name: "Bench" } });
  const user = await db.prisma.user.create({ data: { email: `tracing-${org.id}@bench.local`, name: VIEWER_NAME } });
  await db.prisma.membership.create({ data: { orgId: org.id, userId: user.id } });
  const token = generateToken();
  await db.prisma.apiToken.create({ data: { userId: user.id, orgId: org.id, name: "bench", tokenHash: hashToken(token), prefix: tokenPrefix(token) } });
  return token;
}

/** An OTLP/HTTP receiver that answers every export with an empty success and counts the bytes. */
async function receiver(): Promise<{ endpoint: string; exports: () => number; bytes: () => number; server: Server }> {
  let exports = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on("data", (c: Buffer) => (bytes += c.length));
    req.on("end", () => {
      exports++;
      // An empty ExportTraceServiceResponse in either encoding.
      res.writeHead(200, { "content-type": String(req.headers["content-type"] ?? "application/x-protobuf") }).end(req.headers["content-type"] === "application/json" ? "{}" : "");
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return { endpoint: `http://127.0.0.1:${port}`, exports: () => exports, bytes: () => bytes, server };
}

interface Started {
  url: string;
  child: ChildProcess;
}

async function start(label: string, env: Record<string, string>): Promise<Started> {
  const port = await freePort();
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("OTEL_")));
  // BENCH_TRACING_CPU_PROF=<dir>: a `--cpu-prof` profile of each server, in <dir>/<label>.
  const profile = process.env.BENCH_TRACING_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_TRACING_CPU_PROF}/${label}`] : [];
  const child = spawn(process.execPath, [...profile, "scripts/start.mjs"], {
    cwd: ROOT,
    env: { ...base, ...env, PORT: String(port), HOST: "127.0.0.1" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const url = `http://127.0.0.1:${port}/graphql`;
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`${label} exited with ${child.exitCode}`);
    const ok = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ query: "{ __typename }" }) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { url, child };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new Error(`${label} did not answer within 60 s`);
}

async function stop(server: Started | undefined): Promise<void> {
  if (!server || server.child.exitCode !== null) return;
  server.child.kill("SIGTERM");
  await new Promise((r) => server.child.once("exit", r).once("error", r));
}

interface Load {
  cpuMs: number;
  rps: number;
  p50: number;
  bad: number;
}

async function load(server: Started, token: string, seconds: number): Promise<Load> {
  const before = cpuMsOf(server.child.pid!);
  const result = await autocannon({
    url: server.url,
    method: "POST",
    connections: CONNECTIONS,
    duration: seconds,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: QUERY }),
    expectBody: EXPECT,
  });
  const answered = Math.max(1, result["2xx"]);
  return {
    cpuMs: (cpuMsOf(server.child.pid!) - before) / answered,
    rps: result.requests.average,
    p50: result.latency.p50,
    bad: result.non2xx + result.mismatches + result.errors + result.timeouts,
  };
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

export async function run(): Promise<BenchRow[]> {
  return withBenchSchema(async (db, schema) => {
    const token = await seed(db);
    const otlp = await receiver();
    const common = {
      DATABASE_URL: BENCH_DATABASE_URL,
      DATABASE_SCHEMA: schema,
      REDIS_URL,
      LOG_LEVEL: "warn",
      COUNTERSIGN_WORKERS: "none",
      COUNTERSIGN_SEED_DEMO: "never",
      COUNTERSIGN_RATE_LIMIT_RPS: "1000000",
    };
    let plain: Started | undefined;
    let traced: Started | undefined;
    try {
      plain = await start("untraced", common);
      traced = await start("traced", { ...common, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint });
      log(`servers up; load average ${load1()}`);
      await load(plain, token, WARMUP_SECONDS);
      await load(traced, token, WARMUP_SECONDS);
      const runs = { plain: [] as Load[], traced: [] as Load[] };
      const exportsBefore = otlp.exports();
      for (let r = 0; r < ROUNDS; r++) {
        // Alternating, so a burst of load from elsewhere falls on both.
        const p = await load(plain, token, SECONDS);
        const t = await load(traced, token, SECONDS);
        runs.plain.push(p);
        runs.traced.push(t);
        log(
          `viewer round ${r + 1}: untraced ${p.cpuMs.toFixed(3)} ms CPU/request (${p.rps.toFixed(0)} req/s, p50 ${p.p50} ms), ` +
            `traced ${t.cpuMs.toFixed(3)} ms CPU/request (${t.rps.toFixed(0)} req/s, p50 ${t.p50} ms), ratio ${(t.cpuMs / p.cpuMs).toFixed(2)}, load average ${load1()}`,
        );
      }
      // The batch processor exports every 5 s: wait for the last batch before judging the run.
      for (let i = 0; i < 60 && otlp.exports() === exportsBefore; i++) await new Promise((r) => setTimeout(r, 100));
      const exported = otlp.exports() - exportsBefore;
      log(`receiver: ${exported} exports, ${(otlp.bytes() / 1024).toFixed(0)} KiB in all; load average ${load1()}`);
      const bad = [...runs.plain, ...runs.traced].reduce((n, l) => n + l.bad, 0);
      const plainCpu = mean(runs.plain.map((l) => l.cpuMs));
      const tracedCpu = mean(runs.traced.map((l) => l.cpuMs));
      return [
        row(`authenticated { viewer { name } }, traces exported over OTLP/HTTP (server CPU per request)`, tracedCpu, "ms", {
          baseline: { name: "the same server without an OTLP endpoint", value: plainCpu },
          target: `≤ ${TARGET}× untraced`,
          pass: bad === 0 && exported > 0 && tracedCpu / plainCpu <= TARGET,
        }),
        row(`authenticated { viewer { name } }, traces exported (req/s, ${CONNECTIONS} connections)`, mean(runs.traced.map((l) => l.rps)), "req/s", {
          baseline: { name: "without an OTLP endpoint", value: mean(runs.plain.map((l) => l.rps)) },
          target: "context",
        }),
      ];
    } finally {
      await stop(traced);
      await stop(plain);
      otlp.server.closeAllConnections();
      await new Promise<void>((resolve) => otlp.server.close(() => resolve()));
    }
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { formatTable } = await import("./lib.js");
  console.log(formatTable(await run()));
  process.exit(0);
}
