// PR preview mode (seed 004, preview): the stack's prPlanMode and the PR previews parked for
// (stack, preview). The rules live in src/services/pr-previews.ts.
import { builder, readable } from "../builder.js";
import { COMMON_ERRORS } from "./errors.js";
import { InvalidStateError } from "../../errors.js";
import { clean } from "./input.js";
import { notFoundAsNull, SIGNED_IN } from "../helpers.js";
import { rowQuery } from "./row-query.js";
import { stackTarget } from "../../authz/targets.js";
import { confirmPrPreview, findReadablePrPreview, requestPrPreview, setStackPrPlanMode } from "../../services/pr-previews.js";
import { StackRef } from "./stack.js";

export const PrPlanModeEnum = builder.enumType("PrPlanMode", {
  description: "How a pull request's preview plan starts on a stack (seed 004, preview).",
  values: {
    MANUAL: { value: "manual", description: "The default: a PR preview is parked until someone holding (stack, preview) confirms it." },
    AUTO: { value: "auto", description: "Every PR preview is confirmed when requested: a standing yes. Setting it needs (stack, preview)." },
  } as const,
});

const PrPreviewStatusEnum = builder.enumType("PrPreviewStatus", {
  values: {
    AWAITING_CONFIRMATION: { value: "awaiting_confirmation", description: "Parked on its confirmation stage: the runner must not plan the PR yet." },
    CONFIRMED: { value: "confirmed", description: "The runner may plan the PR's code (read-only; a preview is never applied)." },
  } as const,
});

/** What the read rule needs, loaded with the preview. */
const RULE_INPUTS = { stack: { select: { name: true, authzGroups: true } } } as const;

export const PrPreviewRef = builder.prismaObject("PrPreview", {
  description:
    "A pull request's read-only preview plan on a stack, asked for by the runner before it plans unreviewed code with the stack's credentials. " +
    "Needs (stack, read) on its stack; confirmed under (stack, preview).",
  include: RULE_INPUTS,
  runScopesOnType: true,
  authScopes: (p, ctx) => readable(ctx, p, p.orgId, stackTarget(p.stack, "read")),
  fields: (t) => ({
    id: t.exposeID("id"),
    stack: t.relation("stack", { nullable: true }),
    pullRequest: t.exposeInt("pullRequest"),
    commitSha: t.exposeString("commitSha"),
    status: t.field({ type: PrPreviewStatusEnum, resolve: (p) => p.status }),
    autoConfirmed: t.exposeBoolean("autoConfirmed", { description: "Confirmed by the stack's prPlanMode AUTO, not by a person." }),
    requestedById: t.exposeID("requestedById"),
    confirmedById: t.exposeID("confirmedById", { nullable: true }),
    confirmedAt: t.expose("confirmedAt", { type: "DateTime", nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    viewerCanConfirm: t.boolean({
      description: "Whether the caller holds (stack, preview) on its stack now.",
      resolve: (p, _args, ctx) => ctx.authz.can(stackTarget(p.stack, "preview")),
    }),
  }),
});

builder.prismaObjectFields("Stack", (t) => ({
  prPlanMode: t.field({
    type: PrPlanModeEnum,
    description: "MANUAL (default): PR previews wait for (stack, preview). AUTO: they run at once.",
    select: { prPlanMode: true },
    resolve: (s) => s.prPlanMode,
  }),
  prPreviews: t.relation("prPreviews", {
    description: "The stack's PR previews, newest first (at most 100): the ones awaiting confirmation unless includeConfirmed.",
    args: { includeConfirmed: t.arg.boolean({ defaultValue: false }) },
    query: (args) => ({
      where: args.includeConfirmed ? {} : { status: "awaiting_confirmation" as const },
      orderBy: [{ createdAt: "desc" as const }, { id: "desc" as const }],
      take: 100,
    }),
  }),
}));

builder.queryField("prPreview", (t) =>
  t.withAuth(SIGNED_IN).prismaField({
    type: "PrPreview",
    nullable: true,
    description: "A PR preview whose stack the caller may read; what a runner polls until it is CONFIRMED.",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const found = await findReadablePrPreview(ctx.db, ctx.authz, String(args.id)).catch(notFoundAsNull);
      return found && ctx.db.prisma.prPreview.findUniqueOrThrow({ ...rowQuery(query), where: { id: found.id } });
    },
  }),
);

const SetStackPrPlanModeInputRef = builder.inputType("SetStackPrPlanModeInput", {
  fields: (t) => ({
    stackId: t.id({ required: true }),
    mode: t.field({ type: PrPlanModeEnum, required: true }),
    revision: t.int({ description: "The stack revision you read; a stale one is a ConflictError." }),
  }),
});

const RequestPrPreviewInputRef = builder.inputType("RequestPrPreviewInput", {
  fields: (t) => ({
    stackId: t.id({ required: true }),
    pullRequest: t.int({ required: true, description: "The pull request's number." }),
    commitSha: t.string({ required: true, description: "The PR head commit to be planned (7 to 64 lowercase hex characters)." }),
  }),
});

builder.mutationFields((t) => ({
  setStackPrPlanMode: t.withAuth(SIGNED_IN).prismaField({
    type: "Stack",
    errors: { types: COMMON_ERRORS },
    description:
      "Sets how PR previews start on a stack. Needs (stack, update); AUTO also needs (stack, preview), since it turns every future PR preview into a standing yes (seed 004).",
    args: { input: t.arg({ type: SetStackPrPlanModeInputRef, required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const stack = await setStackPrPlanMode(ctx.db, ctx.authz, { ...clean(args.input), stackId: String(args.input.stackId) });
      return ctx.db.prisma.stack.findUniqueOrThrow({ ...rowQuery(query), where: { id: stack.id } });
    },
  }),
  requestPrPreview: t.withAuth(SIGNED_IN).prismaField({
    type: "PrPreview",
    errors: { types: COMMON_ERRORS },
    description:
      "What a runner calls before planning a pull request on a stack: needs (stack, read) and (stack, deploy). Parked AWAITING_CONFIRMATION when the stack's prPlanMode is MANUAL, " +
      "CONFIRMED at once when AUTO. The same (stack, pull request, commit) answers the same preview.",
    args: { input: t.arg({ type: RequestPrPreviewInputRef, required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const preview = await requestPrPreview(ctx.db, ctx.authz, { ...args.input, stackId: String(args.input.stackId) });
      return ctx.db.prisma.prPreview.findUniqueOrThrow({ ...rowQuery(query), where: { id: preview.id } });
    },
  }),
  confirmPrPreview: t.withAuth(SIGNED_IN).prismaField({
    type: "PrPreview",
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Confirms a parked PR preview: needs (stack, preview) on its stack; (stack, deploy) and (stack, confirm) do not reach it (seed 004).",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const preview = await confirmPrPreview(ctx.db, ctx.authz, String(args.id));
      return ctx.db.prisma.prPreview.findUniqueOrThrow({ ...rowQuery(query), where: { id: preview.id } });
    },
  }),
}));

export { StackRef };
