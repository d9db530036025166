// Approving from Slack (docs/integrations.md): an organization's Slack app (its team and sealed
// signing secret), the links between Slack users and members, and the clicks Slack posts to
// /integrations/slack/<integration id>/interactivity.
//
// A click is taken only when it is signed with the integration's signing secret, fresh (five
// minutes) and not seen before; its Slack user must be linked to a member (a one-time code the
// member confirms in Countersign). The approval or vote is then exactly the one that member could
// cast through the API: approvePlan and voteOnApprovalRequest, as that member, with every check
// they run. The message is updated through the payload's response_url, which must name a host the
// operator allows (COUNTERSIGN_SLACK_RESPONSE_HOSTS) and pass the outbound address policy.

import { createHash, randomBytes, randomInt, randomUUID } from "node:crypto";
import http from "node:http";
import https from "node:https";
import { z } from "zod";
import { Authz, type SignedInAuthz } from "../authz/authz.js";
import { seal, sealingKeyFor, unseal } from "../domain/seal.js";
import {
  BlockActionsPayload,
  ephemeral,
  escapeMrkdwn,
  parseSlackAction,
  payloadOfForm,
  planActionsBlock,
  requestActionsBlock,
  SLACK_SIGNATURE_HEADER,
  SLACK_TIMESTAMP_HEADER,
  SlackTeamId,
  updatedMessage,
  verifySlackSignature,
  type BlockActions,
  type SlackTarget,
} from "../domain/slack.js";
import { networkFailure, outboundConnectOptions } from "../gateway/outbound.js";
import { AppError, ConflictError, InvalidStateError, NotFoundError, PermissionDeniedError } from "../errors.js";
import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import type { EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import { isUnavailableError } from "../infra/faults.js";
import { evaluateLive, loadPlanHead } from "./gate.js";
import { voteOnApprovalRequest } from "./approvals/requests.js";
import { parseInput } from "./parse.js";
import { approvePlan } from "./plans.js";
import { webhookTarget } from "./webhooks.js";

export const SLACK_INTERACTIVITY_PREFIX = "/integrations/slack/";
export const interactivityPath = (integrationId: string) => `${SLACK_INTERACTIVITY_PREFIX}${integrationId}/interactivity`;
/** The largest interactivity body taken (a block_actions payload carries the message: tens of KiB). */
export const SLACK_MAX_BODY_BYTES = 256 * 1024;
/** How long a link code shown in Slack may be confirmed in Countersign. */
export const SLACK_LINK_CODE_TTL_MS = 10 * 60_000;

// ── Configuration ──────────────────────────────────────────────────────────────────────

const SLACK_SEAL = "slack-signing-secret-seal-v1";

export interface SlackDeps {
  db: Database;
  authz: SignedInAuthz;
  config: Config;
}

const ConfigureInput = z.object({
  slackTeam: SlackTeamId,
  // Slack's signing secrets are 32 hexadecimal characters; anything of that shape, a little wider, is taken.
  signingSecret: z.string().regex(/^[A-Za-z0-9]{16,128}$/, "the app's Signing Secret (Slack: Basic Information → App Credentials)"),
});

/** The organization's Slack integration, or null. Needs (webhook, read). */
export async function findSlackIntegration({ db, authz }: Pick<SlackDeps, "db" | "authz">) {
  await authz.require(webhookTarget("read"));
  return db.prisma.slackIntegration.findUnique({ where: { orgId: authz.viewer.orgId } });
}

/**
 * Sets the organization's Slack app: its team and signing secret (sealed). (webhook, create) the
 * first time, (webhook, update) after; changing the team ends every link (they name the old team).
 */
export async function configureSlackIntegration({ db, authz, config }: SlackDeps, raw: unknown) {
  const input = parseInput(ConfigureInput, raw);
  await authz.requireMember();
  const orgId = authz.viewer.orgId;
  const existing = await db.prisma.slackIntegration.findUnique({ where: { orgId } });
  await authz.require(webhookTarget(existing ? "update" : "create"));
  const sealed = seal(SLACK_SEAL, sealingKeyFor(config, "SlackIntegration"), input.signingSecret);
  return db.prisma.$transaction(async (tx) => {
    const row = await tx.slackIntegration.upsert({
      where: { orgId },
      create: { orgId, slackTeam: input.slackTeam, signingSecretSealed: sealed, configuredById: authz.viewer.userId },
      update: { slackTeam: input.slackTeam, signingSecretSealed: sealed, configuredById: authz.viewer.userId },
    });
    if (existing && existing.slackTeam !== input.slackTeam) {
      await tx.slackUserLink.updateMany({ where: { integrationId: row.id, unlinkedAt: null }, data: { unlinkedAt: new Date(), unlinkedById: authz.viewer.userId } });
      await tx.slackLinkCode.deleteMany({ where: { integrationId: row.id, usedAt: null } });
    }
    return row;
  });
}

/** Removes the integration, its links and codes: clicks are refused from then on. (webhook, delete). */
export async function removeSlackIntegration({ db, authz }: Pick<SlackDeps, "db" | "authz">) {
  await authz.require(webhookTarget("delete"));
  const found = await db.prisma.slackIntegration.findUnique({ where: { orgId: authz.viewer.orgId } });
  if (!found) throw new NotFoundError("SlackIntegration", "of this organization");
  await db.prisma.slackIntegration.delete({ where: { id: found.id } });
  return found;
}

// ── Links ──────────────────────────────────────────────────────────────────────────────

/** Crockford's base32 without the letters read as digits: what a person copies out of Slack. */
const CODE_ALPHABET = "ABCDEFGHJKMNPQRSTVWXYZ23456789";
const CODE_LENGTH = 12; // ~59 bits, single use, ten minutes

function newLinkCode(): string {
  let code = "";
  for (let i = 0; i < CODE_LENGTH; i++) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return `${code.slice(0, 4)}-${code.slice(4, 8)}-${code.slice(8)}`;
}

const normalizeCode = (code: string) => code.toUpperCase().replace(/[\s-]/g, "");
const hashCode = (code: string) => createHash("sha256").update(`slack-link:${normalizeCode(code)}`).digest("hex");

const LinkInput = z.object({ code: z.string().min(1).max(64) });

/** The viewer's active links. */
export async function mySlackLinks({ db, authz }: Pick<SlackDeps, "db" | "authz">) {
  await authz.requireMember();
  return db.prisma.slackUserLink.findMany({ where: { orgId: authz.viewer.orgId, userId: authz.viewer.userId, unlinkedAt: null }, orderBy: [{ linkedAt: "asc" }, { id: "asc" }] });
}

/** Every active link of the integration: (webhook, read). */
export async function integrationLinks({ db, authz }: Pick<SlackDeps, "db" | "authz">, integrationId: string) {
  await authz.require(webhookTarget("read"));
  return db.prisma.slackUserLink.findMany({ where: { orgId: authz.viewer.orgId, integrationId, unlinkedAt: null }, orderBy: [{ linkedAt: "asc" }, { id: "asc" }] });
}

/**
 * The viewer confirms a code Slack showed them: the Slack user it was issued to is linked to the
 * viewer from now on (an earlier link of that Slack user ends). The code is single-use and lives
 * ten minutes; an unknown, used, expired or other organization's code reads the same (NotFound).
 * A service account cannot be linked: a click is a person's.
 */
export async function linkSlackUser({ db, authz }: Pick<SlackDeps, "db" | "authz">, raw: unknown) {
  const input = parseInput(LinkInput, raw);
  await authz.requireMember();
  const viewer = authz.viewer;
  if (viewer.isServiceAccount) throw new PermissionDeniedError(null, "A service account cannot be linked to a Slack user: a click in Slack is a person's.");
  return db.prisma.$transaction(async (tx) => {
    const used = await tx.$queryRawUnsafe<{ integrationId: string; slackTeam: string; slackUser: string }[]>(
      `UPDATE slack_link_codes SET "usedAt" = now(), "usedById" = $3
        WHERE "codeHash" = $1 AND "orgId" = $2 AND "usedAt" IS NULL AND "expiresAt" > now()
        RETURNING "integrationId", "slackTeam", "slackUser"`,
      hashCode(input.code),
      viewer.orgId,
      viewer.userId,
    );
    const code = used[0];
    if (!code) throw new NotFoundError("SlackLinkCode", "with this code (unknown, used or expired: click in Slack again for a new one)");
    await tx.slackUserLink.updateMany({
      where: { orgId: viewer.orgId, slackTeam: code.slackTeam, slackUser: code.slackUser, unlinkedAt: null },
      data: { unlinkedAt: new Date(), unlinkedById: viewer.userId },
    });
    return tx.slackUserLink.create({ data: { orgId: viewer.orgId, integrationId: code.integrationId, slackTeam: code.slackTeam, slackUser: code.slackUser, userId: viewer.userId } });
  });
}

/** Ends a link: the linked member themselves, or a holder of (webhook, update). Recorded, never deleted. */
export async function unlinkSlackUser({ db, authz }: Pick<SlackDeps, "db" | "authz">, raw: unknown) {
  const { id } = parseInput(z.object({ id: z.string().min(1).max(200) }), raw);
  await authz.requireMember();
  const viewer = authz.viewer;
  const link = await db.prisma.slackUserLink.findFirst({ where: { id, orgId: viewer.orgId } });
  if (!link || (link.userId !== viewer.userId && !(await authz.can(webhookTarget("update"))))) throw new NotFoundError("SlackUserLink", id);
  if (link.unlinkedAt) throw new InvalidStateError("SlackUserLink", "unlinked", "This Slack user is already unlinked.");
  const [row] = await db.prisma.slackUserLink.updateManyAndReturn({ where: { id, unlinkedAt: null }, data: { unlinkedAt: new Date(), unlinkedById: viewer.userId } });
  if (!row) throw new InvalidStateError("SlackUserLink", "unlinked", "This Slack user is already unlinked.");
  return row;
}

// ── Clicks ─────────────────────────────────────────────────────────────────────────────

/** One POST to the click's response_url. */
export type SlackReply = Record<string, unknown>;

export interface SlackAnswer {
  status: number;
  /** null: an empty body (Slack reads only the status of a block_actions answer). */
  body: Record<string, unknown> | null;
  /** Sent to response_url after the answer, in order. */
  replies: SlackReply[];
  responseUrl: string | null;
}

const refuse = (status: number, error: string, message: string): SlackAnswer => ({ status, body: { error, message }, replies: [], responseUrl: null });

export interface SlackInteractivityDeps {
  db: Database;
  events: EventBus;
  config: Config;
  logger: Logger;
}

export function createSlackInteractivity(deps: SlackInteractivityDeps) {
  const { db, config } = deps;
  const log = deps.logger.child({ module: "slack" });

  /** The response_url as a URL Countersign may post to, or why not. */
  function responseUrlProblem(raw: string): string | null {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return "is not a URL";
    }
    if (url.protocol !== "https:" && !(url.protocol === "http:" && config.slack.allowPrivate)) return "is not https";
    if (url.username || url.password) return "carries credentials";
    if (!config.slack.responseHosts.includes(url.hostname.toLowerCase())) return `names a host outside COUNTERSIGN_SLACK_RESPONSE_HOSTS`;
    return null;
  }

  /** First record of a signed request wins; the same signature and timestamp again is a replay. */
  async function firstSighting(integrationId: string, timestamp: string, signature: string): Promise<boolean> {
    const digest = createHash("sha256").update(`${integrationId}\n${timestamp}\n${signature}`).digest("hex");
    const rows = await db.sql.query<{ digest: string }>(
      `WITH pruned AS (DELETE FROM slack_seen_requests WHERE "seenAt" < now() - interval '15 minutes')
       INSERT INTO slack_seen_requests (digest, "seenAt") VALUES ($1, now()) ON CONFLICT (digest) DO NOTHING RETURNING digest`,
      [digest],
    );
    return rows.length > 0;
  }

  /** Handles one POST to `pathname`. Never throws for the request's own faults. */
  async function handle(pathname: string, headers: Record<string, string | string[] | undefined>, rawBody: Buffer): Promise<SlackAnswer> {
    const match = /^\/integrations\/slack\/([A-Za-z0-9-]{1,64})\/interactivity$/.exec(pathname);
    if (!match) return refuse(404, "not_found", "Slack posts to /integrations/slack/<integration id>/interactivity.");
    const integrationId = match[1]!;
    const header = (name: string) => {
      const v = headers[name];
      return typeof v === "string" ? v : undefined;
    };
    const signature = header(SLACK_SIGNATURE_HEADER);
    const timestamp = header(SLACK_TIMESTAMP_HEADER);
    const integration = await db.prisma.slackIntegration.findUnique({ where: { id: integrationId } });
    // An unknown integration reads as a bad signature: nothing there to sign for.
    if (!integration) {
      log.warn({ integrationId, reason: "unknown_integration" }, "slack request refused");
      return refuse(401, "invalid_signature", "The request is not signed with this integration's signing secret.");
    }
    const secret = config.webhooks.secretKey ? unseal(SLACK_SEAL, config.webhooks.secretKey, integration.signingSecretSealed) : null;
    if (!secret) {
      // Fail closed: a click is never taken unverified. The key may come back (a restart with the right one).
      log.error({ integrationId }, "slack signing secret cannot be opened with the configured COUNTERSIGN_WEBHOOK_SECRET_KEY");
      return refuse(503, "unconfigured", "The integration's signing secret cannot be opened; the operator must restore the sealing key.");
    }
    const verdict = verifySlackSignature(secret, { signature, timestamp }, rawBody);
    if (!verdict.ok) {
      log.warn({ integrationId, orgId: integration.orgId, reason: verdict.reason }, "slack request refused");
      return verdict.reason === "stale_timestamp"
        ? refuse(401, "stale_timestamp", "X-Slack-Request-Timestamp is more than five minutes from now.")
        : refuse(401, "invalid_signature", "The request is not signed with this integration's signing secret.");
    }
    if (!(await firstSighting(integration.id, timestamp!, signature!))) {
      log.warn({ integrationId, orgId: integration.orgId, reason: "replayed" }, "slack request refused");
      return refuse(401, "replayed", "This signed request was already taken.");
    }
    const form = payloadOfForm(rawBody);
    if (!form.ok) return refuse(400, "bad_payload", `The body is not a Slack interaction: ${form.reason}.`);
    if ((form.payload as { type?: unknown } | null)?.type !== "block_actions") {
      // Shortcuts, views and the rest are not Countersign's: taken and ignored.
      return { status: 200, body: null, replies: [], responseUrl: null };
    }
    const parsed = BlockActionsPayload.safeParse(form.payload);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return refuse(400, "bad_payload", `The block_actions payload is not as Slack sends it: ${issue?.path.join(".") || "payload"}: ${issue?.message ?? "invalid"}.`);
    }
    const payload = parsed.data;
    const problem = responseUrlProblem(payload.response_url);
    if (problem) {
      // Where the result would go is not Slack's: nothing is done for a click nobody could be told about.
      log.warn({ integrationId, orgId: integration.orgId, reason: "response_url_refused" }, "slack request refused");
      return refuse(400, "response_url_refused", `The payload's response_url ${problem}.`);
    }
    const replies = await act(integration, payload);
    return { status: 200, body: null, replies, responseUrl: payload.response_url };
  }

  async function act(integration: { id: string; orgId: string; slackTeam: string }, payload: BlockActions): Promise<SlackReply[]> {
    const slackUser = payload.user.id;
    if (payload.team.id !== integration.slackTeam) {
      return [ephemeral(`This Slack workspace is not the one connected to this Countersign organization, so your click changed nothing.`)];
    }
    const action = payload.actions[0]!;
    const target = parseSlackAction(action.action_id, action.value ?? "");
    if (!target) return [ephemeral("This button is not one Countersign understands, so your click changed nothing.")];
    const [link] = await db.sql.query<{ userId: string }>(
      `SELECT "userId" FROM slack_user_links WHERE "orgId" = $1 AND "integrationId" = $2 AND "slackTeam" = $3 AND "slackUser" = $4 AND "unlinkedAt" IS NULL`,
      [integration.orgId, integration.id, payload.team.id, slackUser],
    );
    if (!link) return [ephemeral(await linkInstructions(integration, payload.team.id, slackUser))];
    // The linked member, as the API would see them signed in: their memberships and grants decide.
    const authz = new Authz(db.sql, { orgId: integration.orgId, userId: link.userId, tokenId: "", name: "", email: "", isServiceAccount: false }) as SignedInAuthz;
    const original = payload.message?.blocks ?? [];
    const text = payload.message?.text ?? "Countersign";
    try {
      return target.kind === "plan" ? await approveFromSlack(authz, target.planId, slackUser, original, text) : await voteFromSlack(authz, target, slackUser, original, text);
    } catch (error) {
      if (error instanceof AppError) {
        const replies: SlackReply[] = [ephemeral(`Your click changed nothing: ${error.message}`)];
        // The buttons were for an older revision: the message is refreshed so the next click counts.
        if (error instanceof ConflictError && target.kind === "request") {
          const refreshed = await refreshedRequestMessage(integration.orgId, target.requestId, original, text);
          if (refreshed) replies.push(refreshed);
        }
        return replies;
      }
      const errorId = randomUUID();
      log.error({ err: error, errorId, orgId: integration.orgId }, "slack click failed");
      const why = isUnavailableError(error) ? "Countersign's database is unavailable" : "an unexpected error";
      return [ephemeral(`Your click may not have been recorded (${why}, id ${errorId}); look at the plan or request in Countersign before clicking again.`)];
    }
  }

  /** An unlinked Slack user's click: a fresh one-time code (their earlier unused ones end). */
  async function linkInstructions(integration: { id: string; orgId: string }, slackTeam: string, slackUser: string): Promise<string> {
    const code = newLinkCode();
    await db.prisma.$transaction([
      db.prisma.slackLinkCode.deleteMany({ where: { integrationId: integration.id, slackTeam, slackUser, usedAt: null } }),
      db.prisma.slackLinkCode.create({
        data: { orgId: integration.orgId, integrationId: integration.id, slackTeam, slackUser, codeHash: hashCode(code), expiresAt: new Date(Date.now() + SLACK_LINK_CODE_TTL_MS) },
      }),
    ]);
    return (
      `Your Slack user is not linked to a Countersign member, so your click changed nothing. ` +
      `To link it, sign in to Countersign as yourself within 10 minutes and confirm the code *${code}* ` +
      `(GraphQL: \`mutation { linkSlackUser(input: { code: "${code}" }) { __typename } }\`), then click again. ` +
      `Never confirm a code someone else gives you: whoever's code you confirm acts as you.`
    );
  }

  async function approveFromSlack(authz: SignedInAuthz, planId: string, slackUser: string, original: readonly unknown[], text: string): Promise<SlackReply[]> {
    await approvePlan({ db, authz, events: deps.events }, planId);
    const head = await loadPlanHead(db.sql, authz.viewer.orgId, planId);
    const evaluation = head ? (await evaluateLive(db.sql, head, 0)).evaluation : null;
    const passed = evaluation?.passed ?? false;
    const counted = evaluation?.approvalsCounted ?? 0;
    const result = passed
      ? `:white_check_mark: <@${slackUser}> approved. The gate passed: the plan can be applied.`
      : `:white_check_mark: <@${slackUser}> approved (${counted} approval${counted === 1 ? "" : "s"} counted). The gate still waits for more.`;
    const stillOpen = head?.status === "planned" && !passed;
    return [updatedMessage(original, text, result, stillOpen ? planActionsBlock(planId) : null)];
  }

  async function voteFromSlack(authz: SignedInAuthz, target: Extract<SlackTarget, { kind: "request" }>, slackUser: string, original: readonly unknown[], text: string): Promise<SlackReply[]> {
    await voteOnApprovalRequest({ db, authz, events: deps.events }, { requestId: target.requestId, decision: target.decision, expectedRevision: target.revision });
    const [now] = await db.sql.query<{ status: string; revision: number }>(`SELECT status::text AS status, revision FROM approval_requests WHERE id = $1`, [target.requestId]);
    const verb = target.decision === "approve" ? ":white_check_mark: <@" + slackUser + "> approved" : ":no_entry: <@" + slackUser + "> denied";
    const outcome =
      now?.status === "approved" ? "The call is approved and will run." : now?.status === "rejected" ? "The call is denied." : now?.status === "pending" ? "It waits for more votes." : `It is ${escapeMrkdwn(now?.status ?? "closed")}.`;
    return [updatedMessage(original, text, `${verb}. ${outcome}`, now?.status === "pending" ? requestActionsBlock(target.requestId, now.revision) : null)];
  }

  /** The message with buttons at the request's current revision (or none when it is closed). */
  async function refreshedRequestMessage(orgId: string, requestId: string, original: readonly unknown[], text: string): Promise<SlackReply | null> {
    const [now] = await db.sql.query<{ status: string; revision: number }>(`SELECT status::text AS status, revision FROM approval_requests WHERE id = $1 AND "orgId" = $2`, [requestId, orgId]);
    if (!now) return null;
    const state = now.status === "pending" ? "It changed since this message was posted; the buttons now act on its current state." : `It is ${escapeMrkdwn(now.status)}.`;
    return updatedMessage(original, text, state, now.status === "pending" ? requestActionsBlock(requestId, now.revision) : null);
  }

  /** Posts each reply to response_url, in order; failures are logged, never thrown. */
  async function send(responseUrl: string, replies: readonly SlackReply[]): Promise<void> {
    for (const reply of replies) {
      try {
        const status = await postJson(new URL(responseUrl), JSON.stringify(reply), config.slack.timeoutMs, { allowPrivate: config.slack.allowPrivate });
        if (status < 200 || status >= 300) log.warn({ status }, "slack response_url refused the update");
      } catch (error) {
        log.warn({ error: networkFailure(error, "Slack's response_url") }, "slack response_url unreachable");
      }
    }
  }

  return { handle, send };
}

/** POSTs JSON under the outbound address policy (the checked address, no redirect followed); the status. */
async function postJson(url: URL, body: string, timeoutMs: number, policy: { allowPrivate: boolean }): Promise<number> {
  const { lookup } = await outboundConnectOptions(url, policy);
  return new Promise<number>((resolve, reject) => {
    const client = url.protocol === "https:" ? https : http;
    const req = client.request(
      url,
      { method: "POST", headers: { "content-type": "application/json; charset=utf-8", "content-length": String(Buffer.byteLength(body)) }, lookup, timeout: timeoutMs, agent: false },
      (res) => {
        // A redirect is an answer, never followed (its target is not checked).
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(Object.assign(new Error("timed out"), { code: "ETIMEDOUT" })));
    req.on("error", reject);
    req.end(body);
  });
}

/** For tests and tooling: a random signing secret in Slack's shape (32 hex characters). */
export const newSigningSecret = () => randomBytes(16).toString("hex");
