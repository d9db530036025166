// The IPC messages between bench/subscribers.ts and its child processes (bench/fanout/*):
// the client processes holding the subscribers' sockets, the bare ws server, and the memory
// probe loaded into the Countersign server. Times are CLOCK_MONOTONIC milliseconds
// (`process.hrtime.bigint()`), which Linux shares across processes, so an arrival stamped in a
// client process is compared with a commit stamped in the bench process directly.

/** planGate subscriptions to Countersign, plain sockets to the bare ws server, the same subscriptions to bare graphql-ws. */
export const KINDS = ["gate", "bare", "graphql"] as const;
export type Kind = (typeof KINDS)[number];

export type ToClient =
  /** Open `count` planGate subscriptions (graphql-transport-ws, one socket each), tokens by i % tokens.length; `kind` "graphql" for bare graphql-ws. */
  | { type: "open-gate"; kind: "gate" | "graphql"; url: string; tokens: string[]; planId: string; count: number; localAddress: string; query: string }
  /** Open `count` plain WebSockets to the bare fan-out server. */
  | { type: "open-bare"; url: string; count: number; localAddress: string }
  /** Expect every socket of `kind` to see approvalsCounted ≥ target; answer `armed` now, `arrived` when all have. */
  | { type: "arm"; kind: Kind; target: number }
  /** Close the sockets of `kind`; answer `dropped`. */
  | { type: "drop"; kind: Kind }
  | { type: "close" };

export type FromClient =
  | { type: "opened"; kind: Kind; count: number; ms: number; sample: string | null }
  | { type: "armed"; kind: Kind }
  | { type: "dropped"; kind: Kind }
  /** Each socket's arrival time (monotonic ms) for the round just armed. */
  | { type: "arrived"; kind: Kind; arrivals: number[] }
  | { type: "failed"; message: string };

export type ToProbe = { type: "memory" } | { type: "snapshot"; path: string };
export type FromProbe = { type: "memory"; usage: NodeJS.MemoryUsage; fds: number } | { type: "snapshot"; path: string };

export type ToBare = ToProbe | { type: "payload"; template: string };
export type FromBare = FromProbe | { type: "listening"; port: number } | { type: "payload-set" };
/** The bare graphql-ws server (bench/fanout/bare-graphql-ws.ts). */
export type FromBareGraphql = { type: "listening"; port: number };

/** Monotonic milliseconds, comparable across processes on one Linux host. */
export const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** Where a planGate `next` message carries the number the rounds advance. */
export function approvalsCounted(message: unknown): number | undefined {
  const m = message as { type?: string; payload?: { data?: { planGate?: { evaluation?: { approvalsCounted?: number } } } } };
  return m.type === "next" ? m.payload?.data?.planGate?.evaluation?.approvalsCounted : undefined;
}
