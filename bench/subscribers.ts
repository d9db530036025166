// 10,000 subscribers on one process: planGate subscribers on one
// Countersign server process, its memory per subscriber and the commit-to-last-delivery
// latency, beside a bare `ws` server fanning the same message out to as many sockets.
//
// Five kinds of process, loopback only: this one seeds the schema (bench/gate.ts's seed) and
// commits the approvals; one Countersign server (`node scripts/start.mjs`, the production
// command, with bench/fanout/probe.mjs loaded to report its memory over IPC); one bare ws
// server (bench/fanout/bare-server.ts); one bare graphql-ws server answering the same
// subscription from memory (bench/fanout/bare-graphql-ws.ts: the protocol's own share of an
// opening); and two client processes (bench/fanout/client.ts) holding the sockets, half each,
// so no server's memory holds a client. Memory is read from the Countersign and bare ws servers
// after two full GCs, before and after their 10,000 sockets are open. A round is one approval
// (every planGate subscriber must see approvalsCounted move) and then one bare fan-out of the
// same message, alternating, so both see the same minutes of this shared VM. Every wait is bounded.

import { spawn, type ChildProcess } from "node:child_process";
import { randomInt } from "node:crypto";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Authz } from "../src/authz/authz.js";
import { createEventBus } from "../src/infra/events.js";
import { approvePlan } from "../src/services/plans.js";
import WebSocket from "ws";
import type { FromBare, FromBareGraphql, FromClient, FromProbe, Kind, ToBare, ToClient, ToProbe } from "./fanout/protocol.js";
import { KINDS, monotonicMs } from "./fanout/protocol.js";
import { seed } from "./gate.js";
import { BENCH_DATABASE_URL, cpuMsOf, freePort, log, quantile, row, withBenchSchema, type BenchRow } from "./lib.js";

const SUBSCRIBERS = Number(process.env.BENCH_SUBSCRIBERS ?? 10_000);
/** Client processes; each binds its own loopback address, so 2 × 10,000 sockets never run out of ephemeral ports. */
const CLIENTS = Number(process.env.BENCH_SUBSCRIBERS_CLIENTS ?? 2);
/** Measured rounds, after WARMUP that are not counted; bench/gate.ts's seed has approvers for 205. */
const ROUNDS = Number(process.env.BENCH_SUBSCRIBERS_ROUNDS ?? 30);
const WARMUP = Number(process.env.BENCH_SUBSCRIBERS_WARMUP ?? 3);
/** A folder: heap snapshots of the Countersign server before and after subscribing (for finding where a subscriber's memory goes). */
const HEAP_SNAPSHOTS = process.env.BENCH_SUBSCRIBERS_HEAP_SNAPSHOT;
/** A folder: a CPU profile of the Countersign server's whole run (`--cpu-prof`), written when it exits. */
const CPU_PROFILE = process.env.BENCH_SUBSCRIBERS_CPU_PROFILE;
const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const PLAN_GATE = `subscription($planId: ID!) { planGate(planId: $planId) { version evaluation { approvalsCounted } } }`;
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const KiB = 1024;

// ── Child processes ──────────────────────────────────────────────────────────────────

/**
 * A child with an IPC channel, started through `sh` so its soft file-descriptor limit is raised
 * to the hard one where allowed (10,000 sockets need more than the common default of 1,024).
 */
class Child<In, Out extends { type: string }> {
  readonly process: ChildProcess;
  private readonly waiting: { type: string; resolve: (m: Out) => void; reject: (e: Error) => void }[] = [];
  /** Messages that came before anyone waited for them (a child's `listening`, say), taken by the next next() of their type. */
  private readonly unclaimed: Out[] = [];
  private readonly name: string;

  constructor(name: string, args: string[], env: NodeJS.ProcessEnv = process.env) {
    this.name = name;
    this.process = spawn("/bin/sh", ["-c", 'ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$@"', "sh", process.execPath, ...args], {
      cwd: ROOT,
      env,
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    });
    this.process.on("message", (m: Out) => {
      if (m.type === "failed") {
        for (const w of this.waiting.splice(0)) w.reject(new Error(`${name}: ${(m as unknown as { message: string }).message}`));
        return;
      }
      const at = this.waiting.findIndex((w) => w.type === m.type);
      if (at >= 0) this.waiting.splice(at, 1)[0]!.resolve(m);
      else this.unclaimed.push(m);
    });
    this.process.once("exit", (code) => {
      for (const w of this.waiting.splice(0)) w.reject(new Error(`${name} exited with ${code}`));
    });
  }

