import type { Target } from "../domain/catalog/index.js";

// The catalog Target of a stack or a workspace, in one place: the
// apply gate and the held-call use cases each had a `workspaceTarget` of their own.

/** The families scoped to a workspace: matched by the WORKSPACE name, with its stack's authz groups. */
export type WorkspaceFamily = "approval_policy" | "gateway_policy" | "hold_authority" | "approval_request" | "virtual_key" | "connection" | "workspace";

/** A stack's target (match value = its name, groups = its authz groups); null: a stack that does not exist. */
export const stackTarget = (stack: { name: string; authzGroups: string[] } | null, action: Target["action"]): Target => ({
  resourceType: "stack",
  action,
  matchValue: stack ? stack.name : null,
  groups: stack ? stack.authzGroups : null,
});

/** The workspace-family target of a workspace (match value = its name, groups = its stack's). */
export function workspaceTarget(
  workspace: { name: string; authzGroups: readonly string[] },
  action: "create" | "read" | "update" | "archive" | "approve" | "plan" | "freeze",
): Target {
  return { resourceType: "workspace", action, matchValue: workspace.name, groups: workspace.authzGroups };
}

/**
 * The workspace-scoped families (approval_policy, approval_request, virtual_key, connection,
 * workspace) are matched by the WORKSPACE name and receive its stack's authz groups.
 */
export function workspaceFamilyTarget(
  workspace: { name: string; stack: { authzGroups: string[] } },
  resourceType: WorkspaceFamily,
  action: Target["action"],
): Target {
  return { resourceType, action, matchValue: workspace.name, groups: workspace.stack.authzGroups };
}
