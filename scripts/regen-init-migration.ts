/**
 * npm run migration:regen-init — until the first release, the schema has one migration.
 * Rewrites its generated part from prisma/schema.prisma (keeping the hand-written part
 * below the marker) and its snapshot. After a release, use `npm run migration:new`.
 */
import { readFileSync, writeFileSync, copyFileSync } from "node:fs";
import path from "node:path";
import { diffSchemas, HAND_WRITTEN_MARKER, migrationNames, migrationsDir, schemaPath } from "./migration-tools.js";

const names = await migrationNames();
if (names.length !== 1) {
  console.error("There is more than one migration: add a new one with `npm run migration:new -- <name>`.");
  process.exit(1);
}
const dir = path.join(migrationsDir, names[0]!);
const file = path.join(dir, "migration.sql");
const handWritten = readFileSync(file, "utf8").split(HAND_WRITTEN_MARKER)[1] ?? "\n";
writeFileSync(file, `${diffSchemas(null, schemaPath).trimEnd()}\n\n${HAND_WRITTEN_MARKER}${handWritten}`);
copyFileSync(schemaPath, path.join(dir, "schema.prisma"));
console.log(`rewrote ${path.relative(process.cwd(), dir)}`);
