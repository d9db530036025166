// Start-up: the time from spawning `npm start` on the embedded default (a
// fresh COUNTERSIGN_DATA_DIR, no DATABASE_URL, no REDIS_URL) until the server answers the
// README's first query over HTTP with a demo token it printed; a restart is the same on the
// folder the previous run left. Baseline: a bare `node -e` HTTP server spawned the same way at
// the same moment (node's own start-up, one listen and one answer), so a loaded machine shows
// in both. See docs/benchmarks.md, "The startup module".
//
// BENCH_STARTUP_ROUNDS (default 2) rounds of bare → first start → restart; each row reports the
// slowest round.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { log, row, type BenchRow } from "./lib.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const README_QUERY = "{ viewer { name organization { name } } stacks { edges { node { name authzGroups } } } }";
const TOKEN = /cs_[A-Za-z0-9_-]{43}/;
const PORT = /"port":(\d+)/;
const TIMEOUT_MS = 180_000;

const BARE_SERVER = `const s = require("node:http").createServer((q, r) => r.end('{"data":{"viewer":{"organization":{"name":"Acme Platform"}}}}'));
s.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: s.address().port })));
process.on("SIGTERM", () => process.exit(0));`;

interface Started {
  seconds: number;
  /** CPU seconds (user + system) of every process in the started group until the answer. */
  cpuSeconds: number;
  token: string | null;
}

/** CPU seconds used so far by the processes in a process group (Linux /proc; 0 elsewhere). */
function groupCpuSeconds(pgid: number): number {
  let ticks = 0;
  try {
    for (const pid of readdirSync("/proc")) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
        if (Number(fields[2]) === pgid) ticks += Number(fields[11]) + Number(fields[12]);
      } catch {}
    }
  } catch {
    return 0;
  }
  return ticks / 100; // USER_HZ
}

/**
 * Spawns command (its own process group), waits for its port in the output, sends the README
 * query with `token` (or the first demo token it printed) until it answers with the demo
 * organization, then stops the group with SIGTERM and waits for it to exit.
 */
async function timeStart(command: string, args: string[], dataDir: string, token: string | null): Promise<Started> {
  const env: NodeJS.ProcessEnv = { ...process.env, COUNTERSIGN_DATA_DIR: dataDir, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "info" };
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  delete env.NODE_OPTIONS;
  const started = performance.now();
  const child = spawn(command, args, { cwd: ROOT, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  let out = "";
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${command} ${args.join(" ")}: no port within ${TIMEOUT_MS} ms:\n${out}`)), TIMEOUT_MS);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const m = PORT.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    void exited.then((code) => reject(new Error(`${command} exited with ${code} before serving:\n${out}`)));
  });
  const bearer = token ?? TOKEN.exec(out)?.[0] ?? null;
  try {
    for (;;) {
      if (performance.now() - started > TIMEOUT_MS) throw new Error(`no answer within ${TIMEOUT_MS} ms:\n${out}`);
      try {
        const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
          body: JSON.stringify({ query: README_QUERY }),
        });
        const body = (await res.json()) as { data?: { viewer?: { organization?: { name?: string } } } };
        if (body.data?.viewer?.organization?.name === "Acme Platform") break;
        throw new Error(`the README query did not answer with the demo organization: ${JSON.stringify(body).slice(0, 300)}`);
      } catch (error) {
        if ((error as { cause?: { code?: string } }).cause?.code !== "ECONNREFUSED") throw error;
        await new Promise((r) => setTimeout(r, 10));
      }
    }
    const seconds = (performance.now() - started) / 1000;
    return { seconds, cpuSeconds: groupCpuSeconds(child.pid!), token: bearer };
  } finally {
    try {
      process.kill(-child.pid!, "SIGTERM");
    } catch {}
    await exited;
  }
}

/** The 1-minute load average: other work on the machine stretches every figure here. */
const load = () => os.loadavg()[0]!;

export async function run(): Promise<BenchRow[]> {
  const rounds = Math.max(1, Number(process.env.BENCH_STARTUP_ROUNDS ?? 2));
  const bare: number[] = [];
  const first: Started[] = [];
  const restart: Started[] = [];
  const loads: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), "countersign-startup-"));
    try {
      loads.push(load());
      bare.push((await timeStart(process.execPath, ["-e", BARE_SERVER], dataDir, null)).seconds);
      const f = await timeStart("npm", ["start"], dataDir, null);
      first.push(f);
      const r = await timeStart("npm", ["start"], dataDir, f.token);
      restart.push(r);
      log(`round ${i + 1}: load ${loads[i]!.toFixed(2)}, bare ${bare[i]!.toFixed(2)} s, first start ${f.seconds.toFixed(2)} s (cpu ${f.cpuSeconds.toFixed(2)} s), restart ${r.seconds.toFixed(2)} s (cpu ${r.cpuSeconds.toFixed(2)} s)`);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }
  const slowest = (xs: readonly number[]) => Math.max(...xs);
  const baseline = { name: "bare node -e HTTP server", value: slowest(bare) };
  return [
    row("first start (fresh data folder) → README query answered", slowest(first.map((s) => s.seconds)), "s", { baseline, max: 5 }),
    row("restart (same data folder) → README query answered", slowest(restart.map((s) => s.seconds)), "s", { baseline, max: 2 }),
    row("first start, CPU (all processes)", slowest(first.map((s) => s.cpuSeconds)), "s"),
    row("restart, CPU (all processes)", slowest(restart.map((s) => s.cpuSeconds)), "s"),
    row(`machine load (1-min average) before each round, highest of ${rounds}`, slowest(loads), ""),
  ];
}
