import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { SqlRunner } from "./db.js";

export const MIGRATIONS_DIR = fileURLToPath(new URL("../../prisma/migrations/", import.meta.url));

/** Arbitrary, fixed: every Countersign process takes the same lock before migrating. */
const MIGRATION_LOCK_KEY = 0x436f756e74; // "Count"

export interface MigrationFile {
  name: string;
  sql: string;
  checksum: string;
}

export class MigrationChecksumError extends Error {
  constructor(readonly migration: string) {
    super(
      `Migration ${migration} was applied with different contents: its migration.sql changed after it ran. ` +
        `Restore the file, or add a new migration instead of editing an applied one.`,
    );
  }
}

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<MigrationFile[]> {
  const entries = (await readdir(dir, { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  return Promise.all(
    entries.map(async (name) => {
      const sql = await readFile(path.join(dir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    }),
  );
}

/**
 * Applies pending migrations in order, once each, each in its own transaction, under an
 * advisory lock so that several processes starting at once migrate exactly once.
 * Refuses (before applying anything) when an applied migration's file has changed.
 */
export async function migrate(sql: SqlRunner, dir = MIGRATIONS_DIR): Promise<{ applied: string[] }> {
  const files = await readMigrations(dir);
  return sql.withConnection(async (conn) => {
    await conn.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
    try {
      await conn.exec(`CREATE TABLE IF NOT EXISTS _countersign_migrations (
        name TEXT PRIMARY KEY,
        checksum TEXT NOT NULL,
        applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
      )`);
      const rows = await conn.query<{ name: string; checksum: string }>(
        "SELECT name, checksum FROM _countersign_migrations",
      );
      const applied = new Map(rows.map((r) => [r.name, r.checksum]));
      for (const file of files) {
        const checksum = applied.get(file.name);
        if (checksum !== undefined && checksum !== file.checksum) throw new MigrationChecksumError(file.name);
      }
      const done: string[] = [];
      for (const file of files) {
        if (applied.has(file.name)) continue;
        await conn.exec("BEGIN");
        try {
          await conn.exec(file.sql);
          await conn.query("INSERT INTO _countersign_migrations (name, checksum) VALUES ($1, $2)", [
            file.name,
            file.checksum,
          ]);
          await conn.exec("COMMIT");
        } catch (error) {
          await conn.exec("ROLLBACK");
          throw new Error(`Migration ${file.name} failed: ${(error as Error).message}`, { cause: error });
        }
        done.push(file.name);
      }
      return { applied: done };
    } finally {
      await conn.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]);
    }
  });
}
