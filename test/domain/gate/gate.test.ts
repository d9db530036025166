// The apply gate, one test per rule of the seed (shared/seeds, "Approvals"), named by the rule
// and using the seed's numbers; then the decisions the seed leaves open (docs/apply-gate.md).
import { describe, expect, it } from "vitest";
import {
  GateInputError,
  REQUIREMENT_COUNTS,
  evaluateGate,
  isRequirementCount,
  type ChangeAction,
  type GateInput,
  type GatePolicy,
  type GateReservation,
  type PlanChange,
  type RequirementCount,
} from "../../../src/domain/gate/index.js";

// --- builders ---------------------------------------------------------------------------------

interface PolicySpec {
  name?: string;
  assigned?: string[];
  patterns?: string[];
  /** The count for every action unless `counts` overrides one. */
  count?: RequirementCount;
  counts?: Partial<Record<ChangeAction, RequirementCount>>;
  users?: string[];
  roles?: string[];
}

function policy(id: string, spec: PolicySpec): GatePolicy {
  const requirement = (action: ChangeAction) => ({
    count: spec.counts?.[action] ?? spec.count ?? "auto",
    approverUserIds: spec.users ?? [],
    approverRoleIds: spec.roles ?? [],
  });
  return {
    id,
    name: spec.name ?? id,
    assignedAddresses: spec.assigned ?? [],
    addressPatterns: spec.patterns ?? [],
    requirements: {
      create: requirement("create"),
      update: requirement("update"),
      delete: requirement("delete"),
      replace: requirement("replace"),
    },
  };
}

const T0 = Date.UTC(2025, 0, 6, 9, 0, 0);
const approvals = (...userIds: string[]) =>
  userIds.map((userId, i) => ({ userId, approvedAt: new Date(T0 + i * 60_000) }));

const change = (address: string, action: ChangeAction = "update"): PlanChange => ({ address, action });

const forUser = (id: string, userId: string, placedByUserId = userId): GateReservation => ({
  id,
  holder: { kind: "user", userId },
  placedByUserId,
});
const forRole = (id: string, roleId: string, placedByUserId = "placer"): GateReservation => ({
  id,
  holder: { kind: "role", roleId },
  placedByUserId,
});

interface Spec {
  baseline?: number;
  changes?: PlanChange[];
  policies?: GatePolicy[];
  approvedBy?: string[];
  holders?: string[];
  roles?: Record<string, string[]>;
  reservations?: GateReservation[];
}

function input(spec: Spec): GateInput {
  return {
    baseline: spec.baseline ?? 0,
    changes: spec.changes ?? [],
    policies: spec.policies ?? [],
    approvals: approvals(...(spec.approvedBy ?? [])),
    approveHolders: new Set(spec.holders ?? []),
    roleMembers: new Map(Object.entries(spec.roles ?? {})),
    reservations: spec.reservations ?? [],
  };
}

const gate = (spec: Spec) => evaluateGate(input(spec));
const codes = (spec: Spec) => gate(spec).reasons.map((r) => r.code);

// --- The apply gate -------------------------------------------------------------------------

describe("The apply gate", () => {
  it("a plan may apply when the count is met and every active reservation is answered", () => {
    const spec: Spec = {
      baseline: 1,
      changes: [change("aws_s3_bucket.logs")],
      holders: ["alice", "rita"],
      reservations: [forUser("res-1", "rita")],
    };
    const onlyAlice = gate({ ...spec, approvedBy: ["alice"] });
    expect(onlyAlice).toMatchObject({ countMet: true, reservationsAnswered: false, passed: false });
    const both = gate({ ...spec, approvedBy: ["alice", "rita"] });
    expect(both).toMatchObject({ countMet: true, reservationsAnswered: true, passed: true, reasons: [] });
  });

  it("a requirement added while a plan is already sitting at planned applies to it", () => {
    const spec: Spec = { baseline: 1, changes: [change("aws_db_instance.primary", "delete")], holders: ["alice"], approvedBy: ["alice"] };
    expect(gate(spec).passed).toBe(true);
    const later = gate({ ...spec, policies: [policy("db", { assigned: ["aws_db_instance.primary"], count: 3 })] });
    expect(later.passed).toBe(false);
    expect(later.reasons.map((r) => r.code)).toEqual(["policy_count_not_met"]);
  });
});

