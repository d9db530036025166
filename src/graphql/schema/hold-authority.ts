// Hold authority (docs/held-tool-calls.md, "Hold authority"): the record of the changes that can
// let a held tool call through without approval, read-only, on its workspace. The rules live in
// src/domain/hold-authority.ts and src/services/hold-authority.ts.

import DataLoader from "dataloader";
import { builder } from "../builder.js";
import type { Context } from "../context.js";
import { perRequest } from "../request-loaders.js";
import { loadUser, oneOf } from "../helpers.js";
import { UserRef } from "./organization.js";
import { readableInWorkspace } from "./workspace-rule.js";
import { workspaceFamilyTarget } from "../../authz/targets.js";
import { HOLD_LIFTING_CHANGES, HOLD_LIFTING_KINDS } from "../../domain/hold-authority.js";
import { holdAuthorityChangesOfMany, MAX_HOLD_AUTHORITY_CHANGES_PAGE, type HoldAuthorityChangeRow } from "../../services/hold-authority.js";

/** `workspace.tier_off` → `WORKSPACE_TIER_OFF`: one enum value per row of the product's table. */
const enumName = (kind: string) => kind.replace(/[^A-Za-z0-9]+/g, "_").toUpperCase();

const HoldLiftingKindRef = builder.enumType("HoldLiftingChangeKind", {
  description: "A kind of change that can let a held tool call through without approval; each needs the owner (hold_authority, change).",
  values: Object.fromEntries(HOLD_LIFTING_KINDS.map((kind) => [enumName(kind), { value: kind, description: HOLD_LIFTING_CHANGES[kind].description }])),
});

const HoldAuthorityChangeRef = builder.objectRef<HoldAuthorityChangeRow>("HoldAuthorityChange").implement({
  description:
    "One change that could let a held tool call through without approval, as recorded when an owner made it (never changed or deleted). " +
    "Needs (hold_authority, read) on its workspace.",
  authScopes: (c, ctx) => readableInWorkspace(ctx, c, "hold_authority"),
  runScopesOnType: true,
  fields: (t) => ({
    id: t.exposeID("id"),
    workspaceId: t.exposeID("workspaceId"),
    kind: t.field({ type: HoldLiftingKindRef, resolve: (c) => oneOf(HOLD_LIFTING_KINDS, c.kind, "hold_authority_changes.kind") }),
    subject: t.exposeString("subject", { description: "What it changed, by name: the workspace, `<connection>.<tool>`, a policy's or connection's name." }),
    before: t.field({ type: "JSON", description: "The setting before (never a secret: URL hosts, names, booleans).", resolve: (c) => c.before }),
    after: t.field({ type: "JSON", description: "The setting after.", resolve: (c) => c.after }),
    changedBy: t.field({ type: UserRef, nullable: true, resolve: (c, _a, ctx) => loadUser(ctx, c.actorUserId) }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

/** The newest changes per workspace, batched per request and per `first`. */
const changeLoaders = perRequest((_ctx: Context) => new Map<number, DataLoader<string, HoldAuthorityChangeRow[]>>());
function changesOf(ctx: Context, workspaceId: string, first: number): Promise<HoldAuthorityChangeRow[]> {
  const byFirst = changeLoaders.of(ctx);
  let loader = byFirst.get(first);
  if (!loader) {
    loader = new DataLoader(async (ids: readonly string[]) => {
      const found = await holdAuthorityChangesOfMany(ctx.db, ids, first);
      return ids.map((id) => found.get(id) ?? []);
    });
    byFirst.set(first, loader);
  }
  return loader.load(workspaceId);
}

builder.prismaObjectField("Workspace", "holdAuthorityChanges", (t) =>
  t.field({
    type: [HoldAuthorityChangeRef],
    nullable: true,
    description:
      `Changes that could let a held tool call through without approval (the tier turned off, a tool declared not destructive, a policy set saved, ` +
      `an approval policy disabled or deleted, a connection re-routed), newest first, at most \`first\` (1..${MAX_HOLD_AUTHORITY_CHANGES_PAGE}). ` +
      "Null unless the caller holds (hold_authority, read) here.",
    args: { first: t.arg.int({ defaultValue: 20 }) },
    select: { stack: { select: { authzGroups: true } } },
    resolve: async (w, args, ctx) =>
      (await ctx.authz.can(workspaceFamilyTarget(w, "hold_authority", "read"))) ? changesOf(ctx, w.id, args.first ?? 20) : null,
  }),
);
