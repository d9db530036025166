// The protocol's floor for bench/subscribers.ts's opening row: graphql-ws on a plain `ws` server
// in its own process, answering the same planGate subscription (connection_init, ack, subscribe,
// first message) from memory. Every connection is accepted and every subscription gets one
// constant message and then stays open: no token, no database, no gate. What a planGate
// subscription costs beyond it is Countersign's own (authentication, authorization, the status).

import { buildSchema } from "graphql";
import { useServer } from "graphql-ws/use/ws";
import { WebSocketServer } from "ws";
import type { FromBareGraphql } from "./protocol.js";

const send = (m: FromBareGraphql) => process.send?.(m);

const schema = buildSchema(`
  type Query { ok: Boolean }
  type Evaluation { approvalsCounted: Int! }
  type Gate { version: Float! evaluation: Evaluation! }
  type Subscription { planGate(planId: ID!): Gate! }
`);
const FIRST = { planGate: { version: 1, evaluation: { approvalsCounted: 0 } } };
/** One message, then open until the client completes or leaves (graphql-ws calls return()). */
function firstThenOpen(): AsyncIterableIterator<unknown> {
  let sent = false;
  let end: ((r: IteratorResult<unknown>) => void) | null = null;
  return {
    next: () => (sent ? new Promise((resolve) => (end = resolve)) : ((sent = true), Promise.resolve({ value: FIRST, done: false }))),
    return: () => (end?.({ value: undefined, done: true }), Promise.resolve({ value: undefined, done: true })),
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
schema.getSubscriptionType()!.getFields().planGate!.subscribe = firstThenOpen;

const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, path: "/graphql", perMessageDeflate: false });
useServer({ schema }, wss);
wss.on("listening", () => {
  const address = wss.address();
  send({ type: "listening", port: typeof address === "object" && address ? address.port : 0 });
});
process.on("disconnect", () => process.exit(0));
