// Re-reads that may be asked for faster than they complete (the dashboard re-reads a workspace on
// every live message and after every action it takes).

/**
 * Wraps `run(key)` so that, per key, at most one run is in flight and one more is queued. A call
 * while a run is in flight does not share it — that run may have read before the change the
 * caller is reacting to — but gets the queued run, which starts once the running one has ended.
 * Calls while a run is queued share the queued one: it starts later than all of them.
 */
export function coalesced<K>(run: (key: K) => Promise<void>): (key: K) => Promise<void> {
  const running = new Map<K, Promise<void>>();
  const queued = new Map<K, Promise<void>>();
  const start = (key: K): Promise<void> => {
    const promise = run(key).finally(() => running.delete(key));
    running.set(key, promise);
    return promise;
  };
  return (key) => {
    const waiting = queued.get(key);
    if (waiting) return waiting;
    const current = running.get(key);
    if (!current) return start(key);
    // After the running one, however it ended (its caller sees its failure).
    const next = current.catch(() => undefined).then(() => {
      queued.delete(key);
      return start(key);
    });
    queued.set(key, next);
    return next;
  };
}
