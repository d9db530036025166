// Workspaces: a stack's deployment targets, each with its baseline (seed 000, "Baseline
// approvals": "A workspace's required approvals is the baseline ... It defaults to 0").
// Archived, never deleted ("workspaces are archived rather than removed").
//
// Permissions are the workspace family, matched by the workspace name and receiving its stack's
// authz groups (src/domain/catalog/matrix.ts). Every change that can move a gate publishes
// gate:changed for the workspace after commit.

import { z } from "zod";
import type { SignedInAuthz } from "../authz/authz.js";
import { namePageQuery } from "../authz/list-filter.js";
import { ConflictError, InvalidStateError, NotFoundError, PermissionDeniedError } from "../errors.js";
import type { Database } from "../infra/db.js";
import type { EventBus } from "../infra/events.js";
import { lockWorkspaces } from "./gate.js";
import { workspaceTarget } from "../authz/targets.js";
import { LOCKING_TX_OPTIONS, txSql, type Tx } from "../infra/db.js";
import { uniqueViolation } from "./prisma-errors.js";
import { findReadableStack, ResourceName } from "./stacks.js";
import { parseInput } from "./parse.js";
import { enqueueWorkspaceTierEvent } from "./webhooks.js";
import { isProductionEnvironment, type HoldLiftingKind } from "../domain/hold-authority.js";
import { recordHoldAuthorityChange, requireHoldAuthority } from "./hold-authority.js";

export interface GateDeps {
  db: Database;
  authz: SignedInAuthz;
  events: EventBus;
}

/** A baseline no reasonable review process exceeds; the seed sets no upper bound. */
export const MAX_REQUIRED_APPROVALS = 20;

const Environment = z
  .string()
  .min(1, "An environment is required.")
  .max(50, "An environment is at most 50 characters.")
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "An environment uses letters, digits, '.', '_', '-'.");

const RequiredApprovals = z
  .number()
  .int("The baseline is a whole number of approvals.")
  .min(0, "The baseline is at least 0 (0 means anyone who can see the workspace can apply).")
  .max(MAX_REQUIRED_APPROVALS, `The baseline is at most ${MAX_REQUIRED_APPROVALS}.`);

export function publishGateChange(events: EventBus, orgId: string, workspaceIds: readonly string[], reason: string): void {
  if (workspaceIds.length === 0) return;
  events.publish("gate:changed", { orgId, workspaceIds: [...new Set(workspaceIds)], reason });
}

export type WorkspaceWithStack = NonNullable<Awaited<ReturnType<typeof findWorkspaceInOrg>>>;

export async function findWorkspaceInOrg(db: Database, orgId: string, id: string) {
  return db.prisma.workspace.findFirst({
    where: { id, orgId },
    include: { stack: { select: { id: true, name: true, authzGroups: true } } },
  });
}

export const targetOf = (w: WorkspaceWithStack, action: Parameters<typeof workspaceTarget>[1]) =>
  workspaceTarget({ name: w.name, authzGroups: w.stack.authzGroups }, action);

/** A workspace of the viewer's org the viewer may read, or NotFound (never "forbidden"). */
export async function findReadableWorkspace(db: Database, authz: SignedInAuthz, id: string): Promise<WorkspaceWithStack> {
  const viewer = (await authz.requireMember()) && authz.viewer;
  const workspace = await findWorkspaceInOrg(db, viewer.orgId, id);
  if (!workspace || !(await authz.can(targetOf(workspace, "read")))) throw new NotFoundError("Workspace", id);
  return workspace;
}

/**
 * The workspace for an action: NotFound when it is not in the org or the viewer can neither
 * read it nor perform the action; PermissionDenied naming the tuple when they can read it.
 */
