// A named approver that disappears keeps blocking (docs/apply-gate.md).
// The exact steps through GraphQL, then a table over every way a named approver can
// disappear: each passes before and blocks after, through applyPlan and the gate query.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { APPROVE, PLAN, READ, memberOf, ops, person, role, seedStack, seedWorkspace } from "../gate/helpers.js";
import { subscribe, wsClient } from "../gate/ws.js";

let t: TestApp;
let org: OrgFixture;
let o: ReturnType<typeof ops>;
let stackId: string;
let base: string;

beforeAll(async () => {
  t = await startTestApp();
  base = await t.listen();
  org = await createOrg(t.db);
  o = ops(t);
  stackId = (await seedStack(t, org.orgId)).id;
});
afterAll(() => t.close());

const POLICY = `query($id: ID!) { resourcePolicy(id: $id) { revision updatedAt changeNote updatedBy { id }
  requirements { action approverRoles { id name deleted } deletedApprovers } } }`;
const DELETE_ROLE = `mutation($id: ID!) { deleteRole(id: $id) { __typename } }`;
const gql = (q: string, v: Record<string, unknown>, token = org.adminToken) => t.gql(q, v, token);

describe("deleting a role a resource policy names as approver (the issue's steps)", () => {
  it("keeps the gate closed, records a new revision with who and what, and is visible before deleting", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const dataTeam = await role(t, org.orgId, "data-team", [READ, APPROVE]);
    await memberOf(t, org.orgId, dataTeam.id, "dora");
    const policy = await o.policy(org.adminToken, {
      workspaceIds: [ws.id],
      addressPatterns: ["aws_db_instance.*"],
      requirements: [{ action: "DELETE", count: 1, approverRoleIds: [dataTeam.id] }],
    });
    const planner = await person(t, org.orgId, "planner", [READ, PLAN]);
    const plan = await o.submit(planner.token, ws.id, [{ address: "aws_db_instance.main", action: "DELETE" }]);
    const outsider = await person(t, org.orgId, "outsider", [READ, APPROVE]);
    expect((await o.approve(outsider.token, plan.id)).__typename).toBe("MutationApprovePlanSuccess");

    const before = await o.apply(org.adminToken, plan.id);
    expect(before.__typename).toBe("GateNotPassedError");
    expect(before.reasons.map((r: any) => r.code)).toContain("APPROVER_LIST_MISSING");

    // Before deleting, the admin sees every policy naming the role.
    const named = await gql(`query($id: ID!) { roleResourcePolicies(roleId: $id) { id } roles { id namedByPolicies { id } } }`, { id: dataTeam.id });
    expect(named.errors).toBeUndefined();
    expect(named.data.roleResourcePolicies).toEqual([{ id: policy.id }]);
    expect(named.data.roles.find((r: any) => r.id === dataTeam.id).namedByPolicies).toEqual([{ id: policy.id }]);
    const read0 = (await gql(POLICY, { id: policy.id })).data.resourcePolicy;

    expect((await gql(DELETE_ROLE, { id: dataTeam.id })).data.deleteRole.__typename).toBe("MutationDeleteRoleSuccess");

    const after = await o.apply(org.adminToken, plan.id);
    expect(after.__typename).toBe("GateNotPassedError");
    expect(after.reasons.map((r: any) => r.code)).toContain("APPROVER_LIST_MISSING");
    expect(after.reasons.find((r: any) => r.code === "APPROVER_LIST_MISSING").message).toContain("(deleted)");

    const read1 = (await gql(POLICY, { id: policy.id })).data.resourcePolicy;
    expect(read1.revision).toBe(read0.revision + 1);
    expect(new Date(read1.updatedAt).getTime()).toBeGreaterThan(new Date(read0.updatedAt).getTime());
    expect(read1.updatedBy).toEqual({ id: org.adminId });
    expect(read1.changeNote).toBe(`deleted role ${dataTeam.name}`);
    const del = read1.requirements.find((r: any) => r.action === "DELETE");
    expect(del.approverRoles).toEqual([{ id: dataTeam.id, name: dataTeam.name, deleted: true }]);
    expect(del.deletedApprovers).toEqual([`deleted role ${dataTeam.name}`]);

    // Read-modify-write keeps the tombstone (still blocking); leaving it out is the explicit way to drop it.
    const keep = await gql(
      `mutation($input: UpdateResourcePolicyInput!) { updateResourcePolicy(input: $input) { __typename ... on Error { message } } }`,
      { input: { id: policy.id, revision: read1.revision, requirements: [{ action: "DELETE", count: 1, approverRoleIds: [dataTeam.id] }] } },
    );
    expect(keep.data.updateResourcePolicy.__typename).toBe("MutationUpdateResourcePolicySuccess");
    expect((await o.apply(org.adminToken, plan.id)).__typename).toBe("GateNotPassedError");
  });
});

