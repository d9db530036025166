// A live gate subscriber's queue: it keeps only the newest message, so a slow client skips
// intermediate statuses instead of growing memory, and never receives one older than what it
// already has (docs/apply-gate.md, "Live status").

/** Turns a message into what a consumer's own next() resolves with (LatestQueue.nextMapped). */
export interface MessageMapper<T, R> {
  mapMessage(message: T): IteratorResult<R> | Promise<IteratorResult<R>>;
}

type Settled = IteratorResult<unknown> | Promise<IteratorResult<unknown>>;

/** `message` as `mapper` maps it (as is without one); a mapper that throws rejects. */
function mapped<T>(mapper: MessageMapper<T, unknown> | null, message: T): Settled {
  if (!mapper) return { value: message, done: false };
  try {
    return mapper.mapMessage(message);
  } catch (error) {
    return Promise.reject(error);
  }
}

/** An async iterator that holds only the newest message (by version). */
export class LatestQueue<T extends { version: number }> implements AsyncIterableIterator<T> {
  private pending: T | null = null;
  private maxVersion = -Infinity;
  private waiter: ((r: Settled) => void) | null = null;
  /** How the waiting consumer wants its message (nextMapped). */
  private mapper: MessageMapper<T, unknown> | null = null;
  private ending = false;
  private closed = false;

  /** `owner.queueClosed()` runs once, when the queue closes (an object, not a closure: one queue lives per subscriber). */
  constructor(private readonly owner: { queueClosed(): void } | null = null) {}

  push(message: T): void {
    if (this.closed || this.ending || message.version <= this.maxVersion) return;
    this.maxVersion = message.version;
    if (this.waiter) {
      const resolve = this.waiter;
      const mapper = this.mapper;
      this.waiter = null;
      this.mapper = null;
      resolve(mapped(mapper, message));
    } else {
      this.pending = message;
    }
  }

  /**
   * Hands `message` to `direct` instead of queueing it, when nothing is queued and the consumer
   * is already waiting for its next message (so everything before it has been handed on: order
   * is kept). True if `direct` took it; false leaves the message to push().
   */
  deliverDirect(message: T, direct: { write(message: T): boolean }): boolean {
    if (this.closed || this.ending || this.pending || !this.waiter || message.version <= this.maxVersion) return false;
    if (!direct.write(message)) return false;
    this.maxVersion = message.version;
    return true;
  }

  /** No more messages after the one pending (if any). */
  end(): void {
    this.ending = true;
    if (!this.pending && this.waiter) {
      const resolve = this.waiter;
      this.waiter = null;
      this.mapper = null;
      this.close();
      resolve({ value: undefined, done: true });
    }
  }

  next(): Promise<IteratorResult<T>> {
    return this.nextMapped<T>(null);
  }

  /**
   * next(), resolving with what `mapper` makes of the message: a consumer that maps each message
   * (shared-events.ts) waits on this one promise instead of chaining one of its own per message
   * (a waiting subscriber holds its chain for as long as it waits: docs/benchmarks.md).
   */
  nextMapped<R>(mapper: MessageMapper<T, R> | null): Promise<IteratorResult<R>> {
    if (this.pending) {
      const value = this.pending;
      this.pending = null;
      return Promise.resolve(mapped(mapper, value)) as Promise<IteratorResult<R>>;
    }
    if (this.ending || this.closed) {
      this.close();
      return Promise.resolve({ value: undefined, done: true });
    }
    this.mapper = mapper;
    return new Promise<Settled>((resolve) => (this.waiter = resolve)) as Promise<IteratorResult<R>>;
  }

  return(): Promise<IteratorResult<T>> {
    this.close();
    if (this.waiter) {
      const resolve = this.waiter;
      this.waiter = null;
      this.mapper = null;
      resolve({ value: undefined, done: true });
    }
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  private close() {
    if (this.closed) return;
    this.closed = true;
    this.pending = null;
    this.owner?.queueClosed();
  }
}
