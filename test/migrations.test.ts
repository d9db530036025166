import { mkdtemp, mkdir, writeFile, cp } from "node:fs/promises";
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgres, type Database } from "../src/infra/db.js";
import { migrate, MigrationChecksumError, readMigrations, MIGRATIONS_DIR } from "../src/infra/migrate.js";
import { diffSchemas, diffSchemasAsync, HAND_WRITTEN_MARKER, migrationNames, schemaPath } from "../scripts/migration-tools.js";
import { TEST_DATABASE_URL } from "./helpers/env.js";
import { newSchemaName } from "./helpers/harness.js";

describe("migrations", () => {
  it("the newest migration's schema snapshot matches prisma/schema.prisma", async () => {
    const names = await migrationNames();
    const newest = path.join(MIGRATIONS_DIR, names.at(-1)!, "schema.prisma");
    expect(diffSchemas(newest, schemaPath)).toContain("This is an empty migration");
  });

  // One test per migration, run concurrently: each diff is a Prisma CLI process with the WASM
  // schema engine (~12-18 s on a loaded 2-core machine), so a sequential loop grew past any
  // sensible timeout as migrations were added.
  const names = readdirSync(MIGRATIONS_DIR, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  it.concurrent.each(names.map((name, i) => [name, i] as const))("%s: its generated SQL is exactly Prisma's diff from the previous snapshot", async (name, i) => {
    const previous = i === 0 ? null : path.join(MIGRATIONS_DIR, names[i - 1]!, "schema.prisma");
    const sql = readFileSync(path.join(MIGRATIONS_DIR, name, "migration.sql"), "utf8");
    const generated = sql.split(HAND_WRITTEN_MARKER)[0]!.trimEnd();
    expect(generated, name).toBe((await diffSchemasAsync(previous, path.join(MIGRATIONS_DIR, name, "schema.prisma"))).trimEnd());
  }, 240_000);

  describe("the runner", () => {
    let db: Database;
    let schema: string;
    beforeAll(async () => {
      schema = newSchemaName();
      db = await openPostgres(TEST_DATABASE_URL, schema);
    });
    afterAll(async () => {
      await db.sql.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await db.close();
    });

    it("applies every migration once, in order, and a second run applies nothing", async () => {
      const all = (await readMigrations()).map((m) => m.name);
      expect((await migrate(db.sql)).applied).toEqual(all);
      expect((await migrate(db.sql)).applied).toEqual([]);
      const recorded = await db.sql.query<{ name: string }>("SELECT name FROM _countersign_migrations ORDER BY name");
      expect(recorded.map((r) => r.name)).toEqual(all);
    });

    it("several processes migrating at once apply each migration exactly once (advisory lock)", async () => {
      const other = newSchemaName();
      const dbs = await Promise.all([1, 2, 3].map(() => openPostgres(TEST_DATABASE_URL, other)));
      try {
        const results = await Promise.all(dbs.map((d) => migrate(d.sql)));
        const applied = results.flatMap((r) => r.applied);
        expect(applied.sort()).toEqual((await readMigrations()).map((m) => m.name).sort());
      } finally {
        await dbs[0]!.sql.query(`DROP SCHEMA IF EXISTS ${other} CASCADE`);
        await Promise.all(dbs.map((d) => d.close()));
      }
    });

    it("refuses to start when an applied migration's file changed, before applying anything", async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), "cs-migrations-"));
      await cp(MIGRATIONS_DIR, dir, { recursive: true });
      const first = (await readMigrations(dir))[0]!;
      await writeFile(path.join(dir, first.name, "migration.sql"), `${first.sql}\n-- edited after it ran\n`);
      await mkdir(path.join(dir, "99999999999999_later"));
      await writeFile(path.join(dir, "99999999999999_later", "migration.sql"), "CREATE TABLE should_not_exist (id int);");
      await expect(migrate(db.sql, dir)).rejects.toBeInstanceOf(MigrationChecksumError);
      const tables = await db.sql.query(`SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'should_not_exist'`, [schema]);
      expect(tables).toHaveLength(0);
    });

    it("a failing migration leaves nothing half-written: its transaction rolls back", async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), "cs-migrations-"));
      await cp(MIGRATIONS_DIR, dir, { recursive: true });
      await mkdir(path.join(dir, "99999999999999_broken"));
      await writeFile(
        path.join(dir, "99999999999999_broken", "migration.sql"),
        "CREATE TABLE half_written (id int); SELECT * FROM no_such_table;",
      );
      await expect(migrate(db.sql, dir)).rejects.toThrow(/99999999999999_broken failed/);
      const tables = await db.sql.query(`SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'half_written'`, [schema]);
      expect(tables).toHaveLength(0);
      const recorded = await db.sql.query(`SELECT 1 FROM _countersign_migrations WHERE name = '99999999999999_broken'`);
      expect(recorded).toHaveLength(0);
    });
  });
});
