import { clean, cleanKeepingNull } from "./input.js";
import { builder } from "../builder.js";
import { readableInWorkspace } from "./workspace-rule.js";
import { COMMON_ERRORS } from "./errors.js";
import { InvalidStateError, UpstreamUnavailableError } from "../../errors.js";
import type { ConnectionToolOverride, VirtualKey } from "../../generated/prisma/client.js";
import DataLoader from "dataloader";
import type { Context } from "../context.js";
import { perRequest } from "../request-loaders.js";
import { loadUser, SIGNED_IN } from "../helpers.js";
import { UserRef } from "./organization.js";
import {
  clearToolOverride,
  connectionTools,
  createConnection,
  createVirtualKey,
  deleteConnection,
  listConnections,
  listVirtualKeys,
  listToolOverrides,
  revokeVirtualKey,
  setToolOverride,
  setWorkspaceFrozen,
  updateConnection,
} from "../../services/approvals/keys.js";

// The agent gateway's identities for a workspace (seed 003): virtual keys, connections, freeze.

export const VirtualKeyRef = builder.prismaObject("VirtualKey", {
  description:
    "An agent's gateway key for one workspace. Only its hash is stored; the plaintext was shown once, at creation. " +
    "Needs (virtual_key, read) on its workspace.",
  runScopesOnType: true,
  authScopes: (k, ctx) => readableInWorkspace(ctx, k, "virtual_key"),
  fields: (t) => ({
    id: t.exposeID("id"),
    workspaceId: t.exposeID("workspaceId"),
    name: t.exposeString("name"),
    prefix: t.exposeString("prefix", { description: "The key's first characters, to recognise it." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    revokedAt: t.expose("revokedAt", { type: "DateTime", nullable: true }),
    active: t.boolean({ resolve: (k) => k.revokedAt === null }),
  }),
});

const toolOverrides = perRequest(
  (ctx: Context) =>
    new DataLoader<string, ConnectionToolOverride[]>(async (ids) => {
      const rows = await listToolOverrides(ctx.db, ids);
      return ids.map((id) => rows.filter((r) => r.connectionId === id));
    }),
);

/** A connection's overrides, batched per request over every connection of a list. */
function toolOverridesOf(ctx: Context, connectionId: string): Promise<ConnectionToolOverride[]> {
  return toolOverrides.of(ctx).load(connectionId);
}

const DestructiveSourceRef = builder.enumType("ToolDestructiveSource", {
  description: "Why the gate treats a tool as destructive or not.",
  values: {
    OVERRIDE: { value: "override", description: "An admin's override on the connection." },
    ANNOTATION: { value: "annotation", description: "The upstream's own MCP annotations (destructiveHint, readOnlyHint)." },
    FALLBACK: { value: "fallback", description: "The tool carries neither hint: destructive, as MCP's defaults say (fail closed)." },
  } as const,
});

/** Reached only through its (already authorized) connection: it has no read rule of its own. */
const ConnectionToolRef = builder
  .objectRef<Awaited<ReturnType<typeof connectionTools>>[number]>("ConnectionTool")
  .implement({
    description: "One tool of a connection's upstream MCP server, as agents see it in tools/list, with what the gate makes of it.",
    fields: (t) => ({
      name: t.exposeString("name", { description: "`<connection>.<tool>`: the name agents call." }),
      upstreamName: t.exposeString("upstreamName", { description: "The upstream's own name: what an override names." }),
      title: t.exposeString("title", { nullable: true }),
      description: t.exposeString("description", { nullable: true }),
      inputSchema: t.field({ type: "JSON", resolve: (tool) => tool.inputSchema }),
      readOnlyHint: t.exposeBoolean("readOnlyHint", { nullable: true }),
      destructiveHint: t.exposeBoolean("destructiveHint", { nullable: true }),
      destructive: t.exposeBoolean("destructive", { description: "Whether the gate holds a call to it in production." }),
      destructiveSource: t.field({ type: DestructiveSourceRef, resolve: (tool) => tool.destructiveSource }),
    }),
  });

/** Reached only through its (already authorized) connection: it has no read rule of its own. */
const ToolAnnotationOverrideRef = builder.objectRef<ConnectionToolOverride>("ToolAnnotationOverride").implement({
  description: "An admin's word on whether one upstream tool is destructive; it wins over the tool's MCP annotations (destructiveHint, readOnlyHint).",
  fields: (t) => ({
    tool: t.exposeString("tool", { description: "The upstream's own tool name (without the connection's namespace)." }),
    destructive: t.exposeBoolean("destructive"),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    updatedBy: t.field({ type: UserRef, nullable: true, resolve: (o, _a, ctx) => loadUser(ctx, o.updatedById) }),
  }),
});

export const ToolConnectionRef = builder.prismaObject("Connection", {
  name: "ToolConnection",
  description:
    "An upstream MCP server a workspace's gateway calls through: its tools are listed to agents as `<name>.<tool>`, and a held call is pinned to the provider and URL it was held on. An inactive connection serves nothing and files no new request. " +
    "Needs (connection, read) on its workspace.",
  runScopesOnType: true,
  authScopes: (c, ctx) => readableInWorkspace(ctx, c, "connection"),
  fields: (t) => ({
    id: t.exposeID("id"),
    workspaceId: t.exposeID("workspaceId"),
    name: t.exposeString("name"),
    provider: t.exposeString("provider"),
    active: t.exposeBoolean("active"),
    url: t.exposeString("url", { nullable: true, description: "The upstream MCP server's Streamable HTTP endpoint." }),
    hasCredential: t.boolean({
      description: "Whether a credential is stored for the upstream. The credential itself is sealed and never readable.",
      select: { credentialSealed: true },
      resolve: (c) => c.credentialSealed !== null,
    }),
    timeoutMs: t.exposeInt("timeoutMs", { nullable: true, description: "How long one upstream request may take; null: the gateway's default." }),
    toolOverrides: t.field({
      type: [ToolAnnotationOverrideRef],
      description: "Per-tool destructive overrides, by tool name.",
      resolve: (c, _a, ctx) => toolOverridesOf(ctx, c.id),
    }),
    tools: t.field({
      type: [ConnectionToolRef],
      errors: { types: [UpstreamUnavailableError] },
      description: "The upstream's tools now (cached by the gateway for up to a minute), each with its annotations and whether the gate treats it as destructive. UpstreamUnavailableError when the upstream cannot be read.",
      select: { url: true, credentialSealed: true, timeoutMs: true, updatedAt: true, name: true },
      resolve: async (c, _a, ctx) => connectionTools(ctx, c, await toolOverridesOf(ctx, c.id)),
    }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
  }),
});

const CreatedVirtualKeyRef = builder
  .objectRef<{ virtualKey: VirtualKey; plaintextKey: string }>("CreateVirtualKeyPayload")
  .implement({
    fields: (t) => ({
      virtualKey: t.field({ type: VirtualKeyRef, nullable: true, description: "Null unless the caller may read it.", resolve: (p) => p.virtualKey }),
      plaintextKey: t.exposeString("plaintextKey", { description: "Shown once: store it now; Countersign keeps only its hash." }),
    }),
  });

const WorkspaceFreezeRef = builder.objectRef<{ id: string; name: string; frozen: boolean }>("WorkspaceFreezeState").implement({
  description: "Whether a workspace's held tool calls may be delivered: a frozen workspace delivers none.",
  fields: (t) => ({
    workspaceId: t.exposeID("id"),
    workspaceName: t.exposeString("name"),
    frozen: t.exposeBoolean("frozen"),
  }),
});

const CreateVirtualKeyInput = builder.inputType("CreateVirtualKeyInput", {
  fields: (t) => ({ workspaceId: t.id({ required: true }), name: t.string({ required: true }) }),
});
const RevokeVirtualKeyInput = builder.inputType("RevokeVirtualKeyInput", { fields: (t) => ({ id: t.id({ required: true }) }) });
const CreateToolConnectionInput = builder.inputType("CreateToolConnectionInput", {
  fields: (t) => ({
    workspaceId: t.id({ required: true }),
    name: t.string({ required: true, description: "Letters, digits, '_' and '-': the first segment of the logical tool names it serves." }),
    provider: t.string({ required: true }),
    active: t.boolean({ defaultValue: true }),
    url: t.string({ description: "The upstream MCP server's Streamable HTTP endpoint (http or https, no credentials in it)." }),
    credential: t.string({ description: "Write-only: the Authorization header value presented to the upstream. Stored sealed; never readable." }),
    timeoutMs: t.int({ description: "100 to 300,000 ms; default: the gateway's." }),
  }),
});
const UpdateToolConnectionInput = builder.inputType("UpdateToolConnectionInput", {
  fields: (t) => ({
    id: t.id({ required: true }),
    name: t.string(),
    provider: t.string(),
    active: t.boolean(),
    url: t.string({
      description:
        "Null removes it. Calls held before a change are refused at resume (route_changed). A change is owner-only ((hold_authority, change)), " +
        "recorded, and clears the stored credential unless `credential` is set in the same call.",
    }),
    credential: t.string({ description: "Write-only; null removes it. With a new url: the credential for the new upstream." }),
    timeoutMs: t.int({ description: "Null: the gateway's default." }),
  }),
});
const SetToolAnnotationOverrideInput = builder.inputType("SetToolAnnotationOverrideInput", {
  fields: (t) => ({
    connectionId: t.id({ required: true }),
    tool: t.string({ required: true, description: "The upstream's own tool name (without the connection's namespace)." }),
    destructive: t.boolean({ required: true }),
  }),
});
const ClearToolAnnotationOverrideInput = builder.inputType("ClearToolAnnotationOverrideInput", {
  fields: (t) => ({ connectionId: t.id({ required: true }), tool: t.string({ required: true }) }),
});
const DeleteToolConnectionInput = builder.inputType("DeleteToolConnectionInput", { fields: (t) => ({ id: t.id({ required: true }) }) });
const WorkspaceFreezeInput = builder.inputType("WorkspaceFreezeInput", { fields: (t) => ({ workspaceId: t.id({ required: true }) }) });


builder.queryFields((t) => ({
  virtualKeys: t.withAuth(SIGNED_IN).field({
    type: [VirtualKeyRef],
    description: "A workspace's virtual keys, newest first; needs (virtual_key, read) on the workspace.",
    args: { workspaceId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => listVirtualKeys(ctx, String(args.workspaceId)),
  }),
  toolConnections: t.withAuth(SIGNED_IN).field({
    type: [ToolConnectionRef],
    description: "A workspace's tool connections by name; needs (connection, read) on the workspace.",
    args: { workspaceId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => listConnections(ctx, String(args.workspaceId)),
  }),
}));

builder.mutationFields((t) => ({
  createVirtualKey: t.withAuth(SIGNED_IN).field({
    type: CreatedVirtualKeyRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Needs (virtual_key, create) on the workspace. The plaintext key is in the payload, once.",
    args: { input: t.arg({ type: CreateVirtualKeyInput, required: true }) },
    resolve: (_root, args, ctx) => createVirtualKey(ctx, args.input),
  }),
  revokeVirtualKey: t.withAuth(SIGNED_IN).field({
    type: VirtualKeyRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Needs (virtual_key, revoke). A revoked key authenticates nothing, files nothing and resumes nothing.",
    args: { input: t.arg({ type: RevokeVirtualKeyInput, required: true }) },
    resolve: (_root, args, ctx) => revokeVirtualKey(ctx, args.input),
  }),
  createToolConnection: t.withAuth(SIGNED_IN).field({
    type: ToolConnectionRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Needs (connection, create). A credential needs COUNTERSIGN_APPROVAL_SECRET to be sealed under (InvalidStateError without it).",
    args: { input: t.arg({ type: CreateToolConnectionInput, required: true }) },
    resolve: (_root, args, ctx) => createConnection(ctx, clean(args.input)),
  }),
  updateToolConnection: t.withAuth(SIGNED_IN).field({
    type: ToolConnectionRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description:
      "Needs (connection, update). Deactivating stops new requests binding to it and resumes through it; a new provider or URL strands calls held before (route_changed). " +
      "A new url, provider or name re-routes its tools: owner-only ((hold_authority, change)), recorded in Workspace.holdAuthorityChanges.",
    args: { input: t.arg({ type: UpdateToolConnectionInput, required: true }) },
    resolve: (_root, args, ctx) => updateConnection(ctx, cleanKeepingNull(args.input, ["url", "credential", "timeoutMs"])),
  }),
  setToolAnnotationOverride: t.withAuth(SIGNED_IN).field({
    type: ToolConnectionRef,
    errors: { types: COMMON_ERRORS },
    description:
      "Needs (connection, update). Whether one upstream tool is destructive, over its MCP annotations; returns the connection. " +
      "destructive: false lets its calls run unheld: owner-only ((hold_authority, change)), recorded.",
    args: { input: t.arg({ type: SetToolAnnotationOverrideInput, required: true }) },
    resolve: (_root, args, ctx) => setToolOverride(ctx, args.input),
  }),
  clearToolAnnotationOverride: t.withAuth(SIGNED_IN).field({
    type: ToolConnectionRef,
    errors: { types: COMMON_ERRORS },
    description:
      "Needs (connection, update). The tool's own annotations decide again; NotFoundError when it had no override. " +
      "Clearing a destructive: true override is owner-only ((hold_authority, change)), recorded.",
    args: { input: t.arg({ type: ClearToolAnnotationOverrideInput, required: true }) },
    resolve: (_root, args, ctx) => clearToolOverride(ctx, args.input),
  }),
  deleteToolConnection: t.withAuth(SIGNED_IN).field({
    type: ToolConnectionRef,
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: DeleteToolConnectionInput, required: true }) },
    resolve: (_root, args, ctx) => deleteConnection(ctx, args.input),
  }),
  freezeWorkspace: t.withAuth(SIGNED_IN).field({
    type: WorkspaceFreezeRef,
    errors: { types: COMMON_ERRORS },
    description: "Needs (workspace, freeze). Stops every delivery of an approved tool call in the workspace (preflight: workspace_frozen).",
    args: { input: t.arg({ type: WorkspaceFreezeInput, required: true }) },
    resolve: (_root, args, ctx) => setWorkspaceFrozen(ctx, args.input, true),
  }),
  unfreezeWorkspace: t.withAuth(SIGNED_IN).field({
    type: WorkspaceFreezeRef,
    errors: { types: COMMON_ERRORS },
    description: "Needs (workspace, freeze).",
    args: { input: t.arg({ type: WorkspaceFreezeInput, required: true }) },
    resolve: (_root, args, ctx) => setWorkspaceFrozen(ctx, args.input, false),
  }),
}));
