// The benchmark harness's shared parts: the row every bench module reports, timing helpers,
// the table printer, and a throwaway PostgreSQL schema per run. A benchmark reports; it never
// fails CI (see bench/index.ts and docs/benchmarks.md).

import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { loadavg } from "node:os";
import pg from "pg";
import { openPostgres, type Database } from "../src/infra/db.js";
import { migrate } from "../src/infra/migrate.js";

/** utime + stime of a process and its threads, in ms (Linux /proc; 100 clock ticks a second): what it spent, whatever else the machine ran. */
export function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** One measured figure, beside the raw-SQL (or bare) baseline it is judged against. */
export interface BenchRow {
  name: string;
  value: number;
  unit: string;
  baseline?: { name: string; value: number };
  /** value ÷ baseline.value: below 1 means faster than the baseline. */
  ratio?: number;
  /** Human-readable goal, e.g. "< 1 ms"; rows without one are context. */
  target?: string;
  pass?: boolean;
}

/** Same database the tests use; BENCH_DATABASE_URL points the bench elsewhere. */
export const BENCH_DATABASE_URL =
  process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/test";

// ── Rows ─────────────────────────────────────────────────────────────────────────────

/** A row with its ratio filled in and, given a bound, judged `value < max` (or by `pass`). */
export function row(
  name: string,
  value: number,
  unit: string,
  options: { baseline?: { name: string; value: number }; max?: number; target?: string; pass?: boolean } = {},
): BenchRow {
  const out: BenchRow = { name, value, unit };
  if (options.baseline) {
    out.baseline = options.baseline;
    if (options.baseline.value > 0) out.ratio = value / options.baseline.value;
  }
  if (options.max !== undefined) {
    out.target = options.target ?? `< ${options.max} ${unit}`;
    out.pass = value < options.max;
  } else if (options.target !== undefined) {
    out.target = options.target;
  }
  if (options.pass !== undefined) out.pass = options.pass;
  return out;
}

// ── Timing ───────────────────────────────────────────────────────────────────────────

export interface Timing {
  /** Milliseconds per call. */
  p50: number;
  p95: number;
  p99: number;
  mean: number;
  iterations: number;
}

const nowNs = () => process.hrtime.bigint();

/** The q-quantile (0..1) of sorted samples, nearest rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

/**
 * Times an async call: `warmup` untimed calls, then `iterations` calls each timed on its own
 * with process.hrtime.bigint (fine for anything above a few microseconds, e.g. a round trip).
 */
export async function timeAsync(fn: () => Promise<unknown>, options: { warmup?: number; iterations?: number } = {}): Promise<Timing> {
  const warmup = options.warmup ?? 20;
  const iterations = options.iterations ?? 200;
  for (let i = 0; i < warmup; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const start = nowNs();
    await fn();
    samples.push(Number(nowNs() - start) / 1e6);
  }
  return summarize(samples);
}

/** p50, p95, p99 and mean of samples in milliseconds. */
export function summarize(samples: readonly number[]): Timing {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = samples.reduce((a, b) => a + b, 0) / Math.max(1, samples.length);
  return { p50: quantile(sorted, 0.5), p95: quantile(sorted, 0.95), p99: quantile(sorted, 0.99), mean, iterations: samples.length };
}

/** A sink the optimizer cannot see through, so measured loops are never dead code. */
export let blackhole = 0;
export function consume(value: unknown): void {
  if (value === blackhole) blackhole++;
}

/**
 * Nanoseconds per call of a synchronous function too fast to time one call at a time: runs
 * it in `batches` batches of `perBatch` calls after a warmup, times each batch, and returns
 * the median and the 99th-percentile batch's per-call cost. Reading the clock once per
 * batch keeps hrtime's own ~50 ns out of the figure.
 */
export function nsPerOp(
  fn: (i: number) => unknown,
  options: { perBatch?: number; batches?: number; warmupCalls?: number } = {},
): { p50: number; p99: number; calls: number } {
  const perBatch = options.perBatch ?? 10_000;
  const batches = options.batches ?? 30;
  const warmupCalls = options.warmupCalls ?? 50_000;
  let acc = 0;
  for (let i = 0; i < warmupCalls; i++) if (fn(i)) acc++;
  const perCall: number[] = [];
  for (let b = 0; b < batches; b++) {
    const start = nowNs();
    for (let i = 0; i < perBatch; i++) if (fn(i)) acc++;
    perCall.push(Number(nowNs() - start) / perBatch);
  }
  consume(acc);
  const sorted = perCall.sort((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), calls: perBatch * batches };
}

