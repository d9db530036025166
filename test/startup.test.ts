import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { pgliteDatabase } from "../src/infra/db.js";
import { MIGRATIONS_DIR, migrate, readMigrations } from "../src/infra/migrate.js";
import { openPgliteDataDir, pgliteSnapshotKey, PGLITE_SNAPSHOT_DIR } from "../src/infra/pglite.js";
import { reconcileSystemRoles, systemRoleId } from "../src/services/system-roles.js";
// @ts-expect-error: a plain ES module script without types
import { bundlePath, currentBundle, sourceHash } from "../scripts/bundle.mjs";

/**
 * `npm start`'s two caches (docs/benchmarks.md, the startup module): the server bundle is named
 * by a hash of the sources, and the install-time PGlite snapshot is used only when its key
 * matches the migrations on disk.
 */
const root = path.resolve(import.meta.dirname, "..");
const scratch = await mkdtemp(path.join(os.tmpdir(), "countersign-startup-test-"));
afterAll(() => rm(scratch, { recursive: true, force: true }));

describe("the server bundle", () => {
  it("is named by a hash of the sources: a changed source file names another bundle", async () => {
    const { file } = await currentBundle();
    expect(file).toBe(bundlePath(sourceHash()));
    const probe = path.join(root, "src", `.startup-test-${process.pid}.txt`);
    await writeFile(probe, "a source change");
    try {
      expect(sourceHash()).not.toBe(path.basename(file).slice("main-".length, -".mjs".length));
    } finally {
      await rm(probe, { force: true });
    }
    expect(bundlePath(sourceHash())).toBe(file);
  });

  it("holds one graphql-js, as its ES modules, without the check for a second copy", async () => {
    const { file } = await currentBundle();
    const text = await readFile(file, "utf8");
    // esbuild heads each module it bundles with a comment naming its file.
    const graphqlModules = [...text.matchAll(/^\/\/ \S*node_modules\/graphql\/(\S+)$/gm)].map((m) => m[1]!);
    expect(graphqlModules.length).toBeGreaterThan(50);
    expect(graphqlModules.filter((name) => !name.endsWith(".mjs"))).toEqual([]);
    expect(graphqlModules.filter((name) => name === "jsutils/instanceOf.mjs")).toHaveLength(1);
    const start = text.search(/^\/\/ \S*node_modules\/graphql\/jsutils\/instanceOf\.mjs$/m);
    const instanceOfModule = text.slice(start, text.indexOf("\n// ", start + 1));
    expect(instanceOfModule).toContain("instanceof");
    expect(instanceOfModule).not.toContain("NODE_ENV");
  });
});

describe("the PGlite snapshot", () => {
  it("is keyed by every migration's checksum", async () => {
    const dir = path.join(scratch, "migrations");
    await cp(MIGRATIONS_DIR, dir, { recursive: true });
    const key = await pgliteSnapshotKey(dir);
    expect(key).toBe(await pgliteSnapshotKey());
    const last = (await readMigrations(dir)).at(-1)!;
    await writeFile(path.join(dir, last.name, "migration.sql"), `${last.sql}\n-- edited\n`);
    expect(await pgliteSnapshotKey(dir)).not.toBe(key);
  });

  it("fills a fresh folder with every migration applied, which the runner then verifies", async () => {
    expect((await readFile(path.join(PGLITE_SNAPSHOT_DIR, "key"), "utf8")).trim()).toBe(await pgliteSnapshotKey());
    const { pglite, fromSnapshot } = await openPgliteDataDir(path.join(scratch, "fresh", "pgdata"));
    const db = pgliteDatabase(pglite);
    try {
      expect(fromSnapshot).toBe(true);
      expect((await migrate(db.sql)).applied).toEqual([]);
      const rows = await db.sql.query<{ name: string; checksum: string }>("SELECT name, checksum FROM _countersign_migrations ORDER BY name");
      expect(rows).toEqual((await readMigrations()).map((m) => ({ name: m.name, checksum: m.checksum })));
      expect(await db.prisma.user.count()).toBe(0);
      // The system roles came converged; a drifted role row (not only its permissions) is
      // still seen by the one-read check and converged back.
      expect(await reconcileSystemRoles(db.prisma)).toEqual({ added: 0, removed: 0 });
      await db.prisma.role.update({ where: { id: systemRoleId("admin") }, data: { name: "Renamed" } });
      await reconcileSystemRoles(db.prisma);
      expect((await db.prisma.role.findUniqueOrThrow({ where: { id: systemRoleId("admin") } })).name).toBe("Admin");
    } finally {
      await db.close();
    }
  }, 120_000);

  it("is not used when its key differs: the folder is made from scratch", async () => {
    const stale = path.join(scratch, "stale-snapshot");
    await mkdir(path.join(stale, "pgdata"), { recursive: true });
    await writeFile(path.join(stale, "pgdata", "PG_VERSION"), "not a database\n");
    await writeFile(path.join(stale, "key"), "0".repeat(64));
    const { pglite, fromSnapshot } = await openPgliteDataDir(path.join(scratch, "scratch-made", "pgdata"), stale);
    try {
      expect(fromSnapshot).toBe(false);
      expect((await pglite.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_tables WHERE tablename = '_countersign_migrations'")).rows[0]!.n).toBe(0);
    } finally {
      await pglite.close();
    }
  }, 180_000);
});
