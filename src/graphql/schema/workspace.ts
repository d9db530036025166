// Workspaces over GraphQL: the workspace page and list (each one query: reservations, who holds
// them and who placed them come with it, no N+1), create/update/archive. Logic lives in
// src/services/workspaces.ts.

import { clean } from "./input.js";
import DataLoader from "dataloader";
import { queryFromInfo } from "@pothos/plugin-prisma";
import { builder, readable } from "../builder.js";
import { rowQuery } from "./row-query.js";
import { knownRuleWorkspace, readableInWorkspace } from "./workspace-rule.js";
import { workspaceFamilyTarget } from "../../authz/targets.js";
import { type Context, signedIn } from "../context.js";
import { perRequest } from "../request-loaders.js";
import { ERRORS, deps, loadUser, notFoundAsNull, preloadUsers, SIGNED_IN } from "../helpers.js";
import { RoleRef } from "./access.js";
import { byName, keysetConnection } from "../keyset.js";
import type { Role, Workspace } from "../../generated/prisma/client.js";
import {
  archiveWorkspace,
  createWorkspace,
  findReadableWorkspace,
  listWorkspaceIds,
  unarchiveWorkspace,
  updateWorkspace,
} from "../../services/workspaces.js";
import { reservationOptions, type ReservableWorkspace } from "../../services/reservations.js";
import { answersQuery, peopleNamedBy, workspaceListRows, type WorkspaceListRow } from "../../services/workspace-list.js";




/** Reservation options per workspace, batched per request (two queries for a whole list). */
const optionLoaders = perRequest(
  (ctx: Context) =>
    new DataLoader<ReservableWorkspace, { forSelf: boolean; roles: Role[] }, string>(
      async (workspaces) => {
        const options = await reservationOptions(deps(signedIn(ctx)), workspaces);
        return workspaces.map((w) => options.get(w.id)!);
      },
      { cacheKeyFn: (w) => w.id },
    ),
);
function reservationOptionsOf(ctx: Context, workspace: ReservableWorkspace) {
  return optionLoaders.of(ctx).load(workspace);
}

/** A workspace as the Workspace type holds it: with what its read rule needs. */
type WorkspaceRow = Workspace & { stack: { authzGroups: string[] } };
export const WORKSPACE_RULE_INPUTS = { stack: { select: { authzGroups: true } } } as const;

/**
 * The read rule of a plan or a reservation: the caller may read its workspace, read with the
 * request's other rule workspaces in one batch (ruleWorkspace), or taken from the Workspace row
 * the plan or reservation was reached through (knownRuleWorkspace): a list of workspaces with their
 * plans and reservations reads no workspace twice.
 */
export const inReadableWorkspace = (o: { orgId: string; workspaceId: string }, ctx: Context) => readableInWorkspace(ctx, o, "workspace");

/** A workspace a mutation wrote, read back with what the Workspace type's rule needs. */
export async function workspaceRow(ctx: Context, written: Promise<{ id: string }>): Promise<WorkspaceRow> {
  const { id } = await written;
  return ctx.db.prisma.workspace.findUniqueOrThrow({ where: { id }, include: WORKSPACE_RULE_INPUTS });
}

/**
 * The list's rows (one statement) and the people they name (one batch, read before the fields
 * that name them ask, so each of those answers at once).
 */
async function listRowsWithPeople(ctx: Context, ids: readonly string[]): Promise<WorkspaceListRow[]> {
  const rows = await workspaceListRows(ctx.db, ids);
  await preloadUsers(ctx, peopleNamedBy(rows));
  return rows;
}

// ── Types ─────────────────────────────────────────────────────────────────────────────

