// The bare baseline of bench/subscribers.ts: a plain `ws` server in its own process that, when
// its control socket sends a number, writes the planGate message Countersign sent (the template,
// set over IPC) with that number as approvalsCounted to every other socket: one
// JSON.stringify per round, then one send per socket. No GraphQL, no database, no evaluation.
// The memory probe answers over the same IPC channel.

import { WebSocketServer, type WebSocket } from "ws";
import "./probe.mjs";
import type { FromBare, ToBare } from "./protocol.js";

const send = (m: FromBare) => process.send?.(m);
let template: { payload: { data: { planGate: { evaluation: { approvalsCounted: number } } } } } | null = null;
let control: WebSocket | null = null;

const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, perMessageDeflate: false, clientTracking: true });
wss.on("connection", (socket, request) => {
  if (request.url === "/control") {
    control = socket;
    socket.on("message", (data) => {
      if (!template) return;
      template.payload.data.planGate.evaluation.approvalsCounted = Number(data);
      const payload = JSON.stringify(template);
      for (const client of wss.clients) if (client !== control) client.send(payload);
    });
  }
});
wss.on("listening", () => {
  const address = wss.address();
  send({ type: "listening", port: typeof address === "object" && address ? address.port : 0 });
});
process.on("message", (m: ToBare) => {
  if (m.type === "payload") {
    template = JSON.parse(m.template) as typeof template;
    send({ type: "payload-set" });
  }
});
process.on("disconnect", () => process.exit(0));
