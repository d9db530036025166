// The workspace-scoped families (approval_policy, approval_request, virtual_key, connection,
// gateway_policy) are read as part of their workspace: their types' read rules need the workspace's name and its
// stack's authz groups. One batched read per request (per subscription event) serves every object
// of a list, whatever shape the object was loaded in (a deleted key or policy included).
import DataLoader from "dataloader";
import type { Context } from "../context.js";
import { perRequest } from "../request-loaders.js";
import { readable } from "../builder.js";
import { wroteIt } from "../denied-edges.js";
import { workspaceFamilyTarget } from "../../authz/targets.js";

export type RuleWorkspace = { id: string; orgId: string; name: string; environment: string; stack: { authzGroups: string[] } };

const ruleWorkspaces = perRequest(
  (ctx: Context) =>
    new DataLoader<string, RuleWorkspace | null>(async (ids) => {
      const rows = await ctx.db.prisma.workspace.findMany({
        where: { id: { in: [...ids] } },
        select: { id: true, orgId: true, name: true, environment: true, stack: { select: { authzGroups: true } } },
      });
      const byId = new Map(rows.map((r) => [r.id, r]));
      return ids.map((id) => byId.get(id) ?? null);
    }),
);

/**
 * The rule workspaces of this request at hand without waiting: the rows knownRuleWorkspace was
 * given, and which ids were asked of the loader (a row primed after that does not replace the
 * loader's, so it is not at hand either).
 */
const atHand = perRequest((_ctx: Context) => ({ rows: new Map<string, RuleWorkspace>(), asked: new Set<string>() }));

/** The workspace by id with what the rules need, batched per request. */
export function ruleWorkspace(ctx: Context, id: string): Promise<RuleWorkspace | null> {
  atHand.of(ctx).asked.add(id);
  return ruleWorkspaces.of(ctx).load(id);
}

/**
 * A workspace row this request has read with its stack's groups (the Workspace type's own row):
 * the rules of what is read as part of it (its plans, its reservations) take it from here, with
 * no statement of their own. A row already there stays.
 */
export function knownRuleWorkspace(ctx: Context, w: RuleWorkspace): void {
  const here = atHand.of(ctx);
  if (!here.asked.has(w.id) && !here.rows.has(w.id)) here.rows.set(w.id, w);
  ruleWorkspaces.of(ctx).prime(w.id, w);
}

type Family = "workspace" | "approval_policy" | "approval_request" | "virtual_key" | "connection" | "gateway_policy" | "hold_authority";

/**
 * The read rule of an object read as part of its workspace: (family, read) on that workspace —
 * (workspace, read) for a plan or a reservation, the family's own read for the workspace-scoped families.
 */
export function readableInWorkspace(ctx: Context, o: { orgId: string; workspaceId: string }, family: Family): boolean | Promise<boolean> {
  if (wroteIt(ctx, o)) return true;
  if (!ctx.viewer || o.orgId !== ctx.viewer.orgId) return false;
  const decide = (workspace: RuleWorkspace | null) =>
    !workspace || workspace.orgId !== o.orgId ? false : readable(ctx, o, o.orgId, workspaceFamilyTarget(workspace, family, "read"));
  // The workspace a list read this object through is at hand: decided now, as the list's own rows are.
  const known = atHand.of(ctx).rows.get(o.workspaceId);
  return known ? decide(known) : ruleWorkspace(ctx, o.workspaceId).then(decide);
}
