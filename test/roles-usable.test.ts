// The roles an organization can use are one rule in two forms side by side in
// src/services/roles.ts: usableRoleWhere (Prisma) and the statement of usableRoles (raw SQL, for
// the reads a list repeats). Both must pick the same roles, rows and order: the system roles and
// the organization's own live ones; never a deleted one, never another organization's.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { usableRoles, usableRoleWhere } from "../src/services/roles.js";
import { createOrg, type OrgFixture } from "./helpers/fixtures.js";
import { startTestApp, type TestApp } from "./helpers/harness.js";

let t: TestApp;
let org: OrgFixture;
const ids: Record<string, string> = {};
beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  const other = await createOrg(t.db);
  const make = async (orgId: string, key: string, deleted = false) =>
    (ids[key] = (await t.db.prisma.role.create({ data: { orgId, key, name: `Role ${key}`, ...(deleted ? { deletedAt: new Date() } : {}) } })).id);
  await make(org.orgId, "b-live");
  await make(org.orgId, "a-live");
  await make(org.orgId, "gone", true);
  await make(other.orgId, "elsewhere");
});
afterAll(() => t.close());

const byPrisma = (orgId: string, only?: string[]) =>
  t.db.prisma.role.findMany({ where: { ...usableRoleWhere(orgId), ...(only ? { id: { in: only } } : {}) }, orderBy: [{ name: "asc" }, { id: "asc" }] });

describe("usable roles, in Prisma's form and in SQL", () => {
  it("every usable role, the same rows in the same order", async () => {
    const prisma = await byPrisma(org.orgId);
    expect(prisma.some((r) => r.system)).toBe(true);
    expect(prisma.map((r) => r.id)).toEqual(expect.arrayContaining([ids["a-live"], ids["b-live"]]));
    expect(prisma.map((r) => r.id)).not.toContain(ids["gone"]);
    expect(prisma.map((r) => r.id)).not.toContain(ids["elsewhere"]);
    expect(await usableRoles(t.db.sql, org.orgId, null)).toEqual(prisma);
  });

  it("of given ids only: a deleted one and another organization's are left out by both", async () => {
    const asked = [ids["a-live"]!, ids["gone"]!, ids["elsewhere"]!];
    const prisma = await byPrisma(org.orgId, asked);
    expect(prisma.map((r) => r.id)).toEqual([ids["a-live"]]);
    expect(await usableRoles(t.db.sql, org.orgId, asked)).toEqual(prisma);
    expect(await usableRoles(t.db.sql, org.orgId, [])).toEqual([]);
  });
});
