// Workspaces: CRUD under the workspace family, the baseline, archiving, the SQL-filtered list —
// and the workspace page, the plan page and the workspace list each in one query whose SQL
// statement count does not grow with the rows (who each workspace is reserved for and who
// placed it included).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, like, type OrgFixture } from "../helpers/fixtures.js";
import { ERROR_FIELDS, PLAN, READ, memberOf, ops, person, role, seedStack, seedWorkspace, uniq } from "./helpers.js";

let t: TestApp;
let org: OrgFixture;
let o: ReturnType<typeof ops>;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  o = ops(t);
});
afterAll(() => t.close());

/** Counts every SQL statement (Prisma's and raw) the app's database sends while fn runs. */
async function countStatements(fn: () => Promise<unknown>): Promise<number> {
  const before = t.db.statementCount();
  await fn();
  return t.db.statementCount() - before;
}

const RESERVATION_FIELDS = `reservations { id holderKind holderUser { id name } holderRole { id name } placedBy { id name } placedAt }`;
const LIST = `query($stackId: ID) { workspaces(first: 100, stackId: $stackId) { edges { node { id name requiredApprovals
  viewerCanApprove viewerCanReserveForSelf reservableRoles { id name } ${RESERVATION_FIELDS} openPlans { id approvals { user { name } } } } } pageInfo { hasNextPage } } }`;
const PAGE = `query($id: ID!) { workspace(id: $id) { id name stack { name } ${RESERVATION_FIELDS} openPlans { id status approvals { user { name } } } } }`;
const PLAN_PAGE = `query($id: ID!) { plan(id: $id) { id status submittedBy { name } changeCount changes { address action }
  approvals { approvedAt user { id name } } workspace { name ${RESERVATION_FIELDS} } } }`;

/** A stack with n workspaces, each reserved for a person and for a role, each with a plan approved twice. */
async function populate(n: number) {
  const stack = await seedStack(t, org.orgId);
  const devops = await role(t, org.orgId, "DevOps");
  const runner = await person(t, org.orgId, "runner", [READ, PLAN]);
  const plans: string[] = [];
  const workspaces: string[] = [];
  for (let i = 0; i < n; i++) {
    const w = await seedWorkspace(t, org.orgId, stack.id, 1);
    workspaces.push(w.id);
    const holder = await memberOf(t, org.orgId, devops.id, `holder${i}`);
    await t.db.prisma.reservation.createMany({
      data: [
        { orgId: org.orgId, workspaceId: w.id, holderUserId: holder.userId, placedById: org.adminId },
        { orgId: org.orgId, workspaceId: w.id, holderRoleId: devops.id, placedById: holder.userId },
      ],
    });
    const plan = await o.submit(runner.token, w.id, [{ address: `aws_s3_bucket.b${i}`, action: "CREATE" }, { address: `aws_s3_bucket.c${i}`, action: "UPDATE" }]);
    await o.approve(org.adminToken, plan.id);
    await o.approve(holder.token, plan.id);
    plans.push(plan.id);
  }
  return { stackId: stack.id, workspaces, plans };
}

