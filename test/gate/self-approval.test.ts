// Separation of duties: a workspace that prevents self-approval ("prevent self-review") does not
// count the approval of a plan's submitter toward any count or approver list, and the gate says
// so in its reasons. Seed 000's rule that a person's reservation needs that person's own approval
// still holds: the submitter's approval answers their own reservation and nothing else. Turning
// the option off is a hold-lifting change (owner-only, recorded). Through GraphQL on real
// PostgreSQL.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { evaluateGate, type GateInput } from "../../src/domain/gate/index.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { APPROVE, ERROR_FIELDS, PLAN, READ, allActions, memberOf, ops, person, role, seedStack, seedWorkspace, type Person } from "./helpers.js";

let t: TestApp;
let org: OrgFixture;
let o: ReturnType<typeof ops>;
let stackId: string;
/** Submits and approves: the engineer who plans and would like to wave their own change through. */
let dev: Person;
let ann: Person;
let bob: Person;

const UPDATE = `mutation($input: UpdateWorkspaceInput!) {
  updateWorkspace(input: $input) { __typename ... on MutationUpdateWorkspaceSuccess { data { id preventSelfApproval } } ${ERROR_FIELDS} }
}`;
const SELF = `query($planId: ID!) { gate(planId: $planId) { passed evaluation {
  selfApproval { prevented submitter { id } submitterApproved answersOwnReservation }
  reasons { code message } countedApprovers { id } ignoredApprovers { id } baseline { counted } } } }`;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  o = ops(t);
  stackId = (await seedStack(t, org.orgId)).id;
  dev = await person(t, org.orgId, "dev", [READ, APPROVE, PLAN]);
  ann = await person(t, org.orgId, "ann");
  bob = await person(t, org.orgId, "bob");
});
afterAll(() => t.close());

async function workspace(baseline: number, preventSelfApproval = true) {
  const w = await seedWorkspace(t, org.orgId, stackId, baseline);
  if (preventSelfApproval) await t.db.prisma.workspace.update({ where: { id: w.id }, data: { preventSelfApproval } });
  return w;
}
const submit = (workspaceId: string, by = dev) => o.submit(by.token, workspaceId, [{ address: "aws_db_instance.main", action: "UPDATE" }]);
const self = async (planId: string) => {
  const res = await t.gql(SELF, { planId }, org.adminToken);
  if (res.errors) throw new Error(JSON.stringify(res.errors));
  return res.data.gate;
};

