import { randomBytes } from "node:crypto";
import { createApp, type App } from "../../src/app.js";
import { loadConfig, type Config } from "../../src/infra/config.js";
import { openPostgres, type Database } from "../../src/infra/db.js";
import { createEventBus, type EventBus } from "../../src/infra/events.js";
import { createLogger, type Logger } from "../../src/infra/logger.js";
import { migrate } from "../../src/infra/migrate.js";
import { reconcileSystemRoles } from "../../src/services/system-roles.js";
import { TEST_DATABASE_URL, TEST_REDIS_URL } from "./env.js";

export interface TestApp {
  app: App;
  db: Database;
  events: EventBus;
  config: Config;
  schemaName: string;
  /** Runs one operation through yoga.fetch, as a client would over HTTP. */
  gql<T = any>(query: string, variables?: Record<string, unknown>, token?: string | null): Promise<{ data: T; errors?: any[] }>;
  /** Listens on an ephemeral port; returns the base URL. */
  listen(): Promise<string>;
  /** Closes the app (`requestsMs`: the bound on in-flight requests, app.close's), then its Redis channels and schema. */
  close(options?: { requestsMs?: number }): Promise<void>;
}

/** `t_<unix seconds, base 36>_<random>`: the global setup drops only old ones. */
export function newSchemaName(): string {
  return `t_${Math.floor(Date.now() / 1000).toString(36)}_${randomBytes(5).toString("hex")}`;
}

/**
 * A real Countersign on the real PostgreSQL (a fresh schema of the `test` database, dropped
 * at close) and the real Redis (channels prefixed by the schema name, so files never cross).
 */
export async function startTestApp(
  options: { env?: Record<string, string>; schemaName?: string; migrateOnly?: boolean; logger?: Logger } = {},
): Promise<TestApp> {
  const schemaName = options.schemaName ?? newSchemaName();
  const config = loadConfig({
    DATABASE_URL: TEST_DATABASE_URL,
    DATABASE_SCHEMA: schemaName,
    REDIS_URL: TEST_REDIS_URL,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    COUNTERSIGN_WORKERS: "none",
    // Tests drive one token hard (1,000 subscriptions on one socket): limits are off unless a test sets them.
    COUNTERSIGN_RATE_LIMIT_RPS: "0",
    COUNTERSIGN_MAX_SUBSCRIPTIONS_PER_TOKEN: "0",
    // The shared limits' keys, apart per file (two apps on one schema share them, as two processes would).
    COUNTERSIGN_LIMITS_KEY_PREFIX: `limits:${schemaName}`,
    ...options.env,
  });
  const db = await openPostgres(TEST_DATABASE_URL, schemaName);
  await migrate(db.sql);
  await reconcileSystemRoles(db.prisma);
  const events = createEventBus({ redisUrl: TEST_REDIS_URL, channelPrefix: schemaName });
  const app = createApp({ config, db, events, logger: options.logger ?? createLogger(config.logLevel) });
  let listening = false;
  return {
    app,
    db,
    events,
    config,
    schemaName,
    async gql(query, variables, token) {
      const response = await app.yoga.fetch("http://localhost/graphql", {
        method: "POST",
        headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ query, variables }),
      });
      return (await response.json()) as never;
    },
    async listen() {
      const port = await app.listen(0, "127.0.0.1");
      listening = true;
      return `http://127.0.0.1:${port}`;
    },
    async close(options) {
      if (listening) await app.close(options);
      else await app.services.close();
      await events.close();
      await db.sql.query(`DROP SCHEMA IF EXISTS ${schemaName} CASCADE`).catch(() => {});
      await db.close();
    },
  };
}
