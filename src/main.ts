import v8 from "node:v8";
import { createApp, prepareDatabase } from "./app.js";
import { EMBEDDED_TOOLS_PATH } from "./workers/runtime.js";
import { loadConfig } from "./infra/config.js";
import { openDatabase } from "./infra/db.js";
import { createEventBus } from "./infra/events.js";
import { withLocalSecrets } from "./infra/local-secrets.js";
import { logEscapedRejections } from "./infra/last-guard.js";
import { createLogger } from "./infra/logger.js";
import { startTracing, stopTracing } from "./infra/tracing.js";

// The embedded default keeps its approval secret and gateway service token in the data folder.
const { config, generated } = await withLocalSecrets(loadConfig());
const logger = createLogger(config.logLevel);
if (generated.length > 0) logger.info({ files: generated }, "generated the embedded default's secrets (kept in the data folder, mode 0600)");
logEscapedRejections(logger);

// The embedded PostgreSQL is a 9 MB WebAssembly module: V8's optimizing tier recompiles every
// function start-up runs warm, which doubled start-up's CPU here while steady-state queries ran
// within a few percent on the baseline compiler (docs/benchmarks.md, start-up). Set before
// PGlite compiles; with DATABASE_URL nothing changes.
if (config.database.kind === "pglite") v8.setFlagsFromString("--liftoff-only");
// Traces (OTEL_EXPORTER_OTLP_ENDPOINT): started before the database and Redis are opened.
await startTracing(process.env, logger);
const db = await openDatabase(config.database);
const events = createEventBus({ redisUrl: config.redisUrl, logger });
const prepared = await prepareDatabase(db, config, logger);
const app = createApp({ config, db, events, logger });
const port = await app.listen(config.port, config.host);

const base = `http://localhost:${port}`;
logger.info(
  { port, database: db.kind, eventBus: events.kind, migrationsApplied: prepared.migrations.length, pid: process.pid },
  `Countersign is serving ${base}/graphql`,
);
if (prepared.demo) {
  const lines = prepared.demo.tokens.map((t) => `  ${t.name.padEnd(22)} ${t.role.padEnd(20)} ${t.token}`);
  const gateway = app.services.approvals.gateway && prepared.demo.agentKey ? `MCP gateway: ${base}${EMBEDDED_TOOLS_PATH}\nAgent key: ${prepared.demo.agentKey}\n\n` : "";
  process.stdout.write(
    `\nEmbedded demo organization "${prepared.demo.orgSlug}" created. Tokens (shown once):\n${lines.join("\n")}\n\n` +
      gateway +
      `Explorer:  ${base}/graphql  (header: {"Authorization": "Bearer <token>"})\n` +
      `Dashboard: ${base}/\n\n`,
  );
}

// Shutdown within SHUTDOWN_MS (docs/operations.md, Drain). SIGTERM (a deploy): /readyz answers
// 503 at once while the node keeps serving for COUNTERSIGN_DRAIN_UNREADY_MS, long enough for the
// balancer's health checks to take it out; then it stops accepting, closes WebSockets with 1001,
// lets in-flight requests finish (what is left when the time is up is cut), stops the workers
// (a round in progress finishes; held leases are released or expire) and exits 0.
// SIGINT (Ctrl-C at a terminal) skips the unready period.
const SHUTDOWN_MS = 30_000;
let stopping = false;
async function stop(signal: string) {
  if (stopping) return;
  stopping = true;
  const started = Date.now();
  // The last resort: a shutdown that hangs ends anyway, with a line saying so.
  setTimeout(() => {
    logger.error({ signal }, "shutdown did not finish in time: exiting");
    process.exit(1);
  }, SHUTDOWN_MS - 500).unref();
  const unreadyMs = signal === "SIGTERM" ? config.drainUnreadyMs : 0;
  app.drain();
  logger.info({ signal, unreadyMs }, "draining: /readyz answers 503, still serving");
  if (unreadyMs > 0) await new Promise((resolve) => setTimeout(resolve, unreadyMs));
  logger.info({ signal }, "shutting down: no new connections, finishing requests in flight");
  // What is left for requests in flight, keeping 5 s for the workers and the connections.
  await app.close({ requestsMs: Math.max(1_000, SHUTDOWN_MS - 5_000 - (Date.now() - started)) });
  await events.close();
  await db.close();
  await stopTracing();
  logger.info({ signal, ms: Date.now() - started }, "shut down");
  process.exit(0);
}
process.on("SIGINT", () => void stop("SIGINT"));
process.on("SIGTERM", () => void stop("SIGTERM"));
