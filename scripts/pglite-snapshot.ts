// `npm install` (scripts/generate.mjs) runs this: the embedded default's migrated, empty
// database (migrations and the system roles, nothing of any organization), made through the
// server's own PGlite factory and migration runner, so a first `npm start` copies it instead of
// running initdb and every migration (src/infra/pglite.ts). Start-up still migrates and
// converges the roles on the copy, as on any database.
import v8 from "node:v8";
import { pgliteDatabase } from "../src/infra/db.js";
import { migrate } from "../src/infra/migrate.js";
import { writePgliteSnapshot } from "../src/infra/pglite.js";
import { reconcileSystemRoles } from "../src/services/system-roles.js";

// As in src/main.ts: the baseline compiler only, half the CPU of a start-up-sized run.
v8.setFlagsFromString("--liftoff-only");
const started = performance.now();
const key = await writePgliteSnapshot(async (pglite) => {
  const db = pgliteDatabase(pglite);
  await migrate(db.sql);
  await reconcileSystemRoles(db.prisma);
  await db.prisma.$disconnect();
});
console.log(`Made the embedded database snapshot (${key.slice(0, 12)}) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
