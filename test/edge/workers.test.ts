import { Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/infra/config.js";
import { openPostgres } from "../../src/infra/db.js";
import { createEventBus } from "../../src/infra/events.js";
import { createLogger } from "../../src/infra/logger.js";
import { createWorkers } from "../../src/workers/index.js";
import { TEST_DATABASE_URL } from "../helpers/env.js";
import { APPROVAL_SECRET, SERVICE_TOKEN } from "./world.js";

/**
 * The background workers (approval ingest, delivery and expiry, webhook delivery, HCP run tasks) run in the API
 * process: a round that fails must be logged and retried at the next interval, never reach the
 * process. Here every round fails for real — the database pool is closed under them.
 */

const escaped: unknown[] = [];
const onEscape = (error: unknown) => escaped.push(error);
process.on("unhandledRejection", onEscape);
process.on("uncaughtException", onEscape);
afterAll(() => {
  process.off("unhandledRejection", onEscape);
  process.off("uncaughtException", onEscape);
});

describe("a worker round that throws is contained", () => {
  it("with the database gone, each worker logs each failed round and keeps its schedule; nothing reaches the process", async () => {
    const lines: Array<{ msg: string; level: number }> = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line) as { msg: string; level: number });
        done();
      },
    });
    const config = loadConfig({
      DATABASE_URL: TEST_DATABASE_URL,
      COUNTERSIGN_GATEWAY_EMBEDDED: "off",
      COUNTERSIGN_APPROVAL_SECRET: APPROVAL_SECRET,
      COUNTERSIGN_GATEWAY_SERVICE_TOKEN: SERVICE_TOKEN,
      COUNTERSIGN_GATEWAY_URL: "http://127.0.0.1:9/unused",
      COUNTERSIGN_INGEST_INTERVAL_MS: "40",
      COUNTERSIGN_DELIVERY_INTERVAL_MS: "40",
      COUNTERSIGN_WEBHOOK_INTERVAL_MS: "40",
      COUNTERSIGN_HCP_INTERVAL_MS: "40",
    });
    const db = await openPostgres(TEST_DATABASE_URL);
    await db.close();
    const events = createEventBus({});
    const workers = createWorkers({ config, db, events, logger: createLogger("error", sink) });
    workers.start();
    await new Promise((r) => setTimeout(r, 1_000));
    await workers.close();
    await events.close();
    const failed = (msg: string) => lines.filter((l) => l.msg === msg).length;
    expect(failed("approval ingest tick failed")).toBeGreaterThanOrEqual(3);
    expect(failed("delivery tick failed")).toBeGreaterThanOrEqual(3);
    expect(failed("webhook delivery tick failed")).toBeGreaterThanOrEqual(3);
    expect(failed("hcp run task tick failed")).toBeGreaterThanOrEqual(3);
    expect(escaped).toEqual([]);
  });
});
