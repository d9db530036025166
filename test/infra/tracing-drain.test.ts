// The drain flushes traces: Countersign as a real child process (src/main.ts) exporting to a real
// OTLP/HTTP receiver, with a batch delay far longer than the test, answers an operation; nothing
// has been sent yet; SIGTERM; the process exits 0 and the operation's span has reached the receiver.

import { afterAll, beforeAll, expect, it } from "vitest";
import { openPostgres, type Database } from "../../src/infra/db.js";
import { migrate } from "../../src/infra/migrate.js";
import { reconcileSystemRoles } from "../../src/services/system-roles.js";
import { gql, startServer } from "../faults/harness.js";
import { TEST_DATABASE_URL } from "../helpers/env.js";
import { createOrg } from "../helpers/fixtures.js";
import { newSchemaName } from "../helpers/harness.js";
import { startOtlpReceiver, type OtlpReceiver } from "../helpers/otlp-receiver.js";

let otlp: OtlpReceiver;
let db: Database;
let schema: string;
let token: string;

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  schema = newSchemaName();
  db = await openPostgres(TEST_DATABASE_URL, schema);
  await migrate(db.sql);
  await reconcileSystemRoles(db.prisma);
  token = (await createOrg(db)).adminToken;
});
afterAll(async () => {
  await db?.sql.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
  await db?.close();
  await otlp?.close();
});

it("SIGTERM sends the spans still queued before the process exits", async () => {
  const server = await startServer({
    DATABASE_URL: TEST_DATABASE_URL,
    DATABASE_SCHEMA: schema,
    COUNTERSIGN_WORKERS: "none",
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    // Only the drain's flush can send them within this test.
    OTEL_BSP_SCHEDULE_DELAY: "600000",
  });
  try {
    const answer = await gql(server.base, token, "query Me { viewer { name } }");
    expect(answer.body.data.viewer.name).toBe("Admin");
    expect(otlp.spans.filter((s) => s.name === "query.Me")).toEqual([]);
    await server.kill("SIGTERM");
    expect(server.child.exitCode).toBe(0);
    const operation = otlp.spans.find((s) => s.name === "query.Me");
    expect(operation?.resource["service.name"]).toBe("countersign");
    expect(server.output()).toContain("exporting traces (OpenTelemetry)");
  } finally {
    await server.kill("SIGKILL");
  }
}, 180_000);