  /** The next message of `type`, within `ms`. */
  next<T extends Out["type"]>(type: T, ms = 30_000): Promise<Extract<Out, { type: T }>> {
    const early = this.unclaimed.findIndex((m) => m.type === type);
    if (early >= 0) return Promise.resolve(this.unclaimed.splice(early, 1)[0] as Extract<Out, { type: T }>);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.name}: no ${type} within ${ms} ms`)), ms);
      timer.unref();
      this.waiting.push({
        type,
        resolve: (m) => (clearTimeout(timer), resolve(m as Extract<Out, { type: T }>)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
    });
  }

  send(message: In): void {
    this.process.send(message as object);
  }

  async request<T extends Out["type"]>(message: In, reply: T, ms?: number): Promise<Extract<Out, { type: T }>> {
    const answer = this.next(reply, ms);
    this.send(message);
    return answer;
  }

  async stop(): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    const exited = new Promise((r) => this.process.once("exit", r));
    this.process.kill("SIGTERM");
    const timer = setTimeout(() => this.process.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

const tsx = ["--import", "tsx"];
const probe = ["--expose-gc", "--import", pathToFileURL(`${ROOT}bench/fanout/probe.mjs`).href];

async function startCountersign(schema: string): Promise<{ url: string; child: Child<ToProbe, FromProbe | { type: "failed" }> }> {
  const port = await freePort();
  const child = new Child<ToProbe, FromProbe | { type: "failed" }>("countersign server", [...probe, ...(CPU_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${CPU_PROFILE}`] : []), "scripts/start.mjs"], {
    ...process.env,
    DATABASE_URL: BENCH_DATABASE_URL,
    DATABASE_SCHEMA: schema,
    REDIS_URL,
    PORT: String(port),
    HOST: "127.0.0.1",
    LOG_LEVEL: "warn",
    COUNTERSIGN_WORKERS: "none",
    COUNTERSIGN_SEED_DEMO: "never",
    // 10,000 subscriptions from 100 tokens, opened as fast as the server takes them: the
    // bench measures the gate and its sockets, not the limits.
    COUNTERSIGN_RATE_LIMIT_RPS: "0",
    COUNTERSIGN_MAX_SUBSCRIPTIONS_PER_TOKEN: "0",
    // A handshake queued behind thousands of others may wait longer than the default 3 s.
    COUNTERSIGN_WS_INIT_TIMEOUT_MS: "30000",
    // No balancer to tell: SIGTERM stops it at once (and a CPU profile is written before stop()'s 10 s run out).
    COUNTERSIGN_DRAIN_UNREADY_MS: "0",
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (child.process.exitCode !== null) throw new Error(`the Countersign server exited with ${child.process.exitCode}`);
    if (await fetch(`${url}/readyz`).then((r) => r.ok, () => false)) return { url, child };
    await new Promise((r) => setTimeout(r, 100));
  }
  await child.stop();
  throw new Error("the Countersign server did not become ready within 60 s");
}

interface Memory {
  rss: number;
  heapUsed: number;
  external: number;
  fds: number;
}

async function memoryOf(child: Child<ToProbe, FromProbe | { type: "failed" }> | Child<ToBare, FromBare | { type: "failed" }>): Promise<Memory> {
  const m = await (child as Child<ToProbe, FromProbe>).request({ type: "memory" }, "memory");
  return { rss: m.usage.rss, heapUsed: m.usage.heapUsed, external: m.usage.external, fds: m.fds };
}

const describe = (m: Memory) =>
  `rss ${(m.rss / 2 ** 20).toFixed(1)} MiB, heap ${(m.heapUsed / 2 ** 20).toFixed(1)} MiB, external ${(m.external / 2 ** 20).toFixed(1)} MiB, ${m.fds} fds`;

