// A graphql-ws client for the live-gate tests and the bench: real WebSocket against listen().

import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";

export function wsClient(baseUrl: string, token: string): Client {
  return createClient({
    url: `${baseUrl.replace(/^http/, "ws")}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${token}` },
    retryAttempts: 0,
  });
}

export interface Stream<T> {
  messages: T[];
  errors: unknown[];
  /** Resolves with the first message (from now on, or already received) matching `predicate`. */
  next(predicate?: (m: T) => boolean, timeoutMs?: number): Promise<T>;
  /** Resolves when the server completes the subscription. */
  completed: Promise<void>;
  isCompleted(): boolean;
  dispose(): void;
}

export function subscribe<T = any>(client: Client, query: string, variables: Record<string, unknown>, pick: (data: any) => T): Stream<T> {
  const messages: T[] = [];
  const errors: unknown[] = [];
  let seen = 0;
  let done = false;
  let waiters: { predicate: (m: T) => boolean; resolve: (m: T) => void; from: number }[] = [];
  let complete!: () => void;
  const completed = new Promise<void>((resolve) => (complete = resolve));
  const flush = () => {
    waiters = waiters.filter((w) => {
      const hit = messages.slice(w.from).find(w.predicate);
      if (hit === undefined) return true;
      w.resolve(hit);
      return false;
    });
  };
  const dispose = client.subscribe(
    { query, variables },
    {
      next: (result) => {
        if (result.errors) errors.push(result.errors);
        if (result.data) messages.push(pick(result.data));
        flush();
      },
      error: (error) => {
        errors.push(error);
        done = true;
        complete();
      },
      complete: () => {
        done = true;
        complete();
      },
    },
  );
  return {
    messages,
    errors,
    completed,
    isCompleted: () => done,
    dispose,
    next(predicate = () => true, timeoutMs = 5000) {
      const from = seen;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no matching message within ${timeoutMs} ms (got ${JSON.stringify(messages)}; errors ${JSON.stringify(errors)})`)), timeoutMs);
        waiters.push({
          predicate,
          from,
          resolve: (m) => {
            clearTimeout(timer);
            seen = messages.indexOf(m) + 1;
            resolve(m);
          },
        });
        flush();
      });
    },
  };
}
