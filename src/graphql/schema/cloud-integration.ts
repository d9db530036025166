// Cloud integrations (seed 004, cloud_integration): attached to a stack, authorized as
// themselves by name and by their stack's groups. The rules live in src/services/cloud-integrations.ts.
import { builder, readable } from "../builder.js";
import { COMMON_ERRORS } from "./errors.js";
import { clean } from "./input.js";
import { notFoundAsNull, SIGNED_IN } from "../helpers.js";
import { rowQuery } from "./row-query.js";
import { byName, keysetConnection } from "../keyset.js";
import {
  CLOUD_INTEGRATION_RULE_INPUTS,
  cloudIntegrationTarget,
  createCloudIntegration,
  deleteCloudIntegration,
  findReadableCloudIntegration,
  listCloudIntegrations,
  updateCloudIntegration,
} from "../../services/cloud-integrations.js";

const CloudProviderEnum = builder.enumType("CloudProvider", {
  values: {
    AWS: { value: "aws", description: "identity is an IAM role ARN the runner assumes through OIDC." },
    GCP: { value: "gcp", description: "identity is a service account email the runner impersonates through workload identity federation." },
    AZURE: { value: "azure", description: "identity is an application (client) id with a federated credential." },
  } as const,
});

export const CloudIntegrationRef = builder.prismaObject("CloudIntegration", {
  description:
    "The cloud identity a stack's runs assume (an OIDC federation target: no secret is stored). " +
    "Needs (cloud_integration, read), matched by its name or by a group of its stack.",
  include: CLOUD_INTEGRATION_RULE_INPUTS,
  runScopesOnType: true,
  authScopes: (ci, ctx) => readable(ctx, ci, ci.orgId, cloudIntegrationTarget(ci, "read")),
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    provider: t.field({ type: CloudProviderEnum, resolve: (ci) => ci.provider }),
    identity: t.exposeString("identity"),
    revision: t.exposeInt("revision", { description: "Bumped on every update; pass it back to updateCloudIntegration." }),
    stack: t.relation("stack", { nullable: true, description: "Null unless the caller may read the stack too." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
  }),
});

const CloudIntegrationConnection = builder.connectionObject({ type: CloudIntegrationRef, name: "CloudIntegrationConnection" });

builder.prismaObjectField("Stack", "cloudIntegrations", (t) =>
  t.relation("cloudIntegrations", {
    description: "The stack's cloud integrations the caller may read (each needs (cloud_integration, read)), by name.",
    query: { orderBy: { name: "asc" } },
  }),
);

builder.queryFields((t) => ({
  cloudIntegration: t.withAuth(SIGNED_IN).prismaField({
    type: "CloudIntegration",
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const found = await findReadableCloudIntegration(ctx.db, ctx.authz, String(args.id)).catch(notFoundAsNull);
      return found && ctx.db.prisma.cloudIntegration.findUniqueOrThrow({ ...rowQuery(query), where: { id: found.id } });
    },
  }),
  cloudIntegrations: t.withAuth(SIGNED_IN).field({
    type: CloudIntegrationConnection,
    description: "The cloud integrations the caller may read, ordered by name, filtered in SQL by the caller's grants.",
    args: { first: t.arg.int({ defaultValue: 50 }), after: t.arg.string() },
    resolve: (_root, args, ctx) =>
      keysetConnection(args, byName, async (request) => {
        const page = await listCloudIntegrations(ctx.db, ctx.authz, request);
        return { nodes: page.rows, hasNextPage: page.hasNextPage };
      }),
  }),
}));

const CreateCloudIntegrationInputRef = builder.inputType("CreateCloudIntegrationInput", {
  fields: (t) => ({
    stackId: t.id({ required: true }),
    name: t.string({ required: true }),
    provider: t.field({ type: CloudProviderEnum, required: true }),
    identity: t.string({ required: true }),
  }),
});

const UpdateCloudIntegrationInputRef = builder.inputType("UpdateCloudIntegrationInput", {
  fields: (t) => ({
    id: t.id({ required: true }),
    name: t.string({ description: "A rename also needs (cloud_integration, update) on the new name." }),
    provider: t.field({ type: CloudProviderEnum, description: "Changing it needs the new provider's identity too." }),
    identity: t.string(),
    revision: t.int({ description: "The revision you read; a stale one is a ConflictError." }),
  }),
});

builder.mutationFields((t) => ({
  createCloudIntegration: t.withAuth(SIGNED_IN).prismaField({
    type: "CloudIntegration",
    errors: { types: COMMON_ERRORS },
    description: "Attaches a cloud integration to a stack the caller can read: needs (cloud_integration, create, <name>).",
    args: { input: t.arg({ type: CreateCloudIntegrationInputRef, required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const ci = await createCloudIntegration(ctx.db, ctx.authz, { ...args.input, stackId: String(args.input.stackId) });
      return ctx.db.prisma.cloudIntegration.findUniqueOrThrow({ ...rowQuery(query), where: { id: ci.id } });
    },
  }),
  updateCloudIntegration: t.withAuth(SIGNED_IN).prismaField({
    type: "CloudIntegration",
    errors: { types: COMMON_ERRORS },
    description: "Needs (cloud_integration, update) on the integration (by name or its stack's groups), and on the new name when renamed.",
    args: { input: t.arg({ type: UpdateCloudIntegrationInputRef, required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const ci = await updateCloudIntegration(ctx.db, ctx.authz, { ...clean(args.input), id: String(args.input.id) });
      return ctx.db.prisma.cloudIntegration.findUniqueOrThrow({ ...rowQuery(query), where: { id: ci.id } });
    },
  }),
  deleteCloudIntegration: t.withAuth(SIGNED_IN).prismaField({
    type: "CloudIntegration",
    errors: { types: COMMON_ERRORS },
    description: "Needs (cloud_integration, delete) on the integration.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_query, _root, args, ctx) => deleteCloudIntegration(ctx.db, ctx.authz, String(args.id)),
  }),
}));
