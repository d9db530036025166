// The apply gate's input and output, as plain data.
//
// Input is resolved by the caller AT EVALUATION TIME (seed, "The apply gate": "The gate is
// evaluated at apply time, not when the plan was created"): current approve holders, current
// role members, active reservations, the policies as they stand now. Nothing in here reads a
// database, a clock or a GraphQL context.
//
// Output is JSON-serializable (no Dates, Sets, Maps or undefined-valued keys): it is stored with
// the plan and pushed over subscriptions, and `JSON.parse(JSON.stringify(e))` equals `e`.

export const CHANGE_ACTIONS = ["create", "update", "delete", "replace"] as const;
export type ChangeAction = (typeof CHANGE_ACTIONS)[number];

/**
 * A requirement's count. There is no 0 (seed, "Requirements": "There is no count of zero: a
 * policy cannot wave a change through with no approval at all"); "auto" means the workspace
 * baseline decides.
 */
export const REQUIREMENT_COUNTS = [1, 2, 3, "auto"] as const;
export type RequirementCount = (typeof REQUIREMENT_COUNTS)[number];
export type ExplicitCount = Exclude<RequirementCount, "auto">;

export function isChangeAction(value: unknown): value is ChangeAction {
  return (CHANGE_ACTIONS as readonly unknown[]).includes(value);
}

export function isRequirementCount(value: unknown): value is RequirementCount {
  return (REQUIREMENT_COUNTS as readonly unknown[]).includes(value);
}

// ---------------------------------------------------------------------------------------------
// Input

export interface PlanChange {
  readonly address: string;
  readonly action: ChangeAction;
}

export interface PolicyRequirement {
  readonly count: RequirementCount;
  /** Named approvers: organization users ... */
  readonly approverUserIds: readonly string[];
  /** ... and roles, meaning the roles' CURRENT members (looked up in `GateInput.roleMembers`). */
  readonly approverRoleIds: readonly string[];
}

export interface GatePolicy {
  readonly id: string;
  readonly name: string;
  /** Assigned: exact addresses picked by hand. Additive with the patterns. */
  readonly assignedAddresses: readonly string[];
  /** Matched: address globs (see address-pattern.ts). */
  readonly addressPatterns: readonly string[];
  /** One requirement per action; all four must be present. */
  readonly requirements: Readonly<Record<ChangeAction, PolicyRequirement>>;
}

export interface GateApproval {
  readonly userId: string;
  /** A Date or an ISO-8601 string; used only to say which approval answered a reservation. */
  readonly approvedAt: Date | string;
}

export type ReservationHolder =
  | { readonly kind: "user"; readonly userId: string }
  | { readonly kind: "role"; readonly roleId: string };

export interface GateReservation {
  readonly id: string;
  readonly holder: ReservationHolder;
  readonly placedByUserId: string;
}

export interface GateInput {
  /** The workspace's required approvals: a non-negative integer, 0 by default. */
  readonly baseline: number;
  readonly changes: readonly PlanChange[];
  /** The policies applied to this workspace (the caller filters by workspace). */
  readonly policies: readonly GatePolicy[];
  /** The plan's approvals. Several approvals by one user count once. */
  readonly approvals: readonly GateApproval[];
  /**
   * Users who hold (workspace, approve) NOW, directly or through a role, super_admins included
   * (super_admin short-circuits every permission check). Only approvers need to be in it.
   */
  readonly approveHolders: ReadonlySet<string>;
  /**
   * Current members of every role referenced by a policy requirement or a reservation. A
   * referenced role missing from the map is read as having no members (fail closed).
   */
  readonly roleMembers: ReadonlyMap<string, readonly string[]>;
  /** Active (unreleased) reservations on the workspace. */
  readonly reservations: readonly GateReservation[];
  /**
   * Separation of duties ("prevent self-review", the workspace's preventSelfApproval): the
   * plan's submitter, whose approval then counts toward no count and no approver list. Null or
   * absent when the workspace allows self-approval.
   */
  readonly excludedSubmitterId?: string | null;
  /** Display names for messages only; ids are used when absent. Never affects the decision. */
  readonly userNames?: ReadonlyMap<string, string>;
  readonly roleNames?: ReadonlyMap<string, string>;
}

// ---------------------------------------------------------------------------------------------
// Output

export interface GoverningPolicy {
  readonly policyId: string;
  readonly policyName: string;
  /** This policy's count for the change's action. */
  readonly count: RequirementCount;
}

export interface ChangeEvaluation {
  readonly address: string;
  readonly action: ChangeAction;
  /** Sorted by policy id. Empty when no policy governs the change. */
  readonly governedBy: readonly GoverningPolicy[];
  /** The strictest explicit count of its policies, or the baseline when `onBaseline`. */
  readonly effectiveCount: number;
  /** True when no policy governs it, or all its policies say "auto" for its action. */
  readonly onBaseline: boolean;
}

