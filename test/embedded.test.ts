import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { exited } from "./faults/harness.js";

/**
 * The README's front door: with no DATABASE_URL and no REDIS_URL, `npm start` runs the whole
 * product on an embedded PostgreSQL (PGlite) in COUNTERSIGN_DATA_DIR and an in-process bus,
 * seeding a demo organization and printing its tokens.
 */
const root = path.resolve(import.meta.dirname, "..");
let child: ChildProcess | null = null;
let dataDir = "";

afterAll(async () => {
  // The server drains and closes PGlite on SIGTERM: its data folder is removed once it has exited,
  // not while it still writes there (ENOTEMPTY).
  if (child) {
    child.kill("SIGTERM");
    await exited(child);
  }
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}, 60_000);

function startEmbedded(dir: string): Promise<{ port: number; tokens: string[]; output: () => string }> {
  // COUNTERSIGN_DRAIN_UNREADY_MS=0: the test ends it with SIGTERM and has no balancer to tell.
  const env: NodeJS.ProcessEnv = { ...process.env, COUNTERSIGN_DATA_DIR: dir, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "info", COUNTERSIGN_DRAIN_UNREADY_MS: "0" };
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  // What `npm start` runs: the server bundle (rebuilt first if the sources changed). The
  // embedded gateway test starts the sources through tsx, the fallback.
  const proc = spawn(process.execPath, ["scripts/start.mjs"], { cwd: root, env });
  child = proc;
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`embedded start timed out:\n${out}`)), 240_000);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const serving = /"port":(\d+),"database":"pglite","eventBus":"memory"/.exec(out);
      if (serving && out.includes("Dashboard:")) {
        clearTimeout(timer);
        resolve({ port: Number(serving[1]), tokens: [...out.matchAll(/cs_[A-Za-z0-9_-]{43}/g)].map((m) => m[0]), output: () => out });
      }
    };
    proc.stdout!.on("data", onData);
    proc.stderr!.on("data", onData);
    proc.on("exit", (code) => reject(new Error(`exited with ${code}:\n${out}`)));
  });
}

describe("the embedded default", () => {
  it("starts from scratch on PGlite with the demo organization and answers queries", async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), "countersign-embedded-"));
    const { port, tokens } = await startEmbedded(dataDir);
    expect(tokens.length).toBeGreaterThanOrEqual(4);
    const base = `http://127.0.0.1:${port}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = await (await fetch(`${base}/readyz`)).json();
    expect(ready).toEqual({ status: "ready", database: true, eventBus: true });
    const res = await fetch(`${base}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${tokens[0]}` },
      body: JSON.stringify({ query: "{ viewer { organization { slug } } stacks { edges { node { name authzGroups } } } }" }),
    });
    const body = await res.json();
    expect(body.data.viewer.organization.slug).toBe("acme");
    expect(body.data.stacks.edges.length).toBeGreaterThan(0);
    const explorer = await fetch(`${base}/graphql`, { headers: { accept: "text/html" } });
    expect(await explorer.text()).toContain("Countersign");
  }, 300_000);
});
