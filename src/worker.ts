import { loadConfig } from "./infra/config.js";
import { openDatabase } from "./infra/db.js";
import { createEventBus } from "./infra/events.js";
import { logEscapedRejections } from "./infra/last-guard.js";
import { createLogger } from "./infra/logger.js";
import { migrate } from "./infra/migrate.js";
import { startTracing, stopTracing } from "./infra/tracing.js";
import { createWorkers } from "./workers/index.js";

/**
 * `npm run worker`: the background workers alone (approval-stream ingest, delivery and expiry,
 * and outbound webhook delivery),
 * for deployments that run several API processes with COUNTERSIGN_WORKERS=none behind a load
 * balancer on one PostgreSQL and one Redis. Workers coordinate through the consumer group and
 * the delivery leases, so more than one worker process is safe too.
 */
const config = loadConfig();
const logger = createLogger(config.logLevel).child({ process: "worker" });
logEscapedRejections(logger);

await startTracing(process.env, logger);
const db = await openDatabase(config.database);
await migrate(db.sql);
const events = createEventBus({ redisUrl: config.redisUrl, logger });
const workers = createWorkers({ config: { ...config, gatewayEmbedded: false }, db, events, logger });
workers.start();
const runtime = workers.approvals;
logger.info({ ingest: runtime.ingest !== null, delivery: runtime.delivery !== null }, "Countersign workers running");

let stopping = false;
async function stop(signal: string) {
  if (stopping) return;
  stopping = true;
  // A round in progress finishes; a shutdown that hangs still ends within 30 s, as the API's does.
  setTimeout(() => {
    logger.error({ signal }, "shutdown did not finish in time: exiting");
    process.exit(1);
  }, 29_500).unref();
  logger.info({ signal }, "worker shutting down");
  await workers.close();
  await events.close();
  await db.close();
  await stopTracing();
  process.exit(0);
}
process.on("SIGINT", () => void stop("SIGINT"));
process.on("SIGTERM", () => void stop("SIGTERM"));
