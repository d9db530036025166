// How the apply gate is decided — the one place. See docs/apply-gate.md for the prose version
// and the seed (shared/seeds, "Approvals") for the rules quoted below.
//
// A plan may apply when both hold (seed, "The apply gate"):
//   1. The count is met: every (policy, action) requirement governing one of the plan's changes is
//      satisfied, and, when any change is still on the baseline, the baseline is met.
//   2. Every active reservation is answered.
//
// The rules, as implemented:
// - A change is governed by every policy that assigns it or has a pattern matching it
//   (additive). Its effective count is the strictest EXPLICIT count among those policies for its
//   action; with no policy, or only "auto" ones, it is on the baseline and its count is the
//   baseline.
// - One requirement per (policy, action) present in the plan. Overlapping policies are never
//   merged: each requirement is checked on its own (seed, "Overlapping policies": "Each approver
//   list is satisfied separately").
// - A requirement with a count is met by that many distinct approvals from holders of approve OR
//   its own named approvers (users, or CURRENT members of named roles): "Their approval counts
//   toward that policy's own number, but not toward the workspace baseline." Its approver list
//   is satisfied when one of its named approvers approved.
// - The baseline counts only approvals from holders of approve.
// - A reservation held by a person is answered by that person's approval; one held by a role, by
//   an approval from any one current member. Only an approval that counts (below) can answer.
//
// Decisions where the seed is silent (each one is argued in docs/apply-gate.md):
// - An approval counts for something only when its approver, NOW, holds approve or is a named
//   approver on a requirement governing this plan. Anyone else's approval counts for nothing —
//   not even toward a reservation they would answer: "A reservation adds a required approval. It
//   gives nobody permission to approve." Such approvers are listed in `ignoredApproverIds`.
// - A requirement with an empty approver list is satisfied by its count alone (otherwise it
//   could never be satisfied). A non-empty list whose roles have no members and that names no
//   users can never be satisfied, and keeps blocking — like a memberless role's reservation.
// - An "auto" requirement has no number of its own (the baseline, or a stricter overlapping
//   policy, decides), but if it names approvers it still needs one of them: the seed defines
//   "satisfied" as count AND named approver for every requirement, Auto included, and a policy
//   author who names approvers expects them to be asked.
// - A plan with no resource changes is held to the baseline: no policy set a count for it, so
//   nothing replaced the baseline.
// - Several approvals by one user count once; the earliest is the one reported as answering a
//   reservation (ties broken by user id).
// - Separation of duties (a workspace's preventSelfApproval, GitHub's "prevent self-review"):
//   the submitter's approval counts toward no count (baseline or policy) and satisfies no
//   approver list, and does not answer a role's reservation. It does answer a reservation held
//   by the submitter personally — seed 000: "a reservation held by a person needs that person's
//   own approval" — so the rule never leaves a workspace its own holder cannot apply in. While
//   the gate has not passed, the reason submitter_approval_not_counted says so.
// - Malformed input (a count outside 1, 2, 3, "auto"; a negative or fractional baseline; a
//   duplicate policy id; an unknown action; an unparseable approval time) throws GateInputError
//   rather than producing a verdict: the gate fails closed and loudly.
//
// Deterministic: every output list is sorted, so permuting any input list yields an identical
// (deep-equal) evaluation.

import { buildAddressIndex } from "./address-pattern.js";
import {
  CHANGE_ACTIONS,
  GateInputError,
  isChangeAction,
  isRequirementCount,
  type ChangeAction,
  type ChangeEvaluation,
  type GateEvaluation,
  type GateInput,
  type GatePolicy,
  type GateReason,
  type GoverningPolicy,
  type MissingApprovers,
  type PlanChange,
  type RequirementEvaluation,
  type ReservationEvaluation,
} from "./types.js";

const ACTIONS = CHANGE_ACTIONS.length;
const ACTION_ORDER: Readonly<Record<ChangeAction, number>> = {
  create: 0,
  update: 1,
  delete: 2,
  replace: 3,
};

/** Locale-independent, so the order never depends on the server's ICU data. */
export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Which policies govern an address, and what that makes a change's count. Shared with picker.ts.

