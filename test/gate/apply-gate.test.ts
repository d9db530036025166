// Seed 000's rules, one test each, with the seed's numbers, through GraphQL on the real database:
// what the gate reads is read when it is evaluated (membership, permissions, policies, the
// baseline), and the evaluation that allowed an apply is stored with the plan.
// The pure rules are covered once in test/domain/gate; these cover the DB-backed behaviour.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { APPROVE, PLAN, READ, allActions, memberOf, ops, person, role, seedStack, seedWorkspace, type Person } from "./helpers.js";

let t: TestApp;
let org: OrgFixture;
let o: ReturnType<typeof ops>;
let runner: Person;
let stackId: string;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  o = ops(t);
  runner = await person(t, org.orgId, "runner", [READ, PLAN]);
  stackId = (await seedStack(t, org.orgId)).id;
});
afterAll(() => t.close());

async function workspace(baseline: number) {
  return seedWorkspace(t, org.orgId, stackId, baseline);
}

async function approvers(n: number, name = "approver") {
  return Promise.all(Array.from({ length: n }, (_, i) => person(t, org.orgId, `${name}${i + 1}`)));
}

async function approveAll(planId: string, people: Person[]) {
  for (const p of people) expect((await o.approve(p.token, planId)).__typename).toBe("MutationApprovePlanSuccess");
}

