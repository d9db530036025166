// The targeted plan picker (seed, "Requirements", "A targeted plan").
import { describe, expect, it } from "vitest";
import {
  GateInputError,
  TOTAL_CAN_RISE_NOTE,
  evaluateGate,
  pickTargets,
  type ChangeAction,
  type GatePolicy,
  type RequirementCount,
} from "../../../src/domain/gate/index.js";

function policy(id: string, patterns: string[], counts: Partial<Record<ChangeAction, RequirementCount>>): GatePolicy {
  const requirement = (action: ChangeAction) => ({ count: counts[action] ?? "auto", approverUserIds: [], approverRoleIds: [] });
  return {
    id,
    name: id,
    assignedAddresses: [],
    addressPatterns: patterns,
    requirements: { create: requirement("create"), update: requirement("update"), delete: requirement("delete"), replace: requirement("replace") },
  };
}

const statusPage = policy("status", ["module.status_page.*"], { create: 1, update: 1, delete: 1, replace: 1 });
const databases = policy("db", ["module.prod_db.*", "module.prod_db[*"], { update: 2, delete: 3, replace: 3 });

const currentPlanChanges = [
  { address: "module.status_page.aws_route53_record.status", action: "update" as const },
  { address: "module.status_page.aws_s3_bucket.page", action: "create" as const },
  { address: "module.prod_db.aws_db_instance.main", action: "delete" as const },
  { address: 'module.prod_db["eu"].aws_db_instance.main', action: "update" as const },
  { address: "module.prod_dbx.aws_db_instance.other", action: "update" as const },
  { address: "aws_iam_role.deployer", action: "update" as const },
  { address: "aws_instance.web[0]", action: "update" as const },
  { address: "aws_instance.web[1]", action: "create" as const },
];

describe("the targeted plan picker", () => {
  it("shows each chosen resource's count using the action the workspace's current plan has for it, with the total", () => {
    const picked = pickTargets({
      baseline: 2,
      policies: [statusPage, databases],
      currentPlanChanges,
      chosen: ["module.prod_db.aws_db_instance.main", 'module.prod_db["eu"].aws_db_instance.main'],
    });
    expect(picked.resources).toEqual([
      {
        address: "module.prod_db.aws_db_instance.main",
        action: "delete",
        governedBy: [{ policyId: "db", policyName: "db", count: 3 }],
        count: 3,
        onBaseline: false,
        selectedBy: ["module.prod_db.aws_db_instance.main"],
      },
      {
        address: 'module.prod_db["eu"].aws_db_instance.main',
        action: "update",
        governedBy: [{ policyId: "db", policyName: "db", count: 2 }],
        count: 2,
        onBaseline: false,
        selectedBy: ['module.prod_db["eu"].aws_db_instance.main'],
      },
    ]);
    expect(picked.total).toBe(3);
    expect(picked.baselineApplies).toBe(false);
    expect(picked.notes).toContain(TOTAL_CAN_RISE_NOTE);
  });

  it("a module target selects everything the current plan has under it, and nothing under a longer name", () => {
    const picked = pickTargets({ baseline: 2, policies: [databases], currentPlanChanges, chosen: ["module.prod_db"] });
    expect(picked.resources.map((r) => r.address)).toEqual([
      "module.prod_db.aws_db_instance.main",
      'module.prod_db["eu"].aws_db_instance.main',
    ]);
  });

  it("a resource target without an index selects all its instances", () => {
    const picked = pickTargets({ baseline: 2, policies: [], currentPlanChanges, chosen: ["aws_instance.web"] });
    expect(picked.resources.map((r) => [r.address, r.action, r.count, r.onBaseline])).toEqual([
      ["aws_instance.web[0]", "update", 2, true],
      ["aws_instance.web[1]", "create", 2, true],
    ]);
    expect(picked.total).toBe(2);
  });

  it("targeting a governed module gets its lower number, as far as the current plan shows", () => {
    const picked = pickTargets({ baseline: 2, policies: [statusPage], currentPlanChanges, chosen: ["module.status_page"] });
    expect(picked.resources.map((r) => r.count)).toEqual([1, 1]);
    expect(picked.total).toBe(1);
  });

  it("a targeted plan pulling in a dependency outside the policy is on the baseline", () => {
    const picked = pickTargets({ baseline: 2, policies: [statusPage], currentPlanChanges, chosen: ["module.status_page"] });
    expect(picked.total).toBe(1);
    // The plan runs; Terraform pulls in the deployer role the status page depends on.
    const gate = evaluateGate({
      baseline: 2,
      changes: [
        { address: "module.status_page.aws_route53_record.status", action: "update" },
        { address: "aws_iam_role.deployer", action: "update" },
      ],
      policies: [statusPage],
      approvals: [{ userId: "alice", approvedAt: "2025-01-06T09:00:00Z" }],
      approveHolders: new Set(["alice"]),
      roleMembers: new Map(),
      reservations: [],
    });
    expect(gate.passed).toBe(false);
    expect(gate.baseline).toMatchObject({ applies: true, required: 2, holdingChanges: ["aws_iam_role.deployer"] });
    // Choosing the dependency too shows the baseline before the plan runs.
    const both = pickTargets({ baseline: 2, policies: [statusPage], currentPlanChanges, chosen: ["module.status_page", "aws_iam_role.deployer"] });
    expect(both.total).toBe(2);
    expect(both.holdingChanges).toEqual(["aws_iam_role.deployer"]);
  });

  it("a target the current plan does not change is listed without an action or count, and left out of the total", () => {
    const picked = pickTargets({
      baseline: 2,
      policies: [databases],
      currentPlanChanges,
      chosen: ["module.prod_db.aws_db_instance.main", "module.prod_db.aws_db_subnet_group.main"],
    });
    expect(picked.resources[1]).toEqual({
      address: "module.prod_db.aws_db_subnet_group.main",
      action: null,
      governedBy: [{ policyId: "db", policyName: "db", count: null }],
      count: null,
      onBaseline: false,
      selectedBy: ["module.prod_db.aws_db_subnet_group.main"],
    });
    expect(picked.total).toBe(3);
    expect(picked.notes.some((n) => n.includes("module.prod_db.aws_db_subnet_group.main"))).toBe(true);
  });

  it("choosing nothing the current plan changes leaves the baseline as the total", () => {
    const picked = pickTargets({ baseline: 2, policies: [statusPage], currentPlanChanges, chosen: ["aws_lambda_function.nope"] });
    expect(picked).toMatchObject({ total: 2, baselineApplies: true });
  });

  it("overlapping targets list each resource once, naming every target that selected it", () => {
    const picked = pickTargets({
      baseline: 0,
      policies: [statusPage],
      currentPlanChanges,
      chosen: ["module.status_page", "module.status_page.aws_s3_bucket.page", "module.status_page"],
    });
    expect(picked.resources.map((r) => [r.address, r.selectedBy])).toEqual([
      ["module.status_page.aws_route53_record.status", ["module.status_page"]],
      ["module.status_page.aws_s3_bucket.page", ["module.status_page", "module.status_page.aws_s3_bucket.page"]],
    ]);
  });

  it("there is no count of zero here either: a malformed policy is refused", () => {
    const zero = policy("zero", ["*"], { update: 0 as RequirementCount });
    expect(() => pickTargets({ baseline: 2, policies: [zero], currentPlanChanges, chosen: ["aws_iam_role.deployer"] })).toThrow(GateInputError);
  });
});
