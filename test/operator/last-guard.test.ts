// The last guard, generated over the long-running entry points (the API's `scripts/start.mjs` →
// src/main.ts, and `npm run worker` → src/worker.ts): a rejection nothing handles is logged with
// an error id and the process goes on serving, then still drains and exits 0 on SIGTERM. Under
// Node's default the process would exit at once, ending everyone's requests or rounds with it.

import { spawn } from "node:child_process";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, until } from "../faults/harness.js";
import { TEST_DATABASE_URL } from "../helpers/env.js";
import { newSchemaName } from "../helpers/harness.js";

const ROOT = new URL("../..", import.meta.url).pathname;
const schemas: string[] = [];

afterAll(async () => {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
});

const ENTRY_POINTS = [
  { name: "API (src/main.ts)", script: "src/main.ts", ready: async (port: number) => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200 },
  { name: "worker (src/worker.ts)", script: "src/worker.ts", ready: async (_port: number, out: string) => out.includes("Countersign workers running") },
];

describe.each(ENTRY_POINTS)("the $name", ({ script, ready }) => {
  it("logs a rejection nothing handled, with an id, and goes on until SIGTERM ends it with 0", { timeout: 120_000 }, async () => {
    const schema = newSchemaName();
    schemas.push(schema);
    const port = await freePort();
    let out = "";
    const child = spawn(process.execPath, ["--import", "tsx", "--import", "./test/operator/fixtures/escape-a-rejection.mjs", script], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "/tmp",
        DATABASE_URL: TEST_DATABASE_URL,
        DATABASE_SCHEMA: schema,
        PORT: String(port),
        HOST: "127.0.0.1",
        LOG_LEVEL: "info",
        COUNTERSIGN_SEED_DEMO: "never",
        COUNTERSIGN_DRAIN_UNREADY_MS: "0",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    try {
      await until(async () => {
        if (child.exitCode !== null) throw new Error(`exited before it was ready: ${out.slice(-2000)}`);
        return ready(port, out);
      }, 90_000, "ready");

      child.kill("SIGUSR2");
      await until(() => out.includes("escaped on purpose") || child.exitCode !== null, 10_000, "the rejection");
      // Long enough for Node's default to have ended the process.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(child.exitCode, out.slice(-2000)).toBeNull();
      const line = out.split("\n").find((l) => l.includes("escaped on purpose"))!;
      const logged = JSON.parse(line) as { msg: string; errorId: string; level: number };
      expect(logged.msg).toBe("unhandled rejection");
      expect(logged.errorId).toMatch(/^[0-9a-f-]{36}$/);
      if (script === "src/main.ts") expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);

      child.kill("SIGTERM");
      expect(await exit).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
