import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./helpers/harness.js";
import { addMember, createOrg } from "./helpers/fixtures.js";

/**
 * Lists cost a fixed number of SQL statements whatever their length: the same query over
 * an org with few rows and an org with many rows sends the same number of statements.
 */
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

async function orgWith(n: number) {
  const org = await createOrg(t.db);
  for (let i = 0; i < n; i++) {
    const m = await addMember(t.db, org.orgId, { grants: [{ resourceType: "stack", action: "read" }, { resourceType: "role", action: "read" }] });
    void m;
    await t.db.prisma.stack.create({
      data: {
        orgId: org.orgId,
        name: `s-${i}`,
        authzGroups: ["g"],
        outputs: [{ name: "o", value: i, sensitive: true }],
        groupMembers: { create: [{ orgId: org.orgId, groupName: "g", stackName: `s-${i}` }] },
      },
    });
    const source = await t.db.prisma.identitySource.create({ data: { orgId: org.orgId, name: `src-${i}` } });
    await t.db.prisma.identityGroupBinding.create({
      data: { orgId: org.orgId, identitySourceId: source.id, groupKey: "k", roles: { create: [{ roleId: "system:stack-reader" }] } },
    });
  }
  return org;
}

async function statementsFor(query: string, token: string) {
  // Warm up first: the token's lastUsedAt write and the pool opening connections happen once.
  await t.gql(query, {}, token);
  const before = t.db.statementCount();
  const res = await t.gql(query, {}, token);
  expect(res.errors).toBeUndefined();
  return t.db.statementCount() - before;
}

const QUERIES = {
  roles: `{ roles { key permissions { resourceType action } directMembers { name } } }`,
  members: `{ members { isSuperAdmin user { name email } role { key permissions { action } } } }`,
  stacks: `{ stacks(first: 100) { edges { node { name authzGroups outputs { name value } unmaskedOutputs { name } } } } }`,
  identitySources: `{ identitySources { name bindings { groupKey roles { key } } } }`,
};

describe("no N+1", () => {
  for (const [name, query] of Object.entries(QUERIES)) {
    it(`${name}: the statement count does not grow with the rows`, async () => {
      const small = await orgWith(2);
      const large = await orgWith(12);
      const few = await statementsFor(query, small.adminToken);
      const many = await statementsFor(query, large.adminToken);
      expect(few).toBeGreaterThan(0);
      expect(many).toBe(few);
    });
  }
});
