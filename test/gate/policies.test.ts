// Resource policies: organization-level CRUD applied to many workspaces, assigned addresses and
// validated address patterns, one requirement per action (1, 2, 3 or Auto; no zero) with named
// approvers of the same organization, revisions, and gate:changed for every workspace touched.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, like, type OrgFixture } from "../helpers/fixtures.js";
import type { Topics } from "../../src/infra/events.js";
import { CREATE_POLICY, PLAN, READ, UPDATE_POLICY, allActions, ops, person, role, seedStack, seedWorkspace, uniq } from "./helpers.js";

let t: TestApp;
let org: OrgFixture;
let o: ReturnType<typeof ops>;
let stackId: string;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  o = ops(t);
  stackId = (await seedStack(t, org.orgId)).id;
});
afterAll(() => t.close());

const create = (input: Record<string, unknown>, token = org.adminToken) =>
  t.gql(CREATE_POLICY, { input: { name: uniq("policy"), ...input } }, token).then((r) => r.data.createResourcePolicy);
const update = (input: Record<string, unknown>, token = org.adminToken) =>
  t.gql(UPDATE_POLICY, { input }, token).then((r) => r.data.updateResourcePolicy);

/** Collects gate:changed events published while fn runs (through the real Redis). */
async function gateEvents(fn: () => Promise<unknown>): Promise<Topics["gate:changed"][]> {
  const seen: Topics["gate:changed"][] = [];
  const it = t.events.subscribe("gate:changed");
  const pump = (async () => {
    for await (const e of it) if (e.orgId === org.orgId) seen.push(e);
  })();
  await new Promise((r) => setTimeout(r, 100));
  await fn();
  await new Promise((r) => setTimeout(r, 150));
  await it.return?.(undefined);
  await pump;
  return seen;
}

