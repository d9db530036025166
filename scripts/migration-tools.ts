import { execFile, execFileSync } from "node:child_process";
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
