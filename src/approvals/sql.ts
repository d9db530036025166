import type { Database, SqlRunner } from "../infra/db.js";
import type { Tx } from "./workspaces.js";

/**
 * Raw SQL inside a Prisma interactive transaction, as a SqlRunner. Anything a transaction
 * reads must go through it: on PGlite the transaction holds the one connection, so a query on
 * db.sql from inside it would wait for the transaction forever.
 */
export function prismaTxRunner(ptx: Tx): SqlRunner {
  const runner: SqlRunner = {
    query: async <R>(text: string, params: unknown[] = []) => (await ptx.$queryRawUnsafe(text, ...params)) as R[],
    exec: async (script) => {
      await ptx.$executeRawUnsafe(script);
    },
    withConnection: (inner) => inner(runner),
  };
  return runner;
}

/**
 * A transaction as a SqlRunner, for the delivery worker's hot path. On PostgreSQL it is one
 * pooled connection between BEGIN and COMMIT — raw pg costs a fraction of a Prisma query here
 * (DESIGN.md, "Prisma on machines without the engine download") — and on the embedded PGlite,
 * whose single connection other callers share, a Prisma interactive transaction.
 */
export async function inTransaction<T>(db: Database, fn: (tx: SqlRunner) => Promise<T>): Promise<T> {
  if (db.kind === "pglite") {
    return db.prisma.$transaction(async (ptx) => fn(prismaTxRunner(ptx)), { maxWait: 10_000, timeout: 30_000 });
  }
  return db.sql.withConnection(async (conn) => {
    await conn.query("BEGIN");
    try {
      const result = await fn(conn);
      await conn.query("COMMIT");
      return result;
    } catch (error) {
      await conn.query("ROLLBACK").catch(() => {});
      throw error;
    }
  });
}
