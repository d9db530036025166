// The one loop every background worker runs its tick in (src/workers/loop.ts): its behaviour with
// real timers, and that every worker under src/workers/ runs on it instead of a loop of its own.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/infra/logger.js";
import { createWorkerLoop } from "../../src/workers/loop.js";

const WORKERS = resolve(dirname(fileURLToPath(import.meta.url)), "../../src/workers");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function capturedLog() {
  const lines: { level: number; msg: string; err?: { message: string } }[] = [];
  const log = createLogger("info", { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { log, lines };
}

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
}

async function until(check: () => boolean, ms = 2_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await sleep(5);
  }
}

describe("the worker loop", () => {
  it("runs a tick at start, then one an interval after the last ended", async () => {
    const { log } = capturedLog();
    let ticks = 0;
    const loop = createWorkerLoop({ intervalMs: 40, tick: async () => ticks++, log, failed: "tick failed" });
    expect(loop.started).toBe(false);
    loop.start();
    expect(loop.started).toBe(true);
    await until(() => ticks >= 1, 200);
    await until(() => ticks >= 3, 1_000);
    await loop.stop();
    const after = ticks;
    await sleep(120);
    expect(ticks).toBe(after);
    expect(loop.started).toBe(false);
  });

  it("wake runs the next tick now, not at the interval", async () => {
    const { log } = capturedLog();
    let ticks = 0;
    const loop = createWorkerLoop({ intervalMs: 60_000, tick: async () => ticks++, log, failed: "tick failed" });
    loop.start();
    await until(() => ticks === 1);
    loop.wake();
    await until(() => ticks === 2, 500);
    await loop.stop();
  });

  it("a wake during a tick runs another tick as soon as that one ends", async () => {
    const { log } = capturedLog();
    const first = gate();
    let started = 0;
    let ended = 0;
    const loop = createWorkerLoop({
      intervalMs: 60_000,
      tick: async () => {
        started++;
        if (started === 1) await first.opened;
        ended++;
      },
      log,
      failed: "tick failed",
    });
    loop.start();
    await until(() => started === 1);
    loop.wake();
    loop.wake(); // two wakes during one tick: one more tick, not two
    await sleep(30);
    expect(started).toBe(1); // one tick at a time
    first.open();
    await until(() => started === 2, 500);
    await sleep(50);
    expect(started).toBe(2);
    expect(ended).toBe(2);
    await loop.stop();
  });

  it("a tick's error is logged and never escapes; the loop carries on", async () => {
    const { log, lines } = capturedLog();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      let ticks = 0;
      const loop = createWorkerLoop({
        intervalMs: 20,
        tick: async () => {
          ticks++;
          if (ticks === 1) throw new Error("the first tick breaks");
          return ticks;
        },
        log,
        failed: "the test tick failed",
      });
      loop.start();
      await until(() => ticks >= 3);
      await loop.stop();
      const failures = lines.filter((l) => l.msg === "the test tick failed");
      expect(failures).toHaveLength(1);
      expect(failures[0]!.err?.message).toBe("the first tick breaks");
      expect(failures[0]!.level).toBe(50); // error
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("done sees each tick's result; stop resolves only once the running tick has ended", async () => {
    const { log } = capturedLog();
    const release = gate();
    const results: number[] = [];
    let ticks = 0;
    const loop = createWorkerLoop({
      intervalMs: 60_000,
      tick: async () => {
        ticks++;
        await release.opened;
        return ticks;
      },
      log,
      failed: "tick failed",
      done: (n) => results.push(n),
    });
    loop.start();
    await until(() => ticks === 1);
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    loop.wake(); // stopped: no further tick
    await sleep(30);
    expect(stopped).toBe(false);
    release.open();
    await stopping;
    expect(results).toEqual([1]);
    await sleep(30);
    expect(ticks).toBe(1);
  });
});

describe("every worker runs on the one loop", () => {
  // Generated from the workers themselves: each file under src/workers/ that exports a
  // create…Worker function.
  const workers = readdirSync(WORKERS)
    .filter((f) => f.endsWith(".ts") && f !== "loop.ts")
    .map((f) => ({ file: f, source: readFileSync(join(WORKERS, f), "utf8") }))
    .filter((w) => /export function create\w*Worker\(/.test(w.source));

  it("finds the workers (ingest, approval delivery, webhook delivery)", () => {
    expect(workers.map((w) => w.file).sort()).toEqual(expect.arrayContaining(["delivery.ts", "ingest.ts", "webhook-delivery.ts"]));
  });

  it.each(workers.map((w) => [w.file, w.source] as const))("%s uses createWorkerLoop and keeps no timer of its own", (_file, source) => {
    expect(source).toMatch(/from "\.\/loop\.js"/);
    expect(source).toMatch(/createWorkerLoop\(/);
    // Its own loop would keep a timer and a running tick (an HTTP timeout is no loop).
    expect(source).not.toMatch(/NodeJS\.Timeout/);
    expect(source).not.toMatch(/setInterval\(/);
    expect(source).not.toMatch(/=\s*tick\(\)/);
  });

  it("no worker loop lives outside src/workers/", () => {
    const SRC = resolve(WORKERS, "..");
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) {
          if (entry.name !== "generated") walk(path);
        } else if (entry.name.endsWith(".ts") && !path.startsWith(WORKERS) && /export function create\w*Worker\(/.test(readFileSync(path, "utf8"))) {
          offenders.push(path.slice(SRC.length + 1));
        }
      }
    };
    walk(SRC);
    expect(offenders).toEqual([]);
  });
});
