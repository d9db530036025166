import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compilePrincipal, grantSatisfies, likeMatches, listScope, nameGrams, type ListScope } from "../src/domain/catalog/index.js";
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
    // Whichever gram of the pattern is walked (the rarest, or each pinned), the answer is the same.
    for (const gram of [undefined, 0, 1, 2, 3]) {
      const query = namePageQuery(c.target.resourceType as "stack" | "workspace" | "cloud_integration", org.orgId, scope, null, 50, { gram });
      const rows = query ? await t.db.sql.query<{ name: string }>(query.text, query.params) : [];
      expect(rows.map((r) => r.name).includes(name), `gram ${gram}`).toBe(c.expected);
    }
  });
});

describe("name patterns served from name_gram_entries", () => {
  const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

  it("the SQL name_trigrams computes exactly nameGrams", async () => {
    const names = ["", "a", "ab", "abc", "team-a-0004242", "svc-0000001", "café-1", "x-😀", "a\nb", "prod_backend", "100%", "aaaaaa"];
    const rows = await t.db.sql.query<{ grams: string[] }>(
      "SELECT ARRAY(SELECT name_trigrams(n)) AS grams FROM unnest($1::text[]) WITH ORDINALITY AS u(n, i) ORDER BY i",
      [names],
    );
    expect(rows.map((r) => [...r.grams].sort(byCodeUnit))).toEqual(names.map((n) => nameGrams(n).sort(byCodeUnit)));
  });

  /** The entries the table holds for an org, as `family name gram` lines. */
  async function entries(orgId: string): Promise<string[]> {
    const rows = await t.db.sql.query<{ family: string; name: string; gram: string }>(
      `SELECT family, name, gram FROM name_gram_entries WHERE "orgId" = $1`,
      [orgId],
    );
    return rows.map((r) => `${r.family} ${r.name} ${r.gram}`).sort(byCodeUnit);
  }
  const expectedEntries = (rows: [family: string, name: string][]) =>
    rows.flatMap(([family, name]) => nameGrams(name).map((g) => `${family} ${name} ${g}`)).sort(byCodeUnit);

  it("triggers keep the entries exact through inserts, renames, other updates and deletes, one row or many", async () => {
    const org = await createOrg(t.db);
    const other = await createOrg(t.db);
    const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: "pay-api" } });
    await t.db.sql.query(
      `INSERT INTO stacks (id, "orgId", name, "updatedAt") SELECT gen_random_uuid()::text, $1, n, now() FROM unnest($2::text[]) AS n`,
      [org.orgId, ["svc-1", "svc-2", "svc-3"]],
    );
    const ws = await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: "pay-api-prod" } });
    await t.db.prisma.cloudIntegration.create({
      data: { orgId: org.orgId, stackId: stack.id, name: "aws-main", provider: "aws", identity: "arn:aws:iam::123456789012:role/x" },
    });
    await t.db.prisma.stack.create({ data: { orgId: other.orgId, name: "pay-api" } });
    expect(await entries(org.orgId)).toEqual(
      expectedEntries([["stack", "pay-api"], ["stack", "svc-1"], ["stack", "svc-2"], ["stack", "svc-3"], ["workspace", "pay-api-prod"], ["cloud_integration", "aws-main"]]),
    );

    // A rename rewrites the entries; an update that keeps the name writes none.
    await t.db.prisma.stack.update({ where: { id: stack.id }, data: { name: "payments-api", description: "renamed" } });
    await t.db.prisma.workspace.update({ where: { id: ws.id }, data: { frozen: true } });
    // Two names renamed in one statement.
    await t.db.sql.query(
      `UPDATE stacks SET name = CASE name WHEN 'svc-3' THEN 'api-gw' ELSE 'svc-1b' END WHERE "orgId" = $1 AND name IN ('svc-1', 'svc-3')`,
      [org.orgId],
    );
    expect(await entries(org.orgId)).toEqual(
      expectedEntries([["stack", "payments-api"], ["stack", "svc-1b"], ["stack", "svc-2"], ["stack", "api-gw"], ["workspace", "pay-api-prod"], ["cloud_integration", "aws-main"]]),
    );
    await t.db.sql.query(`DELETE FROM stacks WHERE "orgId" = $1 AND name LIKE 'svc-%'`, [org.orgId]);
    await t.db.prisma.cloudIntegration.deleteMany({ where: { orgId: org.orgId } });
    expect(await entries(org.orgId)).toEqual(expectedEntries([["stack", "payments-api"], ["stack", "api-gw"], ["workspace", "pay-api-prod"]]));
    // The other organization's entries were never touched.
    expect(await entries(other.orgId)).toEqual(expectedEntries([["stack", "pay-api"]]));
  });

  /** Every page of a scope through namePageQuery, concatenated. */
  async function allPages(family: "stack" | "workspace", orgId: string, scope: ListScope, gram: number | undefined): Promise<string[]> {
    const out: string[] = [];
    let after: string | null = null;
    for (;;) {
      const query = namePageQuery(family, orgId, scope, after, 7, { gram });
      if (!query) return out;
      const rows = await t.db.sql.query<{ name: string }>(query.text, query.params);
      out.push(...rows.map((r) => r.name));
      if (rows.length < 7) return out;
      after = rows[rows.length - 1]!.name;
    }
  }

  it("pages through exactly the names the in-memory matcher accepts, whichever gram is walked, before and after ANALYZE", async () => {
    const org = await createOrg(t.db);
    // Names from a small alphabet so the patterns below reach many, few and none of them.
    const names: string[] = [];
    for (let i = 0; i < 400; i++) {
      const digits = String((i * 7919) % 100_000).padStart(5, "0");
      names.push(`${["team-a-", "team-b-", "svc-", "x_"][i % 4]}${digits}${i % 9 === 0 ? "-prod" : ""}`);
    }
    await t.db.sql.query(
      `INSERT INTO stacks (id, "orgId", name, "updatedAt") SELECT gen_random_uuid()::text, $1, n, now() FROM unnest($2::text[]) AS n`,
      [org.orgId, names],
    );
    const stack = await t.db.prisma.stack.findFirstOrThrow({ where: { orgId: org.orgId } });
    await t.db.sql.query(
      `INSERT INTO workspaces (id, "orgId", "stackId", name, "updatedAt") SELECT gen_random_uuid()::text, $1, $2, n, now() FROM unnest($3::text[]) AS n`,
      [org.orgId, stack.id, names],
    );
    const patterns = [
      "%-prod", "%000%", "%-00%", "team-a-%1", "%a-0%-prod", "%7_9%", "svc-%", "%\\_0%", "_eam-%", "%m-b-%9%9",
      "%b-1234%", "%d%", "x\\_%", "%00", "team%-prod", "%00042", "%-0%0%0%",
    ];
    const check = async () => {
      for (const family of ["stack", "workspace"] as const) {
        for (const pattern of patterns) {
          const principal = compilePrincipal({
            orgExists: true, orgDeleted: false, membershipActive: true, isSuperAdmin: false,
            grants: [{ resourceType: family, action: "read", resourcePattern: pattern, authzGroup: "" }],
          });
          const scope = listScope(principal, family, "read");
          const expected = names.filter((n) => likeMatches(n, pattern)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
          for (const gram of [0, 1, 2, 5]) expect(await allPages(family, org.orgId, scope, gram), `${family} ${pattern} gram ${gram}`).toEqual(expected);
          // The rarest gram by the statistics as they stand (or none) answers the same.
          expect(await allPages(family, org.orgId, scope, undefined), `${family} ${pattern}`).toEqual(expected);
        }
      }
    };
    await check();
    await t.db.sql.exec("ANALYZE name_gram_entries");
    await check();
  }, 120_000);
});