/** Splits `total` over the clients as evenly as possible. */
const shares = (total: number, parts: number) => Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));

// ── The run ──────────────────────────────────────────────────────────────────────────

interface Rounds {
  /** Per round: commit (or order) → the last socket's arrival. */
  last: number[];
  /** Every delivery of every measured round. */
  each: number[];
}

const percentile = (xs: readonly number[], q: number) => quantile([...xs].sort((a, b) => a - b), q);

export async function run(): Promise<BenchRow[]> {
  if (SUBSCRIBERS < CLIENTS || WARMUP + ROUNDS > 200) throw new Error("BENCH_SUBSCRIBERS ≥ clients and warm-up + rounds ≤ 200");
  return withBenchSchema(async (db, schema) => {
    const seeded = await seed(db);
    const tokens = [...new Set(seeded.subscriberTokens)];
    const events = createEventBus({ redisUrl: REDIS_URL });
    const server = await startCountersign(schema);
    const bare = new Child<ToBare, FromBare | { type: "failed" }>("bare ws server", ["--expose-gc", ...tsx, "bench/fanout/bare-server.ts"]);
    const bareGraphql = new Child<never, FromBareGraphql>("bare graphql-ws server", [...tsx, "bench/fanout/bare-graphql-ws.ts"]);
    const clients = Array.from({ length: CLIENTS }, (_, i) => new Child<ToClient, FromClient>(`client ${i}`, [...tsx, "bench/fanout/client.ts"]));
    let control: WebSocket | undefined;
    try {
      const barePort = (await bare.next("listening")).port;
      const bareGraphqlPort = (await bareGraphql.next("listening")).port;
      const split = shares(SUBSCRIBERS, CLIENTS);
      // Each client binds its sockets to a loopback address of its own, drawing on that address's
      // ephemeral ports, and the bare sockets to others than the planGate ones: a socket bound to
      // an address searches that address's ports for a free one, so sockets already open there
      // (or left in TIME_WAIT by an earlier run, for a minute) slow every open after them. A run's
      // addresses are its own (127.x.y.*), so both kinds open on empty port ranges.
      const net = `127.${1 + randomInt(254)}.${randomInt(256)}`;
      const localAddress = (kind: Kind, i: number) => `${net}.${2 + KINDS.indexOf(kind) * CLIENTS + i}`;

      const snapshot = async (name: string) => {
        if (HEAP_SNAPSHOTS) log(`subscribers: heap snapshot ${(await server.child.request({ type: "snapshot", path: `${HEAP_SNAPSHOTS}/${name}.heapsnapshot` }, "snapshot", 300_000)).path}`);
      };
      await snapshot("before");
      const serverBefore = await memoryOf(server.child);
      log(`subscribers: Countersign server at ${server.url}, before: ${describe(serverBefore)}`);
      /** Every client opens its share of `kind`'s sockets on `pid`'s server (`order`: the message for client i): the slowest client's time and the server's CPU per socket. */
      const opening = async (kind: Kind, pid: number, order: (i: number, localAddress: string) => ToClient, ms: number) => {
        const before = cpuMsOf(pid);
        const opened = await Promise.all(clients.map((c, i) => c.request(order(i, localAddress(kind, i)), "opened", ms)));
        return { opened, ms: Math.max(...opened.map((o) => o.ms)), cpu: (cpuMsOf(pid) - before) / SUBSCRIBERS };
      };
      const gateOpening = await opening("gate", server.child.process.pid!, (i, localAddress) => ({ type: "open-gate", kind: "gate", url: server.url, tokens, planId: seeded.livePlanId, count: split[i]!, localAddress, query: PLAN_GATE }), 300_000);
      const serverAfter = await memoryOf(server.child);
      await snapshot("subscribed");
      log(`subscribers: ${SUBSCRIBERS} planGate subscriptions (${tokens.length} users) open in ${(gateOpening.ms / 1000).toFixed(1)} s; after: ${describe(serverAfter)}`);

      const sample = gateOpening.opened.find((o) => o.sample !== null)?.sample;
      if (!sample) throw new Error("no planGate message to copy for the bare fan-out");
      await bare.request({ type: "payload", template: sample }, "payload-set");
      const bareBefore = await memoryOf(bare);
      const bareOpening = await opening("bare", bare.process.pid!, (i, localAddress) => ({ type: "open-bare", url: `ws://127.0.0.1:${barePort}`, count: split[i]!, localAddress }), 120_000);
      const bareAfter = await memoryOf(bare);
      log(`subscribers: bare ws server, ${SUBSCRIBERS} sockets open in ${(bareOpening.ms / 1000).toFixed(1)} s; before: ${describe(bareBefore)}; after: ${describe(bareAfter)}`);
      // The same subscriptions on bare graphql-ws (the same exchange, answered from memory), closed again before the rounds.
      const graphqlOpening = await opening("graphql", bareGraphql.process.pid!, (i, localAddress) => ({ type: "open-gate", kind: "graphql", url: `http://127.0.0.1:${bareGraphqlPort}`, tokens, planId: seeded.livePlanId, count: split[i]!, localAddress, query: PLAN_GATE }), 120_000);
      await Promise.all(clients.map((c) => c.request({ type: "drop", kind: "graphql" }, "dropped")));
      await bareGraphql.stop();
      log(`subscribers: bare graphql-ws server, ${SUBSCRIBERS} planGate subscriptions open in ${(graphqlOpening.ms / 1000).toFixed(1)} s`);
      const us = (ms: number) => `${(ms * 1000).toFixed(0)} µs`;
      log(`subscribers: server CPU per socket opened: Countersign ${us(gateOpening.cpu)}, bare ws ${us(bareOpening.cpu)}, bare graphql-ws ${us(graphqlOpening.cpu)}`);
      control = new WebSocket(`ws://127.0.0.1:${barePort}/control`);
      await new Promise((resolve, reject) => control!.once("open", resolve).once("error", reject));

      /** Arms every client for `kind` reaching `target`, runs `start` (returns the start time), then gathers the arrivals. */
      const round = async (kind: Kind, target: number, start: () => Promise<number>): Promise<number[]> => {
        await Promise.all(clients.map((c) => c.request({ type: "arm", kind, target }, "armed")));
        const arrived = Promise.all(clients.map((c) => c.next("arrived", 25_000)));
        const t0 = await start();
        return (await arrived).flatMap((a) => a.arrivals.map((at) => Math.max(0, at - t0)));
      };

      const gate: Rounds = { last: [], each: [] };
      const fanOut: Rounds = { last: [], each: [] };
      const note = (into: Rounds, latencies: number[], measured: boolean) => {
        const last = Math.max(...latencies);
        if (measured) {
          into.last.push(last);
          into.each.push(...latencies);
        }
        return last;
      };
      for (let r = 0; r < WARMUP + ROUNDS; r++) {
        const measured = r >= WARMUP;
        const authz = new Authz(db.sql, { userId: seeded.approverIds[r]!, orgId: seeded.orgId, tokenId: "bench", name: "bench", email: "bench", isServiceAccount: false });
        const g = note(gate, await round("gate", r + 1, async () => (await approvePlan({ db, authz, events }, seeded.livePlanId), monotonicMs())), measured);
        await new Promise((resolve) => setTimeout(resolve, 100));
        const b = note(fanOut, await round("bare", r + 1, async () => {
          const t0 = monotonicMs();
          control!.send(String(r + 1));
          return t0;
        }), measured);
        if (process.env.BENCH_SUBSCRIBERS_VERBOSE) log(`round ${r}${measured ? "" : " (warm-up)"}: planGate last ${g.toFixed(1)} ms, bare last ${b.toFixed(1)} ms`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const serverEnd = await memoryOf(server.child);
      await snapshot("rounds");
      log(`subscribers: Countersign server after ${WARMUP + ROUNDS} rounds: ${describe(serverEnd)}`);

      const perSocket = (after: Memory, before: Memory, key: "rss" | "heapUsed") => (after[key] - before[key]) / SUBSCRIBERS / KiB;
      const n = SUBSCRIBERS.toLocaleString("en-US");
      const q = (xs: number[], p: number) => percentile(xs, p);
      log(
        `subscribers: last delivery p50/p99 planGate ${q(gate.last, 0.5).toFixed(1)}/${q(gate.last, 0.99).toFixed(1)} ms, bare ${q(fanOut.last, 0.5).toFixed(1)}/${q(fanOut.last, 0.99).toFixed(1)} ms; ` +
          `each delivery p50 planGate ${q(gate.each, 0.5).toFixed(1)} ms, bare ${q(fanOut.each, 0.5).toFixed(1)} ms`,
      );
      return [
        // The goals: a subscriber within 2× a bare socket's memory, opened within 1.5× its time.
        row(`server memory per planGate subscriber, ${n} on one process (RSS after GC)`, perSocket(serverAfter, serverBefore, "rss"), "KiB", {
          baseline: { name: `bare ws server, per socket`, value: perSocket(bareAfter, bareBefore, "rss") },
          target: "≤ 2× bare",
          pass: perSocket(serverAfter, serverBefore, "rss") <= 2 * perSocket(bareAfter, bareBefore, "rss"),
        }),
        row(`server memory per planGate subscriber (JS heap used after GC)`, perSocket(serverAfter, serverBefore, "heapUsed"), "KiB", {
          baseline: { name: `bare ws server, per socket`, value: perSocket(bareAfter, bareBefore, "heapUsed") },
          target: "context",
        }),
        // The same figure once the rounds have run: what a subscriber costs in steady state.
        row(`server memory per planGate subscriber after ${WARMUP + ROUNDS} rounds (JS heap used after GC)`, perSocket(serverEnd, serverBefore, "heapUsed"), "KiB", {
          baseline: { name: `bare ws server, per socket`, value: perSocket(bareAfter, bareBefore, "heapUsed") },
          target: "context",
        }),
        row(`commit → last of ${n} planGate deliveries, p50 of ${ROUNDS} rounds`, q(gate.last, 0.5), "ms", {
          baseline: { name: `bare ws fan-out, last of ${n}`, value: q(fanOut.last, 0.5) },
          target: "context",
        }),
        row(`commit → last of ${n} planGate deliveries, p99 of ${ROUNDS} rounds`, q(gate.last, 0.99), "ms", {
          baseline: { name: `bare ws fan-out, last of ${n}`, value: q(fanOut.last, 0.99) },
          target: "context",
        }),
        row(`commit → each planGate delivery, p99 of ${(ROUNDS * SUBSCRIBERS).toLocaleString("en-US")}`, q(gate.each, 0.99), "ms", {
          baseline: { name: "bare ws fan-out, each delivery", value: q(fanOut.each, 0.99) },
          target: "context",
        }),
        row(`opening ${n} planGate subscriptions (connect, init, subscribe, first status)`, gateOpening.ms / 1000, "s", {
          baseline: { name: `opening ${n} bare sockets`, value: bareOpening.ms / 1000 },
          target: "≤ 1.5× bare",
          pass: gateOpening.ms <= 1.5 * bareOpening.ms,
        }),
        // The protocol's own share: the same exchange on bare graphql-ws, and Countersign beside it.
        row(`opening ${n} subscriptions on bare graphql-ws (the same exchange, answered from memory)`, graphqlOpening.ms / 1000, "s", {
          baseline: { name: `opening ${n} bare sockets`, value: bareOpening.ms / 1000 },
          target: "context",
        }),
        row(`opening ${n} planGate subscriptions, beside bare graphql-ws`, gateOpening.ms / 1000, "s", {
          baseline: { name: `the same on bare graphql-ws`, value: graphqlOpening.ms / 1000 },
          target: "context",
        }),
        row(`opening a planGate subscription, server CPU`, gateOpening.cpu * 1000, "µs", {
          baseline: { name: `bare graphql-ws, the same exchange`, value: graphqlOpening.cpu * 1000 },
          target: "context",
        }),
      ];
    } finally {
      control?.terminate();
      for (const c of clients) c.process.connected && c.send({ type: "close" });
      await Promise.all([...clients.map((c) => c.stop()), bare.stop(), bareGraphql.stop(), server.child.stop()]);
      await events.close();
    }
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { formatTable } = await import("./lib.js");
  console.log(formatTable(await run()));
  process.exit(0);
}
