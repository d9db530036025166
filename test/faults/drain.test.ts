// A drain the balancer can see: Countersign as a real child process gets SIGTERM with a request
// in flight (its body half sent), an open WebSocket and a /readyz poller. /readyz answers 503 at
// once while the node still serves for COUNTERSIGN_DRAIN_UNREADY_MS; then the port refuses, the
// request in flight finishes with its answer, the socket is closed with 1001, and the process
// exits 0 well within 30 s. And `npm start` passes the signal on to the server it runs.

import { spawn } from "node:child_process";
import { request } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { openPostgres, type Database } from "../../src/infra/db.js";
import { migrate } from "../../src/infra/migrate.js";
import { reconcileSystemRoles } from "../../src/services/system-roles.js";
import { createOrg } from "../helpers/fixtures.js";
import { newSchemaName } from "../helpers/harness.js";
import { TEST_DATABASE_URL } from "../helpers/env.js";
import { freePort, startRedis, until, type PrivateRedis } from "./harness.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const UNREADY_MS = 1_500;

let redis: PrivateRedis;
let db: Database;
let schema: string;
let token: string;
let env: Record<string, string>;

beforeAll(async () => {
  redis = await startRedis();
  schema = newSchemaName();
  db = await openPostgres(TEST_DATABASE_URL, schema);
  await migrate(db.sql);
  await reconcileSystemRoles(db.prisma);
  token = (await createOrg(db)).adminToken;
  env = { DATABASE_URL: TEST_DATABASE_URL, DATABASE_SCHEMA: schema, REDIS_URL: redis.url, COUNTERSIGN_DRAIN_UNREADY_MS: String(UNREADY_MS), COUNTERSIGN_WORKERS: "all" };
});
afterAll(async () => {
  await db?.sql.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
  await db?.close();
  await redis?.stop();
});

const exitOf = (child: ReturnType<typeof spawn>) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve({ code: child.exitCode, signal: child.signalCode })
    : new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));

/** GET /readyz on a fresh connection: its status, or 0 when the port refuses. */
const readyz = (port: number) =>
  new Promise<number>((resolve) => {
    const req = request({ host: "127.0.0.1", port, path: "/readyz", agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", () => resolve(0));
    req.end();
  });

/** A POST /graphql whose body is sent in two halves: `finish` sends the rest; `answer` is its response. */
function slowRequest(port: number) {
  const body = Buffer.from(JSON.stringify({ query: "{ viewer { id } }" }));
  let resolveAnswer!: (a: { status: number; body: string }) => void;
  let rejectAnswer!: (e: Error) => void;
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => ((resolveAnswer = resolve), (rejectAnswer = reject)));
  const req = request(
    { host: "127.0.0.1", port, path: "/graphql", method: "POST", agent: false, headers: { "content-type": "application/json", "content-length": body.length, authorization: `Bearer ${token}` } },
    (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolveAnswer({ status: res.statusCode ?? 0, body: text }));
    },
  );
  req.on("error", rejectAnswer);
  req.write(body.subarray(0, 10));
  return { answer, finish: () => req.end(body.subarray(10)) };
}

/** Runs a command that starts Countersign on a free port; resolves once it serves (and, asked, has logged its pid). */
async function launch(command: string, args: string[], extra: Record<string, string>, options: { pid?: boolean } = {}) {
  const port = await freePort();
  let out = "";
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "info", COUNTERSIGN_SEED_DEMO: "never", ...extra },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
  await until(async () => {
    if (child.exitCode !== null) throw new Error(`exited: ${out.slice(-2000)}`);
    return (!options.pid || /"pid":\d+/.test(out)) && (await readyz(port)) === 200;
  }, 90_000, `${command} ${args.join(" ")} serving`);
  return { child, port, output: () => out };
}

describe("drain on SIGTERM", () => {
  it("readyz 503 at once while still serving, then the port refuses, the request in flight finishes, the socket closes 1001, exit 0 within 30 s", async () => {
    // The production command (docs/operations.md): node on the server's bundle, no npm between.
    const server = await launch("node", ["scripts/start.mjs"], env);
    // An open WebSocket, acknowledged.
    const socket = new WebSocket(`ws://127.0.0.1:${server.port}/graphql`, "graphql-transport-ws");
    const closed = new Promise<number>((resolve) => socket.once("close", (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      socket.once("open", () => socket.send(JSON.stringify({ type: "connection_init", payload: { authorization: `Bearer ${token}` } })));
      socket.on("message", (data) => JSON.parse(String(data)).type === "connection_ack" && resolve());
      socket.once("error", reject);
    });
    const inFlight = slowRequest(server.port);
    expect(await readyz(server.port)).toBe(200);

    const signalled = Date.now();
    const exited = exitOf(server.child);
    server.child.kill("SIGTERM");
    const polls: Array<{ at: number; status: number }> = [];
    await until(async () => {
      polls.push({ at: Date.now() - signalled, status: await readyz(server.port) });
      return polls.at(-1)!.status === 503;
    }, 2_000, "/readyz answering 503");
    // Unready, still serving: a new request is answered.
    const served = await fetch(`http://127.0.0.1:${server.port}/graphql`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify({ query: "{ viewer { id } }" }) });
    expect(served.status).toBe(200);
    expect((await served.json()).data.viewer.id).toBeTruthy();

    // Until the unready period is over, then the port refuses.
    await until(async () => {
      polls.push({ at: Date.now() - signalled, status: await readyz(server.port) });
      return polls.at(-1)!.status === 0;
    }, UNREADY_MS + 5_000, "the port refusing");
    const refusedAt = polls.at(-1)!.at;
    expect(refusedAt).toBeGreaterThanOrEqual(UNREADY_MS);
    const unready = polls.slice(polls.findIndex((p) => p.status === 503), -1);
    expect(unready.every((p) => p.status === 503), JSON.stringify(polls)).toBe(true);
    expect(unready[0]!.at).toBeLessThan(1_000);
    expect(await closed).toBe(1001);

    // The request in flight since before the signal gets its answer.
    inFlight.finish();
    const answer = await inFlight.answer;
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body).data.viewer.id).toBeTruthy();

    expect(await exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - signalled).toBeLessThan(30_000);
    expect(server.output()).not.toMatch(/unhandled rejection|uncaughtException/);
    expect(server.output()).toContain('"msg":"shut down"');
  }, 120_000);

  it("npm start passes SIGTERM on: the server it runs drains and exits", async () => {
    const npm = await launch("npm", ["start"], { ...env, COUNTERSIGN_DRAIN_UNREADY_MS: "0" }, { pid: true });
    const pid = Number(/"pid":(\d+)/.exec(npm.output())![1]);
    expect(pid).not.toBe(npm.child.pid);
    npm.child.kill("SIGTERM");
    await until(() => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    }, 30_000, "the server process gone");
    expect(npm.output()).toContain('"msg":"shut down"');
    await exitOf(npm.child);
  }, 120_000);
});
