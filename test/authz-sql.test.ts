import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compilePrincipal, grantSatisfies, listScope } from "../src/domain/catalog/index.js";
import { namePageQuery } from "../src/authz/list-filter.js";
import { AUTHZ_CASES } from "./domain/authz-cases.js";
import { startTestApp, type TestApp } from "./helpers/harness.js";
import { createOrg } from "./helpers/fixtures.js";

/**
 * The one table of cases (test/domain/authz-cases.ts) through the SQL side: the seed's
 * three conditions evaluated by PostgreSQL itself, and the list filter that serves pages.
 * The in-memory check runs the same table in test/domain/catalog.
 */
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const SEED_CONDITION_SQL = `SELECT
  ($1 = $5 OR $1 = '*') AND ($2 = $6 OR $2 = '*') AND (
    ($3 = '' AND $4 = '')
    OR ($3 <> '' AND $7::text IS NOT NULL AND $7::text LIKE $3 ESCAPE '\\')
    OR ($4 <> '' AND $4 = ANY($8::text[]))
  ) IS TRUE AS ok`;

describe("the shared authz case table, in SQL", () => {
  it.each(AUTHZ_CASES.map((c) => [c.name, c] as const))("PostgreSQL agrees: %s", async (_name, c) => {
    const [row] = await t.db.sql.query<{ ok: boolean }>(SEED_CONDITION_SQL, [
      c.grant.resourceType,
      c.grant.action,
      c.grant.resourcePattern,
      c.grant.authzGroup,
      c.target.resourceType,
      c.target.action,
      c.target.matchValue,
      c.target.groups,
    ]);
    expect(row!.ok).toBe(c.expected);
    expect(grantSatisfies(c.grant, c.target)).toBe(c.expected);
  });

  const listable = AUTHZ_CASES.filter(
    (c) =>
      (c.target.resourceType === "stack" || c.target.resourceType === "workspace" || c.target.resourceType === "cloud_integration") &&
      c.target.matchValue !== null,
  );

  it.each(listable.map((c) => [c.name, c] as const))("the list filter agrees: %s", async (_name, c) => {
    const org = await createOrg(t.db);
    const name = c.target.matchValue!;
    const groups = [...(c.target.groups ?? [])];
    const stack = await t.db.prisma.stack.create({
      data: {
        orgId: org.orgId,
        name: c.target.resourceType === "stack" ? name : "the-stack",
        authzGroups: groups,
        groupMembers: {
          create: groups.map((g) => ({ orgId: org.orgId, groupName: g, stackName: c.target.resourceType === "stack" ? name : "the-stack" })),
        },
      },
    });
    if (c.target.resourceType === "workspace") {
      await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name } });
    }
    if (c.target.resourceType === "cloud_integration") {
      // A cloud integration passes its stack's groups (seed 004).
      await t.db.prisma.cloudIntegration.create({
        data: { orgId: org.orgId, stackId: stack.id, name, provider: "aws", identity: "arn:aws:iam::123456789012:role/case" },
      });
    }
    const principal = compilePrincipal({ orgExists: true, orgDeleted: false, membershipActive: true, isSuperAdmin: false, grants: [c.grant] });
    const scope = listScope(principal, c.target.resourceType, c.target.action);
    const query = namePageQuery(c.target.resourceType as "stack" | "workspace" | "cloud_integration", org.orgId, scope, null, 50);
    const rows = query ? await t.db.sql.query<{ name: string }>(query.text, query.params) : [];
    expect(rows.map((r) => r.name).includes(name)).toBe(c.expected);
  });
});
