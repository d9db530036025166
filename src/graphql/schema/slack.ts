// Approving from Slack over GraphQL (docs/integrations.md): the organization's Slack app, and the
// links between Slack users and members. Rules in src/services/slack.ts.

import { builder, readable } from "../builder.js";
import { signedIn } from "../context.js";
import { COMMON_ERRORS } from "./errors.js";
import { InvalidStateError } from "../../errors.js";
import {
  configureSlackIntegration,
  findSlackIntegration,
  integrationLinks,
  interactivityPath,
  linkSlackUser,
  mySlackLinks,
  removeSlackIntegration,
  unlinkSlackUser,
} from "../../services/slack.js";
import { webhookTarget } from "../../services/webhooks.js";
import { deps, SIGNED_IN } from "../helpers.js";

export const SlackUserLinkRef = builder.prismaObject("SlackUserLink", {
  description: "A Slack user linked to a member: their clicks on Approve and Deny are that member's. Readable by the member and by (webhook, read).",
  runScopesOnType: true,
  authScopes: (l, ctx) => readable(ctx, l, l.orgId, l.userId === ctx.viewer?.userId ? null : webhookTarget("read")),
  fields: (t) => ({
    id: t.exposeID("id"),
    slackTeam: t.exposeString("slackTeam", { description: "The Slack workspace (team id)." }),
    slackUser: t.exposeString("slackUser", { description: "The Slack user id (U…)." }),
    memberId: t.exposeID("userId", { description: "The member the Slack user acts as." }),
    linkedAt: t.expose("linkedAt", { type: "DateTime" }),
    unlinkedAt: t.expose("unlinkedAt", { type: "DateTime", nullable: true }),
    unlinkedById: t.exposeID("unlinkedById", { nullable: true, description: "Who ended the link (the member, or an administrator of the integration)." }),
  }),
});

export const SlackIntegrationRef = builder.prismaObject("SlackIntegration", {
  description: "The organization's Slack app for approving from Slack. Its signing secret is never readable back. Needs (webhook, read).",
  runScopesOnType: true,
  authScopes: (s, ctx) => readable(ctx, s, s.orgId, webhookTarget("read")),
  fields: (t) => ({
    id: t.exposeID("id"),
    slackTeam: t.exposeString("slackTeam", { description: "The Slack workspace (team id) whose clicks are taken." }),
    interactivityPath: t.string({
      description: "The path to give Slack as the app's Interactivity Request URL (after COUNTERSIGN_PUBLIC_URL).",
      resolve: (s) => interactivityPath(s.id),
    }),
    interactivityUrl: t.string({
      nullable: true,
      description: "The full Request URL, when the operator set COUNTERSIGN_PUBLIC_URL.",
      resolve: (s, _args, ctx) => (ctx.config.publicUrl ? new URL(interactivityPath(s.id), ctx.config.publicUrl).href : null),
    }),
    configuredById: t.exposeID("configuredById"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    links: t.field({
      type: [SlackUserLinkRef],
      description: "The active links, oldest first.",
      resolve: (s, _args, ctx) => integrationLinks(deps(signedIn(ctx)), s.id),
    }),
  }),
});

const ConfigureSlackIntegrationInput = builder.inputType("ConfigureSlackIntegrationInput", {
  fields: (t) => ({
    slackTeam: t.string({ required: true, description: "The Slack workspace's team id (T…, or E… for an Enterprise Grid organization)." }),
    signingSecret: t.string({ required: true, description: "The Slack app's Signing Secret (Basic Information → App Credentials); stored sealed." }),
  }),
});
const LinkSlackUserInput = builder.inputType("LinkSlackUserInput", {
  fields: (t) => ({ code: t.string({ required: true, description: "The one-time code Slack showed you after your click (ten minutes, single use)." }) }),
});
const UnlinkSlackUserInput = builder.inputType("UnlinkSlackUserInput", {
  fields: (t) => ({ id: t.id({ required: true }) }),
});

builder.queryFields((t) => ({
  slackIntegration: t.withAuth(SIGNED_IN).field({
    type: SlackIntegrationRef,
    nullable: true,
    description: "The organization's Slack app, or null; needs (webhook, read).",
    resolve: (_root, _args, ctx) => findSlackIntegration(deps(ctx)),
  }),
  mySlackLinks: t.withAuth(SIGNED_IN).field({
    type: [SlackUserLinkRef],
    description: "The Slack users linked to you in this organization.",
    resolve: (_root, _args, ctx) => mySlackLinks(deps(ctx)),
  }),
}));

builder.mutationFields((t) => ({
  configureSlackIntegration: t.withAuth(SIGNED_IN).field({
    type: SlackIntegrationRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Sets the Slack app: (webhook, create) the first time, (webhook, update) after. A new team ends every link.",
    args: { input: t.arg({ type: ConfigureSlackIntegrationInput, required: true }) },
    resolve: (_root, args, ctx) => configureSlackIntegration(deps(ctx), args.input),
  }),
  removeSlackIntegration: t.withAuth(SIGNED_IN).field({
    type: SlackIntegrationRef,
    errors: { types: COMMON_ERRORS },
    description: "Needs (webhook, delete). Its links and codes go with it; clicks are refused from then on.",
    resolve: (_root, _args, ctx) => removeSlackIntegration(deps(ctx)),
  }),
  linkSlackUser: t.withAuth(SIGNED_IN).field({
    type: SlackUserLinkRef,
    errors: { types: COMMON_ERRORS },
    description: "Links you to the Slack user a code was shown to (after an unlinked click). Confirm only a code Slack showed YOU.",
    args: { input: t.arg({ type: LinkSlackUserInput, required: true }) },
    resolve: (_root, args, ctx) => linkSlackUser(deps(ctx), args.input),
  }),
  unlinkSlackUser: t.withAuth(SIGNED_IN).field({
    type: SlackUserLinkRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError] },
    description: "Ends a link: yours, or any with (webhook, update). The record stays.",
    args: { input: t.arg({ type: UnlinkSlackUserInput, required: true }) },
    resolve: (_root, args, ctx) => unlinkSlackUser(deps(ctx), { id: String(args.input.id) }),
  }),
}));