describe("the submitter's approval does not count", () => {
  it("baseline 1, the submitter approves: the gate stays closed, says why, and the apply is refused; another approval opens it", async () => {
    const w = await workspace(1);
    const plan = await submit(w.id);
    await o.approve(dev.token, plan.id);
    const gate = await self(plan.id);
    expect(gate.passed).toBe(false);
    expect(gate.evaluation.baseline.counted).toBe(0);
    expect(gate.evaluation.ignoredApprovers).toEqual([{ id: dev.userId }]);
    expect(gate.evaluation.selfApproval).toEqual({ prevented: true, submitter: { id: dev.userId }, submitterApproved: true, answersOwnReservation: false });
    const reason = gate.evaluation.reasons.find((r: { code: string }) => r.code === "SUBMITTER_APPROVAL_NOT_COUNTED");
    expect(reason.message).toMatch(/submitted this plan, and this workspace prevents self-approval/);
    expect((await o.apply(dev.token, plan.id)).__typename).toBe("GateNotPassedError");

    await o.approve(ann.token, plan.id);
    const after = await self(plan.id);
    expect(after.passed).toBe(true);
    expect(after.evaluation.reasons).toEqual([]);
    expect((await o.apply(ann.token, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
  });

  it("with the option off (the default) the same approval counts", async () => {
    const w = await workspace(1, false);
    const plan = await submit(w.id);
    await o.approve(dev.token, plan.id);
    const gate = await self(plan.id);
    expect(gate.passed).toBe(true);
    expect(gate.evaluation.selfApproval.prevented).toBe(false);
  });

  it("a policy's named approver who submitted does not satisfy the list; a policy asking 1 needs someone else", async () => {
    const w = await workspace(0);
    await o.policy(org.adminToken, { workspaceIds: [w.id], addressPatterns: ["aws_db_instance.*"], requirements: allActions(1, { approverUserIds: [dev.userId, ann.userId] }) });
    const plan = await submit(w.id);
    await o.approve(dev.token, plan.id);
    const gate = await o.gate(org.adminToken, plan.id);
    expect(gate.passed).toBe(false);
    expect(gate.evaluation.reasons.map((r: { code: string }) => r.code)).toEqual(["POLICY_COUNT_NOT_MET", "APPROVER_LIST_MISSING", "SUBMITTER_APPROVAL_NOT_COUNTED"]);
    await o.approve(ann.token, plan.id);
    expect((await o.gate(org.adminToken, plan.id)).passed).toBe(true);
  });

  it("before the submitter approves, the reason says the approvals must come from others", async () => {
    const w = await workspace(1);
    const plan = await submit(w.id);
    const gate = await self(plan.id);
    expect(gate.evaluation.reasons.at(-1)).toEqual({ code: "SUBMITTER_APPROVAL_NOT_COUNTED", message: expect.stringMatching(/approvals must come from others/) });
  });
});

describe("seed 000: a reservation held by a person needs that person's own approval — still", () => {
  it("the submitter's own reservation is answered by their own approval; the count still needs someone else", async () => {
    const w = await workspace(1);
    expect((await o.reserve(dev.token, w.id)).__typename).toBe("MutationReserveWorkspaceSuccess");
    const plan = await submit(w.id);
    await o.approve(ann.token, plan.id);
    let gate = await self(plan.id);
    // Ann's approval meets the baseline, but only Dev can answer Dev's reservation.
    expect(gate.passed).toBe(false);
    expect(gate.evaluation.reasons.map((r: { code: string }) => r.code)).toEqual(["RESERVATION_UNANSWERED", "SUBMITTER_APPROVAL_NOT_COUNTED"]);
    await o.approve(dev.token, plan.id);
    gate = await self(plan.id);
    expect(gate.passed).toBe(true);
    expect(gate.evaluation.selfApproval.answersOwnReservation).toBe(true);
    expect(gate.evaluation.baseline.counted).toBe(1);
  });

  it("the submitter's approval alone answers their reservation but meets no baseline", async () => {
    const w = await workspace(1);
    await o.reserve(dev.token, w.id);
    const plan = await submit(w.id);
    await o.approve(dev.token, plan.id);
    const gate = await self(plan.id);
    expect(gate.passed).toBe(false);
    expect(gate.evaluation.reasons.map((r: { code: string }) => r.code)).toEqual(["BASELINE_NOT_MET", "SUBMITTER_APPROVAL_NOT_COUNTED"]);
    expect(gate.evaluation.reasons.at(-1).message).toMatch(/still answers .*own reservation/);
    expect(gate.evaluation.countedApprovers).toEqual([{ id: dev.userId }]);
  });

  it("a role's reservation is not answered by the submitter's approval, though the submitter is a member", async () => {
    const w = await workspace(0);
    const ops2 = await role(t, org.orgId, "ops", [READ, APPROVE, PLAN]);
    const member = await memberOf(t, org.orgId, ops2.id, "ops-submitter");
    const other = await memberOf(t, org.orgId, ops2.id, "ops-other");
    expect((await o.reserve(member.token, w.id, ops2.id)).__typename).toBe("MutationReserveWorkspaceSuccess");
    const plan = await submit(w.id, member);
    await o.approve(member.token, plan.id);
    const gate = await self(plan.id);
    expect(gate.passed).toBe(false);
    expect(gate.evaluation.reasons.map((r: { code: string }) => r.code)).toEqual(["RESERVATION_UNANSWERED", "SUBMITTER_APPROVAL_NOT_COUNTED"]);
    // The reservation's reason does not claim the submitter lacks approve.
    expect(gate.evaluation.reasons[0].message).not.toMatch(/neither holds approve/);
    await o.approve(other.token, plan.id);
    expect((await self(plan.id)).passed).toBe(true);
  });

  it("every combination agrees with the rule, evaluated in memory: prevented changes nothing but the submitter's approval", () => {
    // Generated: baseline 0..2 × who approved (subsets of submitter, a, b) × reservation (none, submitter's, a's).
    const people = ["s", "a", "b"];
    for (const baseline of [0, 1, 2])
      for (let mask = 0; mask < 8; mask++)
        for (const reservedFor of [null, "s", "a"]) {
          const approvers = people.filter((_, i) => mask & (1 << i));
          const input: GateInput = {
            baseline,
            changes: [{ address: "x.y", action: "update" }],
            policies: [],
            approvals: approvers.map((userId) => ({ userId, approvedAt: "2026-12-03T00:00:00Z" })),
            approveHolders: new Set(people),
            roleMembers: new Map(),
            reservations: reservedFor ? [{ id: "r", holder: { kind: "user", userId: reservedFor }, placedByUserId: reservedFor }] : [],
          };
          const prevented = evaluateGate({ ...input, excludedSubmitterId: "s" });
          const others = approvers.filter((id) => id !== "s").length;
          const reservationOk = reservedFor === null || approvers.includes(reservedFor);
          const label = JSON.stringify({ baseline, approvers, reservedFor });
          expect(prevented.passed, label).toBe(others >= baseline && reservationOk);
          expect(prevented.reasons.some((r) => r.code === "submitter_approval_not_counted"), label).toBe(!prevented.passed);
          expect(evaluateGate(input).passed, label).toBe(approvers.length >= baseline && reservationOk);
        }
  });
});

describe("turning it off is a hold-lifting change", () => {
  it("turning it on needs only (workspace, update); turning it off is owner-only and recorded", async () => {
    const w = await workspace(1, false);
    const editor = await person(t, org.orgId, "editor", [READ, { resourceType: "workspace", action: "update" }]);
    const on = (await t.gql(UPDATE, { input: { id: w.id, preventSelfApproval: true } }, editor.token)).data.updateWorkspace;
    expect(on).toEqual({ __typename: "MutationUpdateWorkspaceSuccess", data: { id: w.id, preventSelfApproval: true } });
    const refused = (await t.gql(UPDATE, { input: { id: w.id, preventSelfApproval: false } }, editor.token)).data.updateWorkspace;
    expect(refused.__typename).toBe("PermissionDeniedError");
    expect((await t.db.prisma.workspace.findUniqueOrThrow({ where: { id: w.id } })).preventSelfApproval).toBe(true);
    const off = (await t.gql(UPDATE, { input: { id: w.id, preventSelfApproval: false } }, org.adminToken)).data.updateWorkspace;
    expect(off.data.preventSelfApproval).toBe(false);
    const records = await t.db.prisma.holdAuthorityChange.findMany({ where: { workspaceId: w.id } });
    expect(records).toMatchObject([{ kind: "workspace.self_approval_allowed", actorUserId: org.adminId, before: { preventSelfApproval: true }, after: { preventSelfApproval: false } }]);
  });
});
