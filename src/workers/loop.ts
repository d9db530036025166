import type { Logger } from "../infra/logger.js";

/**
 * The loop every background worker runs its tick in (ingest, approval delivery, webhook
 * delivery): one tick at a time, the next one an interval after the last ended.
 *
 * - `start()` runs a tick at once (on the next turn of the event loop), then every `intervalMs`.
 * - `wake()` runs the next tick now instead of at the interval. A wake that arrives during a
 *   tick runs another tick as soon as that one ends: the running tick may have read its source
 *   before what woke it was there.
 * - A tick's error is logged (`failed`) and never escapes; the loop carries on at the interval.
 * - `stop()` stops the timer and resolves once the running tick, if any, has ended.
 */
export interface WorkerLoop {
  start(): void;
  wake(): void;
  stop(): Promise<void>;
  /** False before start() and after stop(). */
  readonly started: boolean;
}

export function createWorkerLoop<T>(options: {
  intervalMs: number;
  tick: () => Promise<T>;
  log: Logger;
  /** The message an error of a tick is logged under. */
  failed: string;
  /** Called with each tick's result (to log what it did). */
  done?: (result: T) => void;
}): WorkerLoop {
  const { intervalMs, tick, log } = options;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> | null = null;
  let stopped = true;
  let wokenWhileRunning = false;

  function schedule(delay: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      timer = null;
      wokenWhileRunning = false;
      running = tick()
        .then((result) => options.done?.(result))
        .catch((error: unknown) => log.error({ err: error }, options.failed))
        .finally(() => {
          running = null;
          schedule(wokenWhileRunning ? 0 : intervalMs);
        });
    }, delay);
  }

  function wake(): void {
    if (stopped) return;
    if (running) {
      wokenWhileRunning = true;
      return;
    }
    if (timer) clearTimeout(timer);
    schedule(0);
  }

  return {
    get started() {
      return !stopped;
    },
    start() {
      if (!stopped) return;
      stopped = false;
      schedule(0);
    },
    wake,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = null;
      await running;
    },
  };
}
