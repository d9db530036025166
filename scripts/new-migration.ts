/**
 * npm run migration:new -- <name>
 *
 * Produces the next migration from the change to prisma/schema.prisma with Prisma's own
 * engine (`migrate diff` between the previous migration's schema snapshot and the current
 * schema; no database, no download). Each migration folder keeps the schema it was made
 * from, so test/migrations.test.ts can prove the newest one matches schema.prisma.
 * Hand-written SQL Prisma cannot express (CHECKs, partial indexes, collations) goes below
 * the HAND_WRITTEN marker and is kept by the checksum like the rest.
 */
import { mkdir, writeFile, copyFile } from "node:fs/promises";
import path from "node:path";
import { diffSchemas, latestSnapshot, HAND_WRITTEN_MARKER, migrationsDir, schemaPath } from "./migration-tools.js";

const name = process.argv[2];
if (!name || !/^[a-z0-9_]+$/.test(name)) {
  console.error("usage: npm run migration:new -- <snake_case_name>");
  process.exit(2);
}
const previous = await latestSnapshot();
const sql = diffSchemas(previous, schemaPath);
if (sql.includes("This is an empty migration")) {
  console.error("schema.prisma has no change since the newest migration.");
  process.exit(1);
}
const stamp = new Date().toISOString().replace(/[-:T]/g, "").slice(0, 14);
const dir = path.join(migrationsDir, `${stamp}_${name}`);
await mkdir(dir, { recursive: true });
await writeFile(path.join(dir, "migration.sql"), `${sql.trimEnd()}\n\n${HAND_WRITTEN_MARKER}\n`);
await copyFile(schemaPath, path.join(dir, "schema.prisma"));
console.log(`wrote ${path.relative(process.cwd(), dir)}`);