// --- Baseline approvals ---------------------------------------------------------------------

describe("Baseline approvals", () => {
  it("baseline 0 means anyone who can see the workspace can apply", () => {
    const evaluation = gate({ baseline: 0, changes: [change("aws_instance.web", "create")] });
    expect(evaluation.passed).toBe(true);
    expect(evaluation.baseline).toMatchObject({ applies: true, required: 0, counted: 0, met: true });
  });

  it("baseline 2 needs two approvals from holders of approve for a change no policy governs", () => {
    const spec: Spec = { baseline: 2, changes: [change("aws_instance.web")], holders: ["alice", "bob"] };
    expect(gate({ ...spec, approvedBy: ["alice"] }).passed).toBe(false);
    expect(gate({ ...spec, approvedBy: ["alice", "bob"] }).passed).toBe(true);
  });

  it("approving requires the approve permission: an approval from someone without it and not named counts for nothing", () => {
    const evaluation = gate({ baseline: 1, changes: [change("aws_instance.web")], approvedBy: ["mallory"] });
    expect(evaluation.passed).toBe(false);
    expect(evaluation.baseline.counted).toBe(0);
    expect(evaluation.approvalsCounted).toBe(0);
    expect(evaluation.ignoredApproverIds).toEqual(["mallory"]);
  });
});

// --- Requirements ---------------------------------------------------------------------------

