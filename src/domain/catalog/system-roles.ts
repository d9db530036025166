// The built-in roles, as data. Seed: seeds/004 "Built-in roles" — focused roles admins
// compose through multi-role SSO bindings; they "ship untargeted (any resource of that
// type)", carry no group, and (role, read) "is bundled into every non-wildcard system role
// so any active member can fetch the catalog the UI needs".
//
// read_data is in none of them explicitly: it returns unmasked outputs, so only the
// wildcards of admin and stack-admin carry it (seed: "read_data gates reading …").

import { permissionKey, type Action, type Permission, type ResourceType } from "./matrix.js";

export interface SystemRole {
  /** Stable key, quoted in logs and policies; never changes. */
  readonly key: string;
  readonly name: string;
  readonly description: string;
  readonly permissions: readonly Permission[];
}

function grant(resourceType: ResourceType, action: Action): Permission {
  return Object.freeze({ resourceType, action, resourcePattern: "", authzGroup: "" });
}

const ROLE_READ = grant("role", "read");

function role(key: string, name: string, description: string, permissions: readonly Permission[]): SystemRole {
  return Object.freeze({ key, name, description, permissions: Object.freeze([...permissions]) });
}

export const SYSTEM_ROLES: readonly SystemRole[] = Object.freeze([
  role("admin", "Admin", "Full administrator access to the organization.", [grant("*", "*")]),
  role(
    "stack-admin",
    "Stack admin",
    "Everything on stacks (including read_data, run_command, local_deploy, preview and state operations), " +
      "plus viewing the protected label keys.",
    [grant("stack", "*"), grant("label", "read"), ROLE_READ],
  ),
  role("stack-reader", "Stack reader", "View stacks (masked outputs) and their run logs.", [
    grant("stack", "read"),
    grant("stack", "read_logs"),
    ROLE_READ,
  ]),
  // Not preview: triggerer is commonly given to developers and CI identities, and preview
  // executes unreviewed provider code (seed: "Carried by stack-approver, not stack-triggerer").
  role("stack-triggerer", "Stack triggerer", "Trigger and watch deployments; cancel runs.", [
    grant("stack", "read"),
    grant("stack", "read_logs"),
    grant("stack", "deploy"),
    grant("stack", "cancel"),
    ROLE_READ,
  ]),
  role("stack-approver", "Stack approver", "Confirm plans and pull-request previews.", [
    grant("stack", "read"),
    grant("stack", "read_logs"),
    grant("stack", "confirm"),
    grant("stack", "preview"),
    ROLE_READ,
  ]),
  role("stack-command-runner", "Stack command runner", "Run raw-command deployments with the stack's credentials.", [
    grant("stack", "read"),
    grant("stack", "run_command"),
    ROLE_READ,
  ]),
  role("stack-local-deployer", "Stack local deployer", "Plan unreviewed local code on the stack's runners.", [
    grant("stack", "read"),
    grant("stack", "local_deploy"),
    ROLE_READ,
  ]),
  role("state-lock-manager", "State lock manager", "Force-unlock a stack's Terraform state.", [
    grant("stack", "read"),
    grant("stack", "unlock_state"),
    ROLE_READ,
  ]),
  role("state-overwriter", "State overwriter", "Replace a stack's Terraform state with an uploaded file.", [
    grant("stack", "read"),
    grant("stack", "overwrite_state"),
    ROLE_READ,
  ]),
  role("state-restorer", "State restorer", "Roll a stack's Terraform state back to a stored prior version.", [
    grant("stack", "read"),
    grant("stack", "restore_state"),
    ROLE_READ,
  ]),

  // ── Countersign ────────────────────────────────────────────────────────────────────
  role("workspace-reader", "Workspace reader", "View workspaces, their plans and gate status.", [
    grant("workspace", "read"),
    ROLE_READ,
  ]),
  role(
    "workspace-approver",
    "Workspace approver",
    "Approve plans, start an apply once the gate passes, and reserve workspaces.",
    [grant("workspace", "read"), grant("workspace", "approve"), ROLE_READ],
  ),
  // For runner and CI identities: submitting plans and reporting apply results, nothing more.
  role("workspace-runner", "Workspace runner", "Submit plans and report apply results (runner and CI identities).", [
    grant("workspace", "read"),
    grant("workspace", "plan"),
    ROLE_READ,
  ]),
  role("approval-reviewer", "Approval reviewer", "See held tool calls and vote on them.", [
    grant("approval_request", "read"),
    grant("approval_request", "decide"),
    ROLE_READ,
  ]),
  // Not manage: approval.policy.manage is owner-only and no grant reaches it (seed 003). The key
  // stays (keys never change); the role reads the rules an owner manages.
  role("approval-policy-manager", "Approval policy reader", "See the tool-call review rules (managing them is owner-only).", [
    grant("approval_policy", "read"),
    ROLE_READ,
  ]),
]);

export const SYSTEM_ROLE_KEYS: ReadonlySet<string> = new Set(SYSTEM_ROLES.map((r) => r.key));

export function systemRole(key: string): SystemRole | undefined {
  return SYSTEM_ROLES.find((r) => r.key === key);
}

export interface RoleDiff {
  readonly add: readonly Permission[];
  readonly remove: readonly Permission[];
}

/**
 * The start-up convergence sweep's diff for one system role: rows that drifted away are
 * removed, missing rows are added, and a row carrying a group is always removed — seed:
 * "the system-role seed carries no group and its convergence sweep removes one if it ever
 * appears, since groups are per-org names". A grouped row in `desired` is never converged
 * in, for the same reason. Rows are compared by the full tuple, so a drifted pattern on an
 * otherwise-correct row is removed and the untargeted row re-added.
 */
export function reconcileSystemRole(current: readonly Permission[], desired: readonly Permission[]): RoleDiff {
  const want = new Map<string, Permission>();
  for (const p of desired) if (p.authzGroup === "") want.set(permissionKey(p), p);
  const have = new Set<string>();
  const remove: Permission[] = [];
  for (const p of current) {
    const key = permissionKey(p);
    // Duplicates cannot exist (the table's unique key is the tuple), so each key is seen once.
    if (!want.has(key)) remove.push(p);
    have.add(key);
  }
  const add = [...want].filter(([key]) => !have.has(key)).map(([, p]) => p);
  return { add, remove };
}
