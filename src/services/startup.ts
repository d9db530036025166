import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import type { Logger } from "../infra/logger.js";
import { migrate } from "../infra/migrate.js";
import { createOrganizationWithAdmin } from "./accounts.js";
import { seedDemo, type DemoSeed } from "./demo.js";
import { reconcileSystemRoles } from "./system-roles.js";

/**
 * Everything start-up does to the database, in order: migrate, converge the system roles,
 * then, on an empty database, the bootstrap token's admin or (embedded default) the demo org.
 */
export async function prepareDatabase(db: Database, config: Config, logger: Logger) {
  const { applied } = await migrate(db.sql);
  const converged = await reconcileSystemRoles(db.prisma);
  if (converged.added || converged.removed) logger.info(converged, "system roles converged");
  let demo: DemoSeed | null = null;
  const empty = (await db.prisma.user.count()) === 0;
  if (empty && config.bootstrapToken) {
    await createOrganizationWithAdmin(db.prisma, {
      orgName: "Default organization",
      slug: "default",
      admin: { email: "admin@countersign.local", name: "Admin" },
      token: config.bootstrapToken,
    });
    logger.info("created the bootstrap admin holding COUNTERSIGN_BOOTSTRAP_TOKEN");
  } else if (empty && db.kind === "pglite" && config.seedDemo === "auto") {
    demo = await seedDemo(db.prisma);
  }
  return { migrations: applied, demo };
}