describe("Requirements", () => {
  it("baseline 2, a change governed by a policy asking for 1 needs one approval", () => {
    const evaluation = gate({
      baseline: 2,
      changes: [change("module.status_page.aws_route53_record.status")],
      policies: [policy("status", { patterns: ["module.status_page.*"], count: 1 })],
      holders: ["alice"],
      approvedBy: ["alice"],
    });
    expect(evaluation.passed).toBe(true);
    expect(evaluation.changes[0]).toMatchObject({ effectiveCount: 1, onBaseline: false });
    expect(evaluation.baseline).toMatchObject({ applies: false, met: true, holdingChanges: [] });
  });

  it("a policy asking for 3 needs three", () => {
    const spec: Spec = {
      baseline: 2,
      changes: [change("module.prod_db.aws_db_instance.main", "delete")],
      policies: [policy("db", { name: "Databases", patterns: ["module.prod_db.*"], count: 3 })],
      holders: ["a", "b", "c"],
    };
    const two = gate({ ...spec, approvedBy: ["a", "b"] });
    expect(two.passed).toBe(false);
    expect(two.changes[0]?.effectiveCount).toBe(3);
    expect(two.reasons).toEqual([
      {
        code: "policy_count_not_met",
        message: 'Policy "Databases" asks for 3 approvals to delete (1 change): 2 so far from holders of approve and its named approvers.',
        policyId: "db",
        action: "delete",
      },
    ]);
    expect(gate({ ...spec, approvedBy: ["a", "b", "c"] }).passed).toBe(true);
  });

  it("an explicit count replaces the baseline whether it is higher or lower", () => {
    const higher = gate({ baseline: 1, changes: [change("x.y")], policies: [policy("p", { assigned: ["x.y"], count: 2 })] });
    const lower = gate({ baseline: 3, changes: [change("x.y")], policies: [policy("p", { assigned: ["x.y"], count: 2 })] });
    expect(higher.changes[0]?.effectiveCount).toBe(2);
    expect(lower.changes[0]?.effectiveCount).toBe(2);
  });

  it("there is no count of zero", () => {
    expect(REQUIREMENT_COUNTS).toEqual([1, 2, 3, "auto"]);
    expect(isRequirementCount(0)).toBe(false);
    expect(isRequirementCount(4)).toBe(false);
    expect(isRequirementCount("auto")).toBe(true);
    // @ts-expect-error 0 is not a RequirementCount
    const zero: RequirementCount = 0;
    const waved = policy("wave", { assigned: ["aws_instance.web"], count: zero });
    expect(() => gate({ changes: [change("aws_instance.web")], policies: [waved] })).toThrow(GateInputError);
    expect(() => gate({ changes: [change("aws_instance.web")], policies: [waved] })).toThrow(/count must be 1, 2, 3 or "auto"/);
  });

  it("a requirement is satisfied when the count is met and at least one named approver has approved", () => {
    const spec: Spec = {
      changes: [change("aws_db_instance.primary", "delete")],
      policies: [policy("db", { assigned: ["aws_db_instance.primary"], count: 2, roles: ["data"] })],
      roles: { data: ["dana"] },
      holders: ["a", "b", "dana"],
    };
    const holdersOnly = gate({ ...spec, approvedBy: ["a", "b"] });
    expect(holdersOnly.requirements[0]).toMatchObject({ countMet: true, approverListSatisfied: false, satisfied: false });
    expect(holdersOnly.reasons.map((r) => r.code)).toEqual(["approver_list_missing"]);
    expect(gate({ ...spec, approvedBy: ["a", "dana"] }).passed).toBe(true);
  });

  it("a mix: one change governed at 1 and one ungoverned still needs the baseline and names the holding change", () => {
    const spec: Spec = {
      baseline: 2,
      changes: [change("module.status_page.aws_route53_record.status"), change("aws_iam_role.deployer", "create")],
      policies: [policy("status", { patterns: ["module.status_page.*"], count: 1 })],
      holders: ["alice", "bob"],
    };
    const one = gate({ ...spec, approvedBy: ["alice"] });
    expect(one.passed).toBe(false);
    expect(one.baseline).toMatchObject({ applies: true, required: 2, counted: 1, met: false, holdingChanges: ["aws_iam_role.deployer"] });
    expect(one.reasons).toEqual([
      {
        code: "baseline_not_met",
        message: "The plan is held on the workspace baseline by aws_iam_role.deployer: 1 of 2 approvals from holders of approve.",
      },
    ]);
    expect(gate({ ...spec, approvedBy: ["alice", "bob"] }).passed).toBe(true);
  });

  it("every change governed by an explicit count: the baseline does not apply", () => {
    const evaluation = gate({
      baseline: 3,
      changes: [change("module.a.x.y"), change("module.b.x.y")],
      policies: [policy("a", { patterns: ["module.a.*"], count: 1 }), policy("b", { patterns: ["module.b.*"], count: 2 })],
      holders: ["h1", "h2"],
      approvedBy: ["h1", "h2"],
    });
    expect(evaluation.baseline.applies).toBe(false);
    expect(evaluation.passed).toBe(true);
  });

  it("the baseline keeps applying to a change whose policies all say Auto for that action", () => {
    const evaluation = gate({
      baseline: 2,
      changes: [change("aws_s3_bucket.assets", "update"), change("aws_s3_bucket.logs", "delete")],
      policies: [policy("buckets", { patterns: ["aws_s3_bucket.*"], counts: { delete: 1 } })],
      holders: ["h1"],
      approvedBy: ["h1"],
    });
    expect(evaluation.changes.map((c) => [c.address, c.effectiveCount, c.onBaseline])).toEqual([
      ["aws_s3_bucket.assets", 2, true],
      ["aws_s3_bucket.logs", 1, false],
    ]);
    expect(evaluation.baseline.holdingChanges).toEqual(["aws_s3_bucket.assets"]);
    expect(evaluation.reasons.map((r) => r.code)).toEqual(["baseline_not_met"]);
  });
});

