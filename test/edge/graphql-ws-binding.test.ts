// The graphql-ws binding (src/edge/graphql-ws.ts): the protocol is graphql-ws's own; what the
// binding owns is checked here on a bare `ws` server: one keep-alive for every socket (a socket
// that stops answering pings is terminated, one that answers stays), the connection_init wait,
// what `extra` each socket gets, and operations running through it.

import { createServer, type Server } from "node:http";
import { buildSchema } from "graphql";
import { createClient } from "graphql-ws";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { serveGraphqlWs, type SocketBound } from "../../src/edge/graphql-ws.js";
import { createLogger } from "../../src/infra/logger.js";

const schema = buildSchema(`type Query { hello: String } type Subscription { count: Int }`);
const roots = {
  query: { hello: () => "world" },
  subscription: {
    count: async function* () {
      for (let i = 1; i <= 3; i++) yield { count: i };
    },
  },
};

interface Extra extends SocketBound {
  address: string | undefined;
}

let server: Server | null = null;
let dispose: (() => Promise<void>) | null = null;

afterEach(async () => {
  await dispose?.();
  await new Promise((resolve) => server?.close(resolve));
  server = null;
  dispose = null;
});

async function serve(options: { keepAliveMs?: number; initWaitMs?: number } = {}) {
  server = createServer();
  const wsServer = new WebSocketServer({ server, path: "/graphql" });
  const extras: Extra[] = [];
  const binding = serveGraphqlWs<Record<string, unknown> | undefined, Extra>({ schema, roots }, wsServer, {
    extra: (socket, request) => {
      const extra = { socket, address: request.socket.remoteAddress };
      extras.push(extra);
      return extra;
    },
    connectionInitWaitTimeout: options.initWaitMs ?? 0,
    keepAliveMs: options.keepAliveMs,
    logger: createLogger("silent"),
  });
  dispose = () => binding.dispose();
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { url: `ws://127.0.0.1:${port}/graphql`, extras };
}

function socket(url: string, options: WebSocket.ClientOptions = {}) {
  const ws = new WebSocket(url, "graphql-transport-ws", options);
  const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
  const opened = new Promise<void>((resolve, reject) => ws.once("open", () => resolve()).once("error", reject));
  return { ws, opened, closed };
}

describe("the graphql-ws binding", () => {
  it("runs queries and subscriptions, and gives each socket the extra made from its upgrade request", async () => {
    const { url, extras } = await serve();
    const client = createClient({ url, webSocketImpl: WebSocket, retryAttempts: 0 });
    try {
      const answer = await new Promise((resolve, reject) => {
        client.subscribe({ query: "{ hello }" }, { next: resolve, error: reject, complete: () => {} });
      });
      expect(answer).toEqual({ data: { hello: "world" } });
      const counts: unknown[] = [];
      await new Promise<void>((resolve, reject) => {
        client.subscribe({ query: "subscription { count }" }, { next: (r) => counts.push(r), error: reject, complete: resolve });
      });
      expect(counts).toEqual([1, 2, 3].map((count) => ({ data: { count } })));
      expect(extras).toHaveLength(1);
      expect(extras[0]!.address).toBe("127.0.0.1");
    } finally {
      await client.dispose();
    }
  });

  it("terminates a socket that stops answering pings, and keeps one that answers", async () => {
    const { url } = await serve({ keepAliveMs: 400 });
    const silent = socket(url, { autoPong: false });
    const answering = socket(url);
    await Promise.all([silent.opened, answering.opened]);
    // Pinged at the first tick, no pong by the second: terminated (no close frame: 1006).
    expect(await silent.closed).toBe(1006);
    // The answering socket has been pinged at every tick meanwhile, and is still open after more.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(answering.ws.readyState).toBe(WebSocket.OPEN);
    answering.ws.close();
  });

  it("a keep-alive tick that comes late (the process was stalled) terminates nobody whose pong is still unread", async () => {
    const keepAliveMs = 300;
    const { url } = await serve({ keepAliveMs });
    const answering = socket(url);
    await answering.opened;
    // Right after answering the first ping, stall this process (server and client alike) for
    // more than two intervals: the pong is sent, but the server reads it only after its late tick.
    const stalled = new Promise<void>((resolve) =>
      answering.ws.once("ping", () => {
        const until = performance.now() + keepAliveMs * 2.5;
        while (performance.now() < until);
        resolve();
      }),
    );
    await stalled;
    await new Promise((resolve) => setTimeout(resolve, keepAliveMs));
    expect(answering.ws.readyState).toBe(WebSocket.OPEN);
    answering.ws.close();
  });

  it("closes a socket that sends no connection_init in time with 4408; one that does is not closed", async () => {
    const { url } = await serve({ initWaitMs: 150 });
    const idle = socket(url);
    const initialized = socket(url);
    await Promise.all([idle.opened, initialized.opened]);
    const acked = new Promise((resolve) => initialized.ws.once("message", (data) => resolve(JSON.parse(String(data)))));
    initialized.ws.send(JSON.stringify({ type: "connection_init" }));
    expect(await acked).toEqual({ type: "connection_ack" });
    expect(await idle.closed).toBe(4408);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(initialized.ws.readyState).toBe(WebSocket.OPEN);
    initialized.ws.close();
  });
});
