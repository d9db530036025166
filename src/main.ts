import { randomUUID } from "node:crypto";
import v8 from "node:v8";
import { createApp, prepareDatabase } from "./app.js";
import { EMBEDDED_TOOLS_PATH } from "./workers/runtime.js";
import { loadConfig } from "./infra/config.js";
import { openDatabase } from "./infra/db.js";
import { createEventBus } from "./infra/events.js";
import { withLocalSecrets } from "./infra/local-secrets.js";
import { createLogger } from "./infra/logger.js";

// The embedded default keeps its approval secret and gateway service token in the data folder.
const { config, generated } = await withLocalSecrets(loadConfig());
const logger = createLogger(config.logLevel);
if (generated.length > 0) logger.info({ files: generated }, "generated the embedded default's secrets (kept in the data folder, mode 0600)");
// The last guard: every route answers its own failures (500 with an error id, src/edge/http.ts)
// and every worker catches each round; a rejection that still escapes is logged, with an id, and
// does not end the process and everyone's requests with it (Node's default). A synchronous
// uncaught exception keeps Node's default: the process state is then unknown.
process.on("unhandledRejection", (reason) => {
  logger.error({ err: reason, errorId: randomUUID() }, "unhandled rejection");
});

// The embedded PostgreSQL is a 9 MB WebAssembly module: V8's optimizing tier recompiles every
// function start-up runs warm, which doubled start-up's CPU here while steady-state queries ran
// within a few percent on the baseline compiler (docs/benchmarks.md, start-up). Set before
// PGlite compiles; with DATABASE_URL nothing changes.
if (config.database.kind === "pglite") v8.setFlagsFromString("--liftoff-only");
const db = await openDatabase(config.database);
const events = createEventBus({ redisUrl: config.redisUrl, logger });
const prepared = await prepareDatabase(db, config, logger);
const app = createApp({ config, db, events, logger });
const port = await app.listen(config.port, config.host);

const base = `http://localhost:${port}`;
logger.info(
  { port, database: db.kind, eventBus: events.kind, migrationsApplied: prepared.migrations.length },
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

let stopping = false;
async function stop(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, "shutting down");
  await app.close();
  await events.close();
  await db.close();
  process.exit(0);
}
process.on("SIGINT", () => void stop("SIGINT"));
process.on("SIGTERM", () => void stop("SIGTERM"));
