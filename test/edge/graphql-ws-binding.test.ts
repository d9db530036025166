// The graphql-ws binding (src/edge/graphql-ws.ts): graphql-transport-ws with graphql-ws's own
// messages, codes and hooks, run on the sockets by the binding; checked here on a bare `ws`
// server: one keep-alive for every socket (a socket that stops answering pings is terminated, one
// that answers stays), the connection_init wait, what `extra` each socket gets, and operations
// running through it: a stream to its end, one completed by the client, one that fails, and the
// protocol's refusals.

import { createServer, type Server } from "node:http";
import { buildSchema } from "graphql";
import { createClient } from "graphql-ws";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { serveGraphqlWs, type SocketBound } from "../../src/edge/graphql-ws.js";
import { createLogger } from "../../src/infra/logger.js";

const schema = buildSchema(`type Query { hello: String } type Subscription { count: Int, forever: Int, failing: Int }`);
/** How many `forever` streams are still running (a stream completed by the client is returned: it stops). */
let running = 0;
const roots = {
  query: { hello: () => "world" },
  subscription: {
    count: async function* () {
      for (let i = 1; i <= 3; i++) yield { count: i };
    },
    forever: async function* () {
      running++;
      try {
        for (let i = 1; ; i++) {
          yield { forever: i };
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        running--;
      }
    },
    failing: async function* () {
      yield { failing: 1 };
      throw new Error("the source broke");
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
  const completed: string[] = [];
  const onComplete = (_ctx: unknown, id: string) => void completed.push(id);
  const binding = serveGraphqlWs<Record<string, unknown> | undefined, Extra>({ schema, roots, onComplete }, wsServer, {
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
  return { url: `ws://127.0.0.1:${port}/graphql`, extras, completed };
}

/** A raw graphql-transport-ws socket: every message it receives, in order, and a wait for the next matching one. */
function protocolSocket(url: string) {
  const s = socket(url);
  const received: Record<string, unknown>[] = [];
  const waiting: { match: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void }[] = [];
  s.ws.on("message", (data) => {
    const message = JSON.parse(String(data)) as Record<string, unknown>;
    received.push(message);
    for (const w of waiting.splice(0)) (w.match(message) ? w.resolve(message) : waiting.push(w));
  });
  const next = (match: (m: Record<string, unknown>) => boolean) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const seen = received.find(match);
      if (seen) resolve(seen);
      else waiting.push({ match, resolve });
    });
  const send = (message: object) => s.ws.send(JSON.stringify(message));
  return { ...s, received, next, send };
}

/** A protocol socket past its connection_ack. */
async function acknowledgedSocket(url: string) {
  const s = protocolSocket(url);
  await s.opened;
  s.send({ type: "connection_init" });
  await s.next((m) => m.type === "connection_ack");
  return s;
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

  it("a stream completed by the client is returned (it stops), gets no complete message, and onComplete is told", async () => {
    const { url, completed } = await serve();
    const s = await acknowledgedSocket(url);
    s.send({ id: "a", type: "subscribe", payload: { query: "subscription { forever }" } });
    await s.next((m) => m.id === "a" && (m.payload as { data: { forever: number } }).data.forever === 2);
    expect(running).toBe(1);
    s.send({ id: "a", type: "complete" });
    await expect.poll(() => completed).toEqual(["a"]);
    expect(running).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(s.received.filter((m) => m.type === "complete")).toEqual([]);
    s.ws.close();
  });

  it("a stream that fails is answered with an error message carrying its message, then completes without a complete message", async () => {
    const { url, completed } = await serve();
    const s = await acknowledgedSocket(url);
    s.send({ id: "f", type: "subscribe", payload: { query: "subscription { failing }" } });
    const error = await s.next((m) => m.id === "f" && m.type === "error");
    expect(error.payload).toEqual([{ message: "the source broke" }]);
    expect(s.received.filter((m) => m.id === "f").map((m) => m.type)).toEqual(["next", "error"]);
    await expect.poll(() => completed).toEqual(["f"]);
    // The socket stays open for other operations.
    s.send({ id: "q", type: "subscribe", payload: { query: "{ hello }" } });
    expect((await s.next((m) => m.id === "q" && m.type === "next")).payload).toEqual({ data: { hello: "world" } });
    expect((await s.next((m) => m.id === "q" && m.type === "complete")).type).toBe("complete");
    s.ws.close();
  });

  it("a stream that ends sends a complete message; closing the socket returns the streams still running", async () => {
    const { url, completed } = await serve();
    const s = await acknowledgedSocket(url);
    s.send({ id: "c", type: "subscribe", payload: { query: "subscription { count }" } });
    await s.next((m) => m.id === "c" && m.type === "complete");
    expect(s.received.filter((m) => m.id === "c" && m.type === "next")).toHaveLength(3);
    s.send({ id: "r", type: "subscribe", payload: { query: "subscription { forever }" } });
    await s.next((m) => m.id === "r" && m.type === "next");
    expect(running).toBe(1);
    s.ws.close();
    await expect.poll(() => running).toBe(0);
    await expect.poll(() => completed).toEqual(["c", "r"]);
  });

  it("refuses what the protocol refuses: subscribe before connection_ack (4401), an id already running (4409), a second connection_init (4429), a message that is not one (4400)", async () => {
    const { url } = await serve();
    const early = protocolSocket(url);
    await early.opened;
    early.send({ id: "1", type: "subscribe", payload: { query: "{ hello }" } });
    expect(await early.closed).toBe(4401);

    const twice = await acknowledgedSocket(url);
    twice.send({ id: "1", type: "subscribe", payload: { query: "subscription { forever }" } });
    await twice.next((m) => m.id === "1");
    twice.send({ id: "1", type: "subscribe", payload: { query: "subscription { forever }" } });
    expect(await twice.closed).toBe(4409);

    const init = await acknowledgedSocket(url);
    init.send({ type: "connection_init" });
    expect(await init.closed).toBe(4429);

    const garbage = protocolSocket(url);
    await garbage.opened;
    garbage.ws.send("not json");
    expect(await garbage.closed).toBe(4400);
    await expect.poll(() => running).toBe(0);
  });
});
