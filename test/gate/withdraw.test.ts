// Withdrawing an approval: the approver takes back their own approval while the plan
// is planned. The row stays (seed 000: approvals are never deleted), marked with who withdrew it
// and when; it counts nowhere the gate counts approvals (the stored inputs, the apply, the live
// push); approving again adds a new approval beside the withdrawn one.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "graphql-ws";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { ERROR_FIELDS, PLAN, READ, ops, person, seedStack, seedWorkspace, type Person } from "./helpers.js";
import { subscribe, wsClient } from "./ws.js";

const WITHDRAW = `mutation($planId: ID!) {
  withdrawApproval(planId: $planId) {
    __typename
    ... on MutationWithdrawApprovalSuccess { data { id approvedAt withdrawnAt withdrawnBy { id } user { id } } }
    ${ERROR_FIELDS}
  }
}`;
const APPROVALS = `query($id: ID!) { plan(id: $id) { id approvals { id user { id } approvedAt withdrawnAt withdrawnBy { id } } } }`;
const PLAN_GATE = `subscription($planId: ID!) { planGate(planId: $planId) { planId version passed evaluation { approvalsCounted } } }`;
const REPORT = `mutation($input: ReportPlanResultInput!) { reportPlanResult(input: $input) { __typename ${ERROR_FIELDS} } }`;

let t: TestApp;
let base: string;
let org: OrgFixture;
let o: ReturnType<typeof ops>;
let runner: Person;
let stackId: string;
const clients: Client[] = [];

beforeAll(async () => {
  t = await startTestApp();
  base = await t.listen();
  org = await createOrg(t.db);
  o = ops(t);
  runner = await person(t, org.orgId, "runner", [READ, PLAN]);
  stackId = (await seedStack(t, org.orgId)).id;
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await t.close();
});

