import type { Database, SqlRunner } from "../../infra/db.js";
import { LOCKING_TX_OPTIONS, txSql } from "../../infra/db.js";

/**
 * A transaction as a SqlRunner, for the delivery worker's hot path. On PostgreSQL it is one
 * pooled connection between BEGIN and COMMIT — raw pg costs a fraction of a Prisma query here
 * (DESIGN.md, "Prisma on machines without the engine download") — and on the embedded PGlite,
 * whose single connection other callers share, a Prisma interactive transaction.
 */
export async function inTransaction<T>(db: Database, fn: (tx: SqlRunner) => Promise<T>): Promise<T> {
  if (db.kind === "pglite") {
    // txSql: on PGlite the transaction holds the one connection, so its reads must go through it.
    return db.prisma.$transaction(async (ptx) => fn(txSql(ptx)), LOCKING_TX_OPTIONS);
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
