// A live gate subscriber's queue: it keeps only the newest message, so a slow client skips
// intermediate statuses instead of growing memory, and never receives one older than what it
// already has (docs/apply-gate.md, "Live status").

/** An async iterator that holds only the newest message (by version). */
export class LatestQueue<T extends { version: number }> implements AsyncIterableIterator<T> {
  private pending: T | null = null;
  private maxVersion = -Infinity;
  private waiter: ((r: IteratorResult<T>) => void) | null = null;
  private ending = false;
  private closed = false;

  /** `owner.queueClosed()` runs once, when the queue closes (an object, not a closure: one queue lives per subscriber). */
  constructor(private readonly owner: { queueClosed(): void } | null = null) {}

  push(message: T): void {
    if (this.closed || this.ending || message.version <= this.maxVersion) return;
    this.maxVersion = message.version;
    if (this.waiter) {
      const resolve = this.waiter;
      this.waiter = null;
      resolve({ value: message, done: false });
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
      this.close();
      resolve({ value: undefined, done: true });
    }
  }

  next(): Promise<IteratorResult<T>> {
    if (this.pending) {
      const value = this.pending;
      this.pending = null;
      return Promise.resolve({ value, done: false });
    }
    if (this.ending || this.closed) {
      this.close();
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve) => (this.waiter = resolve));
  }

  return(): Promise<IteratorResult<T>> {
    this.close();
    if (this.waiter) {
      const resolve = this.waiter;
      this.waiter = null;
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
