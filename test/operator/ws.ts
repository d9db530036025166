// WebSocket helpers for the operator tests: a graphql-ws client that records how its socket
// closed, and a raw socket for protocol-level checks.

import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";

export interface TrackedClient {
  client: Client;
  /** Resolves with the first close after the socket opened: its code and when it happened. */
  closed: Promise<{ code: number; reason: string; at: number }>;
}

/** `lazy: false` keeps one socket open from the start until dispose (else it closes when idle). */
export function trackedClient(baseUrl: string, token: string, options: { lazy?: boolean } = {}): TrackedClient {
  let resolve!: (v: { code: number; reason: string; at: number }) => void;
  const closed = new Promise<{ code: number; reason: string; at: number }>((r) => (resolve = r));
  const client = createClient({
    url: `${baseUrl.replace(/^http/, "ws")}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${token}` },
    retryAttempts: 0,
    lazy: options.lazy ?? true,
    on: {
      closed: (event) => {
        const e = event as { code: number; reason: string };
        resolve({ code: e.code, reason: String(e.reason), at: Date.now() });
      },
    },
  });
  return { client, closed };
}

/** A raw graphql-transport-ws socket; resolves its close code and the time it took. */
export function rawSocket(baseUrl: string): { ws: WebSocket; opened: Promise<void>; closed: Promise<{ code: number; reason: string; afterMs: number }> } {
  const started = Date.now();
  const ws = new WebSocket(`${baseUrl.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws");
  const opened = new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  const closed = new Promise<{ code: number; reason: string; afterMs: number }>((resolve) =>
    ws.once("close", (code, reason) => resolve({ code, reason: reason.toString(), afterMs: Date.now() - started })),
  );
  return { ws, opened, closed };
}

export const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms))]);
