import { clean } from "./input.js";
import { builder } from "../builder.js";
import { readableInWorkspace } from "./workspace-rule.js";
import { COMMON_ERRORS } from "./errors.js";
import { InvalidStateError } from "../../errors.js";
import type { VirtualKey } from "../../generated/prisma/client.js";
import {
  createConnection,
  createVirtualKey,
  deleteConnection,
  listConnections,
  listVirtualKeys,
  revokeVirtualKey,
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

export const ToolConnectionRef = builder.prismaObject("Connection", {
  name: "ToolConnection",
  description:
    "A tool provider a workspace's gateway calls through. A logical tool `<name>.<operation>` runs as `<provider>.<operation>` here; an inactive connection serves nothing and files no new request. " +
    "Needs (connection, read) on its workspace.",
  runScopesOnType: true,
  authScopes: (c, ctx) => readableInWorkspace(ctx, c, "connection"),
  fields: (t) => ({
    id: t.exposeID("id"),
    workspaceId: t.exposeID("workspaceId"),
    name: t.exposeString("name"),
    provider: t.exposeString("provider"),
    active: t.exposeBoolean("active"),
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
  }),
});
const UpdateToolConnectionInput = builder.inputType("UpdateToolConnectionInput", {
  fields: (t) => ({ id: t.id({ required: true }), name: t.string(), provider: t.string(), active: t.boolean() }),
});
const DeleteToolConnectionInput = builder.inputType("DeleteToolConnectionInput", { fields: (t) => ({ id: t.id({ required: true }) }) });
const WorkspaceFreezeInput = builder.inputType("WorkspaceFreezeInput", { fields: (t) => ({ workspaceId: t.id({ required: true }) }) });


builder.queryFields((t) => ({
  virtualKeys: t.field({
    type: [VirtualKeyRef],
    authScopes: { authenticated: true },
    description: "A workspace's virtual keys, newest first; needs (virtual_key, read) on the workspace.",
    args: { workspaceId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => listVirtualKeys(ctx, String(args.workspaceId)),
  }),
  toolConnections: t.field({
    type: [ToolConnectionRef],
    authScopes: { authenticated: true },
    description: "A workspace's tool connections by name; needs (connection, read) on the workspace.",
    args: { workspaceId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => listConnections(ctx, String(args.workspaceId)),
  }),
}));

builder.mutationFields((t) => ({
  createVirtualKey: t.field({
    type: CreatedVirtualKeyRef,
    authScopes: { authenticated: true },
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Needs (virtual_key, create) on the workspace. The plaintext key is in the payload, once.",
    args: { input: t.arg({ type: CreateVirtualKeyInput, required: true }) },
    resolve: (_root, args, ctx) => createVirtualKey(ctx, args.input),
  }),
  revokeVirtualKey: t.field({
    type: VirtualKeyRef,
    authScopes: { authenticated: true },
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Needs (virtual_key, revoke). A revoked key authenticates nothing, files nothing and resumes nothing.",
    args: { input: t.arg({ type: RevokeVirtualKeyInput, required: true }) },
    resolve: (_root, args, ctx) => revokeVirtualKey(ctx, args.input),
  }),
  createToolConnection: t.field({
    type: ToolConnectionRef,
    authScopes: { authenticated: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: CreateToolConnectionInput, required: true }) },
    resolve: (_root, args, ctx) => createConnection(ctx, clean(args.input)),
  }),
  updateToolConnection: t.field({
    type: ToolConnectionRef,
    authScopes: { authenticated: true },
    errors: { types: COMMON_ERRORS },
    description: "Needs (connection, update). Deactivating stops new requests binding to it and resumes through it.",
    args: { input: t.arg({ type: UpdateToolConnectionInput, required: true }) },
    resolve: (_root, args, ctx) => updateConnection(ctx, clean(args.input)),
  }),
  deleteToolConnection: t.field({
    type: ToolConnectionRef,
    authScopes: { authenticated: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: DeleteToolConnectionInput, required: true }) },
    resolve: (_root, args, ctx) => deleteConnection(ctx, args.input),
  }),
  freezeWorkspace: t.field({
    type: WorkspaceFreezeRef,
    authScopes: { authenticated: true },
    errors: { types: COMMON_ERRORS },
    description: "Needs (workspace, freeze). Stops every delivery of an approved tool call in the workspace (preflight: workspace_frozen).",
    args: { input: t.arg({ type: WorkspaceFreezeInput, required: true }) },
    resolve: (_root, args, ctx) => setWorkspaceFrozen(ctx, args.input, true),
  }),
  unfreezeWorkspace: t.field({
    type: WorkspaceFreezeRef,
    authScopes: { authenticated: true },
    errors: { types: COMMON_ERRORS },
    description: "Needs (workspace, freeze).",
    args: { input: t.arg({ type: WorkspaceFreezeInput, required: true }) },
    resolve: (_root, args, ctx) => setWorkspaceFrozen(ctx, args.input, false),
  }),
}));
