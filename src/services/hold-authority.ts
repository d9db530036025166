// Hold authority: a change that can let a held tool call through without approval
// (src/domain/hold-authority.ts) needs (hold_authority, change) on its workspace — owner-only —
// and is recorded, with who and when, in the append-only hold_authority_changes, in the same
// transaction as the change, together with the webhook event hold_authority.changed.

import type { Authz } from "../authz/authz.js";
import { workspaceFamilyTarget } from "../authz/targets.js";
import { HOLD_LIFTING_CHANGES, type HoldLiftingKind } from "../domain/hold-authority.js";
import type { Database, Tx } from "../infra/db.js";
import type { Prisma } from "../generated/prisma/client.js";
import { enqueueWebhookEvent } from "./webhooks.js";

type ScopedWorkspace = { name: string; stack: { authzGroups: string[] } };

/** (hold_authority, change) on the workspace: owner-only, so PermissionDenied for everyone else. */
export async function requireHoldAuthority(authz: Authz, workspace: ScopedWorkspace): Promise<void> {
  await authz.require(workspaceFamilyTarget(workspace, "hold_authority", "change"));
}

export interface HoldAuthorityChangeInput {
  orgId: string;
  workspace: { id: string; name: string };
  kind: HoldLiftingKind;
  /** What it changed, by name. */
  subject: string;
  /** Never a secret: booleans, names, URL hosts. */
  before: Record<string, unknown>;
  after: Record<string, unknown>;
  actorUserId: string;
}

/** The record and its webhook event, inside the caller's transaction (committed with the change or not at all). */
export async function recordHoldAuthorityChange(tx: Tx, change: HoldAuthorityChangeInput): Promise<void> {
  const row = await tx.holdAuthorityChange.create({
    data: {
      orgId: change.orgId,
      workspaceId: change.workspace.id,
      kind: change.kind,
      subject: change.subject,
      before: change.before as Prisma.InputJsonValue,
      after: change.after as Prisma.InputJsonValue,
      actorUserId: change.actorUserId,
    },
  });
  await enqueueWebhookEvent(tx, change.orgId, {
    type: "hold_authority.changed",
    summary: `${change.workspace.name}: ${HOLD_LIFTING_CHANGES[change.kind].description} (${change.subject})`,
    data: {
      change: { id: row.id, kind: change.kind, subject: change.subject },
      workspace: { id: change.workspace.id, name: change.workspace.name },
      changedBy: { id: change.actorUserId },
    },
  });
}

export const MAX_HOLD_AUTHORITY_CHANGES_PAGE = 200;

export type HoldAuthorityChangeRow = {
  id: string;
  orgId: string;
  workspaceId: string;
  kind: string;
  subject: string;
  before: unknown;
  after: unknown;
  actorUserId: string;
  createdAt: Date;
};

/**
 * The newest `first` changes of each workspace, in one statement (a list selecting each one's
 * record). The caller has authorized every workspace.
 */
export async function holdAuthorityChangesOfMany(db: Database, workspaceIds: readonly string[], first: number): Promise<Map<string, HoldAuthorityChangeRow[]>> {
  const ids = [...new Set(workspaceIds)];
  const out = new Map<string, HoldAuthorityChangeRow[]>(ids.map((id) => [id, []]));
  if (ids.length === 0) return out;
  const rows = await db.sql.query<HoldAuthorityChangeRow>(
    `SELECT id, "orgId", "workspaceId", kind, subject, before, after, "actorUserId", "createdAt" FROM (
       SELECT c.*, row_number() OVER (PARTITION BY c."workspaceId" ORDER BY c."createdAt" DESC, c.id DESC) AS n
         FROM hold_authority_changes c WHERE c."workspaceId" = ANY($1::text[])) x
      WHERE n <= $2
      ORDER BY "workspaceId", "createdAt" DESC, id DESC`,
    [ids, Math.min(Math.max(first, 1), MAX_HOLD_AUTHORITY_CHANGES_PAGE)],
  );
  for (const row of rows) out.get(row.workspaceId)!.push({ ...row, createdAt: new Date(row.createdAt) });
  return out;
}
