// Loaded into a measured server process (`--expose-gc --import bench/fanout/probe.mjs`):
// answers `{ type: "memory" }` over IPC with process.memoryUsage() after two full GCs, and the
// number of open file descriptors; `{ type: "snapshot", path }` writes a V8 heap snapshot there
// (BENCH_SUBSCRIBERS_HEAP_SNAPSHOT). It never keeps the process alive (the channel is unref'd).
// Plain JavaScript (its messages are ToProbe and FromProbe in protocol.ts), so the measured
// server runs as production starts it, `node scripts/start.mjs`, with no loader of TypeScript in it.

import { readdirSync } from "node:fs";
import { writeHeapSnapshot } from "node:v8";

const gc = globalThis.gc;

/** @param {{ type: string; path?: string }} message */
function answerMemory(message) {
  if (message?.type === "snapshot") {
    gc?.();
    process.send?.({ type: "snapshot", path: writeHeapSnapshot(message.path) });
    return;
  }
  if (message?.type !== "memory") return;
  gc?.();
  gc?.();
  process.send?.({ type: "memory", usage: process.memoryUsage(), fds: readdirSync("/proc/self/fd").length });
}

if (process.send) {
  if (!gc) throw new Error("bench/fanout/probe.mjs needs --expose-gc");
  process.on("message", answerMemory);
  process.channel?.unref();
}
