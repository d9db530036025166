// Loaded into a measured server process (`--expose-gc --import tsx --import bench/fanout/probe.ts`):
// answers `{ type: "memory" }` over IPC with process.memoryUsage() after two full GCs, and the
// number of open file descriptors; `{ type: "snapshot", path }` writes a V8 heap snapshot there
// (BENCH_SUBSCRIBERS_HEAP_SNAPSHOT). It never keeps the process alive (the channel is unref'd).

import { readdirSync } from "node:fs";
import { writeHeapSnapshot } from "node:v8";
import type { FromProbe, ToProbe } from "./protocol.js";

const gc = (globalThis as { gc?: () => void }).gc;

export function answerMemory(message: ToProbe): boolean {
  if (message?.type === "snapshot") {
    gc?.();
    process.send?.({ type: "snapshot", path: writeHeapSnapshot(message.path) } satisfies FromProbe);
    return true;
  }
  if (message?.type !== "memory") return false;
  gc?.();
  gc?.();
  const reply: FromProbe = { type: "memory", usage: process.memoryUsage(), fds: readdirSync("/proc/self/fd").length };
  process.send?.(reply);
  return true;
}

if (process.send) {
  if (!gc) throw new Error("bench/fanout/probe.ts needs --expose-gc");
  process.on("message", (m: ToProbe) => void answerMemory(m));
  process.channel?.unref();
}