async function freshPlan(baseline: number) {
  const w = await seedWorkspace(t, org.orgId, stackId, baseline);
  const plan = await o.submit(runner.token, w.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
  return { w, plan };
}
const withdraw = async (token: string, planId: string) => (await t.gql(WITHDRAW, { planId }, token)).data.withdrawApproval;
const approvals = async (token: string, planId: string) => (await t.gql(APPROVALS, { id: planId }, token)).data.plan.approvals;

describe("withdrawApproval", () => {
  it("a withdrawn approval stops counting: the count drops, the gate closes and the apply is refused; the row stays, marked", async () => {
    const { plan } = await freshPlan(2);
    const ann = await person(t, org.orgId, "ann");
    const bob = await person(t, org.orgId, "bob");
    await o.approve(ann.token, plan.id);
    await o.approve(bob.token, plan.id);
    expect((await o.gate(org.adminToken, plan.id)).passed).toBe(true);

    const res = await withdraw(ann.token, plan.id);
    expect(res.__typename).toBe("MutationWithdrawApprovalSuccess");
    expect(res.data.user.id).toBe(ann.userId);
    expect(res.data.withdrawnBy.id).toBe(ann.userId);
    expect(res.data.withdrawnAt).toBeTruthy();

    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.passed).toBe(false);
    expect(gate.evaluation.approvalsCounted).toBe(1);
    expect(gate.evaluation.countedApprovers.map((u: { id: string }) => u.id)).toEqual([bob.userId]);
    const applied = await o.apply(bob.token, plan.id);
    expect(applied.__typename).toBe("GateNotPassedError");

    const listed = await approvals(org.adminToken, plan.id);
    expect(listed).toHaveLength(2);
    const annRow = listed.find((a: { user: { id: string } }) => a.user.id === ann.userId);
    expect(annRow.withdrawnAt).toBeTruthy();
    expect(annRow.withdrawnBy.id).toBe(ann.userId);
    expect(await t.db.prisma.approval.count({ where: { planId: plan.id } })).toBe(2);
  });

  it("a withdrawn approval no longer answers the approver's own reservation", async () => {
    const { w, plan } = await freshPlan(0);
    const cat = await person(t, org.orgId, "cat");
    expect((await o.reserve(cat.token, w.id)).__typename).toBe("MutationReserveWorkspaceSuccess");
    await o.approve(cat.token, plan.id);
    expect((await o.gate(org.adminToken, plan.id)).passed).toBe(true);
    await withdraw(cat.token, plan.id);
    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.passed).toBe(false);
    expect(gate.evaluation.reservations[0].answered).toBe(false);
  });

  it("a live planGate subscriber sees the gate close when the approval is withdrawn", async () => {
    const { plan } = await freshPlan(1);
    const dan = await person(t, org.orgId, "dan");
    await o.approve(dan.token, plan.id);
    const c = wsClient(base, org.adminToken);
    clients.push(c);
    const s = subscribe<{ version: number; passed: boolean; evaluation: { approvalsCounted: number } }>(c, PLAN_GATE, { planId: plan.id }, (d) => d.planGate);
    const first = await s.next();
    expect(first.passed).toBe(true);
    await withdraw(dan.token, plan.id);
    const closed = await s.next((m) => !m.passed);
    expect(closed.version).toBeGreaterThan(first.version);
    expect(closed.evaluation.approvalsCounted).toBe(0);
    s.dispose();
  });

  it("approving again after withdrawing adds a new approval that counts; the withdrawn one stays", async () => {
    const { plan } = await freshPlan(1);
    const eve = await person(t, org.orgId, "eve");
    const first = (await o.approve(eve.token, plan.id)).data;
    await withdraw(eve.token, plan.id);
    expect((await o.gate(org.adminToken, plan.id)).passed).toBe(false);
    const again = await o.approve(eve.token, plan.id);
    expect(again.__typename).toBe("MutationApprovePlanSuccess");
    expect(again.data.id).not.toBe(first.id);
    expect((await o.approve(eve.token, plan.id)).data.id).toBe(again.data.id);
    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.passed).toBe(true);
    expect(gate.evaluation.approvalsCounted).toBe(1);
    const listed = await approvals(org.adminToken, plan.id);
    expect(listed.map((a: { id: string; withdrawnAt: string | null }) => [a.id, a.withdrawnAt !== null])).toEqual([
      [first.id, true],
      [again.data.id, false],
    ]);
    // Withdrawing twice: the second finds no active approval.
    await withdraw(eve.token, plan.id);
    const twice = await withdraw(eve.token, plan.id);
    expect(twice).toMatchObject({ __typename: "InvalidStateError", state: "not_approved" });
  });

  it("a plan that is not planned takes no withdrawal: InvalidStateError, and the approval stays counted", async () => {
    const { plan } = await freshPlan(1);
    const fay = await person(t, org.orgId, "fay");
    await o.approve(fay.token, plan.id);
    expect((await o.apply(fay.token, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
    expect(await withdraw(fay.token, plan.id)).toMatchObject({ __typename: "InvalidStateError", state: "applying" });
    await t.gql(REPORT, { input: { planId: plan.id, outcome: "APPLIED" } }, runner.token);
    expect(await withdraw(fay.token, plan.id)).toMatchObject({ __typename: "InvalidStateError", state: "applied" });
    const listed = await approvals(org.adminToken, plan.id);
    expect(listed[0].withdrawnAt).toBeNull();
  });

  it("someone else's approval cannot be withdrawn by you: only your own active approval is ever marked", async () => {
    const { plan } = await freshPlan(1);
    const gus = await person(t, org.orgId, "gus");
    const hal = await person(t, org.orgId, "hal");
    await o.approve(gus.token, plan.id);
    // hal (and even a super admin) has no approval of their own here.
    expect(await withdraw(hal.token, plan.id)).toMatchObject({ __typename: "InvalidStateError", state: "not_approved" });
    expect(await withdraw(org.adminToken, plan.id)).toMatchObject({ __typename: "InvalidStateError", state: "not_approved" });
    expect((await approvals(org.adminToken, plan.id))[0].withdrawnAt).toBeNull();
    expect((await o.gate(org.adminToken, plan.id)).passed).toBe(true);
  });

  it("a plan of another organization, or one the caller cannot read, is NotFound", async () => {
    const { plan } = await freshPlan(1);
    const other = await createOrg(t.db);
    expect(await withdraw(other.adminToken, plan.id)).toMatchObject({ __typename: "NotFoundError" });
    const outsider = await person(t, org.orgId, "outsider", []);
    expect(await withdraw(outsider.token, plan.id)).toMatchObject({ __typename: "NotFoundError" });
    expect(await withdraw(org.adminToken, "no-such-plan")).toMatchObject({ __typename: "NotFoundError" });
  });
});
