import { createHash } from "node:crypto";
import pg from "pg";
import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "../generated/prisma/client.js";
import type { Config } from "./config.js";
import { openPgliteDataDir } from "./pglite.js";
import { inSpan, tracingActive } from "./tracing.js";
import type { PGlite } from "@electric-sql/pglite";

export type { PrismaClient };

/** Raw SQL beside Prisma: migrations, the list filters' range scans, the bench's baseline. */
export interface QueryOptions {
  /**
   * A statement on a hot path (the live gate's reads): prepared once per connection, named by a
   * hash of its text, so PostgreSQL parses and plans it once instead of on every call. Only
   * for fixed text with parameters; never for SQL assembled from input.
   */
  prepare?: boolean;
}

export interface SqlRunner {
  query<T = Record<string, unknown>>(text: string, params?: unknown[], options?: QueryOptions): Promise<T[]>;
  /** Runs a multi-statement script (a migration file). */
  exec(script: string): Promise<void>;
  /** Runs fn on one connection (advisory locks are per session). */
  withConnection<T>(fn: (conn: SqlRunner) => Promise<T>): Promise<T>;
}

export interface Database {
  kind: "postgres" | "pglite";
  prisma: PrismaClient;
  sql: SqlRunner;
  /** SQL statements sent so far on this database (Prisma's and raw): how tests prove no N+1. */
  statementCount(): number;
  /**
   * Of those, the ones Prisma Client sent (its model queries and its raw ones, each compiled by
   * its query compiler first): how tests prove a hot path sends none.
   */
  prismaStatementCount(): number;
  /** The connection pool's counts (PostgreSQL only), for /metrics. */
  poolStats?(): { total: number; idle: number; waiting: number };
  close(): Promise<void>;
}

export async function openDatabase(config: Config["database"]): Promise<Database> {
  return config.kind === "postgres" ? openPostgres(config.url, config.schema) : openPglite(config.dataDir);
}

const statementNames = new Map<string, string>();

/** A prepared statement's name: the same text gets the same name on every connection. */
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (!name) statementNames.set(text, (name = `cs_${createHash("sha1").update(text).digest("hex").slice(0, 24)}`));
  return name;
}

/** `sent.raw` counts the statements sent through the runner (the database's own driver, not Prisma). */
function pgRunner(client: pg.Pool | pg.PoolClient, sent: { raw: number }): SqlRunner {
  const runner: SqlRunner = {
    async query<T>(text: string, params?: unknown[], options?: QueryOptions) {
      sent.raw++;
      const values = params as unknown[] | undefined;
      const result = options?.prepare ? await client.query({ name: statementName(text), text, values }) : await client.query(text, values);
      return result.rows as T[];
    },
    async exec(script) {
      sent.raw++;
      await client.query(script);
    },
    async withConnection(fn) {
      if (!("connect" in client) || typeof (client as pg.Pool).totalCount !== "number") return fn(runner);
      const conn = await (client as pg.Pool).connect();
      try {
        return await fn(pgRunner(conn, sent));
      } finally {
        conn.release();
      }
    },
  };
  return runner;
}

/**
 * Raw SQL as spans when traces are on (Prisma's own queries have Prisma's spans): the statement's
 * text with its placeholders, never its parameters, and only inside a traced piece of work (an
 * operation, a delivery), so a worker's idle polling records nothing. Off, the runner as it is.
 */
function tracedSql(runner: SqlRunner, system: "postgresql"): SqlRunner {
  if (!tracingActive()) return runner;
  const span = (text: string) => ({ kind: "client" as const, requireParent: true, attributes: { "db.system.name": system, "db.query.text": text } });
  return {
    query: <T>(text: string, params?: unknown[], options?: QueryOptions) => inSpan(sqlSpanName(text), span(text), () => runner.query<T>(text, params, options)),
    // A script (a migration) is named, not recorded: it can be long.
    exec: (script) => inSpan("sql script", { kind: "client", requireParent: true, attributes: { "db.system.name": system } }, () => runner.exec(script)),
    withConnection: (fn) => runner.withConnection((conn) => fn(tracedSql(conn, system))),
  };
}