/** Wall time of one step, for the seed log. */
export async function timed<T>(label: string, fn: () => Promise<T>): Promise<T> {
  const start = nowNs();
  const result = await fn();
  log(`${label}: ${(Number(nowNs() - start) / 1e9).toFixed(1)} s`);
  return result;
}

/** The machine's 1-minute load average, as the bench's log lines print it. */
export const load1 = (): string => loadavg()[0]!.toFixed(2);
/** The 1-, 5- and 15-minute load averages, as the bench's log lines print them. */
export const loadAverages = (): string => loadavg().map((l) => l.toFixed(2)).join(", ");

/** Progress goes to stderr, so stdout is the table alone. */
export function log(message: string): void {
  process.stderr.write(`  · ${message}\n`);
}

/** A TCP port free on 127.0.0.1 right now (for a server child to listen on). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

// ── The table ────────────────────────────────────────────────────────────────────────

function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs === 0) return "0";
  if (abs >= 1000) return value.toFixed(0);
  if (abs >= 100) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(2);
  if (abs >= 0.01) return value.toFixed(3);
  return value.toPrecision(2);
}

function formatRatio(ratio: number): string {
  if (ratio >= 10) return `${ratio.toFixed(0)}×`;
  if (ratio >= 0.1) return `${ratio.toFixed(2)}×`;
  return `${ratio.toPrecision(2)}×`;
}

/** The table: name, value, unit, baseline, ratio, target, pass. FAIL rows stand out. */
export function formatTable(rows: readonly BenchRow[]): string {
  const header = ["name", "value", "unit", "baseline", "ratio", "target", "pass"];
  const cells = rows.map((r) => [
    r.name,
    formatNumber(r.value),
    r.unit,
    r.baseline ? `${formatNumber(r.baseline.value)} ${r.unit} (${r.baseline.name})` : "",
    r.ratio === undefined ? "" : formatRatio(r.ratio),
    r.target ?? "",
    r.pass === undefined ? "" : r.pass ? "ok" : "FAIL ◀",
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] as string).length)));
  const rightAligned = new Set([1, 4]);
  const line = (c: readonly string[]) =>
    c.map((text, i) => (rightAligned.has(i) ? text.padStart(widths[i] as number) : text.padEnd(widths[i] as number))).join("  ").trimEnd();
  return [line(header), widths.map((w) => "─".repeat(w)).join("  "), ...cells.map(line)].join("\n");
}

// ── A throwaway schema ───────────────────────────────────────────────────────────────

const SCHEMA_PREFIX = "bench_";
/** A live run holds this advisory lock on its schema, so a sweep never drops a running bench. */
const lockKey = (schema: string) => `countersign-bench:${schema}`;

/** Drops bench_* schemas that no live run holds (an interrupted run leaves its schema behind). */
async function sweepStaleSchemas(client: pg.Client): Promise<void> {
  const { rows } = await client.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench\\_%'`);
  for (const { nspname } of rows) {
    const { rows: got } = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock(hashtext($1)) AS ok", [lockKey(nspname)]);
    if (!got[0]?.ok) continue;
    try {
      log(`dropping stale schema ${nspname}`);
      await client.query(`DROP SCHEMA "${nspname}" CASCADE`);
    } finally {
      await client.query("SELECT pg_advisory_unlock(hashtext($1))", [lockKey(nspname)]);
    }
  }
}

/**
 * Runs fn against a fresh schema `bench_<random>` of the bench database, migrated with the
 * product's own migrations, and drops it afterwards (also when fn throws).
 */
export async function withBenchSchema<T>(fn: (db: Database, schema: string) => Promise<T>): Promise<T> {
  const schema = `${SCHEMA_PREFIX}${randomBytes(5).toString("hex")}`;
  const admin = new pg.Client({ connectionString: BENCH_DATABASE_URL });
  await admin.connect();
  let db: Database | undefined;
  try {
    await sweepStaleSchemas(admin);
    await admin.query("SELECT pg_advisory_lock(hashtext($1))", [lockKey(schema)]);
    db = await openPostgres(BENCH_DATABASE_URL, schema);
    await migrate(db.sql);
    return await fn(db, schema);
  } finally {
    await db?.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch((error: Error) => log(`could not drop ${schema}: ${error.message}`));
    await admin.end().catch(() => {});
  }
}