export interface ChangeCount {
  readonly governedBy: readonly GoverningPolicy[];
  readonly effectiveCount: number;
  readonly onBaseline: boolean;
}

export interface PolicyScope {
  /** The policies, sorted by id. */
  readonly policies: readonly GatePolicy[];
  /** Indices into `policies` of those assigning or matching `address`, ascending (so by id). */
  governing(address: string): readonly number[];
  /**
   * Seed, "Requirements": "An explicit count replaces the workspace baseline for the resources
   * the policy governs, whether it is higher or lower", and "Overlapping policies": "The count
   * is the strictest of them." Auto is not a count; all-Auto (or no policy) is the baseline.
   */
  count(governing: readonly number[], action: ChangeAction, baseline: number): ChangeCount;
}

/** Compiles every policy's patterns once (and caches the compiled index across calls). */
export function scopePolicies(policies: readonly GatePolicy[]): PolicyScope {
  const sorted = [...policies].sort((a, b) => compareStrings(a.id, b.id));
  const index = buildAddressIndex(
    sorted.map((policy) => ({ exact: policy.assignedAddresses, patterns: policy.addressPatterns })),
  );
  // Per (policy, action): the row shown in `governedBy` (shared between changes; the output is
  // read-only data) and the explicit count, 0 for Auto.
  const rows: GoverningPolicy[] = [];
  const explicit = new Int8Array(sorted.length * ACTIONS);
  sorted.forEach((policy, p) => {
    CHANGE_ACTIONS.forEach((action, a) => {
      const count = policy.requirements[action]?.count;
      if (!isRequirementCount(count)) {
        // There is no count of zero (seed, "Requirements"), and nothing else outside 1-3 / Auto.
        throw new GateInputError([`policy ${policy.id} ${action} count must be 1, 2, 3 or "auto" (got ${JSON.stringify(count)})`]);
      }
      rows.push({ policyId: policy.id, policyName: policy.name, count });
      explicit[p * ACTIONS + a] = count === "auto" ? 0 : count;
    });
  });
  return {
    policies: sorted,
    governing: (address) => index.lookup(address),
    count(governing, action, baseline) {
      const a = ACTION_ORDER[action];
      let strictest = 0;
      const governedBy = new Array<GoverningPolicy>(governing.length);
      for (let k = 0; k < governing.length; k++) {
        const slot = (governing[k] as number) * ACTIONS + a;
        governedBy[k] = rows[slot] as GoverningPolicy;
        const count = explicit[slot] as number;
        if (count > strictest) strictest = count;
      }
      const onBaseline = strictest === 0;
      return { governedBy, effectiveCount: onBaseline ? baseline : strictest, onBaseline };
    },
  };
}

// ---------------------------------------------------------------------------------------------

