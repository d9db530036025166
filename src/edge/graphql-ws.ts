// graphql-ws on a `ws` server: the protocol is graphql-ws's own (makeServer); this file only
// binds it to the sockets, as graphql-ws's `useServer` (graphql-ws/use/ws) does, with three
// differences that matter when one process holds 10,000 subscribers, each of which keeps its
// binding for as long as it lives (docs/benchmarks.md, "What a subscriber costs"):
//
// - keep-alive is one timer for every socket, not one interval per socket: every KEEP_ALIVE_MS
//   each open socket is pinged, and one that has not answered the previous ping by then is
//   terminated (useServer's rule: no pong within KEEP_ALIVE_MS of a ping). A tick that comes
//   late (this process was busy: a long GC, a heap snapshot) terminates nobody: after such a
//   stall timers run before the sockets are read, so pongs that did arrive would look missing;
// - the message handler is not an async function: useServer's awaits the operation, so the raw
//   `subscribe` message (a Buffer and its string) stayed in its suspended frame for the whole
//   life of a subscription;
// - the upgrade request is read once, when the socket opens (`extra` gets what it needs, such as
//   the client's address), and not kept; the connection_init wait is a timer cleared at init.

import type { IncomingMessage } from "node:http";
import { CloseCode, handleProtocols, makeServer, type ServerOptions } from "graphql-ws";
import type { WebSocket, WebSocketServer } from "ws";
import type { Logger } from "../infra/logger.js";

/** useServer's default: a socket is pinged this often and must answer within the same time. */
export const KEEP_ALIVE_MS = 12_000;

/** What every `extra` carries: the socket (graphql-ws hooks read `ctx.extra.socket`). */
export interface SocketBound {
  readonly socket: WebSocket;
}

export interface GraphqlWsBinding<E extends SocketBound> {
  /** The `extra` of a socket that opened, from its upgrade request (which is not kept after this). */
  extra(socket: WebSocket, request: IncomingMessage): E;
  /** Closes a socket that has not sent connection_init within this time (graphql-ws: 4408). 0: never. */
  connectionInitWaitTimeout: number;
  keepAliveMs?: number;
  logger: Logger;
}

/** Close reasons are limited to 123 bytes by the WebSocket protocol. */
const closeReason = (error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  return message.length < 124 ? message : "Internal server error";
};

/**
 * Serves graphql-ws on `wsServer` (graphql-ws's `useServer`, bound as described above). Options
 * are graphql-ws's own, except connectionInitWaitTimeout, which the binding applies.
 */
export function serveGraphqlWs<P extends Record<string, unknown> | undefined, E extends SocketBound>(
  options: Omit<ServerOptions<P, E>, "connectionInitWaitTimeout">,
  wsServer: WebSocketServer,
  binding: GraphqlWsBinding<E>,
): { dispose(): Promise<void> } {
  const { logger } = binding;
  const onConnect = options.onConnect;
  const server = makeServer<P, E>({
    ...options,
    // The binding's timer (below) applies it; graphql-ws's own would keep its timer for the socket's life.
    connectionInitWaitTimeout: 0,
    onConnect: (ctx) => {
      // connection_init arrived: graphql-ws has set connectionInitReceived before calling this.
      clearInitWait(ctx.extra.socket);
      return onConnect?.(ctx);
    },
  });
  wsServer.options.handleProtocols = handleProtocols;

  /** Sockets waiting for connection_init, with the timer that closes them. */
  const initWaits = new Map<WebSocket, NodeJS.Timeout>();
  function clearInitWait(socket: WebSocket) {
    const timer = initWaits.get(socket);
    if (timer === undefined) return;
    clearTimeout(timer);
    initWaits.delete(socket);
  }

  /** Sockets pinged by the last keep-alive tick that have not answered yet. */
  const awaitingPong = new Set<WebSocket>();
  const keepAliveMs = binding.keepAliveMs ?? KEEP_ALIVE_MS;
  let lastTick = performance.now();
  const keepAlive =
    keepAliveMs > 0 && Number.isFinite(keepAliveMs)
      ? setInterval(() => {
          const now = performance.now();
          // Late by half an interval or more: the pongs may be unread yet, so nobody is judged.
          if (now - lastTick >= keepAliveMs * 1.5) awaitingPong.clear();
          lastTick = now;
          for (const socket of wsServer.clients) {
            if (socket.readyState !== socket.OPEN) continue;
            if (awaitingPong.has(socket)) {
              awaitingPong.delete(socket);
              socket.terminate();
              continue;
            }
            awaitingPong.add(socket);
            socket.ping();
          }
        }, keepAliveMs)
      : null;
  keepAlive?.unref();
  // One listener function for every socket (ws calls it with the socket as `this`).
  function ponged(this: WebSocket) {
    awaitingPong.delete(this);
  }

  function internalError(socket: WebSocket, error: unknown, what: string) {
    logger.error({ err: error }, what);
    socket.close(CloseCode.InternalServerError, closeReason(error));
  }

  wsServer.once("error", (error) => {
    logger.error({ err: error }, "websocket server error");
    for (const socket of wsServer.clients) socket.close(CloseCode.InternalServerError, "Internal server error");
  });

  wsServer.on("connection", (socket, request) => {
    socket.once("error", (error) => internalError(socket, error, "websocket error"));
    socket.on("pong", ponged);
    const timeout = binding.connectionInitWaitTimeout;
    if (timeout > 0 && Number.isFinite(timeout)) {
      initWaits.set(
        socket,
        setTimeout(() => {
          initWaits.delete(socket);
          socket.close(CloseCode.ConnectionInitialisationTimeout, "Connection initialisation timeout");
        }, timeout),
      );
    }
    const closed = server.opened(new BoundSocket(socket, internalError), binding.extra(socket, request));
    socket.once("close", (code, reason) => {
      clearInitWait(socket);
      awaitingPong.delete(socket);
      void closed(code, String(reason));
    });
  });

  return {
    async dispose() {
      if (keepAlive) clearInterval(keepAlive);
      for (const timer of initWaits.values()) clearTimeout(timer);
      initWaits.clear();
      for (const socket of wsServer.clients) socket.close(1001, "Going away");
      wsServer.removeAllListeners();
      await new Promise<void>((resolve, reject) => wsServer.close((error) => (error ? reject(error) : resolve())));
    },
  };
}

/**
 * graphql-ws's view of one socket. A class, not an object of arrows: one lives per socket, its
 * methods are shared (under tsx, every arrow kept in a property is named with a property array of
 * its own: docs/benchmarks.md, "What a subscriber costs").
 */
class BoundSocket {
  readonly protocol: string;

  constructor(
    private readonly socket: WebSocket,
    private readonly failed: (socket: WebSocket, error: unknown, what: string) => void,
  ) {
    this.protocol = socket.protocol;
  }

  send(data: string): Promise<void> {
    const { socket } = this;
    return new Promise<void>((resolve, reject) => {
      if (socket.readyState !== socket.OPEN) return resolve();
      socket.send(data, (error) => (error ? reject(error) : resolve()));
    });
  }

  close(code: number, reason: string): void {
    this.socket.close(code, reason);
  }

  // Not an async function: nothing of the message stays behind while its operation runs.
  onMessage(handle: (data: string) => Promise<void>): void {
    const { socket, failed } = this;
    socket.on("message", (data) => {
      handle(String(data)).catch((error: unknown) => failed(socket, error, "graphql-ws message handling failed"));
    });
  }
}