export interface MissingApprovers {
  /** The requirement's named users (all of them: any one would do). */
  readonly userIds: readonly string[];
  /** The requirement's named roles. */
  readonly roleIds: readonly string[];
  /** Everyone whose approval would satisfy the list now: the users plus the roles' current members. */
  readonly eligibleUserIds: readonly string[];
}

/** One per (policy, action) that governs at least one of the plan's changes. */
export interface RequirementEvaluation {
  readonly policyId: string;
  readonly policyName: string;
  readonly action: ChangeAction;
  readonly count: RequirementCount;
  /** How many of the plan's changes this requirement governs. */
  readonly changeCount: number;
  /** Approvals that count toward this policy's number: approve holders and its named approvers. */
  readonly counted: number;
  readonly countedUserIds: readonly string[];
  /** Always true for "auto": the count is then the baseline's business (see `baseline`). */
  readonly countMet: boolean;
  /** True when the list is empty or one of its named approvers approved. */
  readonly approverListSatisfied: boolean;
  /** Named approvers (users, or current members of named roles) who approved. */
  readonly namedApproverIds: readonly string[];
  /** Empty when the list is satisfied. */
  readonly missingApprovers: MissingApprovers;
  readonly satisfied: boolean;
}

export interface BaselineEvaluation {
  /** True when at least one change is on the baseline, or the plan has no changes at all. */
  readonly applies: boolean;
  readonly required: number;
  /** Approvals by holders of approve; only these count toward the baseline. */
  readonly counted: number;
  readonly countedUserIds: readonly string[];
  /** `!applies || counted >= required`. */
  readonly met: boolean;
  /** Addresses of the changes holding the plan on the baseline, sorted. */
  readonly holdingChanges: readonly string[];
}

export interface ReservationEvaluation {
  readonly id: string;
  readonly holder: ReservationHolder;
  readonly placedByUserId: string;
  readonly answered: boolean;
  /** The earliest counting approval that answers it, or null. */
  readonly answeredByUserId: string | null;
  /** For a role's reservation, its current members (sorted); null for a person's. */
  readonly currentMembers: readonly string[] | null;
}

export const GATE_REASON_CODES = [
  "baseline_not_met",
  "policy_count_not_met",
  "approver_list_missing",
  "reservation_unanswered",
  "submitter_approval_not_counted",
] as const;
export type GateReasonCode = (typeof GATE_REASON_CODES)[number];

/** What the self-approval rule did to this evaluation. */
export interface SelfApprovalEvaluation {
  /** The workspace prevents self-approval: the submitter's approval counts toward no count or list. */
  readonly prevented: boolean;
  /** The plan's submitter, when prevented; null otherwise. */
  readonly submitterId: string | null;
  readonly submitterApproved: boolean;
  /**
   * Seed 000: "a reservation held by a person needs that person's own approval". The submitter's
   * approval still answers a reservation held by the submitter (and nothing else).
   */
  readonly answersOwnReservation: boolean;
}

export interface GateReason {
  readonly code: GateReasonCode;
  readonly message: string;
  readonly policyId?: string;
  readonly action?: ChangeAction;
  readonly reservationId?: string;
}

export interface GateEvaluation {
  /** `countMet && reservationsAnswered`. */
  readonly passed: boolean;
  /** The baseline (where it applies) and every requirement are satisfied. */
  readonly countMet: boolean;
  readonly reservationsAnswered: boolean;
  readonly baseline: BaselineEvaluation;
  /** Sorted by address, then action. */
  readonly changes: readonly ChangeEvaluation[];
  /** Sorted by policy id, then action (create, update, delete, replace). */
  readonly requirements: readonly RequirementEvaluation[];
  /** Sorted by id. */
  readonly reservations: readonly ReservationEvaluation[];
  /** Distinct users whose approval counts for anything ("the count so far"). */
  readonly approvalsCounted: number;
  readonly countedApproverIds: readonly string[];
  /**
   * Users who approved but now neither hold approve nor are named on a requirement of this plan,
   * and the submitter whose approval the self-approval rule excludes (unless it answered their
   * own reservation).
   */
  readonly ignoredApproverIds: readonly string[];
  /** Absent on evaluations stored before the rule existed (read them as not prevented). */
  readonly selfApproval?: SelfApprovalEvaluation;
  /** Why the gate has not passed; empty when it passed. Stable codes, sorted as documented. */
  readonly reasons: readonly GateReason[];
}

/** Input the evaluator refuses to decide on (a programming or data error, not a gate result). */
export class GateInputError extends Error {
  override readonly name = "GateInputError";
  readonly issues: readonly string[];
  constructor(issues: readonly string[]) {
    super(`invalid gate input: ${issues.join("; ")}`);
    this.issues = issues;
  }
}
