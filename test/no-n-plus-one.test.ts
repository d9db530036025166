import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./helpers/harness.js";
import { addMember, createOrg } from "./helpers/fixtures.js";
import { WorkspacesDocument } from "../src/generated/graphql/graphql.js";

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

describe("the dashboard's workspace list", () => {
  /** An org of n workspaces, each with an active reservation, a released one and an open plan approved and withdrawn, by different people. */
  async function listOrg(n: number) {
    const org = await createOrg(t.db);
    const people: { userId: string }[] = [];
    for (let i = 0; i < 6; i++) people.push(await addMember(t.db, org.orgId, { role: "workspace-approver" }));
    const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: "s" } });
    const role = await t.db.prisma.role.create({ data: { orgId: org.orgId, key: "oncall", name: "On call" } });
    for (let i = 0; i < n; i++) {
      const w = await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: `w-${i}` } });
      const who = (k: number) => people[(i + k) % people.length]!.userId;
      await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: w.id, ...(i % 2 ? { holderRoleId: role.id } : { holderUserId: who(0) }), placedById: who(1) } });
      await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: w.id, holderUserId: who(2), placedById: who(2), releasedAt: new Date(), releasedById: who(3) } });
      const plan = await t.db.prisma.plan.create({ data: { orgId: org.orgId, workspaceId: w.id, submittedById: who(4), status: "planned" } });
      await t.db.prisma.approval.create({ data: { planId: plan.id, userId: who(5), withdrawnAt: new Date(), withdrawnById: who(5) } });
    }
    return org;
  }
  const LIST = WorkspacesDocument.toString();

  it("costs the same statements whatever its length, and reads people and workspaces once: not a statement per field naming a person", async () => {
    const count = async (n: number) => {
      const org = await listOrg(n);
      await t.gql(LIST, { first: 100, includeReleased: true }, org.adminToken);
      const before = t.db.statementCount();
      const res = await t.gql(LIST, { first: 100 }, org.adminToken);
      expect(res.errors).toBeUndefined();
      expect(res.data.workspaces.edges).toHaveLength(n);
      expect(res.data.workspaces.edges[0].node.openPlans[0].approvals[0].withdrawnBy.name).toBeTruthy();
      return t.db.statementCount() - before;
    };
    const few = await count(2);
    const many = await count(10);
    expect(many).toBe(few);
    // The token; the page's ids; the workspaces with their stacks, reservations (with role holders),
    // open plans and approvals; the people they name, once; the roles an admin may reserve for.
    expect(many).toBeLessThanOrEqual(11);
  });
});
