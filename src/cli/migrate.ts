// npm run migrate — applies pending migrations to the configured database and exits.
import { mkdir } from "node:fs/promises";
import { loadConfig } from "../infra/config.js";
import { openDatabase } from "../infra/db.js";
import { migrate } from "../infra/migrate.js";
import { reconcileSystemRoles } from "../services/system-roles.js";

const config = loadConfig();
if (config.database.kind === "pglite") await mkdir(config.database.dataDir, { recursive: true });
const db = await openDatabase(config.database);
try {
  const { applied } = await migrate(db.sql);
  await reconcileSystemRoles(db.prisma);
  console.log(applied.length ? `applied ${applied.join(", ")}` : "the database is up to date");
} finally {
  await db.close();
}