describe("one query each, no N+1", () => {
  it("the workspace list shows who each workspace is reserved for and who placed it, in a statement count that does not grow with rows", async () => {
    const small = await populate(1);
    const large = await populate(6);
    await t.gql(LIST, { stackId: small.stackId }, org.adminToken); // warm: token last-use write, plan caches
    let smallResult: any;
    let largeResult: any;
    const few = await countStatements(async () => (smallResult = await t.gql(LIST, { stackId: small.stackId }, org.adminToken)));
    const many = await countStatements(async () => (largeResult = await t.gql(LIST, { stackId: large.stackId }, org.adminToken)));
    expect(smallResult.errors).toBeUndefined();
    expect(largeResult.data.workspaces.edges).toHaveLength(6);
    const node = largeResult.data.workspaces.edges[0].node;
    expect(node.reservations).toHaveLength(2);
    expect(node.reservations[0].placedBy.name).toBeTruthy();
    expect(many).toBe(few);
    expect(few).toBeGreaterThan(3);
    // 17 since each type carries its own read rule: the reservations' and plans' workspaces (name and
    // stack groups, what (workspace, read) needs) come with the list, one statement for all rows.
    expect(few).toBeLessThanOrEqual(17);
  });

  it("the workspace page, one query whatever the reservations and plans", async () => {
    const small = await populate(1);
    const w = small.workspaces[0]!;
    await t.gql(PAGE, { id: w }, org.adminToken);
    const before = await countStatements(() => t.gql(PAGE, { id: w }, org.adminToken));
    // Three more reservations and three more approvals.
    const more = await Promise.all([1, 2, 3].map((i) => person(t, org.orgId, `extra${i}`)));
    for (const p of more) {
      await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: w, holderUserId: p.userId, placedById: p.userId } });
      await o.approve(p.token, small.plans[0]!);
    }
    // The new people moved the authz epoch: the first request after reloads the kept principal
    // (one statement, whatever the rows); count the one after it, as `before` was.
    await t.gql(PAGE, { id: w }, org.adminToken);
    let page: any;
    const after = await countStatements(async () => (page = await t.gql(PAGE, { id: w }, org.adminToken)));
    expect(page.data.workspace.reservations).toHaveLength(5);
    expect(page.data.workspace.openPlans[0].approvals).toHaveLength(5);
    expect(before).toBeGreaterThan(2);
    expect(after).toBe(before);
  });

  it("the plan page, one query whatever the changes, approvals and reservations", async () => {
    const { plans } = await populate(2);
    await t.gql(PLAN_PAGE, { id: plans[0] }, org.adminToken);
    const one = await countStatements(() => t.gql(PLAN_PAGE, { id: plans[0] }, org.adminToken));
    const extra = await Promise.all([1, 2, 3, 4].map((i) => person(t, org.orgId, `late${i}`)));
    for (const p of extra) await o.approve(p.token, plans[1]!);
    // As above: the first request after the new people reloads the kept principal.
    await t.gql(PLAN_PAGE, { id: plans[1] }, org.adminToken);
    let page: any;
    const other = await countStatements(async () => (page = await t.gql(PLAN_PAGE, { id: plans[1] }, org.adminToken)));
    expect(page.data.plan.approvals).toHaveLength(6);
    expect(page.data.plan.workspace.reservations.find((r: any) => r.holderKind === "ROLE").holderRole.name).toBeTruthy();
    expect(one).toBeGreaterThan(2);
    expect(other).toBe(one);
  });
});