export const WorkspaceRef = builder.prismaObject("Workspace", {
  description:
    "A stack's deployment target: its baseline, reservations, plans and the policies applied to it. Needs (workspace, read).",
  // What the read rule needs, loaded with the workspace itself (no query of its own).
  include: WORKSPACE_RULE_INPUTS,
  runScopesOnType: true,
  authScopes: (w, ctx) => {
    knownRuleWorkspace(ctx, w);
    return readable(ctx, w, w.orgId, workspaceFamilyTarget(w, "workspace", "read"));
  },
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    environment: t.exposeString("environment", { description: "The environment's name: what approval-policy rules match on." }),
    production: t.exposeBoolean("production", {
      description:
        "The environment tier: the gateway holds destructive tool calls for approval only in a production workspace, and its Cedar " +
        "context carries it as context.production. A prod or production environment is production unless an owner says otherwise.",
    }),
    requiredApprovals: t.exposeInt("requiredApprovals", {
      description: "The baseline: approvals needed for every change no resource policy sets a count for (default 0).",
    }),
    preventSelfApproval: t.exposeBoolean("preventSelfApproval", {
      description:
        "Separation of duties (\"prevent self-review\"): the approval of a plan's submitter counts toward no count or approver list " +
        "of that plan. A reservation held by the submitter is still answered by their own approval (seed 000).",
    }),
    frozen: t.exposeBoolean("frozen"),
    archived: t.boolean({ resolve: (w) => w.archivedAt !== null }),
    archivedAt: t.expose("archivedAt", { type: "DateTime", nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    stack: t.relation("stack", { nullable: true, description: "Null unless the caller may read the stack too." }),
    reservations: t.relation("reservations", {
      description: "Who the workspace is reserved for, and who placed each reservation. Active ones unless includeReleased.",
      args: { includeReleased: t.arg.boolean({ defaultValue: false }) },
      query: (args) => ({
        where: args.includeReleased ? {} : { releasedAt: null },
        orderBy: [{ placedAt: "asc" }, { id: "asc" }],
      }),
    }),
    openPlans: t.relation("plans", {
      description: "Plans that are planned or applying, oldest first.",
      query: { where: { status: { in: ["planned", "applying"] } }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] },
    }),
    plans: t.relatedConnection("plans", {
      description: "Every plan, newest first. Plans are never deleted.",
      cursor: "id",
      query: { orderBy: [{ createdAt: "desc" }, { id: "desc" }] },
    }),
    viewerCanApprove: t.boolean({
      description: "Whether the caller holds (workspace, approve) here now.",
      select: { stack: { select: { authzGroups: true } } },
      resolve: (w, _args, ctx) => ctx.authz.check({ resourceType: "workspace", action: "approve", matchValue: w.name, groups: w.stack.authzGroups }),
    }),
    viewerCanReserveForSelf: t.boolean({
      description: "Whether the caller may reserve this workspace for themselves now (batched across a list).",
      select: { stack: { select: { authzGroups: true } } },
      resolve: async (w, _args, ctx) => (await reservationOptionsOf(ctx, w)).forSelf,
    }),
    reservableRoles: t.field({
      type: [RoleRef],
      description: "The roles the caller may reserve this workspace for now (see Query.reservableRoles; batched across a list).",
      select: { stack: { select: { authzGroups: true } } },
      resolve: async (w, _args, ctx) => (await reservationOptionsOf(ctx, w)).roles,
    }),
  }),
});

const WorkspaceConnection = builder.connectionObject({ type: WorkspaceRef, name: "WorkspaceConnection" });

builder.prismaObjectField("Stack", "workspaces", (t) =>
  t.field({
    type: [WorkspaceRef],
    description: "The stack's workspaces the caller may read, by name (archived ones when includeArchived).",
    args: { includeArchived: t.arg.boolean({ defaultValue: false }) },
    // The Workspace type's own rule leaves out the ones the caller may not read (denied-edges.ts).
    resolve: async (stack, args, ctx, info) =>
      (await ctx.db.prisma.workspace.findMany({
        ...queryFromInfo({ context: ctx, info, typeName: "Workspace" }),
        where: { stackId: stack.id, ...(args.includeArchived ? {} : { archivedAt: null }) },
        orderBy: { name: "asc" },
      })) as WorkspaceRow[],
  }),
);

// ── Queries ───────────────────────────────────────────────────────────────────────────

builder.queryFields((t) => ({
  workspace: t.withAuth(SIGNED_IN).prismaField({
    type: "Workspace",
    nullable: true,
    description: "A workspace the caller may read (the workspace page: one query, reservations included).",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const found = await findReadableWorkspace(ctx.db, ctx.authz, String(args.id)).catch(notFoundAsNull);
      return found ? ctx.db.prisma.workspace.findUnique({ ...rowQuery(query), where: { id: found.id } }) : null;
    },
  }),
  workspaces: t.withAuth(SIGNED_IN).field({
    type: WorkspaceConnection,
    description:
      "The workspaces the caller may read, ordered by name, filtered in SQL by the caller's grants; one query shape " +
      "whatever the page selects (who each is reserved for and who placed it included).",
    args: {
      first: t.arg.int({ defaultValue: 50 }),
      after: t.arg.string(),
      stackId: t.arg.id(),
      includeArchived: t.arg.boolean({ defaultValue: false }),
    },
    resolve: (_root, args, ctx, info) =>
      keysetConnection(args, byName, async (request) => {
        const page = await listWorkspaceIds(ctx.db, ctx.authz, {
          ...request,
          stackId: args.stackId ? String(args.stackId) : null,
          includeArchived: args.includeArchived ?? false,
        });
        const ids = page.rows.map((r) => r.id);
        // The type's own include (what its read rule needs) is in the query already; naming it types the rows.
        const query = queryFromInfo({ context: ctx, info, typeName: "Workspace", path: ["edges", "node"], include: WORKSPACE_RULE_INPUTS });
        // The dashboard's selection is one statement (services/workspace-list.ts); any other through Prisma.
        const loaded: WorkspaceRow[] =
          ids.length === 0
            ? []
            : answersQuery(query)
              ? await listRowsWithPeople(ctx, ids)
              : await ctx.db.prisma.workspace.findMany({ ...query, where: { id: { in: ids } } });
        const byId = new Map(loaded.map((w) => [w.id, w]));
        return { nodes: ids.map((id) => byId.get(id)).filter((w) => w !== undefined), hasNextPage: page.hasNextPage, lastScanned: page.lastScanned };
      }),
  }),
}));

