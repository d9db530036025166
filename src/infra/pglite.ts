import { createHash } from "node:crypto";
import { cpSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite, type PGliteOptions } from "@electric-sql/pglite";

/**
 * The embedded default's PostgreSQL (PGlite) in one place: the one factory the server, the
 * snapshot made at install time and the tests open it through, so an extension loaded here is
 * loaded everywhere (and is part of the snapshot's key).
 */
export const PGLITE_EXTENSIONS = {} satisfies NonNullable<PGliteOptions["extensions"]>;

export function createPglite(dataDir?: string, options: Omit<PGliteOptions, "extensions"> = {}): Promise<PGlite> {
  return PGlite.create(dataDir, { ...options, extensions: PGLITE_EXTENSIONS });
}

/**
 * The migrated, empty database, made once by `npm install` (scripts/pglite-snapshot.ts), so a
 * first start copies a data folder instead of running initdb and every migration from zero
 * (initdb alone is a second PGlite instance and most of a first start's CPU).
 *
 * It is keyed by what decides its contents: PGlite's version, the extensions above and every
 * migration's name and checksum. A snapshot whose key differs is never used (the first start
 * then runs initdb and the migrations itself); the migration runner still checks every applied
 * migration's checksum on the copy, as on any database.
 */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** migrate.ts's MIGRATIONS_DIR, restated: migrate.ts imports db.ts, which imports this file. */
const MIGRATIONS_DIR = path.join(ROOT, "prisma", "migrations");
export const PGLITE_SNAPSHOT_DIR = path.join(ROOT, "node_modules", ".cache", "countersign", "pglite-snapshot");
const SNAPSHOT_FORMAT = 1;

export async function pgliteSnapshotKey(migrationsDir = MIGRATIONS_DIR): Promise<string | null> {
  let pgliteVersion: string;
  try {
    pgliteVersion = (JSON.parse(await readFile(path.join(ROOT, "node_modules", "@electric-sql", "pglite", "package.json"), "utf8")) as { version: string }).version;
  } catch {
    return null; // not the usual layout: no snapshot, the slow path is still right
  }
  // Every migration folder's name and its migration.sql's sha256 (what the runner records).
  const names = (await readdir(migrationsDir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  const migrations = await Promise.all(
    names.map(async (name) => [name, createHash("sha256").update(await readFile(path.join(migrationsDir, name, "migration.sql"), "utf8")).digest("hex")]),
  );
  const described = JSON.stringify({ format: SNAPSHOT_FORMAT, pgliteVersion, extensions: Object.keys(PGLITE_EXTENSIONS).sort(), migrations });
  return createHash("sha256").update(described).digest("hex");
}

/**
 * Makes the snapshot: `prepare` migrates a fresh PGlite opened through createPglite; the folder
 * is written beside the final one and renamed into place with its key, so a reader never sees
 * half a snapshot.
 */
export async function writePgliteSnapshot(prepare: (pglite: PGlite) => Promise<void>, dir = PGLITE_SNAPSHOT_DIR): Promise<string> {
  const key = await pgliteSnapshotKey();
  if (!key) throw new Error("cannot key a PGlite snapshot: node_modules/@electric-sql/pglite/package.json is unreadable");
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  const pglite = await createPglite(path.join(tmp, "pgdata"));
  try {
    await prepare(pglite);
  } finally {
    await pglite.close();
  }
  await writeFile(path.join(tmp, "key"), `${key}\n`);
  await rm(dir, { recursive: true, force: true });
  await rename(tmp, dir);
  return key;
}

async function isEmptyOrMissing(dir: string): Promise<boolean> {
  try {
    return (await readdir(dir)).length === 0;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return true;
    throw error;
  }
}

/**
 * Opens the embedded database in dataDir. A missing or empty folder is filled from the
 * snapshot when its key matches the migrations on disk (copied beside it, then renamed in, so an
 * interrupted copy leaves no half database); anything else opens as it is (PGlite runs initdb
 * on an empty folder).
 */
export async function openPgliteDataDir(dataDir: string, snapshotDir = PGLITE_SNAPSHOT_DIR): Promise<{ pglite: PGlite; fromSnapshot: boolean }> {
  let fromSnapshot = false;
  if (await isEmptyOrMissing(dataDir)) {
    const [want, have] = await Promise.all([
      pgliteSnapshotKey(),
      readFile(path.join(snapshotDir, "key"), "utf8").then((k) => k.trim(), () => null),
    ]);
    if (want && have === want) {
      const tmp = `${dataDir}.tmp-${process.pid}`;
      await rm(tmp, { recursive: true, force: true });
      await mkdir(path.dirname(dataDir), { recursive: true });
      // Synchronous: ~1,200 small files copied on the thread pool cost three times the CPU
      // (and wait behind other work on a loaded machine); nothing else runs yet.
      cpSync(path.join(snapshotDir, "pgdata"), tmp, { recursive: true });
      await rename(tmp, dataDir); // replaces an empty folder (rename(2))
      fromSnapshot = true;
    }
  }
  await mkdir(dataDir, { recursive: true });
  return { pglite: await createPglite(dataDir), fromSnapshot };
}
