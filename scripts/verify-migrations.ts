/**
 * npm run migration:verify
 *
 * Diffs every migration against Prisma's engine (the previous snapshot to its own) and, when every
 * one's generated SQL is exactly the diff, records their fingerprints and the Prisma version in
 * prisma/verified-migrations.json. test/migrations.test.ts then diffs only what is not recorded
 * (a new migration, one changed since, or all of them under another Prisma). Run it after adding a
 * migration or upgrading Prisma, and commit the file with the migration.
 */
import { writeFile } from "node:fs/promises";
import {
  diffSchemasAsync,
  generatedSql,
  installedPrismaVersion,
  migrationFingerprint,
  migrationNames,
  snapshotOf,
  verifiedManifestPath,
  type VerifiedManifest,
} from "./migration-tools.js";

const names = await migrationNames();
const mismatched: string[] = [];
// Two at a time: each diff is a Prisma process with the WASM schema engine.
let next = 0;
await Promise.all(
  [0, 1].map(async () => {
    for (let i = next++; i < names.length; i = next++) {
      const diff = await diffSchemasAsync(i === 0 ? null : snapshotOf(names[i - 1]!), snapshotOf(names[i]!));
      if (diff.trimEnd() !== generatedSql(names[i]!)) mismatched.push(names[i]!);
    }
  }),
);
if (mismatched.length > 0) {
  console.error(`not Prisma's diff from the previous snapshot: ${mismatched.sort().join(", ")}`);
  process.exit(1);
}
const manifest: VerifiedManifest = {
  prisma: installedPrismaVersion(),
  migrations: Object.fromEntries(names.map((name, i) => [name, migrationFingerprint(names, i)])),
};
await writeFile(verifiedManifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
console.log(`verified ${names.length} migrations under Prisma ${manifest.prisma}`);
