import { execFile, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { readdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

export const root = fileURLToPath(new URL("..", import.meta.url));
export const schemaPath = path.join(root, "prisma/schema.prisma");
export const migrationsDir = path.join(root, "prisma/migrations");
export const HAND_WRITTEN_MARKER = "-- countersign:hand-written (below: SQL Prisma's schema cannot express)";
const prismaCli = path.join(root, "node_modules/prisma/build/index.js");

export async function migrationNames(): Promise<string[]> {
  return (await readdir(migrationsDir, { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
}

/** The schema snapshot of the newest migration, or null when there is none. */
export async function latestSnapshot(): Promise<string | null> {
  const names = await migrationNames().catch(() => []);
  const last = names.at(-1);
  return last ? path.join(migrationsDir, last, "schema.prisma") : null;
}

const diffArgs = (from: string | null, to: string) => [
  prismaCli, "migrate", "diff", ...(from ? ["--from-schema-datamodel", from] : ["--from-empty"]), "--to-schema-datamodel", to, "--script",
];

/** SQL that takes a database from schema `from` (null: empty) to schema `to`, by Prisma's engine. */
export function diffSchemas(from: string | null, to: string): string {
  return execFileSync(process.execPath, diffArgs(from, to), { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** `diffSchemas` in a child process that does not block this one, so several diffs can overlap. */
export async function diffSchemasAsync(from: string | null, to: string): Promise<string> {
  const { stdout } = await execFileAsync(process.execPath, diffArgs(from, to), { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/**
 * Migrations whose SQL was checked against Prisma's diff (`npm run migration:verify`), each by a
 * fingerprint of what the diff depends on: the previous snapshot, its own snapshot and its
 * generated SQL. A recorded migration whose fingerprint still matches under the same Prisma needs
 * no new diff (one Prisma process each, the slowest part of the test run); any other is diffed.
 */
export const verifiedManifestPath = path.join(root, "prisma/verified-migrations.json");

export interface VerifiedManifest {
  prisma: string;
  migrations: Record<string, string>;
}

export const installedPrismaVersion = (): string =>
  (JSON.parse(readFileSync(path.join(root, "node_modules/prisma/package.json"), "utf8")) as { version: string }).version;

/** The SQL of a migration that Prisma generates (what is above the hand-written marker). */
export const generatedSql = (name: string, dir = migrationsDir): string =>
  readFileSync(path.join(dir, name, "migration.sql"), "utf8").split(HAND_WRITTEN_MARKER)[0]!.trimEnd();

export const snapshotOf = (name: string, dir = migrationsDir): string => path.join(dir, name, "schema.prisma");

/** What Prisma's diff for migration `names[i]` depends on, hashed. */
export function migrationFingerprint(names: readonly string[], i: number, dir = migrationsDir): string {
  const hash = createHash("sha256");
  hash.update(i === 0 ? "(empty)" : readFileSync(snapshotOf(names[i - 1]!, dir), "utf8")).update("\0");
  hash.update(readFileSync(snapshotOf(names[i]!, dir), "utf8")).update("\0");
  return hash.update(generatedSql(names[i]!, dir)).digest("hex");
}

export function readVerifiedManifest(): VerifiedManifest {
  try {
    return JSON.parse(readFileSync(verifiedManifestPath, "utf8")) as VerifiedManifest;
  } catch {
    return { prisma: "", migrations: {} };
  }
}