// --- Overlapping policies -------------------------------------------------------------------

describe("Overlapping policies", () => {
  const spec: Spec = {
    baseline: 2,
    changes: [change("module.prod_db.aws_db_instance.main", "delete")],
    policies: [
      policy("narrow", { assigned: ["module.prod_db.aws_db_instance.main"], count: 1, users: ["nina"] }),
      policy("broad", { patterns: ["module.prod_db.*"], count: 3, roles: ["data"] }),
    ],
    roles: { data: ["dana", "dave"] },
    holders: ["h1", "h2", "h3"],
  };

  it("1 and 3 overlapping need 3 and one approver from each list", () => {
    const first = gate(spec);
    expect(first.changes[0]).toMatchObject({
      effectiveCount: 3,
      governedBy: [
        { policyId: "broad", count: 3 },
        { policyId: "narrow", count: 1 },
      ],
    });

    // Meeting the number does not discharge the other policies' approver lists.
    const threeHolders = gate({ ...spec, approvedBy: ["h1", "h2", "h3"] });
    expect(threeHolders.passed).toBe(false);
    expect(threeHolders.reasons.map((r) => [r.code, r.policyId])).toEqual([
      ["approver_list_missing", "broad"],
      ["approver_list_missing", "narrow"],
    ]);
    expect(threeHolders.requirements.find((r) => r.policyId === "broad")?.missingApprovers).toEqual({
      userIds: [],
      roleIds: ["data"],
      eligibleUserIds: ["dana", "dave"],
    });

    // Lists are not merged: one from each, and the 3 from holders or the broad list.
    expect(gate({ ...spec, approvedBy: ["nina", "h1", "h2"] }).passed).toBe(false);
    const fromEach = gate({ ...spec, approvedBy: ["nina", "dana", "h1", "h2"] });
    expect(fromEach.passed).toBe(true);
    expect(fromEach.requirements.map((r) => [r.policyId, r.counted])).toEqual([
      ["broad", 3],
      ["narrow", 3],
    ]);
  });

  it("merging would let a narrow policy dilute a broad one: a narrow policy's named approver does not count toward the broad number", () => {
    // nina is named only on the narrow policy and does not hold approve.
    const evaluation = gate({ ...spec, approvedBy: ["nina", "dana", "h1"] });
    const broad = evaluation.requirements.find((r) => r.policyId === "broad");
    expect(broad).toMatchObject({ counted: 2, countedUserIds: ["dana", "h1"], countMet: false });
    expect(evaluation.passed).toBe(false);
  });
});

// --- Named approvers ------------------------------------------------------------------------

