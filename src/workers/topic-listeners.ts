import type { EventBus, TopicName, Topics } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";

/**
 * One subscription of the process to a bus topic, fanned out to in-process listeners; opened at
 * the first listener, ended by close(). If the subscription fails, `stopped` is logged once and
 * the listeners hear nothing more (each user says what it falls back on).
 */
export function topicListeners<K extends TopicName>(events: EventBus, topic: K, logger: Logger | undefined, stopped: string) {
  const listeners = new Set<(payload: Topics[K]) => void>();
  let iterator: AsyncIterator<Topics[K]> | null = null;
  return {
    subscribe(listener: (payload: Topics[K]) => void): () => void {
      listeners.add(listener);
      if (!iterator) {
        const it = events.subscribe(topic);
        iterator = it;
        void (async () => {
          for (;;) {
            const next = await it.next();
            if (next.done) return;
            for (const l of [...listeners]) l(next.value);
          }
        })().catch((error: unknown) => logger?.warn({ err: String(error) }, stopped));
      }
      return () => listeners.delete(listener);
    },
    async close(): Promise<void> {
      listeners.clear();
      await iterator?.return?.();
      iterator = null;
    },
  };
}
