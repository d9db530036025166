import type { TaskWake } from "../gateway/gateway.js";
import type { EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import { topicListeners } from "./topic-listeners.js";

/**
 * What wakes the gateway's waiting `tasks/result`: the event bus's `approval:changed` (a vote, a
 * decision, expiry, invalidation, the delivery's dispatch and execution), from any process on
 * Redis. One subscription for the process, fanned out to the waiters; opened at the first waiter.
 */
export function approvalWake(events: EventBus, logger?: Logger): TaskWake & { close(): Promise<void> } {
  const changed = topicListeners(events, "approval:changed", logger, "approval wake-ups stopped: waiting tasks re-read on their interval");
  return {
    subscribe: (listener) => changed.subscribe((payload) => listener(payload.requestId)),
    close: () => changed.close(),
  };
}