describe("Named approvers", () => {
  it("a named approver's approval counts toward the policy's number but not the baseline", () => {
    const spec: Spec = {
      baseline: 2,
      changes: [change("module.status_page.aws_route53_record.status"), change("aws_iam_role.deployer")],
      policies: [policy("status", { patterns: ["module.status_page.*"], count: 1, users: ["nina"] })],
      holders: ["h1", "h2"],
    };
    const nina = gate({ ...spec, approvedBy: ["nina"] });
    expect(nina.requirements[0]).toMatchObject({ counted: 1, countedUserIds: ["nina"], satisfied: true });
    expect(nina.baseline).toMatchObject({ counted: 0, met: false });
    expect(nina.approvalsCounted).toBe(1);
    expect(nina.reasons.map((r) => r.code)).toEqual(["baseline_not_met"]);
    expect(gate({ ...spec, approvedBy: ["nina", "h1", "h2"] }).passed).toBe(true);
  });

  it("being named is itself the grant: a named approver without approve may approve", () => {
    const evaluation = gate({
      baseline: 2,
      changes: [change("aws_db_instance.primary", "delete")],
      policies: [policy("db", { assigned: ["aws_db_instance.primary"], count: 2, users: ["nina", "noah"] })],
      approvedBy: ["nina", "noah"],
    });
    expect(evaluation.passed).toBe(true);
    expect(evaluation.ignoredApproverIds).toEqual([]);
  });

  it("a named role means its current members: a removed member no longer counts", () => {
    const spec: Spec = {
      changes: [change("aws_db_instance.primary", "delete")],
      policies: [policy("db", { assigned: ["aws_db_instance.primary"], count: 1, roles: ["data"] })],
      approvedBy: ["dana"],
    };
    expect(gate({ ...spec, roles: { data: ["dana"] } }).passed).toBe(true);
    const removed = gate({ ...spec, roles: { data: ["dave"] } });
    expect(removed.passed).toBe(false);
    expect(removed.ignoredApproverIds).toEqual(["dana"]);
  });

  it("being named on a policy that governs nothing in this plan grants nothing", () => {
    const evaluation = gate({
      baseline: 0,
      changes: [change("aws_instance.web")],
      policies: [policy("db", { patterns: ["module.prod_db.*"], count: 3, users: ["nina"] })],
      reservations: [forUser("res-1", "nina")],
      approvedBy: ["nina"],
    });
    expect(evaluation.requirements).toEqual([]);
    expect(evaluation.ignoredApproverIds).toEqual(["nina"]);
    expect(evaluation.reservationsAnswered).toBe(false);
  });
});

// --- Reservations ---------------------------------------------------------------------------

