import { appendFile, cp, mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgres, type Database } from "../src/infra/db.js";
import { migrate, MigrationChecksumError, readMigrations, MIGRATIONS_DIR } from "../src/infra/migrate.js";
import {
  diffSchemas,
  diffSchemasAsync,
  generatedSql,
  installedPrismaVersion,
  migrationFingerprint,
  migrationNames,
  readVerifiedManifest,
  schemaPath,
  snapshotOf,
} from "../scripts/migration-tools.js";
import { TEST_DATABASE_URL } from "./helpers/env.js";
import { newSchemaName } from "./helpers/harness.js";

describe("migrations", () => {
  it("the newest migration's schema snapshot matches prisma/schema.prisma", async () => {
    const names = await migrationNames();
    const newest = path.join(MIGRATIONS_DIR, names.at(-1)!, "schema.prisma");
    expect(diffSchemas(newest, schemaPath)).toContain("This is an empty migration");
  });

  // One test per migration, run concurrently. Each diff is a Prisma CLI process with the WASM
  // schema engine (~4 s of CPU), so a migration `npm run migration:verify` recorded, unchanged
  // since and under the same Prisma, is not diffed again; a new or changed one always is.
  const names = readdirSync(MIGRATIONS_DIR, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  const verified = readVerifiedManifest();
  const samePrisma = verified.prisma === installedPrismaVersion();
  it.concurrent.each(names.map((name, i) => [name, i] as const))("%s: its generated SQL is exactly Prisma's diff from the previous snapshot", async (name, i) => {
    if (samePrisma && verified.migrations[name] === migrationFingerprint(names, i)) return;
    const previous = i === 0 ? null : snapshotOf(names[i - 1]!);
    expect(generatedSql(name), name).toBe((await diffSchemasAsync(previous, snapshotOf(name))).trimEnd());
  }, 240_000);

  it("a recorded fingerprint no longer matches when the SQL, the snapshot or the previous snapshot changes", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "cs-fingerprints-"));
    await cp(MIGRATIONS_DIR, dir, { recursive: true });
    const i = names.length - 1;
    const fingerprints = [migrationFingerprint(names, i, dir)];
    expect(fingerprints[0]).toBe(migrationFingerprint(names, i));
    const sql = path.join(dir, names[i]!, "migration.sql");
    await writeFile(sql, `-- changed\n${await readFile(sql, "utf8")}`);
    fingerprints.push(migrationFingerprint(names, i, dir));
    for (const snapshot of [path.join(dir, names[i]!, "schema.prisma"), path.join(dir, names[i - 1]!, "schema.prisma")]) {
      await appendFile(snapshot, "\n// changed\n");
      fingerprints.push(migrationFingerprint(names, i, dir));
    }
    expect(new Set(fingerprints).size).toBe(4);
    // Below the hand-written marker is not Prisma's diff: a change there is kept by the runtime checksum instead.
    await appendFile(sql, "\n-- hand-written\n");
    expect(migrationFingerprint(names, i, dir)).toBe(fingerprints[3]);
  });

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