export function evaluateGate(input: GateInput): GateEvaluation {
  const approvedAt = assertValidInput(input);
  const { baseline, approveHolders } = input;
  const scope = scopePolicies(input.policies);
  const policies = scope.policies;
  const userName = (id: string): string => input.userNames?.get(id) ?? id;
  const roleName = (id: string): string => input.roleNames?.get(id) ?? id;

  // --- changes -------------------------------------------------------------------------------
  const byAddressThenAction = (a: PlanChange, b: PlanChange): number =>
    compareStrings(a.address, b.address) || ACTION_ORDER[a.action] - ACTION_ORDER[b.action];
  // Parsed plans arrive sorted; checking is linear, sorting is not.
  const sortedChanges = isSorted(input.changes, byAddressThenAction)
    ? input.changes
    : [...input.changes].sort(byAddressThenAction);
  // Changes governed per (policy index, action index); > 0 means the requirement is present.
  const changesPerRequirement = new Int32Array(policies.length * ACTIONS);
  const holdingChanges: string[] = [];
  const changes = new Array<ChangeEvaluation>(sortedChanges.length);
  for (let c = 0; c < sortedChanges.length; c++) {
    const { address, action } = sortedChanges[c] as PlanChange;
    const governing = scope.governing(address);
    const { governedBy, effectiveCount, onBaseline } = scope.count(governing, action, baseline);
    const a = ACTION_ORDER[action];
    for (const p of governing) changesPerRequirement[p * ACTIONS + a]! += 1;
    if (onBaseline && holdingChanges[holdingChanges.length - 1] !== address) holdingChanges.push(address);
    changes[c] = { address, action, governedBy, effectiveCount, onBaseline };
  }

  // --- approvers -----------------------------------------------------------------------------
  // Separation of duties: with self-approval prevented, the submitter's approval is left out of
  // every count and approver list; it can only answer the submitter's own reservation (below).
  const excluded = input.excludedSubmitterId ?? null;
  const allApprovers = [...approvedAt.keys()].sort(compareStrings);
  const approvers = excluded === null ? allApprovers : allApprovers.filter((id) => id !== excluded);
  const holders = approvers.filter((id) => approveHolders.has(id));
  // Whether the submitter would count, were they not excluded: holding approve, or named on a
  // requirement of this plan (filled in while the requirements are evaluated).
  let submitterWouldCount = excluded !== null && approvedAt.has(excluded) && approveHolders.has(excluded);

  // Current members, read now: "Membership is read when the apply is checked".
  const memberCache = new Map<string, readonly string[]>();
  const membersOf = (roleId: string): readonly string[] => {
    let members = memberCache.get(roleId);
    if (!members) {
      members = [...new Set(input.roleMembers.get(roleId) ?? [])].sort(compareStrings);
      memberCache.set(roleId, members);
    }
    return members;
  };

  // --- requirements --------------------------------------------------------------------------
  const namedOnThisPlan = new Set<string>();
  const requirements: RequirementEvaluation[] = [];
  policies.forEach((policy, p) => {
    CHANGE_ACTIONS.forEach((action, a) => {
      const changeCount = changesPerRequirement[p * ACTIONS + a] ?? 0;
      if (changeCount === 0) return;
      const requirement = policy.requirements[action];
      const userIds = [...new Set(requirement.approverUserIds)].sort(compareStrings);
      const roleIds = [...new Set(requirement.approverRoleIds)].sort(compareStrings);
      const named = new Set(userIds);
      for (const roleId of roleIds) for (const member of membersOf(roleId)) named.add(member);

      if (excluded !== null && approvedAt.has(excluded) && named.has(excluded)) submitterWouldCount = true;
      const namedApproverIds = approvers.filter((id) => named.has(id));
      for (const id of namedApproverIds) namedOnThisPlan.add(id);
      const countedUserIds = approvers.filter((id) => approveHolders.has(id) || named.has(id));
      const countMet = requirement.count === "auto" || countedUserIds.length >= requirement.count;
      const listEmpty = userIds.length === 0 && roleIds.length === 0;
      const approverListSatisfied = listEmpty || namedApproverIds.length > 0;
      const missingApprovers: MissingApprovers = approverListSatisfied
        ? { userIds: [], roleIds: [], eligibleUserIds: [] }
        : { userIds, roleIds, eligibleUserIds: [...named].sort(compareStrings) };

      requirements.push({
        policyId: policy.id,
        policyName: policy.name,
        action,
        count: requirement.count,
        changeCount,
        counted: countedUserIds.length,
        countedUserIds,
        countMet,
        approverListSatisfied,
        namedApproverIds,
        missingApprovers,
        satisfied: countMet && approverListSatisfied,
      });
    });
  });

  // An approval counts for something only from a holder of approve or a named approver here.
  const countingApprovers = new Set([...holders, ...namedOnThisPlan]);
  // Seed 000, "The apply gate": "a reservation held by a person needs that person's own
  // approval". Preventing self-approval never makes the submitter's own reservation
  // unanswerable: their (counting) approval answers it, and nothing else.
  const ownReservation = excluded !== null && input.reservations.some((r) => r.holder.kind === "user" && r.holder.userId === excluded);
  const answersOwnReservation = ownReservation && submitterWouldCount;
  const answersReservationsOf = (holderUserId: string | null) => (id: string) =>
    countingApprovers.has(id) || (answersOwnReservation && id === excluded && holderUserId === excluded);
  const countedApproverIds = allApprovers.filter((id) => countingApprovers.has(id) || (answersOwnReservation && id === excluded));
  const ignoredApproverIds = allApprovers.filter((id) => !countedApproverIds.includes(id));

  // --- baseline ------------------------------------------------------------------------------
  const baselineApplies = changes.length === 0 || holdingChanges.length > 0;
  const baselineMet = !baselineApplies || holders.length >= baseline;

  // --- reservations --------------------------------------------------------------------------
  const earliest = (candidates: readonly string[], counts: (id: string) => boolean): string | null => {
    let best: string | null = null;
    for (const id of candidates) {
      if (!counts(id)) continue;
      if (best === null || (approvedAt.get(id) as number) < (approvedAt.get(best) as number)) best = id;
    }
    return best; // candidates are sorted, so ties go to the smaller id
  };
  const reservations = [...input.reservations]
    .sort((a, b) => compareStrings(a.id, b.id))
    .map((reservation): ReservationEvaluation => {
      const { holder } = reservation;
      const currentMembers = holder.kind === "role" ? membersOf(holder.roleId) : null;
      const answeredByUserId =
        holder.kind === "user"
          ? earliest([holder.userId], answersReservationsOf(holder.userId))
          : earliest(currentMembers ?? [], answersReservationsOf(null));
      return {
        id: reservation.id,
        holder: holder.kind === "user" ? { kind: "user", userId: holder.userId } : { kind: "role", roleId: holder.roleId },
        placedByUserId: reservation.placedByUserId,
        answered: answeredByUserId !== null,
        answeredByUserId,
        currentMembers: currentMembers ? [...currentMembers] : null,
      };
    });
  const reservationsAnswered = reservations.every((r) => r.answered);

  // --- verdict and reasons -------------------------------------------------------------------
  const countMet = baselineMet && requirements.every((r) => r.satisfied);
  const reasons: GateReason[] = [];

  if (!baselineMet) {
    const where =
      holdingChanges.length === 0
        ? "The plan has no resource changes, so the workspace baseline applies"
        : `The plan is held on the workspace baseline by ${listSome(holdingChanges)}`;
    reasons.push({
      code: "baseline_not_met",
      message: `${where}: ${holders.length} of ${approvals(baseline)} from holders of approve.`,
    });
  }

  for (const r of requirements) {
    if (!r.countMet) {
      reasons.push({
        code: "policy_count_not_met",
        message:
          `Policy "${r.policyName}" asks for ${approvals(r.count as number)} to ${r.action} ` +
          `(${r.changeCount === 1 ? "1 change" : `${r.changeCount} changes`}): ` +
          `${r.counted} so far from holders of approve and its named approvers.`,
        policyId: r.policyId,
        action: r.action,
      });
    }
    if (!r.approverListSatisfied) {
      const who = [
        ...r.missingApprovers.userIds.map(userName),
        ...r.missingApprovers.roleIds.map((roleId) => {
          const members = membersOf(roleId);
          return members.length === 0
            ? `role ${roleName(roleId)} (no current members)`
            : `role ${roleName(roleId)} (current members: ${members.map(userName).join(", ")})`;
        }),
      ].join("; ");
      const nobody = r.missingApprovers.eligibleUserIds.length === 0 ? " Nobody can satisfy this list now." : "";
      reasons.push({
        code: "approver_list_missing",
        message: `Policy "${r.policyName}" (${r.action}) needs an approval from one of its named approvers: ${who}.${nobody}`,
        policyId: r.policyId,
        action: r.action,
      });
    }
  }

  for (const r of reservations) {
    if (r.answered) continue;
    const placedBy = userName(r.placedByUserId);
    const uncounted = (ids: readonly string[]): string => {
      const approvedButIgnored = ids.filter((id) => approvedAt.has(id) && !countingApprovers.has(id) && id !== excluded);
      if (approvedButIgnored.length === 0) return "";
      return (
        ` ${approvedButIgnored.map(userName).join(", ")} approved, but neither holds approve on the ` +
        `workspace nor is a named approver on this plan's policies, so that does not count.`
      );
    };
    let message: string;
    if (r.holder.kind === "user") {
      const holder = userName(r.holder.userId);
      message = `Reserved for ${holder} by ${placedBy}: every apply needs ${holder}'s own approval.${uncounted([r.holder.userId])}`;
    } else {
      const role = roleName(r.holder.roleId);
      const members = r.currentMembers ?? [];
      message =
        members.length === 0
          ? `Reserved for role ${role} by ${placedBy}: the role has no members, so it blocks every apply until a super_admin releases the reservation.`
          : `Reserved for role ${role} by ${placedBy}: every apply needs an approval from one current member (${members.map(userName).join(", ")}).${uncounted(members)}`;
    }
    reasons.push({ code: "reservation_unanswered", message, reservationId: r.id });
  }

  const passed = countMet && reservationsAnswered;
  const submitterApproved = excluded !== null && approvedAt.has(excluded);
  if (!passed && excluded !== null) {
    const who = userName(excluded);
    const own = answersOwnReservation ? ` It still answers ${who}'s own reservation.` : "";
    reasons.push({
      code: "submitter_approval_not_counted",
      message: submitterApproved
        ? `${who} submitted this plan, and this workspace prevents self-approval: ${who}'s approval counts toward no count or approver list.${own}`
        : `${who} submitted this plan, and this workspace prevents self-approval: the approvals must come from others.`,
    });
  }

  return {
    passed,
    countMet,
    reservationsAnswered,
    baseline: {
      applies: baselineApplies,
      required: baseline,
      counted: holders.length,
      countedUserIds: holders,
      met: baselineMet,
      holdingChanges,
    },
    changes,
    requirements,
    reservations,
    approvalsCounted: countedApproverIds.length,
    countedApproverIds,
    ignoredApproverIds,
    reasons,
    selfApproval: { prevented: excluded !== null, submitterId: excluded, submitterApproved, answersOwnReservation },
  };
}