describe("Reservations", () => {
  const base: Spec = { baseline: 0, changes: [change("aws_instance.web")] };

  it("a reservation held by a person needs that person's own approval", () => {
    const spec: Spec = { ...base, holders: ["alice", "rita"], reservations: [forUser("res-1", "rita", "rita")] };
    const others = gate({ ...spec, approvedBy: ["alice"] });
    expect(others.passed).toBe(false);
    expect(others.reservations).toEqual([
      { id: "res-1", holder: { kind: "user", userId: "rita" }, placedByUserId: "rita", answered: false, answeredByUserId: null, currentMembers: null },
    ]);
    expect(others.reasons).toEqual([
      { code: "reservation_unanswered", message: "Reserved for rita by rita: every apply needs rita's own approval.", reservationId: "res-1" },
    ]);
    const own = gate({ ...spec, approvedBy: ["alice", "rita"] });
    expect(own.passed).toBe(true);
    expect(own.reservations[0]?.answeredByUserId).toBe("rita");
  });

  it("a reservation gives nobody permission to approve: the holder's approval without approve or a naming does not answer it", () => {
    const evaluation = gate({ ...base, reservations: [forUser("res-1", "rita", "admin")], approvedBy: ["rita"] });
    expect(evaluation.reservationsAnswered).toBe(false);
    expect(evaluation.ignoredApproverIds).toEqual(["rita"]);
    expect(evaluation.reasons[0]?.message).toMatch(/rita approved, but neither holds approve/);
  });

  it("a role member who is a named approver on a governing policy may answer the role's reservation", () => {
    const evaluation = gate({
      ...base,
      policies: [policy("web", { assigned: ["aws_instance.web"], count: 1, users: ["dora"] })],
      roles: { devops: ["dora"] },
      reservations: [forRole("res-1", "devops")],
      approvedBy: ["dora"],
    });
    expect(evaluation.passed).toBe(true);
  });

  it("a role's reservation is answered by one approval whatever the size of the role", () => {
    const members = ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"];
    const evaluation = gate({
      ...base,
      roles: { devops: members },
      holders: members,
      reservations: [forRole("res-1", "devops")],
      approvedBy: ["d5"],
    });
    expect(evaluation.passed).toBe(true);
    expect(evaluation.reservations[0]).toMatchObject({ answered: true, answeredByUserId: "d5", currentMembers: members });
  });

  it("the earliest counting approval is the one that answers a role's reservation", () => {
    const evaluation = evaluateGate({
      ...input({ ...base, roles: { devops: ["d1", "d2"] }, holders: ["d1", "d2"], reservations: [forRole("res-1", "devops")] }),
      approvals: [
        { userId: "d1", approvedAt: "2025-01-06T10:00:00.000Z" },
        { userId: "d2", approvedAt: "2025-01-06T09:00:00.000Z" },
      ],
    });
    expect(evaluation.reservations[0]?.answeredByUserId).toBe("d2");
  });

  it("a removed role member leaves the reservation missing again and the evaluation shows the role's current members", () => {
    const spec: Spec = {
      ...base,
      holders: ["d1", "d2", "d3"],
      reservations: [forRole("res-1", "devops", "d2")],
      approvedBy: ["d1"],
    };
    expect(gate({ ...spec, roles: { devops: ["d1", "d2", "d3"] } }).passed).toBe(true);
    const removed = evaluateGate({
      ...input({ ...spec, roles: { devops: ["d3", "d2"] } }),
      userNames: new Map([
        ["d2", "Dee"],
        ["d3", "Dov"],
      ]),
      roleNames: new Map([["devops", "DevOps"]]),
    });
    expect(removed.passed).toBe(false);
    expect(removed.reservations[0]).toMatchObject({ answered: false, answeredByUserId: null, currentMembers: ["d2", "d3"] });
    expect(removed.reasons).toEqual([
      {
        code: "reservation_unanswered",
        message: "Reserved for role DevOps by Dee: every apply needs an approval from one current member (Dee, Dov).",
        reservationId: "res-1",
      },
    ]);
  });

  it("an approval that answers a reservation counts toward the baseline when its approver holds approve, no double counting", () => {
    const spec: Spec = {
      baseline: 2,
      changes: [change("aws_instance.web")],
      roles: { devops: ["dora"] },
      holders: ["dora", "hank"],
      reservations: [forRole("res-1", "devops")],
    };
    const doraTwice = gate({ ...spec, approvedBy: ["dora", "dora"] });
    expect(doraTwice.reservationsAnswered).toBe(true);
    expect(doraTwice.baseline).toMatchObject({ counted: 1, countedUserIds: ["dora"], met: false });
    expect(doraTwice.approvalsCounted).toBe(1);
    const withHank = gate({ ...spec, approvedBy: ["dora", "hank"] });
    expect(withHank.passed).toBe(true);
    expect(withHank.approvalsCounted).toBe(2);
  });

  it("no resource policy lowers a reservation", () => {
    const evaluation = gate({
      baseline: 2,
      changes: [change("module.status_page.aws_route53_record.status")],
      policies: [policy("everything", { patterns: ["*"], count: 1, users: ["nina"] })],
      holders: ["rita"],
      reservations: [forUser("res-1", "rita")],
      approvedBy: ["nina"],
    });
    expect(evaluation.countMet).toBe(true);
    expect(evaluation.passed).toBe(false);
    expect(evaluation.reasons.map((r) => r.code)).toEqual(["reservation_unanswered"]);
  });

  it("several reservations must each be answered", () => {
    const spec: Spec = {
      ...base,
      roles: { devops: ["dora"] },
      holders: ["rita", "dora"],
      reservations: [forRole("res-2", "devops"), forUser("res-1", "rita")],
    };
    const rita = gate({ ...spec, approvedBy: ["rita"] });
    expect(rita.passed).toBe(false);
    expect(rita.reservations.map((r) => [r.id, r.answered])).toEqual([
      ["res-1", true],
      ["res-2", false],
    ]);
    expect(rita.reasons.map((r) => r.reservationId)).toEqual(["res-2"]);
    expect(gate({ ...spec, approvedBy: ["rita", "dora"] }).passed).toBe(true);
  });

  it("a role with no members keeps blocking", () => {
    const spec: Spec = { ...base, holders: ["a", "b", "c"], approvedBy: ["a", "b", "c"], reservations: [forRole("res-1", "ghosts")] };
    for (const roles of [{ ghosts: [] }, {}] as Record<string, string[]>[]) {
      const evaluation = gate({ ...spec, roles });
      expect(evaluation.passed).toBe(false);
      expect(evaluation.reservations[0]).toMatchObject({ answered: false, currentMembers: [] });
      expect(evaluation.reasons[0]?.message).toBe(
        "Reserved for role ghosts by placer: the role has no members, so it blocks every apply until a super_admin releases the reservation.",
      );
    }
  });
});

