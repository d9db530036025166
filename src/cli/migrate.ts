// npm run migrate — applies pending migrations to the configured database and exits.
import { loadConfig } from "../infra/config.js";
import { openDatabase } from "../infra/db.js";
import { migrate } from "../infra/migrate.js";
import { reconcileSystemRoles } from "../services/system-roles.js";

const config = loadConfig();
const db = await openDatabase(config.database);
try {
  const { applied } = await migrate(db.sql);
  await reconcileSystemRoles(db.prisma);
  console.log(applied.length ? `applied ${applied.join(", ")}` : "the database is up to date");
} finally {
  await db.close();
}