describe("workspaces", () => {
  const CREATE = `mutation($input: CreateWorkspaceInput!) { createWorkspace(input: $input) { __typename ... on MutationCreateWorkspaceSuccess { data { id name environment requiredApprovals } } ${ERROR_FIELDS} } }`;
  const UPDATE = `mutation($input: UpdateWorkspaceInput!) { updateWorkspace(input: $input) { __typename ... on MutationUpdateWorkspaceSuccess { data { requiredApprovals } } ${ERROR_FIELDS} } }`;

  it("the baseline defaults to 0; create needs (workspace, create, <name>) with the stack's groups", async () => {
    const stack = await seedStack(t, org.orgId, ["team-pay"]);
    const res = await t.gql(CREATE, { input: { stackId: stack.id, name: uniq("pay") } }, org.adminToken);
    expect(res.data.createWorkspace.data).toMatchObject({ environment: "dev", requiredApprovals: 0 });
    const scoped = await person(t, org.orgId, "scoped", [
      { resourceType: "stack", action: "read", authzGroup: "team-pay" },
      { resourceType: "workspace", action: "create", resourcePattern: like("pay-*") },
    ]);
    const denied = await t.gql(CREATE, { input: { stackId: stack.id, name: "ops-x" } }, scoped.token);
    expect(denied.data.createWorkspace).toMatchObject({ __typename: "PermissionDeniedError", missing: { action: "create", matchValue: "ops-x" } });
    expect((await t.gql(CREATE, { input: { stackId: stack.id, name: uniq("pay") } }, scoped.token)).data.createWorkspace.__typename).toBe("MutationCreateWorkspaceSuccess");
    const dup = await t.gql(CREATE, { input: { stackId: stack.id, name: res.data.createWorkspace.data.name } }, org.adminToken);
    expect(dup.data.createWorkspace.__typename).toBe("ConflictError");
    const bad = await t.gql(CREATE, { input: { stackId: stack.id, name: "x", requiredApprovals: -1 } }, org.adminToken);
    expect(bad.data.createWorkspace.issues[0].field).toBe("input.requiredApprovals");
  });

  it("editing the baseline needs (workspace, update) and publishes a gate change", async () => {
    const stack = await seedStack(t, org.orgId);
    const w = await seedWorkspace(t, org.orgId, stack.id, 0);
    const reader = await person(t, org.orgId, "reader", [READ]);
    expect((await t.gql(UPDATE, { input: { id: w.id, requiredApprovals: 2 } }, reader.token)).data.updateWorkspace.missing).toMatchObject({ action: "update" });
    const seen: string[][] = [];
    const it = t.events.subscribe("gate:changed");
    const pump = (async () => {
      for await (const e of it) if (e.orgId === org.orgId) seen.push(e.workspaceIds);
    })();
    await new Promise((r) => setTimeout(r, 100));
    expect((await t.gql(UPDATE, { input: { id: w.id, requiredApprovals: 2 } }, org.adminToken)).data.updateWorkspace.data.requiredApprovals).toBe(2);
    await new Promise((r) => setTimeout(r, 150));
    await it.return?.(undefined);
    await pump;
    expect(seen).toEqual([[w.id]]);
  });

  it("workspaces are archived, never deleted, and the list hides archived ones unless asked", async () => {
    const stack = await seedStack(t, org.orgId);
    const [a, b] = await Promise.all([seedWorkspace(t, org.orgId, stack.id), seedWorkspace(t, org.orgId, stack.id)]);
    await t.gql(`mutation($id: ID!) { archiveWorkspace(id: $id) { __typename } }`, { id: a.id }, org.adminToken);
    const list = await t.gql(LIST, { stackId: stack.id }, org.adminToken);
    expect(list.data.workspaces.edges.map((e: any) => e.node.id)).toEqual([b.id]);
    const all = await t.gql(`query($s: ID) { workspaces(stackId: $s, includeArchived: true) { edges { node { id archived } } } }`, { s: stack.id }, org.adminToken);
    expect(all.data.workspaces.edges).toHaveLength(2);
    expect(await t.db.prisma.workspace.count({ where: { id: a.id } })).toBe(1);
  });

  it("the list is filtered in SQL by the caller's grants, and a stack lists its readable workspaces", async () => {
    const stack = await seedStack(t, org.orgId, ["grp-list"]);
    const mine = await seedWorkspace(t, org.orgId, stack.id, 0, uniq("mine"));
    await seedWorkspace(t, org.orgId, stack.id, 0, uniq("theirs"));
    const viewer = await person(t, org.orgId, "viewer", [
      { resourceType: "workspace", action: "read", resourcePattern: like("mine-*") },
      { resourceType: "stack", action: "read", authzGroup: "grp-list" },
    ]);
    const list = await t.gql(LIST, { stackId: stack.id }, viewer.token);
    expect(list.data.workspaces.edges.map((e: any) => e.node.id)).toEqual([mine.id]);
    const viaStack = await t.gql(`query($id: ID!) { stack(id: $id) { workspaces { id } } }`, { id: stack.id }, viewer.token);
    expect(viaStack.data.stack.workspaces).toEqual([{ id: mine.id }]);
    const grouped = await person(t, org.orgId, "grouped", [{ resourceType: "workspace", action: "read", authzGroup: "grp-list" }]);
    expect((await t.gql(LIST, { stackId: stack.id }, grouped.token)).data.workspaces.edges).toHaveLength(2);
  });
});
