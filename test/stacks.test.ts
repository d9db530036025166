import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./helpers/harness.js";
import { addMember, createOrg, like, type OrgFixture } from "./helpers/fixtures.js";

const CREATE = `mutation($input: CreateStackInput!) {
  createStack(input: $input) {
    __typename
    ... on MutationCreateStackSuccess { data { id name authzGroups } }
    ... on Error { code message }
    ... on PermissionDeniedError { missing { resourceType action matchValue } }
    ... on ValidationError { issues { field code } }
  }
}`;
const UPDATE = `mutation($input: UpdateStackInput!) {
  updateStack(input: $input) {
    __typename
    ... on MutationUpdateStackSuccess { data { id name authzGroups labels } }
    ... on Error { code message }
    ... on PermissionDeniedError { missing { resourceType action matchValue } }
  }
}`;
const LIST = `query($first: Int, $after: String) { stacks(first: $first, after: $after) { edges { cursor node { name } } pageInfo { hasNextPage endCursor } } }`;

let t: TestApp;
let org: OrgFixture;

async function seedStack(name: string, authzGroups: string[] = [], extra: Record<string, unknown> = {}) {
  return t.db.prisma.stack.create({
    data: {
      orgId: org.orgId,
      name,
      authzGroups,
      ...extra,
      groupMembers: { create: authzGroups.map((groupName) => ({ orgId: org.orgId, groupName, stackName: name })) },
    },
  });
}

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
});
afterAll(() => t.close());