// --- Scoping resources ----------------------------------------------------------------------

describe("Scoping resources", () => {
  it("assigned and matched are additive", () => {
    const address = "module.prod_db.aws_db_instance.main";
    const evaluation = gate({
      changes: [change(address, "delete"), change("module.prod_db.aws_db_parameter_group.main")],
      policies: [
        policy("matched", { patterns: ["module.prod_db.*"], count: 2 }),
        policy("assigned", { assigned: [address], count: 1 }),
      ],
    });
    const db = evaluation.changes.find((c) => c.address === address);
    expect(db?.governedBy.map((g) => g.policyId)).toEqual(["assigned", "matched"]);
    expect(db?.effectiveCount).toBe(2);
    // Assigning a resource to a new policy never takes it off one that already covered it.
    expect(evaluation.changes.map((c) => c.governedBy.map((g) => g.policyId))).toEqual([["assigned", "matched"], ["matched"]]);
  });

  it("matching is exact against the whole address: a root-level resource needs its own pattern", () => {
    const evaluation = gate({
      baseline: 2,
      changes: [change("aws_db_instance.primary"), change("module.replica.aws_db_instance.primary"), change("aws_db_instance.primary_backup")],
      policies: [policy("db", { patterns: ["*.aws_db_instance.primary"], count: 1 })],
    });
    expect(evaluation.changes.map((c) => [c.address, c.onBaseline])).toEqual([
      ["aws_db_instance.primary", true],
      ["aws_db_instance.primary_backup", true],
      ["module.replica.aws_db_instance.primary", false],
    ]);
    const own = gate({
      changes: [change("aws_db_instance.primary")],
      policies: [policy("db", { patterns: ["*.aws_db_instance.primary", "aws_db_instance.primary"], count: 1 })],
    });
    expect(own.changes[0]?.onBaseline).toBe(false);
  });
});

// --- Decisions the seed leaves open ---------------------------------------------------------