// ── Mutations ─────────────────────────────────────────────────────────────────────────

const CreateWorkspaceInputRef = builder.inputType("CreateWorkspaceInput", {
  fields: (t) => ({
    stackId: t.id({ required: true }),
    name: t.string({ required: true, description: "Unique in the organization: the match value of workspace-family grants." }),
    environment: t.string({ description: "Default dev." }),
    production: t.boolean({
      description:
        "The tier. Default: true exactly when the environment is prod or production (any case). false on such an environment " +
        "lets its destructive calls run unheld: owner-only ((hold_authority, change)), recorded in holdAuthorityChanges.",
    }),
    requiredApprovals: t.int({ description: "The baseline, default 0." }),
    preventSelfApproval: t.boolean({ description: "Whether a plan's submitter's approval counts for nothing on it. Default false." }),
  }),
});

const UpdateWorkspaceInputRef = builder.inputType("UpdateWorkspaceInput", {
  fields: (t) => ({
    id: t.id({ required: true }),
    name: t.string(),
    environment: t.string(),
    production: t.boolean({
      description:
        "The tier. Changing it decides whether destructive tool calls are held; it is published (webhook workspace.tier_changed). " +
        "Turning it off, or keeping it off while the environment becomes prod, is owner-only ((hold_authority, change)) and recorded. " +
        "An environment that becomes prod turns it on unless this says false.",
    }),
    requiredApprovals: t.int({ description: "The baseline. Applies to every open plan at once (the gate is evaluated at apply time)." }),
    preventSelfApproval: t.boolean({
      description:
        "Separation of duties; applies to every open plan at once. Turning it off lets a plan through with fewer approvals: " +
        "owner-only ((hold_authority, change)) and recorded in holdAuthorityChanges.",
    }),
  }),
});

builder.mutationFields((t) => ({
  createWorkspace: t.withAuth(SIGNED_IN).field({
    type: WorkspaceRef,
    errors: ERRORS,
    description: "Needs (workspace, create, <name>) with the stack's groups, on a stack the caller can read.",
    args: { input: t.arg({ type: CreateWorkspaceInputRef, required: true }) },
    resolve: (_root, args, ctx) => workspaceRow(ctx, createWorkspace(deps(ctx), { ...clean(args.input), stackId: String(args.input.stackId) })),
  }),
  updateWorkspace: t.withAuth(SIGNED_IN).field({
    type: WorkspaceRef,
    errors: ERRORS,
    description: "Needs (workspace, update). Editing the baseline re-evaluates every open gate on the workspace.",
    args: { input: t.arg({ type: UpdateWorkspaceInputRef, required: true }) },
    resolve: (_root, args, ctx) => workspaceRow(ctx, updateWorkspace(deps(ctx), { ...clean(args.input), id: String(args.input.id) })),
  }),
  archiveWorkspace: t.withAuth(SIGNED_IN).field({
    type: WorkspaceRef,
    errors: ERRORS,
    description:
      "Needs (workspace, archive). Workspaces are archived, never deleted: plans and approvals stay; planned plans are discarded.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => workspaceRow(ctx, archiveWorkspace(deps(ctx), String(args.id))),
  }),
  unarchiveWorkspace: t.withAuth(SIGNED_IN).field({
    type: WorkspaceRef,
    errors: ERRORS,
    description: "Needs (workspace, archive).",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => workspaceRow(ctx, unarchiveWorkspace(deps(ctx), String(args.id))),
  }),
}));

