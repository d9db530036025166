// `npm run cli -- admin …`: creates organizations, users and tokens directly in the
// configured database (DATABASE_URL, or the embedded one), for first runs and operators.
import { parseArgs } from "node:util";
import { loadConfig } from "../infra/config.js";
import { openDatabase, type Database } from "../infra/db.js";
import { migrate } from "../infra/migrate.js";
import { createOrganizationWithAdmin, createPersonalOrganization, findOrCreateUser, issueToken, slugify } from "../services/accounts.js";
import { reconcileSystemRoles, systemRoleId } from "../services/system-roles.js";
import { SYSTEM_ROLE_KEYS } from "../domain/catalog/index.js";
import { terminalSafe } from "./terminal.js";

export const ADMIN_USAGE = `countersign admin <command> [options]   (talks to the database directly)

  create-org   --name NAME --admin-email EMAIL [--admin-name NAME] [--slug SLUG] [--personal]
               a new organization; its first member is super admin; prints their token.
               --personal: a personal organization owned by that person instead (admin
               implicitly; no role assignments, group bindings or custom roles in it)
  create-user  --org SLUG --email EMAIL --name NAME [--role KEY] [--service-account]
               adds a member (a service account for a chatops bot); prints a token
  create-token --org SLUG --email EMAIL [--name NAME]
               a new token for an existing member`;

async function open(): Promise<Database> {
  const config = loadConfig();
  const db = await openDatabase(config.database);
  await migrate(db.sql);
  await reconcileSystemRoles(db.prisma);
  return db;
}

class UsageError extends Error {}

function need(values: Record<string, unknown>, ...keys: string[]) {
  for (const key of keys) if (typeof values[key] !== "string" || values[key] === "") throw new UsageError(`--${key} is required`);
}

async function orgBySlug(db: Database, slug: string) {
  const org = await db.prisma.organization.findUnique({ where: { slug } });
  if (!org || org.deletedAt) throw new UsageError(`No organization with slug ${slug}.`);
  return org;
}

export async function runAdmin(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      name: { type: "string" },
      slug: { type: "string" },
      org: { type: "string" },
      email: { type: "string" },
      role: { type: "string" },
      "admin-email": { type: "string" },
      "admin-name": { type: "string" },
      "service-account": { type: "boolean", default: false },
      personal: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
    },
    strict: true,
  });
  const print = (result: Record<string, unknown>) =>
    console.log(terminalSafe(values.json ? JSON.stringify(result) : Object.entries(result).map(([k, v]) => `${k}: ${v}`).join("\n")));
  try {
    if (command === "create-org") {
      need(values, "name", "admin-email");
      const db = await open();
      try {
        if (values.personal) {
          const { org, owner, token } = await createPersonalOrganization(db.prisma, {
            orgName: values.name!,
            slug: values.slug ?? slugify(values.name!),
            owner: { email: values["admin-email"]!, name: values["admin-name"] ?? values["admin-email"]! },
          });
          print({ organization: org.slug, personal: true, owner: owner.email, token });
          return 0;
        }
        const { org, user, token } = await createOrganizationWithAdmin(db.prisma, {
          orgName: values.name!,
          slug: values.slug,
          admin: { email: values["admin-email"]!, name: values["admin-name"] ?? values["admin-email"]! },
        });
        print({ organization: org.slug, admin: user.email, token });
      } finally {
        await db.close();
      }
      return 0;
    }
    if (command === "create-user") {
      need(values, "org", "email", "name");
      if (values.role && !SYSTEM_ROLE_KEYS.has(values.role)) throw new UsageError(`--role must be one of: ${[...SYSTEM_ROLE_KEYS].join(", ")}`);
      const db = await open();
      try {
        const org = await orgBySlug(db, values.org!);
        const result = await db.prisma.$transaction(async (tx) => {
          const user = await findOrCreateUser(tx, org.id, { email: values.email!, name: values.name!, isServiceAccount: values["service-account"] });
          await tx.membership.upsert({
            where: { orgId_userId: { orgId: org.id, userId: user.id } },
            create: { orgId: org.id, userId: user.id },
            update: { deactivatedAt: null },
          });
          if (values.role) {
            if (org.personal) throw new UsageError(`${org.slug} is a personal organization: it has no manual role assignments (its owner is admin implicitly).`);
            await tx.roleAssignment.upsert({
              where: { orgId_userId: { orgId: org.id, userId: user.id } },
              create: { orgId: org.id, userId: user.id, roleId: systemRoleId(values.role) },
              update: { roleId: systemRoleId(values.role) },
            });
          }
          const { token } = await issueToken(tx, { userId: user.id, orgId: org.id, name: "cli" });
          return { user, token };
        });
        print({ user: result.user.email, role: values.role ?? "(none)", token: result.token });
      } finally {
        await db.close();
      }
      return 0;
    }
    if (command === "create-token") {
      need(values, "org", "email");
      const db = await open();
      try {
        const org = await orgBySlug(db, values.org!);
        // The organization's member with this email (user rows belong to one organization).
        const user = await db.prisma.user.findFirst({ where: { email: values.email!, memberships: { some: { orgId: org.id } } } });
        const membership = user && (await db.prisma.membership.findUnique({ where: { orgId_userId: { orgId: org.id, userId: user.id } } }));
        if (!user || !membership) throw new UsageError(`${values.email} is not a member of ${org.slug}.`);
        const { token } = await issueToken(db.prisma, { userId: user.id, orgId: org.id, name: values.name ?? "cli" });
        print({ user: user.email, token });
      } finally {
        await db.close();
      }
      return 0;
    }
    throw new UsageError(command ? `Unknown admin command: ${command}` : "An admin command is required.");
  } catch (error) {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      console.error(terminalSafe(`${(error as Error).message}\n\n${ADMIN_USAGE}`));
      return 2;
    }
    console.error(terminalSafe(`error: ${(error as Error).message}`));
    return 1;
  }
}
