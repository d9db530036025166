import { builder, readable } from "../builder.js";
import { COMMON_ERRORS } from "./errors.js";
import { clean } from "./input.js";
import { notFoundAsNull, SIGNED_IN } from "../helpers.js";
import {
  createStack,
  deleteStack,
  findReadableStack,
  listStacks,
  updateStack,
} from "../../services/stacks.js";
import { stackTarget } from "../../authz/targets.js";
import { parseInput } from "../../services/parse.js";
import { setProtectedLabelKeys, setStackOutputs, StackOutputsInput } from "../../services/labels.js";
import { byName, keysetConnection } from "../keyset.js";

interface StackOutput {
  name: string;
  value: unknown;
  sensitive: boolean;
}

const StackOutputRef = builder.objectRef<StackOutput & { masked: boolean }>("StackOutput").implement({
  description: "A Terraform output. Sensitive values are masked unless the caller holds (stack, read_data).",
  fields: (t) => ({
    name: t.exposeString("name"),
    sensitive: t.exposeBoolean("sensitive"),
    masked: t.exposeBoolean("masked"),
    value: t.field({ type: "JSON", nullable: true, resolve: (o) => (o.masked ? null : o.value) }),
  }),
});

const outputsOf = (raw: unknown): StackOutput[] => (Array.isArray(raw) ? (raw as StackOutput[]) : []);

export const StackRef = builder.prismaObject("Stack", {
  description: "A deployable unit: its workspaces, authz groups, labels and Terraform outputs. Needs (stack, read).",
  runScopesOnType: true,
  authScopes: (s, ctx) => readable(ctx, s, s.orgId, stackTarget(s, "read")),
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    description: t.exposeString("description"),
    labels: t.field({ type: "JSON", description: "Label key → value.", resolve: (s) => s.labels }),
    authzGroups: t.exposeStringList("authzGroups"),
    revision: t.exposeInt("revision", { description: "Bumped on every update; pass it back to updateStack (required when replacing labels or authzGroups)." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    outputs: t.field({
      type: [StackOutputRef],
      description:
        "Masked under (stack, read): sensitive values are null. Unmasked when the caller also holds (stack, read_data).",
      resolve: async (stack, _args, ctx) => {
        const unmasked = await ctx.authz.can(stackTarget(stack, "read_data"));
        return outputsOf(stack.outputs).map((o) => ({ ...o, masked: o.sensitive && !unmasked }));
      },
    }),
    unmaskedOutputs: t.field({
      type: [StackOutputRef],
      nullable: true,
      description: "Every output with its value; null unless the caller holds (stack, read_data) (seed 004, read_data).",
      // Field-level authorization: more sensitive than the object it sits on.
      authScopes: (stack) => ({ permission: stackTarget(stack, "read_data") }),
      unauthorizedResolver: () => null,
      resolve: (stack) => outputsOf(stack.outputs).map((o) => ({ ...o, masked: false })),
    }),
  }),
});

const StackConnection = builder.connectionObject({ type: StackRef, name: "StackConnection" });