export async function findWorkspaceFor(
  db: Database,
  authz: SignedInAuthz,
  id: string,
  action: Parameters<typeof workspaceTarget>[1],
): Promise<WorkspaceWithStack> {
  const viewer = (await authz.requireMember()) && authz.viewer;
  const workspace = await findWorkspaceInOrg(db, viewer.orgId, id);
  if (!workspace) throw new NotFoundError("Workspace", id);
  if (await authz.can(targetOf(workspace, action))) return workspace;
  if (!(await authz.can(targetOf(workspace, "read")))) throw new NotFoundError("Workspace", id);
  throw new PermissionDeniedError({ resourceType: "workspace", action, matchValue: workspace.name });
}

export function assertNotArchived(workspace: { name: string; archivedAt: Date | null }): void {
  if (workspace.archivedAt) throw archivedError(workspace.name);
}

const archivedError = (name: string) => new InvalidStateError("Workspace", "archived", `Workspace ${name} is archived: unarchive it first.`);

/**
 * lockWorkspaces for one workspace that must still be live: the row lock and the archived
 * check (as of the lock) in one statement, inside the caller's transaction.
 */
export async function lockLiveWorkspace(tx: Tx, id: string): Promise<void> {
  const [row] = await txSql(tx).query<{ name: string; archived: boolean }>(
    `SELECT name, ("archivedAt" IS NOT NULL) AS archived FROM workspaces WHERE id = $1 FOR UPDATE`,
    [id],
  );
  if (!row) throw new NotFoundError("Workspace", id);
  if (row.archived) throw archivedError(row.name);
}

export const CreateWorkspaceInput = z.object({
  stackId: z.string().min(1),
  name: ResourceName,
  environment: Environment.default("dev"),
  /**
   * Omitted: production exactly when the environment says prod (isProductionEnvironment).
   * `false` on a prod environment lets its destructive calls run unheld: owner-only
   * (docs/held-tool-calls.md, "The production tier").
   */
  production: z.boolean().optional(),
  requiredApprovals: RequiredApprovals.default(0),
  preventSelfApproval: z.boolean().default(false),
});

/**
 * (workspace, create, <name>) with the stack's groups, on a stack the viewer can see. A prod
 * environment is production unless the call says `production: false`, which needs the hold
 * authority (owner-only) and is recorded.
 */
