// The workspace-scoped families (approval_policy, approval_request, virtual_key, connection,
// gateway_policy) are read as part of their workspace: their types' read rules need the workspace's name and its
// stack's authz groups. One batched read per request (per subscription event) serves every object
// of a list, whatever shape the object was loaded in (a deleted key or policy included).
import DataLoader from "dataloader";
import type { Context } from "../context.js";
import { readable } from "../builder.js";
import { wroteIt } from "../denied-edges.js";
import { workspaceFamilyTarget } from "../../authz/targets.js";

export type RuleWorkspace = { id: string; orgId: string; name: string; environment: string; stack: { authzGroups: string[] } };

const loaders = new WeakMap<Context, DataLoader<string, RuleWorkspace | null>>();

/** The workspace by id with what the rules need, batched per request. */
export function ruleWorkspace(ctx: Context, id: string): Promise<RuleWorkspace | null> {
  let loader = loaders.get(ctx);
  if (!loader) {
    loader = new DataLoader(async (ids) => {
      const rows = await ctx.db.prisma.workspace.findMany({
        where: { id: { in: [...ids] } },
        select: { id: true, orgId: true, name: true, environment: true, stack: { select: { authzGroups: true } } },
      });
      const byId = new Map(rows.map((r) => [r.id, r]));
      return ids.map((id) => byId.get(id) ?? null);
    });
    loaders.set(ctx, loader);
  }
  return loader.load(id);
}

/** A subscription's context lives across events: read the workspaces anew on the next one. */
export function forgetRuleWorkspaces(ctx: Context): void {
  loaders.delete(ctx);
}

type Family = "approval_policy" | "approval_request" | "virtual_key" | "connection" | "gateway_policy" | "hold_authority";

/** The read rule of an object of a workspace-scoped family: (family, read) on its workspace. */
export async function readableInWorkspace(ctx: Context, o: { orgId: string; workspaceId: string }, family: Family): Promise<boolean> {
  if (wroteIt(ctx, o)) return true;
  if (!ctx.viewer || o.orgId !== ctx.viewer.orgId) return false;
  const workspace = await ruleWorkspace(ctx, o.workspaceId);
  if (!workspace || workspace.orgId !== o.orgId) return false;
  return readable(ctx, o, o.orgId, workspaceFamilyTarget(workspace, family, "read"));
}
