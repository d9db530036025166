// The targeted plan picker: what a targeted plan would need, shown before it runs.
//
// Seed, "Requirements" / "A targeted plan": "The targeted plan picker shows each resource's count
// before the plan runs, using the action the workspace's current plan has for it, and the total
// can rise once the plan shows what it really changes."
//
// Decisions:
// - A chosen target selects every current-plan address equal to it or beneath it, the way
//   `terraform plan -target` does: `module.x` selects `module.x.aws_a.b`, `module.x["k"].aws_a.b`
//   and nested modules; `aws_instance.web` selects `aws_instance.web[0]`, `aws_instance.web["a"]`.
//   "Beneath" means the next character is `.` or `[`, so `module.x` never selects `module.xy.*`.
// - A target that selects nothing in the current plan is still listed, with action null and
//   count null: the current plan does not change it, so there is no action to read a count from.
//   It does not enter the total.
// - The total is the count part of the gate (evaluate.ts's rule, reused): the strictest effective
//   count among the selected changes, and at least the baseline when any of them is on the
//   baseline — or when nothing with an action was selected, since an empty plan is held to the
//   baseline. It is the minimum number of approvals; approver lists and reservations can require
//   particular people on top of it, and they are the gate's business after the plan runs.

import { compareStrings, scopePolicies } from "./evaluate.js";
import type { ChangeAction, GatePolicy, PlanChange, RequirementCount } from "./types.js";

export interface PickTargetsInput {
  readonly baseline: number;
  readonly policies: readonly GatePolicy[];
  /** The workspace's current (untargeted) plan. */
  readonly currentPlanChanges: readonly PlanChange[];
  /** Exact addresses or module / resource prefixes, as given to `-target`. */
  readonly chosen: readonly string[];
}

export interface PickedPolicy {
  readonly policyId: string;
  readonly policyName: string;
  /** The policy's count for the resource's current-plan action; null when it has none. */
  readonly count: RequirementCount | null;
}

export interface PickedResource {
  readonly address: string;
  /** The action the current plan has for it; null when the current plan does not change it. */
  readonly action: ChangeAction | null;
  readonly governedBy: readonly PickedPolicy[];
  /** Its effective count; null when `action` is null. */
  readonly count: number | null;
  readonly onBaseline: boolean;
  /** The chosen targets that selected it, sorted. */
  readonly selectedBy: readonly string[];
}

export interface PickTargetsResult {
  /** Sorted by address. */
  readonly resources: readonly PickedResource[];
  /** The minimum approvals the targeted plan would need, as far as the current plan shows. */
  readonly total: number;
  readonly baselineApplies: boolean;
  /** Selected addresses on the baseline, sorted. */
  readonly holdingChanges: readonly string[];
  readonly notes: readonly string[];
}

export const TOTAL_CAN_RISE_NOTE =
  "The total can rise once the plan shows what it really changes: Terraform may pull in dependencies outside the targets, and one on the baseline holds the whole plan to it.";

export function pickTargets(input: PickTargetsInput): PickTargetsResult {
  const scope = scopePolicies(input.policies);
  const targets = [...new Set(input.chosen)].sort(compareStrings);
  const plan = [...input.currentPlanChanges].sort((a, b) => compareStrings(a.address, b.address));

  // address -> (change, targets selecting it). Several entries for one address (not expected
  // from a parsed plan) are each kept.
  const selected = new Map<PlanChange, string[]>();
  const unmatched: string[] = [];
  for (const target of targets) {
    let any = false;
    for (const change of beneath(plan, target)) {
      any = true;
      const by = selected.get(change);
      if (by) by.push(target);
      else selected.set(change, [target]);
    }
    if (!any) unmatched.push(target);
  }

  const resources: PickedResource[] = [];
  for (const [change, selectedBy] of selected) {
    const { governedBy, effectiveCount, onBaseline } = scope.count(
      scope.governing(change.address),
      change.action,
      input.baseline,
    );
    resources.push({ address: change.address, action: change.action, governedBy, count: effectiveCount, onBaseline, selectedBy });
  }
  for (const target of unmatched) {
    resources.push({
      address: target,
      action: null,
      governedBy: scope.governing(target).map((i) => {
        const policy = scope.policies[i] as GatePolicy;
        return { policyId: policy.id, policyName: policy.name, count: null };
      }),
      count: null,
      onBaseline: false,
      selectedBy: [target],
    });
  }
  resources.sort((a, b) => compareStrings(a.address, b.address) || compareStrings(a.action ?? "", b.action ?? ""));
  const known = resources.filter((r) => r.action !== null);
  const holdingChanges = [...new Set(known.filter((r) => r.onBaseline).map((r) => r.address))];
  const baselineApplies = known.length === 0 || holdingChanges.length > 0;
  let total = baselineApplies ? input.baseline : 0;
  for (const r of known) if (!r.onBaseline && (r.count as number) > total) total = r.count as number;

  const notes = [TOTAL_CAN_RISE_NOTE];
  if (unmatched.length > 0) {
    notes.push(
      `Not changed by the current plan, so not counted: ${unmatched.join(", ")}. If the targeted plan does change them, their policies apply.`,
    );
  }
  notes.push("Approver lists and reservations may require particular people on top of the total.");
  return { resources, total, baselineApplies, holdingChanges, notes };
}

/** Changes at `target` or beneath it; `plan` is sorted by address, so they are contiguous. */
function* beneath(plan: readonly PlanChange[], target: string): Generator<PlanChange> {
  let lo = 0;
  let hi = plan.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareStrings((plan[mid] as PlanChange).address, target) < 0) lo = mid + 1;
    else hi = mid;
  }
  for (let i = lo; i < plan.length; i++) {
    const change = plan[i] as PlanChange;
    if (!change.address.startsWith(target)) return;
    const next = change.address.charAt(target.length);
    if (next === "" || next === "." || next === "[") yield change;
  }
}
