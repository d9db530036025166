import type { SignedInAuthz } from "../../authz/authz.js";
import { NotFoundError } from "../../errors.js";
import type { Database } from "../../infra/db.js";
import type { Tx } from "../../infra/db.js";

export type ScopedWorkspace = {
  id: string;
  orgId: string;
  name: string;
  environment: string;
  /** The tier (docs/held-tool-calls.md, "The production tier"). */
  production: boolean;
  frozen: boolean;
  archivedAt: Date | null;
  stack: { authzGroups: string[] };
};

/** A workspace of the viewer's org, or NotFound: another org's workspace never exists for the caller. */
export async function workspaceInViewerOrg(db: Database, authz: SignedInAuthz, workspaceId: string): Promise<ScopedWorkspace> {
  await authz.requireMember();
  const orgId = authz.viewer.orgId;
  const workspace = await db.prisma.workspace.findFirst({
    where: { id: workspaceId, orgId },
    select: { id: true, orgId: true, name: true, environment: true, production: true, frozen: true, archivedAt: true, stack: { select: { authzGroups: true } } },
  });
  if (!workspace) throw new NotFoundError("Workspace", workspaceId);
  return workspace;
}

/**
 * The workspace lock: every vote, policy change, freeze and delivery preflight of a workspace
 * serializes on its row. Lock order is always workspace, then request, then delivery job.
 */
export async function lockWorkspace(tx: Tx, workspaceId: string): Promise<{ id: string; frozen: boolean; archived: boolean } | null> {
  const rows = await tx.$queryRaw<{ id: string; frozen: boolean; archived: boolean }[]>`
    SELECT id, frozen, ("archivedAt" IS NOT NULL) AS archived FROM workspaces WHERE id = ${workspaceId} FOR UPDATE`;
  return rows[0] ?? null;
}
