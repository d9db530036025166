// PostgreSQL stopped and started under open subscriptions (its own cluster, the server under test
// a child process): the socket stays open, a subscribe during the outage ends that operation only
// with a retryable error, HTTP answers 503 with Retry-After, readiness follows the database, and
// the subscription opened before the outage sees the truth after it.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "graphql-ws";
import { subscribe, wsClient } from "../gate/ws.js";
import { gql, readyz, startPostgresCluster, startServer, until, type PrivateCluster, type ServerProcess } from "./harness.js";
import { APPROVE_PLAN, PLAN_GATE, seedWorld, submitPlan, type FaultWorld, type GateMsg } from "./world.js";

let cluster: PrivateCluster;
let server: ServerProcess;
let w: FaultWorld;
const clients: Client[] = [];

beforeAll(async () => {
  cluster = await startPostgresCluster();
  w = await seedWorld(cluster.url);
  // No REDIS_URL: the in-process bus, so only PostgreSQL fails here.
  server = await startServer({ DATABASE_URL: cluster.url, COUNTERSIGN_UNAVAILABLE_RETRY_AFTER_S: "3" });
}, 180_000);

afterAll(async () => {
  for (const c of clients) await c.dispose();
  await server?.kill();
  await w?.db.close();
  await cluster?.destroy();
});

describe("PostgreSQL stopped and started under open subscriptions", () => {
  it("keeps the socket open, refuses only the operation that needs the database, answers 503 + Retry-After, and recovers", async () => {
    const planId = await submitPlan(server.base, w);
    const client = wsClient(server.base, w.adminToken);
    clients.push(client);
    const gate = subscribe<GateMsg>(client, PLAN_GATE, { planId }, (d) => d.planGate);
    const first = await gate.next();
    expect(first.evaluation.approvalsCounted).toBe(0);

    await cluster.stop();

    // A subscribe on the open socket: that operation ends with a retryable error.
    const during = subscribe<GateMsg>(client, PLAN_GATE, { planId }, (d) => d.planGate);
    await during.completed;
    const errors = during.errors[0] as { message: string; extensions?: Record<string, unknown> }[];
    expect(errors[0]!.extensions).toMatchObject({ code: "SERVICE_UNAVAILABLE", retryable: true, retryAfterSeconds: 3 });

    // HTTP: 503 with Retry-After, not 500 "Unexpected error".
    const http = await gql(server.base, w.adminToken, `{ viewer { id } }`);
    expect(http.status).toBe(503);
    expect(http.headers.get("retry-after")).toBe("3");
    expect(http.body.errors[0].extensions.code).toBe("SERVICE_UNAVAILABLE");
    expect(await readyz(server.base)).toBe(503);

    // The subscription opened before the outage is untouched.
    expect(gate.isCompleted()).toBe(false);
    expect(gate.errors).toEqual([]);

    await cluster.start();
    await until(async () => (await readyz(server.base)) === 200, 20_000, "ready after PostgreSQL is back");

    // The same socket carries the next change to the old subscription, and takes new ones.
    const approved = await gql(server.base, w.approverTokens[0]!, APPROVE_PLAN, { planId });
    expect(approved.body.data.approvePlan.__typename).toBe("MutationApprovePlanSuccess");
    const after = await gate.next((m) => m.evaluation.approvalsCounted === 1, 10_000);
    expect(after.version).toBeGreaterThan(first.version);
    const again = subscribe<GateMsg>(client, PLAN_GATE, { planId }, (d) => d.planGate);
    expect((await again.next()).evaluation.approvalsCounted).toBe(1);
    again.dispose();

    expect(server.alive()).toBe(true);
    expect(server.crashes()).toEqual([]);
  }, 120_000);
});