describe("the count", () => {
  it("baseline 2 and a policy asking 1: one approval applies", async () => {
    const ws = await workspace(2);
    await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["module.status_page.*"], requirements: allActions(1) });
    const plan = await o.submit(runner.token, ws.id, [{ address: "module.status_page.aws_s3_bucket.site", action: "UPDATE" }]);
    const [alice] = await approvers(1);
    await approveAll(plan.id, [alice!]);
    const gate = await o.gate(alice!.token, plan.id);
    expect(gate.evaluation.changes[0]).toMatchObject({ effectiveCount: 1, onBaseline: false });
    expect(gate.evaluation.baseline.applies).toBe(false);
    expect((await o.apply(alice!.token, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
  });

  it("baseline 2 and a policy asking 3: a change governed at 3 needs three approvals", async () => {
    const ws = await workspace(2);
    await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["aws_db_instance.*"], requirements: allActions(3) });
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_db_instance.primary", action: "DELETE" }]);
    const people = await approvers(3);
    await approveAll(plan.id, people.slice(0, 2));
    const held = await o.apply(people[0]!.token, plan.id);
    expect(held.__typename).toBe("GateNotPassedError");
    expect(held.reasons.map((r: { code: string }) => r.code)).toEqual(["POLICY_COUNT_NOT_MET"]);
    await approveAll(plan.id, people.slice(2));
    expect((await o.apply(people[0]!.token, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
  });

  it("policies asking 1 and 3 overlapping need 3, and one approver from each list", async () => {
    const ws = await workspace(2);
    const [dba1, dba2, sre1] = await approvers(3, "named");
    const [other] = await approvers(1, "other");
    await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["module.prod_db.*"], requirements: allActions(3, { approverUserIds: [dba1!.userId, dba2!.userId] }) });
    await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["*.aws_db_instance.*"], requirements: allActions(1, { approverUserIds: [sre1!.userId] }) });
    const plan = await o.submit(runner.token, ws.id, [{ address: "module.prod_db.aws_db_instance.main", action: "DELETE" }]);
    // Three approvals, but none from the second list: the count is met, one list is missing.
    await approveAll(plan.id, [dba1!, dba2!, other!]);
    let gate = await o.gate(other!.token, plan.id);
    expect(gate.evaluation.changes[0].effectiveCount).toBe(3);
    expect(gate.evaluation.requirements.map((r: { countMet: boolean }) => r.countMet)).toEqual([true, true]);
    expect(gate.evaluation.reasons.map((r: { code: string }) => r.code)).toEqual(["APPROVER_LIST_MISSING"]);
    expect(gate.evaluation.requirements.find((r: { approverListSatisfied: boolean }) => !r.approverListSatisfied).missingApprovers.users).toEqual([{ id: sre1!.userId }]);
    expect((await o.apply(other!.token, plan.id)).__typename).toBe("GateNotPassedError");
    await approveAll(plan.id, [sre1!]);
    gate = await o.gate(other!.token, plan.id);
    expect(gate.passed).toBe(true);
    expect((await o.apply(other!.token, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
  });

  it("a mix: one change governed at 1 and one no policy covers still needs the baseline, and the plan page names the change holding it", async () => {
    const ws = await workspace(2);
    await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["module.status_page.*"], requirements: allActions(1) });
    const plan = await o.submit(runner.token, ws.id, [
      { address: "module.status_page.aws_s3_bucket.site", action: "UPDATE" },
      { address: "aws_iam_role.deployer", action: "CREATE" },
    ]);
    const [a, b] = await approvers(2);
    await approveAll(plan.id, [a!]);
    const gate = await o.gate(a!.token, plan.id);
    expect(gate.evaluation.baseline).toMatchObject({ applies: true, required: 2, counted: 1, met: false, holdingChanges: ["aws_iam_role.deployer"] });
    expect(gate.evaluation.reasons[0].message).toContain("aws_iam_role.deployer");
    await approveAll(plan.id, [b!]);
    expect((await o.apply(a!.token, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
  });

  it("a change whose policies all say Auto stays on the baseline", async () => {
    const ws = await workspace(1);
    await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["aws_s3_bucket.*"], requirements: allActions(null) });
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.evaluation.changes[0]).toMatchObject({ onBaseline: true, effectiveCount: 1, governedBy: [{ auto: true, count: null }] });
    expect(gate.evaluation.baseline.holdingChanges).toEqual(["aws_s3_bucket.logs"]);
  });

  it("baseline 0 means anyone who can see the workspace can apply", async () => {
    const ws = await workspace(0);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const reader = await person(t, org.orgId, "reader", [READ]);
    const res = await o.apply(reader.token, plan.id);
    expect(res.__typename).toBe("MutationApplyPlanSuccess");
    expect(res.data.applyStartedBy.id).toBe(reader.userId);
  });

  it("once the gate passes, anyone holding approve may start the apply; a reader may not when approvals were needed", async () => {
    const ws = await workspace(1);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const [a, starter] = await approvers(2);
    await approveAll(plan.id, [a!]);
    const reader = await person(t, org.orgId, "reader", [READ]);
    const denied = await o.apply(reader.token, plan.id);
    expect(denied).toMatchObject({ __typename: "PermissionDeniedError", missing: { resourceType: "workspace", action: "approve", matchValue: ws.name } });
    const res = await o.apply(starter!.token, plan.id);
    expect(res.data.applyStartedBy.id).toBe(starter!.userId);
  });

  it("a targeted plan: a dependency Terraform pulls in outside the policy puts the plan on the baseline", async () => {
    const ws = await workspace(2);
    await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["module.status_page.*"], requirements: allActions(1) });
    const plan = await o.submit(runner.token, ws.id, [
      { address: "module.status_page.aws_s3_bucket.site", action: "UPDATE" },
      { address: "aws_route53_record.status", action: "UPDATE" },
    ], { targets: ["module.status_page"] });
    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.evaluation.baseline).toMatchObject({ applies: true, required: 2, holdingChanges: ["aws_route53_record.status"] });
  });

  it("a requirement added while a plan is already sitting at planned applies to it", async () => {
    const ws = await workspace(0);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_db_instance.primary", action: "DELETE" }]);
    const [dba] = await approvers(1, "dba");
    await o.policy(org.adminToken, { workspaceIds: [ws.id], assignments: [{ workspaceId: ws.id, address: "aws_db_instance.primary" }], requirements: allActions(1, { approverUserIds: [dba!.userId] }) });
    const held = await o.apply(org.adminToken, plan.id);
    expect(held.__typename).toBe("GateNotPassedError");
    await approveAll(plan.id, [dba!]);
    expect((await o.apply(org.adminToken, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
  });

  it("the stored evaluation survives later policy edits: the requirement that applied can be shown after the fact", async () => {
    const ws = await workspace(0);
    const policy = await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["aws_*"], requirements: allActions(1) });
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_db_instance.primary", action: "DELETE" }]);
    const [a] = await approvers(1);
    await approveAll(plan.id, [a!]);
    expect((await o.apply(a!.token, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
    const edited = await t.gql(
      `mutation($input: UpdateResourcePolicyInput!) { updateResourcePolicy(input: $input) { __typename } }`,
      { input: { id: policy.id, revision: policy.revision, requirements: allActions(3) } },
      org.adminToken,
    );
    expect(edited.data.updateResourcePolicy.__typename).toBe("MutationUpdateResourcePolicySuccess");
    const gate = await o.gate(a!.token, plan.id);
    expect(gate).toMatchObject({ source: "STORED", planStatus: "APPLYING", passed: true });
    expect(gate.evaluation.changes[0]).toMatchObject({ effectiveCount: 1, governedBy: [{ count: 1 }] });
    expect(gate.evaluation.countedApprovers).toEqual([{ id: a!.userId }]);
  });
});

describe("who counts", () => {
  it("permissions are read when the gate is evaluated: an approver who lost approve no longer counts", async () => {
    const ws = await workspace(1);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const approverRole = await role(t, org.orgId, "Approvers");
    const readerRole = await role(t, org.orgId, "Readers", [READ]);
    const alice = await memberOf(t, org.orgId, approverRole.id, "alice");
    await approveAll(plan.id, [alice]);
    expect((await o.gate(alice.token, plan.id)).passed).toBe(true);
    await t.gql(`mutation($r: ID!, $u: ID!) { assignRole(roleId: $r, userId: $u) { __typename } }`, { r: readerRole.id, u: alice.userId }, org.adminToken);
    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.passed).toBe(false);
    expect(gate.evaluation.ignoredApprovers).toEqual([{ id: alice.userId }]);
    expect((await o.apply(org.adminToken, plan.id)).__typename).toBe("GateNotPassedError");
  });

  it("named approvers may approve without holding approve; their approval counts toward the policy, never the baseline", async () => {
    const ws = await workspace(1);
    const dataTeam = await person(t, org.orgId, "data", []);
    await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["aws_db_instance.*"], requirements: allActions(1, { approverUserIds: [dataTeam.userId] }) });
    const plan = await o.submit(runner.token, ws.id, [
      { address: "aws_db_instance.primary", action: "DELETE" },
      { address: "aws_s3_bucket.logs", action: "CREATE" },
    ]);
    expect((await o.approve(dataTeam.token, plan.id)).__typename).toBe("MutationApprovePlanSuccess");
    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.evaluation.requirements[0]).toMatchObject({ satisfied: true, namedApprovers: [{ id: dataTeam.userId }] });
    expect(gate.evaluation.baseline).toMatchObject({ applies: true, counted: 0, met: false });
    // Someone neither holding approve nor named may not approve at all.
    const stranger = await person(t, org.orgId, "stranger", [READ]);
    expect(await o.approve(stranger.token, plan.id)).toMatchObject({ __typename: "PermissionDeniedError", missing: { action: "approve" } });
    const [b] = await approvers(1);
    await approveAll(plan.id, [b!]);
    expect((await o.gate(b!.token, plan.id)).passed).toBe(true);
  });

  it("a named role: its current members are named approvers", async () => {
    const ws = await workspace(0);
    const dba = await role(t, org.orgId, "DBA", [READ]);
    const dan = await memberOf(t, org.orgId, dba.id, "dan");
    await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["aws_db_instance.*"], requirements: allActions(1, { approverRoleIds: [dba.id] }) });
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_db_instance.primary", action: "UPDATE" }]);
    let gate = await o.gate(org.adminToken, plan.id);
    expect(gate.evaluation.requirements[0].missingApprovers).toMatchObject({ roles: [{ id: dba.id }], eligibleUsers: [{ id: dan.userId }] });
    await approveAll(plan.id, [dan]);
    gate = await o.gate(org.adminToken, plan.id);
    expect(gate.passed).toBe(true);
  });

  it("super_admin short-circuits every permission check: their approval counts toward the baseline", async () => {
    const ws = await workspace(1);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const boss = await person(t, org.orgId, "boss", [], { superAdmin: true });
    await approveAll(plan.id, [boss]);
    expect((await o.gate(boss.token, plan.id)).evaluation.baseline.countedApprovers).toEqual([{ id: boss.userId }]);
    expect((await o.apply(boss.token, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
  });

  it("approving twice is idempotent: the same approval, no error, counted once", async () => {
    const ws = await workspace(2);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const [a] = await approvers(1);
    const first = await o.approve(a!.token, plan.id);
    const second = await o.approve(a!.token, plan.id);
    expect(second.__typename).toBe("MutationApprovePlanSuccess");
    expect(second.data).toEqual(first.data);
    expect((await o.gate(a!.token, plan.id)).evaluation.baseline.counted).toBe(1);
  });
});

describe("reservations in the gate", () => {
  it("a reservation held by a person needs that person's own approval", async () => {
    const ws = await workspace(0);
    const [alice, bob] = await approvers(2);
    expect((await o.reserve(alice!.token, ws.id)).__typename).toBe("MutationReserveWorkspaceSuccess");
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    await approveAll(plan.id, [bob!]);
    const held = await o.apply(bob!.token, plan.id);
    expect(held.reasons.map((r: { code: string }) => r.code)).toEqual(["RESERVATION_UNANSWERED"]);
    await approveAll(plan.id, [alice!]);
    expect((await o.apply(bob!.token, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
  });

  it("a role's reservation is answered by one approval from any current member, whatever the size of the role", async () => {
    const ws = await workspace(0);
    const devops = await role(t, org.orgId, "DevOps");
    const members = await Promise.all([1, 2, 3, 4].map((i) => memberOf(t, org.orgId, devops.id, `devops${i}`)));
    expect((await o.reserve(members[0]!.token, ws.id, devops.id)).__typename).toBe("MutationReserveWorkspaceSuccess");
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    await approveAll(plan.id, [members[3]!]);
    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.evaluation.reservations[0]).toMatchObject({ holderKind: "ROLE", answered: true, answeredBy: { id: members[3]!.userId } });
  });

  it("a removed role member leaves the reservation missing again, and the plan page shows the role's current members", async () => {
    const ws = await workspace(0);
    const devops = await role(t, org.orgId, "DevOps");
    const others = await role(t, org.orgId, "Others");
    const carol = await memberOf(t, org.orgId, devops.id, "carol");
    const dave = await memberOf(t, org.orgId, devops.id, "dave");
    await o.reserve(carol.token, ws.id, devops.id);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    await approveAll(plan.id, [carol]);
    expect((await o.gate(carol.token, plan.id)).passed).toBe(true);
    // Membership is read when the apply is checked, not when the approval was given.
    await t.gql(`mutation($r: ID!, $u: ID!) { assignRole(roleId: $r, userId: $u) { __typename } }`, { r: others.id, u: carol.userId }, org.adminToken);
    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.passed).toBe(false);
    expect(gate.evaluation.reservations[0]).toMatchObject({ answered: false, currentMembers: [{ id: dave.userId }] });
    expect(gate.evaluation.reasons[0].message).toContain(dave.name);
    expect((await o.apply(org.adminToken, plan.id)).__typename).toBe("GateNotPassedError");
  });

  it("a deactivated member no longer answers their role's reservation", async () => {
    const ws = await workspace(0);
    const devops = await role(t, org.orgId, "DevOps");
    const erin = await memberOf(t, org.orgId, devops.id, "erin");
    await o.reserve(erin.token, ws.id, devops.id);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    await approveAll(plan.id, [erin]);
    await t.gql(`mutation($u: ID!) { deactivateMember(userId: $u) { __typename } }`, { u: erin.userId }, org.adminToken);
    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.evaluation.reservations[0]).toMatchObject({ answered: false, currentMembers: [] });
  });

  it("membership through an SSO group binding answers a role's reservation, and a group sync removing it leaves it missing again", async () => {
    const ws = await workspace(0);
    const devops = await role(t, org.orgId, "DevOps");
    const frank = await person(t, org.orgId, "frank", [READ]);
    const source = await t.db.prisma.identitySource.create({ data: { orgId: org.orgId, name: `okta-${ws.name}` } });
    await t.db.prisma.identityGroupBinding.create({
      data: { orgId: org.orgId, identitySourceId: source.id, groupKey: "devops", roles: { create: [{ roleId: devops.id }] } },
    });
    await t.db.prisma.userIdentityGroup.create({ data: { identitySourceId: source.id, userId: frank.userId, groupKey: "devops" } });
    await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: ws.id, holderRoleId: devops.id, placedById: org.adminId } });
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    await approveAll(plan.id, [frank]);
    expect((await o.gate(frank.token, plan.id)).evaluation.reservations[0].answered).toBe(true);
    const sync = await t.gql(
      `mutation($input: SyncUserGroupsInput!) { syncUserGroups(input: $input) { __typename } }`,
      { input: { identitySourceId: source.id, userId: frank.userId, groupKeys: [] } },
      org.adminToken,
    );
    expect(sync.data.syncUserGroups.__typename).toBe("MutationSyncUserGroupsSuccess");
    expect((await o.gate(frank.token, plan.id)).evaluation.reservations[0].answered).toBe(false);
  });

  it("several reservations at once, by a person and a role: every one must be answered", async () => {
    const ws = await workspace(0);
    const devops = await role(t, org.orgId, "DevOps");
    const gina = await memberOf(t, org.orgId, devops.id, "gina");
    const [hank] = await approvers(1, "hank");
    await o.reserve(gina.token, ws.id, devops.id);
    await o.reserve(hank!.token, ws.id);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    await approveAll(plan.id, [hank!]);
    let gate = await o.gate(hank!.token, plan.id);
    expect(gate.evaluation.reservations.map((r: { answered: boolean }) => r.answered).sort()).toEqual([false, true]);
    await approveAll(plan.id, [gina]);
    gate = await o.gate(hank!.token, plan.id);
    expect(gate.passed).toBe(true);
  });

  it("a reservation gives nobody permission to approve: a member of the role still needs approve or a policy naming them", async () => {
    const ws = await workspace(0);
    const watchers = await role(t, org.orgId, "Watchers", [READ]);
    const ivy = await memberOf(t, org.orgId, watchers.id, "ivy");
    await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: ws.id, holderRoleId: watchers.id, placedById: org.adminId } });
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    expect(await o.approve(ivy.token, plan.id)).toMatchObject({ __typename: "PermissionDeniedError", missing: { action: "approve" } });
  });

  it("an approval answering a reservation counts toward the baseline too, with no double counting", async () => {
    const ws = await workspace(1);
    const [judy] = await approvers(1, "judy");
    await o.reserve(judy!.token, ws.id);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    await approveAll(plan.id, [judy!]);
    const gate = await o.gate(judy!.token, plan.id);
    expect(gate.passed).toBe(true);
    expect(gate.evaluation).toMatchObject({ approvalsCounted: 1, baseline: { counted: 1 } });
  });

  it("no resource policy lowers a reservation: a plan governed at 1 still needs the role's member", async () => {
    const ws = await workspace(2);
    const devops = await role(t, org.orgId, "DevOps");
    const kim = await memberOf(t, org.orgId, devops.id, "kim");
    await o.reserve(kim.token, ws.id, devops.id);
    await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["*"], requirements: allActions(1) });
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const [lee] = await approvers(1, "lee");
    await approveAll(plan.id, [lee!]);
    const gate = await o.gate(lee!.token, plan.id);
    expect(gate.evaluation.countMet).toBe(true);
    expect(gate.evaluation.reservationsAnswered).toBe(false);
    expect((await o.apply(lee!.token, plan.id)).__typename).toBe("GateNotPassedError");
  });

  it("a role with no members left keeps blocking applies until a super_admin releases its reservation", async () => {
    const ws = await workspace(0);
    const ghost = await role(t, org.orgId, "Ghosts");
    const r = await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: ws.id, holderRoleId: ghost.id, placedById: org.adminId } });
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const held = await o.apply(org.adminToken, plan.id);
    expect(held.reasons[0].message).toContain("no members");
    expect((await o.release(org.adminToken, r.id)).__typename).toBe("MutationReleaseReservationSuccess");
    expect((await o.apply(org.adminToken, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
  });
});

describe("typed errors", () => {
  it("gate not passed carries the evaluation; an applied plan is not in a state to apply again", async () => {
    const ws = await workspace(1);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const held = await o.apply(org.adminToken, plan.id);
    expect(held).toMatchObject({ __typename: "GateNotPassedError", code: "GATE_NOT_PASSED", gate: { passed: false } });
    expect(held.gate.version).toBeGreaterThan(0);
    await approveAll(plan.id, [(await approvers(1))[0]!]);
    expect((await o.apply(org.adminToken, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
    expect(await o.apply(org.adminToken, plan.id)).toMatchObject({ __typename: "InvalidStateError", state: "applying" });
    expect((await o.approve(org.adminToken, plan.id)).__typename).toBe("InvalidStateError");
  });

  it("a plan in another organization is not found, never forbidden", async () => {
    const other = await createOrg(t.db);
    const ws = await workspace(0);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    expect((await o.approve(other.adminToken, plan.id)).__typename).toBe("NotFoundError");
    expect((await o.apply(other.adminToken, plan.id)).__typename).toBe("NotFoundError");
    expect(await o.gate(other.adminToken, plan.id)).toBeNull();
  });
});