function isSorted<T>(items: readonly T[], compare: (a: T, b: T) => number): boolean {
  for (let i = 1; i < items.length; i++) if (compare(items[i - 1] as T, items[i] as T) > 0) return false;
  return true;
}

function approvals(n: number): string {
  return n === 1 ? "1 approval" : `${n} approvals`;
}

function listSome(items: readonly string[], max = 5): string {
  if (items.length <= max) return items.join(", ");
  return `${items.slice(0, max).join(", ")} and ${items.length - max} more`;
}

/** Throws GateInputError on malformed input; returns each approver's earliest approval time. */
function assertValidInput(input: GateInput): Map<string, number> {
  const issues: string[] = [];
  if (!Number.isInteger(input.baseline) || input.baseline < 0) {
    issues.push(`baseline must be a non-negative integer (got ${String(input.baseline)})`);
  }
  const ids = new Set<string>();
  for (const policy of input.policies) {
    if (ids.has(policy.id)) issues.push(`policy ${policy.id} appears twice`);
    ids.add(policy.id);
    for (const action of CHANGE_ACTIONS) {
      const requirement = (policy.requirements as Partial<GatePolicy["requirements"]> | undefined)?.[action];
      if (!requirement) {
        issues.push(`policy ${policy.id} has no ${action} requirement`);
      } else if (!isRequirementCount(requirement.count)) {
        // There is no count of zero (seed, "Requirements").
        issues.push(`policy ${policy.id} ${action} count must be 1, 2, 3 or "auto" (got ${JSON.stringify(requirement.count)})`);
      }
    }
  }
  for (const change of input.changes) {
    if (!isChangeAction(change.action)) {
      issues.push(`change ${change.address} has an unknown action ${JSON.stringify(change.action)}`);
    }
  }
  const approvedAt = new Map<string, number>();
  for (const approval of input.approvals) {
    const at = approval.approvedAt instanceof Date ? approval.approvedAt.getTime() : Date.parse(approval.approvedAt);
    if (Number.isNaN(at)) {
      issues.push(`approval by ${approval.userId} has an invalid time`);
      continue;
    }
    const seen = approvedAt.get(approval.userId);
    if (seen === undefined || at < seen) approvedAt.set(approval.userId, at);
  }
  for (const reservation of input.reservations) {
    const kind: unknown = reservation.holder.kind;
    if (kind !== "user" && kind !== "role") issues.push(`reservation ${reservation.id} has an unknown holder kind`);
  }
  if (issues.length > 0) throw new GateInputError(issues);
  return approvedAt;
}