describe("Decisions (docs/apply-gate.md)", () => {
  it("a requirement with an empty approver list is satisfied by its count alone", () => {
    const evaluation = gate({
      changes: [change("aws_instance.web")],
      policies: [policy("web", { assigned: ["aws_instance.web"], count: 1 })],
      holders: ["h1"],
      approvedBy: ["h1"],
    });
    expect(evaluation.requirements[0]).toMatchObject({ approverListSatisfied: true, satisfied: true });
    expect(evaluation.passed).toBe(true);
  });

  it("an Auto requirement that names approvers keeps the change on the baseline and still needs one of its approvers", () => {
    const spec: Spec = {
      baseline: 1,
      changes: [change("aws_s3_bucket.assets")],
      policies: [policy("buckets", { patterns: ["aws_s3_bucket.*"], count: "auto", users: ["nina"] })],
      holders: ["h1"],
    };
    const holder = gate({ ...spec, approvedBy: ["h1"] });
    expect(holder.changes[0]).toMatchObject({ onBaseline: true, effectiveCount: 1 });
    expect(holder.requirements[0]).toMatchObject({ count: "auto", countMet: true, approverListSatisfied: false });
    expect(holder.reasons.map((r) => r.code)).toEqual(["approver_list_missing"]);
    // nina's approval satisfies the list but is not a holder's, so the baseline still needs h1.
    expect(gate({ ...spec, approvedBy: ["nina"] }).reasons.map((r) => r.code)).toEqual(["baseline_not_met"]);
    expect(gate({ ...spec, approvedBy: ["nina", "h1"] }).passed).toBe(true);
  });

  it("an Auto requirement with no approvers asks for nothing of its own", () => {
    const evaluation = gate({
      baseline: 0,
      changes: [change("aws_s3_bucket.assets")],
      policies: [policy("buckets", { patterns: ["aws_s3_bucket.*"], count: "auto" })],
    });
    expect(evaluation.passed).toBe(true);
  });

  it("a policy governing several changes with different actions yields one requirement per (policy, action) present", () => {
    const evaluation = gate({
      changes: [change("aws_s3_bucket.a", "create"), change("aws_s3_bucket.b", "delete"), change("aws_s3_bucket.c", "delete")],
      policies: [policy("buckets", { patterns: ["aws_s3_bucket.*"], counts: { create: 1, delete: 3 } })],
    });
    expect(evaluation.requirements.map((r) => [r.action, r.count, r.changeCount])).toEqual([
      ["create", 1, 1],
      ["delete", 3, 2],
    ]);
  });

  it("a named approver list whose roles have no members and no users keeps blocking, and says so", () => {
    const evaluation = gate({
      changes: [change("aws_db_instance.primary")],
      policies: [policy("db", { name: "Databases", assigned: ["aws_db_instance.primary"], count: 1, roles: ["data"] })],
      holders: ["h1"],
      approvedBy: ["h1"],
    });
    expect(evaluation.passed).toBe(false);
    expect(evaluation.reasons).toEqual([
      {
        code: "approver_list_missing",
        message:
          'Policy "Databases" (update) needs an approval from one of its named approvers: role data (no current members). Nobody can satisfy this list now.',
        policyId: "db",
        action: "update",
      },
    ]);
  });

  it("a plan with no resource changes is held to the baseline", () => {
    const evaluation = gate({ baseline: 1, changes: [] });
    expect(evaluation.baseline).toMatchObject({ applies: true, met: false, holdingChanges: [] });
    expect(evaluation.reasons[0]?.message).toBe(
      "The plan has no resource changes, so the workspace baseline applies: 0 of 1 approval from holders of approve.",
    );
  });

  it("the evaluation is JSON-serializable: stored and pushed, it reads back equal", () => {
    const evaluation = gate({
      baseline: 2,
      changes: [change("module.prod_db.aws_db_instance.main", "delete"), change("aws_iam_role.x")],
      policies: [policy("db", { patterns: ["module.prod_db.*"], count: 3, roles: ["data"] })],
      roles: { data: ["dana"], devops: [] },
      holders: ["h1"],
      reservations: [forRole("r1", "devops"), forUser("r2", "rita")],
      approvedBy: ["h1", "zed"],
    });
    expect(JSON.parse(JSON.stringify(evaluation))).toEqual(evaluation);
    expect(evaluation.reasons.map((r) => r.code)).toEqual([
      "baseline_not_met",
      "policy_count_not_met",
      "approver_list_missing",
      "reservation_unanswered",
      "reservation_unanswered",
    ]);
  });

  it("malformed input is refused, not decided", () => {
    expect(() => gate({ baseline: -1 })).toThrow(GateInputError);
    expect(() => gate({ baseline: 1.5 })).toThrow(/baseline must be a non-negative integer/);
    expect(() => gate({ policies: [policy("p", {}), policy("p", {})] })).toThrow(/appears twice/);
    expect(() => evaluateGate({ ...input({}), approvals: [{ userId: "a", approvedAt: "yesterday" }] })).toThrow(/invalid time/);
    expect(() => gate({ changes: [{ address: "x.y", action: "no-op" as ChangeAction }] })).toThrow(/unknown action/);
  });
});