export async function createWorkspace({ db, authz, events }: GateDeps, raw: unknown) {
  const input = parseInput(CreateWorkspaceInput, raw);
  const stack = await findReadableStack(db, authz, input.stackId);
  await authz.require({ resourceType: "workspace", action: "create", matchValue: input.name, groups: stack.authzGroups });
  const prodEnvironment = isProductionEnvironment(input.environment);
  const production = input.production ?? prodEnvironment;
  const unheld = prodEnvironment && !production;
  if (unheld) await requireHoldAuthority(authz, { name: input.name, stack: { authzGroups: stack.authzGroups } });
  try {
    const created = await db.prisma.$transaction(async (tx) => {
      const row = await tx.workspace.create({
        data: {
          orgId: stack.orgId,
          stackId: stack.id,
          name: input.name,
          environment: input.environment,
          production,
          requiredApprovals: input.requiredApprovals,
          preventSelfApproval: input.preventSelfApproval,
        },
      });
      if (unheld) {
        await recordHoldAuthorityChange(tx, {
          orgId: row.orgId,
          workspace: row,
          kind: "workspace.created_unheld",
          subject: row.name,
          before: {},
          after: { environment: row.environment, production: false },
          actorUserId: authz.viewer.userId,
        });
      }
      return row;
    });
    // Live workspace lists (workspacesChanged) learn of it without a reload.
    publishGateChange(events, created.orgId, [created.id], "workspace_created");
    return created;
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A workspace named ${input.name} already exists in this organization.`);
    throw error;
  }
}

export const UpdateWorkspaceInput = z.object({
  id: z.string().min(1),
  name: ResourceName.optional(),
  environment: Environment.optional(),
  production: z.boolean().optional(),
  requiredApprovals: RequiredApprovals.optional(),
  preventSelfApproval: z.boolean().optional(),
});

/**
 * (workspace, update) on the workspace as it is; a rename re-checks update against the new name
 * without groups (as a stack rename does). A baseline edit or a rename (the name is the match
 * value of approve grants) can move every open gate on the workspace: gate:changed. So does a
 * change of the tier (`production`), which decides whether the gateway holds the workspace's
 * destructive tool calls at all: security relevant, so it is published (reason
 * workspace_tier_changed) and sent to webhooks subscribed to workspace.tier_changed.
 *
 * An environment that becomes prod turns the tier on unless the same call says
 * `production: false`. Turning the tier off, or keeping it off while the environment becomes
 * prod, lets held calls through: it needs the hold authority (owner-only), decided on the row as
 * locked, and is recorded (tierChangeKind).
 */
export async function updateWorkspace({ db, authz, events }: GateDeps, raw: unknown) {
  const input = parseInput(UpdateWorkspaceInput, raw);
  const workspace = await findWorkspaceFor(db, authz, input.id, "update");
  assertNotArchived(workspace);
  const name = input.name ?? workspace.name;
  if (name !== workspace.name) {
    await authz.require({ resourceType: "workspace", action: "update", matchValue: name, groups: null });
  }
  let before;
  let updated;
  try {
    ({ before, updated } = await db.prisma.$transaction(async (tx) => {
      // The baseline is a gate input: serialize with applyPlan (src/services/gate.ts).
      await lockWorkspaces(txSql(tx), [workspace.id]);
      const before = await tx.workspace.findUniqueOrThrow({ where: { id: workspace.id } });
      const next = nextTier(before, input);
      const kind = tierChangeKind(before, next);
      // Separation of duties turned off: plans get through with fewer approvals.
      const selfApprovalAllowed = before.preventSelfApproval && input.preventSelfApproval === false;
      if (kind || selfApprovalAllowed) await requireHoldAuthority(authz, workspace);
      const row = await tx.workspace.update({
        where: { id: workspace.id },
        data: {
          name,
          environment: next.environment,
          production: next.production,
          requiredApprovals: input.requiredApprovals,
          preventSelfApproval: input.preventSelfApproval,
        },
      });
      if (selfApprovalAllowed) {
        await recordHoldAuthorityChange(tx, {
          orgId: row.orgId,
          workspace: row,
          kind: "workspace.self_approval_allowed",
          subject: row.name,
          before: { preventSelfApproval: true },
          after: { preventSelfApproval: false },
          actorUserId: authz.viewer.userId,
        });
      }
      if (row.production !== before.production) await enqueueWorkspaceTierEvent(tx, row, before.production, authz.viewer.userId);
      if (kind) {
        await recordHoldAuthorityChange(tx, {
          orgId: row.orgId,
          workspace: row,
          kind,
          subject: row.name,
          before: { environment: before.environment, production: before.production },
          after: { environment: row.environment, production: row.production },
          actorUserId: authz.viewer.userId,
        });
      }
      return { before, updated: row };
    }, LOCKING_TX_OPTIONS));
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A workspace named ${name} already exists in this organization.`);
    throw error;
  }
  const gateMoved =
    updated.requiredApprovals !== before.requiredApprovals ||
    updated.name !== before.name ||
    updated.preventSelfApproval !== before.preventSelfApproval;
  if (gateMoved) publishGateChange(events, workspace.orgId, [workspace.id], "workspace_updated");
  if (updated.production !== before.production) publishGateChange(events, workspace.orgId, [workspace.id], "workspace_tier_changed");
  return updated;
}

type Tier = { environment: string; production: boolean };

/** The environment and tier an update leaves: an environment becoming prod turns the tier on unless the call says otherwise. */
export function nextTier(current: Tier, input: { environment?: string | undefined; production?: boolean | undefined }): Tier {
  const environment = input.environment ?? current.environment;
  const becomesProd = isProductionEnvironment(environment) && !isProductionEnvironment(current.environment);
  return { environment, production: input.production ?? (becomesProd ? true : current.production) };
}

