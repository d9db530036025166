import type { Context } from "../context.js";
import type { TopicName, Topics } from "../../infra/events.js";

export type TopicEvent<K extends TopicName> = { [T in K]: { topic: T; payload: Topics[T] } }[K];

/**
 * Several event-bus topics as one stream, in arrival order. Every topic's subscription starts
 * at once (before the caller loads the state it yields first), so no event published after
 * that load is missed. `return()` ends every underlying subscription.
 *
 * When the bus resyncs (events may have been lost in an outage, EventBus.onResync), the stream
 * yields an `authz:changed` event for the viewer's organization with reason "resync": every
 * consumer already re-reads all it shows on that event, and yields only what changed.
 */
export function mergeEvents<K extends TopicName>(ctx: Pick<Context, "events" | "viewer">, topics: readonly K[]) {
  const iterators = topics.map((topic) => ({ topic, it: ctx.events.subscribe(topic) }));
  type Next = { index: number; result: IteratorResult<unknown> };
  const pending = new Map<number, Promise<Next>>();
  const pull = (index: number) => {
    pending.set(index, iterators[index]!.it.next().then((result) => ({ index, result })));
  };
  iterators.forEach((_, index) => pull(index));
  let closed = false;
  let resyncs = 0;
  let wake: (() => void) | null = null;
  const orgId = ctx.viewer?.orgId;
  const stopResync = orgId
    ? ctx.events.onResync(() => {
        resyncs = 1;
        wake?.();
      })
    : () => {};

  const merged = {
    async next(): Promise<IteratorResult<TopicEvent<K>>> {
      while (!closed && pending.size > 0) {
        if (resyncs > 0 && orgId) {
          resyncs = 0;
          return { done: false, value: { topic: "authz:changed", payload: { orgId, reason: "resync" } } as TopicEvent<K> };
        }
        const resynced = new Promise<"resync">((resolve) => (wake = () => resolve("resync")));
        const first = await Promise.race([...pending.values(), resynced]);
        wake = null;
        if (first === "resync") continue;
        const { index, result } = first;
        if (result.done) {
          pending.delete(index);
          continue;
        }
        pull(index);
        return { done: false, value: { topic: iterators[index]!.topic, payload: result.value } as TopicEvent<K> };
      }
      return { done: true, value: undefined };
    },
    async return(): Promise<IteratorResult<TopicEvent<K>>> {
      if (!closed) {
        closed = true;
        stopResync();
        wake?.();
        await Promise.all(iterators.map(({ it }) => it.return?.()));
      }
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator]() {
      return merged;
    },
  };
  return merged;
}