// ── Every way a named approver can disappear ─────────────────────────────────────────────

type Setup = { roleId: string; userId: string; token: string };
interface Variant {
  name: string;
  /** Names the approver on the policy: by role or by user. */
  by: "role" | "user";
  disappear: (s: Setup) => Promise<void>;
}

const VARIANTS: Variant[] = [
  { name: "the named role is deleted", by: "role", disappear: async (s) => void (await gql(DELETE_ROLE, { id: s.roleId })) },
  {
    name: "the role's only member is deactivated",
    by: "role",
    disappear: async (s) => void (await gql(`mutation($u: ID!) { deactivateMember(userId: $u) { __typename } }`, { u: s.userId })),
  },
  {
    name: "the role's only member loses the role",
    by: "role",
    disappear: async (s) => void (await gql(`mutation($u: ID!) { unassignRole(userId: $u) { __typename } }`, { u: s.userId })),
  },
  {
    name: "the named user is deactivated",
    by: "user",
    disappear: async (s) => void (await gql(`mutation($u: ID!) { deactivateMember(userId: $u) { __typename } }`, { u: s.userId })),
  },
  {
    name: "the named user's membership is removed",
    by: "user",
    disappear: async (s) => void (await t.db.prisma.membership.deleteMany({ where: { orgId: org.orgId, userId: s.userId } })),
  },
];

describe("a named approver that disappears keeps blocking", () => {
  it.each(VARIANTS)("$name: the gate that passed with their approval closes again", async (variant) => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    // The named approver holds no approve grant of their own: only being named lets them count.
    const approverRole = await role(t, org.orgId, "named", [READ]);
    const approver = await memberOf(t, org.orgId, approverRole.id, "nadia");
    await o.policy(org.adminToken, {
      workspaceIds: [ws.id],
      addressPatterns: ["aws_db_instance.*"],
      requirements: [
        { action: "DELETE", count: 1, ...(variant.by === "role" ? { approverRoleIds: [approverRole.id] } : { approverUserIds: [approver.userId] }) },
      ],
    });
    const planner = await person(t, org.orgId, "planner", [READ, PLAN]);
    const plan = await o.submit(planner.token, ws.id, [{ address: "aws_db_instance.main", action: "DELETE" }]);
    expect((await o.approve(approver.token, plan.id)).__typename).toBe("MutationApprovePlanSuccess");
    expect((await o.gate(org.adminToken, plan.id)).passed).toBe(true);

    await variant.disappear({ roleId: approverRole.id, userId: approver.userId, token: approver.token });

    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.passed).toBe(false);
    expect(gate.evaluation.reasons.map((r: any) => r.code)).toContain("APPROVER_LIST_MISSING");
    const applied = await o.apply(org.adminToken, plan.id);
    expect(applied.__typename).toBe("GateNotPassedError");
  });
});

describe("the live gate", () => {
  it("a planGate subscriber sees the gate close when the named role that passed it is deleted", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const named = await role(t, org.orgId, "live-named", [READ]);
    const approver = await memberOf(t, org.orgId, named.id, "lina");
    await o.policy(org.adminToken, {
      workspaceIds: [ws.id],
      addressPatterns: ["aws_db_instance.*"],
      requirements: [{ action: "DELETE", count: 1, approverRoleIds: [named.id] }],
    });
    const planner = await person(t, org.orgId, "planner", [READ, PLAN]);
    const plan = await o.submit(planner.token, ws.id, [{ address: "aws_db_instance.main", action: "DELETE" }]);
    const client = wsClient(base, org.adminToken);
    try {
      const stream = subscribe<{ passed: boolean; version: number; evaluation: { reasons: { code: string }[] } }>(
        client,
        `subscription($planId: ID!) { planGate(planId: $planId) { passed version evaluation { reasons { code } } } }`,
        { planId: plan.id },
        (d) => d.planGate,
      );
      await stream.next((m) => !m.passed);
      expect((await o.approve(approver.token, plan.id)).__typename).toBe("MutationApprovePlanSuccess");
      const open = await stream.next((m) => m.passed);
      expect((await gql(DELETE_ROLE, { id: named.id })).data.deleteRole.__typename).toBe("MutationDeleteRoleSuccess");
      const closed = await stream.next((m) => !m.passed && m.version > open.version);
      expect(closed.evaluation.reasons.map((r) => r.code)).toContain("APPROVER_LIST_MISSING");
      stream.dispose();
    } finally {
      await client.dispose();
    }
  });
});
