// The server SIGKILLed in the middle of a burst of mutations (a child process on its own schema):
// after a restart, every mutation that was acknowledged is there and served.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_DATABASE_URL } from "../helpers/env.js";
import { newSchemaName } from "../helpers/harness.js";
import { gql, readyz, startServer, type ServerProcess } from "./harness.js";
import { SUBMIT, seedWorld, type FaultWorld } from "./world.js";

let server: ServerProcess | null = null;
let w: FaultWorld;
const schema = newSchemaName();
const env = { DATABASE_URL: TEST_DATABASE_URL, DATABASE_SCHEMA: schema };

beforeAll(async () => {
  w = await seedWorld(TEST_DATABASE_URL, schema);
  server = await startServer(env);
}, 180_000);

afterAll(async () => {
  await server?.kill();
  await w?.db.sql.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
  await w?.db.close();
});

describe("the server SIGKILLed mid-burst", () => {
  it("keeps every acknowledged mutation across the kill and a restart", async () => {
    const s = server!;
    const acknowledged: string[] = [];
    let sent = 0;
    let killed = false;
    const submitOne = async () => {
      sent++;
      try {
        const res = await gql(s.base, w.runnerToken, SUBMIT, {
          input: { workspaceId: w.workspaceId, changes: [{ address: `aws_s3_bucket.b${sent}`, action: "CREATE" }] },
        });
        const id = res.body?.data?.submitPlan?.data?.id;
        if (id) acknowledged.push(id);
      } catch {
        // the connection died with the process: not acknowledged
      }
    };
    // Four clients in a loop; the kill lands while requests are in flight.
    const workers = Array.from({ length: 4 }, async () => {
      while (!killed && sent < 400) await submitOne();
    });
    while (acknowledged.length < 12) await new Promise((r) => setTimeout(r, 20));
    killed = true;
    s.child.kill("SIGKILL");
    await Promise.all(workers);
    expect(acknowledged.length).toBeGreaterThanOrEqual(12);

    server = await startServer(env);
    expect(await readyz(server.base)).toBe(200);
    const stored = await w.db.prisma.plan.findMany({ where: { id: { in: acknowledged } }, select: { id: true } });
    expect(stored.map((p) => p.id).sort()).toEqual([...acknowledged].sort());
    const res = await gql(server.base, w.runnerToken, `query($planId: ID!) { gate(planId: $planId) { planId } }`, { planId: acknowledged.at(-1) });
    expect(res.body.data.gate.planId).toBe(acknowledged.at(-1));
  }, 120_000);
});