describe("stacks", () => {
  it("an admin creates a stack with authz groups", async () => {
    const res = await t.gql(CREATE, { input: { name: "payments-api", authzGroups: ["team-payments", "env-prod"] } }, org.adminToken);
    expect(res.data.createStack.__typename).toBe("MutationCreateStackSuccess");
    expect(res.data.createStack.data.authzGroups).toEqual(["team-payments", "env-prod"]);
  });

  it("a permission (stack, create, team-a-*) constrains what names a user may create", async () => {
    const m = await addMember(t.db, org.orgId, { grants: [{ resourceType: "stack", action: "create", resourcePattern: like("team-a-*") }] });
    const ok = await t.gql(CREATE, { input: { name: "team-a-vpc" } }, m.token);
    expect(ok.data.createStack.__typename).toBe("MutationCreateStackSuccess");
    const denied = await t.gql(CREATE, { input: { name: "team-b-vpc" } }, m.token);
    expect(denied.data.createStack).toMatchObject({
      __typename: "PermissionDeniedError",
      missing: { resourceType: "stack", action: "create", matchValue: "team-b-vpc" },
    });
  });

  it("assigning a group at create requires (stack_authz_group, assign, <name>) on top of (stack, create)", async () => {
    const m = await addMember(t.db, org.orgId, { grants: [{ resourceType: "stack", action: "create" }] });
    const denied = await t.gql(CREATE, { input: { name: "grouped-1", authzGroups: ["env-prod"] } }, m.token);
    expect(denied.data.createStack.missing).toEqual({ resourceType: "stack_authz_group", action: "assign", matchValue: "env-prod" });
    expect(await t.db.prisma.stack.count({ where: { orgId: org.orgId, name: "grouped-1" } })).toBe(0);
    const m2 = await addMember(t.db, org.orgId, {
      grants: [
        { resourceType: "stack", action: "create" },
        { resourceType: "stack_authz_group", action: "assign", resourcePattern: like("env-*") },
      ],
    });
    const ok = await t.gql(CREATE, { input: { name: "grouped-2", authzGroups: ["env-prod"] } }, m2.token);
    expect(ok.data.createStack.__typename).toBe("MutationCreateStackSuccess");
  });

  it("(stack, update, team-a-*) plus a group-targeted deploy cannot label one's own stack into env-prod", async () => {
    const s = await seedStack("team-a-svc");
    const m = await addMember(t.db, org.orgId, {
      grants: [
        { resourceType: "stack", action: "read", resourcePattern: like("team-a-*") },
        { resourceType: "stack", action: "update", resourcePattern: like("team-a-*") },
        { resourceType: "stack", action: "deploy", authzGroup: "env-prod" },
      ],
    });
    const res = await t.gql(UPDATE, { input: { id: s.id, authzGroups: ["env-prod"], revision: 1 } }, m.token);
    expect(res.data.updateStack.missing).toEqual({ resourceType: "stack_authz_group", action: "assign", matchValue: "env-prod" });
    expect((await t.db.prisma.stack.findUniqueOrThrow({ where: { id: s.id } })).authzGroups).toEqual([]);
  });

  it("removing a group also requires (stack_authz_group, assign, <name>)", async () => {
    const s = await seedStack("team-a-remove", ["team-x"]);
    const m = await addMember(t.db, org.orgId, { grants: [{ resourceType: "stack", action: "*", resourcePattern: like("team-a-*") }] });
    const res = await t.gql(UPDATE, { input: { id: s.id, authzGroups: [], revision: 1 } }, m.token);
    expect(res.data.updateStack.missing.resourceType).toBe("stack_authz_group");
  });

  it("a rename re-checks update against the new name without groups", async () => {
    const s = await seedStack("grp-rename", ["team-r"]);
    const m = await addMember(t.db, org.orgId, {
      grants: [
        { resourceType: "stack", action: "read", authzGroup: "team-r" },
        { resourceType: "stack", action: "update", authzGroup: "team-r" },
      ],
    });
    const denied = await t.gql(UPDATE, { input: { id: s.id, name: "grp-renamed" } }, m.token);
    expect(denied.data.updateStack.missing).toEqual({ resourceType: "stack", action: "update", matchValue: "grp-renamed" });
    const desc = await t.gql(UPDATE, { input: { id: s.id, description: "fine" } }, m.token);
    expect(desc.data.updateStack.__typename).toBe("MutationUpdateStackSuccess");
  });

  it("changing a protected label key requires (label, update, <key>); free-form keys stay under (stack, update)", async () => {
    await t.gql(`mutation { setProtectedLabelKeys(keys: ["env"], revision: 1) { __typename } }`, {}, org.adminToken);
    const s = await seedStack("team-a-labels", [], { labels: { env: "dev", owner: "x" } });
    const m = await addMember(t.db, org.orgId, { grants: [{ resourceType: "stack", action: "*", resourcePattern: like("team-a-*") }] });
    const free = await t.gql(UPDATE, { input: { id: s.id, labels: { env: "dev", owner: "y" }, revision: 1 } }, m.token);
    expect(free.data.updateStack.__typename).toBe("MutationUpdateStackSuccess");
    const guarded = await t.gql(UPDATE, { input: { id: s.id, labels: { env: "prod", owner: "y" }, revision: 2 } }, m.token);
    expect(guarded.data.updateStack.missing).toEqual({ resourceType: "label", action: "update", matchValue: "env" });
    const m2 = await addMember(t.db, org.orgId, {
      grants: [
        { resourceType: "stack", action: "*", resourcePattern: like("team-a-*") },
        { resourceType: "label", action: "update", resourcePattern: "env" },
      ],
    });
    const ok = await t.gql(UPDATE, { input: { id: s.id, labels: { env: "prod" }, revision: 2 } }, m2.token);
    expect(ok.data.updateStack.data.labels).toEqual({ env: "prod" });
  });

  it("invalid input gets a ValidationError naming the field, and nothing is written", async () => {
    const groups = Array.from({ length: 21 }, (_, i) => `g${i}`);
    const res = await t.gql(CREATE, { input: { name: "too-many", authzGroups: groups } }, org.adminToken);
    expect(res.data.createStack.__typename).toBe("ValidationError");
    expect(res.data.createStack.issues[0].field).toBe("input.authzGroups");
    const bad = await t.gql(CREATE, { input: { name: "-bad name" } }, org.adminToken);
    expect(bad.data.createStack.issues[0].field).toBe("input.name");
    expect(await t.db.prisma.stack.count({ where: { name: { in: ["too-many", "-bad name"] } } })).toBe(0);
  });

  it("a duplicate name is a conflict", async () => {
    await seedStack("dup-stack");
    const res = await t.gql(CREATE, { input: { name: "dup-stack" } }, org.adminToken);
    expect(res.data.createStack.code).toBe("CONFLICT");
  });

  it("outputs are masked under read and unmasked under read_data", async () => {
    await seedStack("producer", [], { outputs: [{ name: "password", value: "s3cret", sensitive: true }, { name: "url", value: "u", sensitive: false }] });
    const reader = await addMember(t.db, org.orgId, { role: "stack-reader" });
    const q = `{ stacks(first: 100) { edges { node { name outputs { name masked value } } } } }`;
    const res = await t.gql(q, {}, reader.token);
    const producer = res.data.stacks.edges.find((e: any) => e.node.name === "producer").node;
    expect(producer.outputs).toEqual([
      { name: "password", masked: true, value: null },
      { name: "url", masked: false, value: "u" },
    ]);
    const consumer = await addMember(t.db, org.orgId, { grants: [{ resourceType: "stack", action: "read_data", resourcePattern: "producer" }] });
    const direct = await t.gql(`{ stackOutputs(stackName: "producer") { name value } }`, {}, consumer.token);
    expect(direct.data.stackOutputs).toEqual([{ name: "password", value: "s3cret" }, { name: "url", value: "u" }]);
    expect((await t.gql(`{ stackOutputs(stackName: "producer") { name } }`, {}, reader.token)).data.stackOutputs).toEqual([]);
  });

  it("a principal whose only stack grants target authz groups lists exactly the stacks carrying those groups", async () => {
    const other = await createOrg(t.db);
    for (const [name, groups] of [["g-list-1", ["only-here"]], ["g-list-2", ["only-here", "x"]], ["g-list-3", ["x"]]] as const) {
      await seedStack(name, [...groups]);
    }
    // The same group name in another org must not leak in.
    await t.db.prisma.stack.create({
      data: { orgId: other.orgId, name: "g-list-foreign", authzGroups: ["only-here"], groupMembers: { create: [{ orgId: other.orgId, groupName: "only-here", stackName: "g-list-foreign" }] } },
    });
    const m = await addMember(t.db, org.orgId, { grants: [{ resourceType: "stack", action: "read", authzGroup: "only-here" }] });
    const res = await t.gql(LIST, { first: 50 }, m.token);
    expect(res.data.stacks.edges.map((e: any) => e.node.name)).toEqual(["g-list-1", "g-list-2"]);
  });

  it("lists page by name with a cursor, and a grant union covers each arm once", async () => {
    for (const n of ["pg-a-1", "pg-a-2", "pg-a-3", "pg-b-1", "pg-exact"]) await seedStack(n, n === "pg-b-1" ? ["pgb"] : []);
    const m = await addMember(t.db, org.orgId, {
      grants: [
        { resourceType: "stack", action: "read", resourcePattern: like("pg-a-*") },
        { resourceType: "stack", action: "read", resourcePattern: like("pg-exact") },
        { resourceType: "stack", action: "read", authzGroup: "pgb" },
      ],
    });
    const first = await t.gql(LIST, { first: 2 }, m.token);
    expect(first.data.stacks.edges.map((e: any) => e.node.name)).toEqual(["pg-a-1", "pg-a-2"]);
    expect(first.data.stacks.pageInfo.hasNextPage).toBe(true);
    const second = await t.gql(LIST, { first: 10, after: first.data.stacks.pageInfo.endCursor }, m.token);
    expect(second.data.stacks.edges.map((e: any) => e.node.name)).toEqual(["pg-a-3", "pg-b-1", "pg-exact"]);
    expect(second.data.stacks.pageInfo.hasNextPage).toBe(false);
  });

  it("a stack of another organization is not found, never forbidden", async () => {
    const other = await createOrg(t.db);
    const foreign = await t.db.prisma.stack.create({ data: { orgId: other.orgId, name: "foreign" } });
    expect((await t.gql(`query($id: ID!) { stack(id: $id) { name } }`, { id: foreign.id }, org.adminToken)).data.stack).toBeNull();
    const res = await t.gql(UPDATE, { input: { id: foreign.id, description: "x" } }, org.adminToken);
    expect(res.data.updateStack.__typename).toBe("NotFoundError");
  });
});
