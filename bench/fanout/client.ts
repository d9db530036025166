// A client process of bench/subscribers.ts: holds its share of the subscribers' sockets (planGate
// subscriptions over graphql-transport-ws, and plain sockets to the bare fan-out server), stamps
// each arrival with the monotonic clock first, and reports a round's arrivals over IPC once every
// socket of the armed kind has seen the round's number. The sockets live here, not in the
// bench process, so the server's memory and CPU are its own and the bench process stays free to
// commit. Controlled entirely by the messages in protocol.ts.

import WebSocket from "ws";
import { approvalsCounted, monotonicMs, type FromClient, type Kind, type ToClient } from "./protocol.js";

const send = (m: FromClient) => process.send?.(m);
/** Opened this many at a time, so the server never sees thousands of handshakes at once. */
const BATCH = 100;
const ROUND_TIMEOUT_MS = 20_000;

interface Socket {
  counted: number;
  arrivedAt: number;
  ws: WebSocket;
}

const sockets: Record<Kind, Socket[]> = { gate: [], bare: [], graphql: [] };
const armed: Record<Kind, { target: number; reached: number; timer: NodeJS.Timeout } | null> = { gate: null, bare: null, graphql: null };
let sample: string | null = null;

function onCounted(kind: Kind, s: Socket, counted: number, at: number): void {
  if (counted <= s.counted) return;
  s.counted = counted;
  s.arrivedAt = at;
  const round = armed[kind];
  if (round && counted >= round.target && ++round.reached === sockets[kind].length) {
    clearTimeout(round.timer);
    armed[kind] = null;
    send({ type: "arrived", kind, arrivals: sockets[kind].map((x) => x.arrivedAt) });
  }
}

function openGate(kind: "gate" | "graphql", url: string, token: string, planId: string, localAddress: string, query: string): Promise<void> {
  const ws = new WebSocket(`${url.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws", { localAddress, perMessageDeflate: false });
  const s: Socket = { counted: -1, arrivedAt: 0, ws };
  sockets[kind].push(s);
  return new Promise((resolve, reject) => {
    ws.on("open", () => ws.send(JSON.stringify({ type: "connection_init", payload: { authorization: `Bearer ${token}` } })));
    ws.on("error", reject);
    ws.on("close", (code, reason) => reject(new Error(`planGate socket closed: ${code} ${String(reason)}`)));
    ws.on("message", (data) => {
      const at = monotonicMs();
      const text = String(data);
      const message = JSON.parse(text) as { type: string };
      const counted = approvalsCounted(message);
      if (counted !== undefined) {
        if (kind === "gate") sample ??= text;
        if (s.counted < 0) resolve();
        onCounted(kind, s, counted, at);
      } else if (message.type === "connection_ack") {
        ws.send(JSON.stringify({ id: "1", type: "subscribe", payload: { query, variables: { planId } } }));
      } else if (message.type === "error" || message.type === "complete") {
        reject(new Error(`subscription ended: ${text}`));
      }
    });
  });
}

function openBare(url: string, localAddress: string): Promise<void> {
  const ws = new WebSocket(url, { localAddress, perMessageDeflate: false });
  const s: Socket = { counted: -1, arrivedAt: 0, ws };
  sockets.bare.push(s);
  return new Promise((resolve, reject) => {
    ws.on("open", () => resolve());
    ws.on("error", reject);
    ws.on("message", (data) => {
      const at = monotonicMs();
      const counted = approvalsCounted(JSON.parse(String(data)));
      if (counted !== undefined) onCounted("bare", s, counted, at);
    });
  });
}

async function openMany(count: number, open: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < count; i += BATCH) {
    await Promise.all(Array.from({ length: Math.min(BATCH, count - i) }, (_, j) => open(i + j)));
  }
}

process.on("message", (m: ToClient) => {
  void (async () => {
    try {
      if (m.type === "open-gate") {
        const start = monotonicMs();
        await openMany(m.count, (i) => openGate(m.kind, m.url, m.tokens[i % m.tokens.length]!, m.planId, m.localAddress, m.query));
        send({ type: "opened", kind: m.kind, count: sockets[m.kind].length, ms: monotonicMs() - start, sample: m.kind === "gate" ? sample : null });
      } else if (m.type === "open-bare") {
        const start = monotonicMs();
        await openMany(m.count, () => openBare(m.url, m.localAddress));
        send({ type: "opened", kind: "bare", count: sockets.bare.length, ms: monotonicMs() - start, sample: null });
      } else if (m.type === "arm") {
        const all = sockets[m.kind];
        const reached = all.filter((s) => s.counted >= m.target).length;
        const timer = setTimeout(() => {
          const round = armed[m.kind];
          send({ type: "failed", message: `${m.kind}: ${round?.reached ?? "?"} of ${all.length} sockets saw ${m.target} within ${ROUND_TIMEOUT_MS} ms` });
        }, ROUND_TIMEOUT_MS);
        armed[m.kind] = { target: m.target, reached, timer };
        send({ type: "armed", kind: m.kind });
      } else if (m.type === "drop") {
        for (const s of sockets[m.kind].splice(0)) s.ws.terminate();
        send({ type: "dropped", kind: m.kind });
      } else if (m.type === "close") {
        for (const s of Object.values(sockets).flat()) s.ws.terminate();
        process.exit(0);
      }
    } catch (error) {
      send({ type: "failed", message: (error as Error).message });
    }
  })();
});
process.on("disconnect", () => process.exit(0));
