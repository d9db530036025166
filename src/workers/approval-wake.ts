import type { TaskWake } from "../gateway/gateway.js";
import type { EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";

/**
 * What wakes the gateway's waiting `tasks/result`: the event bus's `approval:changed` (a vote, a
 * decision, expiry, invalidation, the delivery's dispatch and execution), from any process on
 * Redis. One subscription for the process, fanned out to the waiters; opened at the first waiter.
 */
export function approvalWake(events: EventBus, logger?: Logger): TaskWake & { close(): Promise<void> } {
  const listeners = new Set<(approvalId: string) => void>();
  let iterator: AsyncIterator<{ requestId: string }> | null = null;
  return {
    subscribe(listener) {
      listeners.add(listener);
      if (!iterator) {
        const it = events.subscribe("approval:changed");
        iterator = it;
        void (async () => {
          for (;;) {
            const next = await it.next();
            if (next.done) return;
            for (const l of [...listeners]) l(next.value.requestId);
          }
        })().catch((error: unknown) => logger?.warn({ err: String(error) }, "approval wake-ups stopped: waiting tasks re-read on their interval"));
      }
      return () => listeners.delete(listener);
    },
    async close() {
      listeners.clear();
      await iterator?.return?.();
      iterator = null;
    },
  };
}