builder.queryFields((t) => ({
  stack: t.withAuth(SIGNED_IN).prismaField({
    type: "Stack",
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_query, _root, args, ctx) => findReadableStack(ctx.db, ctx.authz, String(args.id)).catch(notFoundAsNull),
  }),
  stacks: t.withAuth(SIGNED_IN).field({
    type: StackConnection,
    description: "The stacks the caller may read, ordered by name, filtered in SQL by the caller's grants.",
    args: { first: t.arg.int({ defaultValue: 50 }), after: t.arg.string() },
    resolve: (_root, args, ctx) =>
      keysetConnection(args, byName, async (request) => {
        const page = await listStacks(ctx.db, ctx.authz, request);
        return { nodes: page.rows, hasNextPage: page.hasNextPage };
      }),
  }),
  stackOutputs: t.withAuth(SIGNED_IN).field({
    type: [StackOutputRef],
    description:
      "A producer stack's outputs, unmasked, for a consumer holding only (stack, read_data) on it (seed 004, read_data).",
    args: { stackName: t.arg.string({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const stack = await ctx.db.prisma.stack.findFirst({ where: { orgId: ctx.viewer.orgId, name: args.stackName } });
      if (!stack || !(await ctx.authz.can(stackTarget(stack, "read_data")))) return [];
      return outputsOf(stack.outputs).map((o) => ({ ...o, masked: false }));
    },
  }),
  protectedLabelKeys: t.withAuth(SIGNED_IN).stringList({
    description: "The org's protected label keys; needs (label, read).",
    resolve: async (_root, _args, ctx) => {
      await ctx.authz.require({ resourceType: "label", action: "read", matchValue: null, groups: null });
      const org = await ctx.db.prisma.organization.findUniqueOrThrow({ where: { id: ctx.viewer.orgId } });
      return org.protectedLabelKeys;
    },
  }),
  protectedLabelKeysRevision: t.withAuth(SIGNED_IN).int({
    description: "The revision of the protected-key set, to pass to setProtectedLabelKeys; needs (label, read).",
    resolve: async (_root, _args, ctx) => {
      await ctx.authz.require({ resourceType: "label", action: "read", matchValue: null, groups: null });
      const org = await ctx.db.prisma.organization.findUniqueOrThrow({ where: { id: ctx.viewer.orgId } });
      return org.protectedLabelKeysRevision;
    },
  }),
}));

const CreateStackInputRef = builder.inputType("CreateStackInput", {
  fields: (t) => ({
    name: t.string({ required: true }),
    description: t.string(),
    labels: t.field({ type: "JSON", description: "Label key → string value." }),
    authzGroups: t.stringList({ description: "Up to 20 exact authz groups; each needs (stack_authz_group, assign, <group>)." }),
  }),
});

const UpdateStackInputRef = builder.inputType("UpdateStackInput", {
  fields: (t) => ({
    id: t.id({ required: true }),
    name: t.string(),
    description: t.string(),
    labels: t.field({ type: "JSON", description: "Replaces the whole label set." }),
    authzGroups: t.stringList({ description: "Replaces the whole group set." }),
    revision: t.int({
      description: "The revision you read. Required with labels or authzGroups (whole-set replaces); a stale one is a ConflictError.",
    }),
  }),
});

const StackOutputInputRef = builder.inputType("StackOutputInput", {
  fields: (t) => ({
    name: t.string({ required: true }),
    value: t.field({ type: "JSON", required: true }),
    sensitive: t.boolean({ defaultValue: false }),
  }),
});


builder.mutationFields((t) => ({
  createStack: t.withAuth(SIGNED_IN).field({
    type: StackRef,
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: CreateStackInputRef, required: true }) },
    resolve: (_root, args, ctx) => createStack(ctx.db, ctx.authz, clean(args.input)),
  }),
  updateStack: t.withAuth(SIGNED_IN).field({
    type: StackRef,
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: UpdateStackInputRef, required: true }) },
    resolve: (_root, args, ctx) => updateStack(ctx.db, ctx.authz, clean(args.input)),
  }),
  deleteStack: t.withAuth(SIGNED_IN).field({
    type: StackRef,
    errors: { types: COMMON_ERRORS },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => deleteStack(ctx.db, ctx.authz, String(args.id)),
  }),
  setStackOutputs: t.withAuth(SIGNED_IN).field({
    type: StackRef,
    errors: { types: COMMON_ERRORS },
    description: "Records a stack's Terraform outputs (what a runner reports after an apply); needs (stack, update).",
    args: { stackId: t.arg.id({ required: true }), outputs: t.arg({ type: [StackOutputInputRef], required: true }) },
    resolve: (_root, args, ctx) =>
      setStackOutputs(ctx.db, ctx.authz, String(args.stackId), parseInput(StackOutputsInput, args.outputs, "outputs")),
  }),
  setProtectedLabelKeys: t.withAuth(SIGNED_IN).stringList({
    errors: { types: COMMON_ERRORS },
    description:
      "Replaces the org's whole protected-key set over the revision you read (protectedLabelKeysRevision); a stale one " +
      "is a ConflictError. Needs (label, create) (seed 004, label).",
    args: { keys: t.arg.stringList({ required: true }), revision: t.arg.int({ required: true }) },
    resolve: (_root, args, ctx) => setProtectedLabelKeys(ctx.db, ctx.authz, args.keys, args.revision),
  }),
}));