/** Which hold-lifting change going from `current` to `next` is, if any. */
export function tierChangeKind(current: Tier, next: Tier): HoldLiftingKind | null {
  if (current.production && !next.production) return "workspace.tier_off";
  if (!next.production && isProductionEnvironment(next.environment) && !isProductionEnvironment(current.environment)) return "workspace.environment_unheld";
  return null;
}

/**
 * Archiving keeps everything (plans and approvals are never deleted) and makes the workspace
 * read-only. Its planned plans are discarded (they can no longer apply); an applying plan must
 * be reported first, so the runner's result is never orphaned.
 */
export async function archiveWorkspace({ db, authz, events }: GateDeps, id: string) {
  const workspace = await findWorkspaceFor(db, authz, id, "archive");
  assertNotArchived(workspace);
  const updated = await db.prisma.$transaction(async (tx) => {
    await lockWorkspaces(txSql(tx), [workspace.id]);
    const applying = await tx.plan.count({ where: { workspaceId: workspace.id, status: "applying" } });
    if (applying > 0) {
      throw new InvalidStateError("Workspace", "applying", `A plan is applying on ${workspace.name}: report its result before archiving.`);
    }
    await tx.plan.updateMany({
      where: { workspaceId: workspace.id, status: "planned" },
      data: { status: "discarded", discardReason: "workspace_archived" },
    });
    return tx.workspace.update({ where: { id: workspace.id }, data: { archivedAt: new Date() } });
  }, LOCKING_TX_OPTIONS);
  publishGateChange(events, workspace.orgId, [workspace.id], "workspace_archived");
  return updated;
}

export async function unarchiveWorkspace({ db, authz, events }: GateDeps, id: string) {
  const workspace = await findWorkspaceFor(db, authz, id, "archive");
  if (!workspace.archivedAt) return workspace;
  const updated = await db.prisma.workspace.update({ where: { id: workspace.id }, data: { archivedAt: null } });
  publishGateChange(events, workspace.orgId, [workspace.id], "workspace_unarchived");
  return updated;
}

interface WorkspaceNameRow {
  id: string;
  name: string;
  stackId: string;
  archivedAt: Date | null;
}

/** How many SQL pages a filtered list scans at most before it returns a short page. */
const MAX_SCANNED_PAGES = 20;

/**
 * One ordered page of the workspaces the viewer may read, filtered in SQL by their grants
 * (src/authz/list-filter.ts). Archived workspaces and other stacks' are skipped by scanning on
 * from the cursor; the returned ids are loaded by the caller in one query with whatever the
 * page selects (reservations and who placed them included).
 */
export async function listWorkspaceIds(
  db: Database,
  authz: SignedInAuthz,
  options: { first: number; after: string | null; stackId?: string | null; includeArchived?: boolean },
): Promise<{ rows: WorkspaceNameRow[]; hasNextPage: boolean; lastScanned: string | null }> {
  const scope = await authz.scope("workspace", "read");
  const orgId = authz.viewer.orgId;
  const keep = (row: WorkspaceNameRow) =>
    (options.includeArchived || row.archivedAt === null) && (!options.stackId || row.stackId === options.stackId);
  const rows: WorkspaceNameRow[] = [];
  let after = options.after;
  for (let page = 0; page < MAX_SCANNED_PAGES; page++) {
    const query = namePageQuery("workspace", orgId, scope, after, options.first + 1);
    if (!query) break;
    const fetched = await db.sql.query<WorkspaceNameRow>(query.text, query.params);
    for (const row of fetched) if (keep(row)) rows.push(row);
    if (rows.length > options.first || fetched.length <= options.first) {
      return { rows: rows.slice(0, options.first), hasNextPage: rows.length > options.first, lastScanned: null };
    }
    after = fetched.at(-1)!.name;
  }
  // Scanned the maximum: a short page that says where to go on from.
  return { rows: rows.slice(0, options.first), hasNextPage: true, lastScanned: after };
}