/** `sql SELECT`, `sql UPDATE`: the statement's first word. */
function sqlSpanName(text: string): string {
  const verb = /^\s*(\w+)/.exec(text)?.[1];
  return verb ? `sql ${verb.toUpperCase()}` : "sql";
}

export async function openPostgres(url: string, schema?: string): Promise<Database> {
  const pool = new pg.Pool({
    connectionString: url,
    max: 10,
    // Each test file runs in its own schema; search_path puts Prisma and raw SQL there.
    // Timestamps are stored without a zone; the session is pinned to UTC so raw SQL and
    // Prisma agree whatever the server's default.
    options: `-c timezone=UTC${schema ? ` -c search_path=${schema}` : ""}`,
  });
  // An idle connection the server closes (PostgreSQL stopped or restarted: 57P01) is dropped
  // from the pool and reported here; without a listener it would end the process. The next
  // query opens a new connection, or fails as unavailable (infra/faults.ts) while the server is down.
  pool.on("error", () => {});
  let statements = 0;
  const sent = { raw: 0 };
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      statements++;
      return query(...args);
    };
  });
  if (schema) {
    // IF NOT EXISTS still races when two processes create the same schema at once.
    await pool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`).catch(async (error: { code?: string }) => {
      if (error.code !== "23505" && error.code !== "42P06") throw error;
    });
  }
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool, schema ? { schema } : undefined) });
  return {
    kind: "postgres",
    prisma,
    sql: tracedSql(pgRunner(pool, sent), "postgresql"),
    statementCount: () => statements,
    prismaStatementCount: () => statements - sent.raw,
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    async close() {
      await prisma.$disconnect();
      await pool.end().catch(() => {});
    },
  };
}

export async function openPglite(dataDir: string): Promise<Database> {
  // The embedded default's directory may not exist yet on a fresh clone: filled from the
  // install-time snapshot when it matches the migrations (src/infra/pglite.ts).
  const { pglite } = await openPgliteDataDir(dataDir);
  return pgliteDatabase(pglite);
}

/** An open PGlite as a Database (Prisma through pglite-prisma-adapter, raw SQL beside it). */
export function pgliteDatabase(pglite: PGlite): Database {
  // pglite-prisma-adapter is typed against an older driver-adapter-utils; the runtime
  // contract is the same (test/embedded.test.ts runs the product on it end to end).
  const adapter = new PrismaPGlite(pglite) as unknown as PrismaPg;
  const prisma = new PrismaClient({ adapter });
  const runner: SqlRunner = {
    async query<T>(text: string, params?: unknown[]) {
      const result = await pglite.query<T>(text, params);
      return result.rows;
    },
    async exec(script) {
      await pglite.exec(script);
    },
    // PGlite is one connection: every caller already shares its session.
    withConnection: (fn) => fn(runner),
  };
  return {
    kind: "pglite",
    prisma,
    sql: tracedSql(runner, "postgresql"),
    statementCount: () => 0,
    prismaStatementCount: () => 0,
    async close() {
      await prisma.$disconnect();
      await pglite.close();
    },
  };
}

export type Tx = Parameters<Parameters<Database["prisma"]["$transaction"]>[0]>[0];

/** Transactions that wait on row locks (applyPlan, approvals, policy edits) get room to wait. */
export const LOCKING_TX_OPTIONS = { maxWait: 10_000, timeout: 30_000 } as const;

/** Raw SQL inside a Prisma interactive transaction, as a SqlRunner (one connection, one tx). */
export function txSql(tx: Tx): SqlRunner {
  const runner: SqlRunner = {
    query: async <T>(text: string, params: unknown[] = []) => (await tx.$queryRawUnsafe(text, ...params)) as T[],
    exec: async (script) => {
      await tx.$executeRawUnsafe(script);
    },
    withConnection: (fn) => fn(runner),
  };
  return runner;
}
