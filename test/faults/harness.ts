// Servers a fault test owns and may kill: its own redis-server, its own PostgreSQL cluster, and
// Countersign itself as a child process (so "the process stays up" is a real process's fate).
// Nothing here touches the machine's shared PostgreSQL or Redis.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns true (or throws the last error at the deadline). */
export async function until(check: () => Promise<boolean> | boolean, timeoutMs = 10_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown = null;
  for (;;) {
    try {
      if (await check()) return;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${timeoutMs} ms${last ? `: ${String(last)}` : ""}`);
    await sleep(100);
  }
}

/** Resolves once `child` has exited (at once if it has). */
export function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once("exit", () => resolve()));
}

// ─── Redis ───────────────────────────────────────────────────────────────────────────────────

export interface PrivateRedis {
  port: number;
  url: string;
  /** SIGKILL: nothing saved, connections cut. */
  kill(): Promise<void>;
  /** A new, empty redis-server on the same port. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export async function startRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let child: ChildProcess | null = null;
  const start = async () => {
    child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"], { stdio: "ignore" });
    await until(() => spawnSync("redis-cli", ["-p", String(port), "ping"], { encoding: "utf8" }).stdout.trim() === "PONG", 10_000, "redis-server up");
  };
  const kill = async () => {
    const c = child;
    child = null;
    if (!c) return;
    c.kill("SIGKILL");
    await exited(c);
  };
  await start();
  return { port, url: `redis://127.0.0.1:${port}`, kill, start, stop: kill };
}

// ─── PostgreSQL ──────────────────────────────────────────────────────────────────────────────

const PG_BIN = "/usr/lib/postgresql/15/bin";
/** initdb is slow here (~20 s on a busy machine): one initialized cluster is kept and copied. */
const TEMPLATE = path.join(os.tmpdir(), "countersign-faults-pg15-template");

export interface PrivateCluster {
  port: number;
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  destroy(): Promise<void>;
}

/** Runs a PostgreSQL binary as the `postgres` OS user (PostgreSQL refuses to run as root). */
function asPostgres(bin: string, args: string[]) {
  const isRoot = process.getuid?.() === 0;
  const result = isRoot
    ? spawnSync("runuser", ["-u", "postgres", "--", path.join(PG_BIN, bin), ...args], { encoding: "utf8" })
    : spawnSync(path.join(PG_BIN, bin), args, { encoding: "utf8" });
  if (result.status !== 0) throw new Error(`${bin} ${args.join(" ")} failed: ${result.stderr || result.stdout}`);
  return result;
}

function chownToPostgres(dir: string) {
  if (process.getuid?.() !== 0) return;
  spawnSync("chown", ["-R", "postgres:postgres", dir]);
}

export async function startPostgresCluster(): Promise<PrivateCluster> {
  if (!existsSync(path.join(TEMPLATE, "PG_VERSION"))) {
    const building = `${TEMPLATE}.${process.pid}`;
    mkdirSync(building, { recursive: true });
    chownToPostgres(building);
    asPostgres("initdb", ["-D", building, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
    try {
      cpSync(building, TEMPLATE, { recursive: true });
      chownToPostgres(TEMPLATE);
    } catch {
      // Another run made it first.
    }
    rmSync(building, { recursive: true, force: true });
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), "countersign-faults-pg-"));
  const data = path.join(dir, "data");
  cpSync(TEMPLATE, data, { recursive: true });
  if (process.getuid?.() === 0) chownSync(dir, 0, 0);
  chownToPostgres(dir);
  spawnSync("chmod", ["700", data]);
  const port = await freePort();
  const start = async () => {
    asPostgres("pg_ctl", ["-D", data, "-l", path.join(dir, "log"), "-w", "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off`, "start"]);
  };
  const stop = async () => {
    asPostgres("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"]);
  };
  await start();
  return {
    port,
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop,
    async destroy() {
      try {
        await stop();
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ─── Countersign as a child process ──────────────────────────────────────────────────────────

export interface ServerProcess {
  base: string;
  port: number;
  child: ChildProcess;
  /** Everything the process wrote to stderr and stdout (pino JSON lines). */
  output(): string;
  alive(): boolean;
  /** Lines of its output that report an unhandled rejection or an uncaught exception. */
  crashes(): string[];
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * `node --import tsx src/main.ts` with this environment, on a free port; resolves once /healthz
 * answers. The server is the child itself (not under the tsx CLI, which runs it as a grandchild),
 * so a signal sent to it, SIGKILL included, reaches the server and not only a wrapper.
 */
export async function startServer(env: Record<string, string>, port?: number): Promise<ServerProcess> {
  const p = port ?? (await freePort());
  let out = "";
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: ROOT,
    // No unready period on SIGTERM unless a test asks (no balancer here to tell).
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: String(p), HOST: "127.0.0.1", LOG_LEVEL: "info", COUNTERSIGN_SEED_DEMO: "never", COUNTERSIGN_DRAIN_UNREADY_MS: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const base = `http://127.0.0.1:${p}`;
  await until(async () => {
    if (child.exitCode !== null) throw new Error(`server exited: ${out.slice(-2000)}`);
    return (await fetch(`${base}/healthz`)).ok;
  }, 90_000, "server up");
  return {
    base,
    port: p,
    child,
    output: () => out,
    alive: () => child.exitCode === null && child.signalCode === null,
    crashes: () => out.split("\n").filter((line) => /unhandledRejection|uncaughtException|UnhandledPromiseRejection|triggerUncaughtException|^Node\.js v\d/.test(line)),
    async kill(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      await exited(child);
    },
  };
}

/** One GraphQL operation over HTTP: the response status, headers and body. */
export async function gql(base: string, token: string, query: string, variables: Record<string, unknown> = {}) {
  const response = await fetch(`${base}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const text = await response.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = { raw: text };
  }
  return { status: response.status, headers: response.headers, body };
}

export async function readyz(base: string): Promise<number> {
  try {
    return (await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(3_000) })).status;
  } catch {
    return 0;
  }
}