describe("resource policies", () => {
  it("a policy applied to many workspaces, by assignment and by pattern, reads back whole", async () => {
    const [w1, w2] = await Promise.all([seedWorkspace(t, org.orgId, stackId), seedWorkspace(t, org.orgId, stackId)]);
    const dba = await role(t, org.orgId, "DBA");
    const dana = await person(t, org.orgId, "dana");
    const res = await create({
      workspaceIds: [w1.id, w2.id],
      addressPatterns: ["module.prod_db.*", "*.aws_s3_bucket.*"],
      assignments: [{ workspaceId: w1.id, address: "aws_db_instance.primary" }],
      requirements: [
        { action: "DELETE", count: 3, approverRoleIds: [dba.id] },
        { action: "UPDATE", count: 1, approverUserIds: [dana.userId] },
      ],
    });
    expect(res.__typename).toBe("MutationCreateResourcePolicySuccess");
    const read = await t.gql(
      `query($id: ID!) { resourcePolicy(id: $id) { name revision addressPatterns workspaces { id } assignments { workspace { id } address }
         requirements { action count auto approverUsers { id } approverRoles { id } } } }`,
      { id: res.data.id },
      org.adminToken,
    );
    const p = read.data.resourcePolicy;
    expect(p.revision).toBe(1);
    expect(p.workspaces.map((w: { id: string }) => w.id).sort()).toEqual([w1.id, w2.id].sort());
    expect(p.assignments).toEqual([{ workspace: { id: w1.id }, address: "aws_db_instance.primary" }]);
    expect(p.requirements).toEqual([
      { action: "CREATE", count: null, auto: true, approverUsers: [], approverRoles: [] },
      { action: "UPDATE", count: 1, auto: false, approverUsers: [{ id: dana.userId }], approverRoles: [] },
      { action: "DELETE", count: 3, auto: false, approverUsers: [], approverRoles: [{ id: dba.id }] },
      { action: "REPLACE", count: null, auto: true, approverUsers: [], approverRoles: [] },
    ]);
    const page = await t.gql(`query($id: ID!) { workspace(id: $id) { resourcePolicies { id } } }`, { id: w2.id }, org.adminToken);
    expect(page.data.workspace.resourcePolicies).toEqual([{ id: res.data.id }]);
  });

  it("there is no count of zero, and input is validated field by field with nothing written", async () => {
    const w = await seedWorkspace(t, org.orgId, stackId);
    const other = await createOrg(t.db);
    const stranger = await person(t, other.orgId, "stranger");
    const name = uniq("invalid");
    const res = await create({
      name,
      workspaceIds: [w.id, "no-such-workspace"],
      addressPatterns: ["module.ok.*", "module.**", " padded"],
      assignments: [{ workspaceId: "elsewhere", address: "aws_s3_bucket.a" }],
      requirements: [
        { action: "CREATE", count: 0 },
        { action: "DELETE", count: 4 },
        { action: "CREATE", count: 1 },
      ],
    });
    expect(res.__typename).toBe("ValidationError");
    const fields = res.issues.map((i: { field: string }) => i.field);
    expect(fields).toEqual(expect.arrayContaining([
      "input.addressPatterns.1",
      "input.addressPatterns.2",
      "input.requirements.0.count",
      "input.requirements.1.count",
      "input.requirements.2.action",
    ]));
    expect(res.issues.find((i: { field: string }) => i.field === "input.requirements.0.count").message).toContain("no count of zero");
    const refs = await create({ name, workspaceIds: [w.id, "no-such-workspace"], assignments: [{ workspaceId: "elsewhere", address: "aws_s3_bucket.a" }], requirements: [{ action: "UPDATE", count: 1, approverUserIds: [stranger.userId] }] });
    expect(refs.issues.map((i: { field: string }) => i.field)).toEqual([
      "input.workspaceIds.1",
      "input.assignments.0.workspaceId",
      "input.requirements.0.approverUserIds.0",
    ]);
    expect(await t.db.prisma.resourcePolicy.count({ where: { name } })).toBe(0);
  });

  it("named approvers are users and roles of the same organization", async () => {
    const w = await seedWorkspace(t, org.orgId, stackId);
    const other = await createOrg(t.db);
    const foreign = await role(t, other.orgId, "Foreign");
    const res = await create({ workspaceIds: [w.id], requirements: [{ action: "DELETE", count: 1, approverRoleIds: [foreign.id] }] });
    expect(res.issues[0].field).toBe("input.requirements.0.approverRoleIds.0");
  });

  it("edits bump the revision, a stale revision is a conflict, and every workspace it applies to hears about it", async () => {
    const [w1, w2, w3] = await Promise.all([0, 1, 2].map(() => seedWorkspace(t, org.orgId, stackId)));
    const created = await o.policy(org.adminToken, { workspaceIds: [w1!.id, w2!.id], requirements: allActions(1) });
    const events = await gateEvents(async () => {
      const res = await update({ id: created.id, revision: 1, workspaceIds: [w2!.id, w3!.id], addressPatterns: ["aws_*"] });
      expect(res.data.revision).toBe(2);
    });
    expect(events).toHaveLength(1);
    expect([...events[0]!.workspaceIds].sort()).toEqual([w1!.id, w2!.id, w3!.id].sort());
    const stale = await update({ id: created.id, revision: 1, description: "late" });
    expect(stale).toMatchObject({ __typename: "ConflictError", currentRevision: 2 });
    const deleted = await gateEvents(() =>
      t.gql(`mutation($id: ID!) { deleteResourcePolicy(id: $id) { __typename } }`, { id: created.id }, org.adminToken),
    );
    expect([...deleted[0]!.workspaceIds].sort()).toEqual([w2!.id, w3!.id].sort());
    expect(await t.db.prisma.resourcePolicy.count({ where: { id: created.id } })).toBe(0);
  });

  it("assignment and matching are additive: assigning a resource to a new policy never takes it off one that already covered it", async () => {
    const w = await seedWorkspace(t, org.orgId, stackId, 0);
    const broad = await o.policy(org.adminToken, { workspaceIds: [w.id], addressPatterns: ["aws_db_instance.*"], requirements: allActions(3) });
    const narrow = await o.policy(org.adminToken, { workspaceIds: [w.id], assignments: [{ workspaceId: w.id, address: "aws_db_instance.primary" }], requirements: allActions(1) });
    const runner = await person(t, org.orgId, "runner", [READ, PLAN]);
    const plan = await o.submit(runner.token, w.id, [{ address: "aws_db_instance.primary", action: "DELETE" }]);
    const change = (await o.gate(org.adminToken, plan.id)).evaluation.changes[0];
    expect(change.effectiveCount).toBe(3);
    expect(change.governedBy.map((g: { count: number }) => g.count).sort()).toEqual([1, 3]);
    expect([broad.id, narrow.id]).toHaveLength(2);
  });

  it("permissions are the resource_policy family, matched by the policy name", async () => {
    const w = await seedWorkspace(t, org.orgId, stackId);
    const teamAdmin = await person(t, org.orgId, "team-admin", [
      { resourceType: "resource_policy", action: "create", resourcePattern: like("team-a-*") },
      { resourceType: "resource_policy", action: "read", resourcePattern: like("team-a-*") },
    ]);
    const denied = await create({ name: "team-b-db", workspaceIds: [w.id] }, teamAdmin.token);
    expect(denied).toMatchObject({ __typename: "PermissionDeniedError", missing: { resourceType: "resource_policy", action: "create", matchValue: "team-b-db" } });
    const ok = await create({ name: uniq("team-a-db"), workspaceIds: [w.id] }, teamAdmin.token);
    expect(ok.__typename).toBe("MutationCreateResourcePolicySuccess");
    await create({ name: uniq("team-c-db"), workspaceIds: [w.id] });
    const list = await t.gql(`{ resourcePolicies(first: 100) { edges { node { name } } } }`, {}, teamAdmin.token);
    const names = list.data.resourcePolicies.edges.map((e: { node: { name: string } }) => e.node.name);
    expect(names.length).toBeGreaterThan(0);
    expect(names.every((n: string) => n.startsWith("team-a-"))).toBe(true);
    const upd = await update({ id: ok.data.id, description: "x" }, teamAdmin.token);
    expect(upd.missing).toMatchObject({ resourceType: "resource_policy", action: "update" });
  });
});
