// A GitHub custom deployment protection rule (docs/integrations.md): an organization's GitHub App
// (its id, private key and webhook secret, sealed), the mappings from a repository's environment
// to a workspace, and the deployment_protection_rule events GitHub posts to
// /integrations/github/<integration id>/webhook.
//
// An event is taken only when signed with the integration's webhook secret; the same signed body
// again is recorded once. Its callback URL must be the documented one under
// COUNTERSIGN_GITHUB_API_URL for the event's own repository (an installation token goes there).
// The request waits for the workflow run's plan (`plan submit --run-url <run page>`) on the
// mapped workspace, whichever arrives first, then for that plan's gate: approved when it passes,
// rejected when it no longer can (superseded, discarded, its apply failed). A matched plan's
// origin becomes GITHUB_DEPLOYMENT (its link, the run URL the workflow gave). An environment no
// mapping names is rejected at once, saying so: fail closed, never guessed. Answers are delivered
// by src/workers/github-delivery.ts.

import { createHash } from "node:crypto";
import { z } from "zod";
import type { SignedInAuthz } from "../authz/authz.js";
import {
  callbackRunId,
  clipComment,
  EnvironmentName,
  GITHUB_DELIVERY_HEADER,
  GITHUB_EVENT_HEADER,
  GITHUB_SIGNATURE_HEADER,
  parseAppPrivateKey,
  ProtectionRuleRequested,
  RepositoryFullName,
  runPageUrl,
  runUrlNamesRun,
  verifyGithubSignature,
} from "../domain/github.js";
import { seal, sealingKeyFor, unseal } from "../domain/seal.js";
import { InvalidStateError, NotFoundError, ValidationError } from "../errors.js";
import type { Config } from "../infra/config.js";
import type { Database, SqlRunner } from "../infra/db.js";
import type { Logger } from "../infra/logger.js";
import { evaluateLive, loadPlanHead } from "./gate.js";
import { parseInput } from "./parse.js";
import { setPlanOrigin } from "./plans.js";
import { webhookTarget } from "./webhooks.js";
import { findReadableWorkspace } from "./workspaces.js";

export const GITHUB_WEBHOOK_PREFIX = "/integrations/github/";
export const githubWebhookPath = (integrationId: string) => `${GITHUB_WEBHOOK_PREFIX}${integrationId}/webhook`;
/** The largest event body taken (a deployment_protection_rule event is a few KiB; pull_requests can add more). */
export const GITHUB_MAX_BODY_BYTES = 1024 * 1024;

export const GITHUB_KEY_SEAL = "github-app-private-key-seal-v1";
export const GITHUB_SECRET_SEAL = "github-webhook-secret-seal-v1";

export const PROTECTION_REQUEST_STATUSES = ["waiting", "queued", "delivering", "delivered", "failed"] as const;

// ── Configuration ──────────────────────────────────────────────────────────────────────

export interface GithubDeps {
  db: Database;
  authz: SignedInAuthz;
  config: Config;
}

const ConfigureInput = z.object({
  appId: z.string().regex(/^[0-9]{1,20}$/, "the App's numeric App ID (GitHub: the App's settings → About)"),
  // A 4,096-bit RSA key's PEM is about 3,300 characters.
  privateKey: z
    .string()
    .max(8192, "at most 8,192 characters (a GitHub App's .pem file is about 1,700)")
    .refine((pem) => pem.trim().length > 0, "the App's private key (the .pem file GitHub generated), not blank"),
  webhookSecret: z.string().min(16, "at least 16 characters (GitHub: the App's Webhook secret)").max(256),
});

/** The organization's GitHub App, or null. Needs (webhook, read). */
export async function findGithubIntegration({ db, authz }: Pick<GithubDeps, "db" | "authz">) {
  await authz.require(webhookTarget("read"));
  return db.prisma.githubIntegration.findUnique({ where: { orgId: authz.viewer.orgId } });
}

/**
 * Sets the organization's GitHub App: its id, private key and webhook secret (both sealed).
 * (webhook, create) the first time, (webhook, update) after. The key must be an RSA PEM key.
 */
export async function configureGithubIntegration({ db, authz, config }: GithubDeps, raw: unknown) {
  const input = parseInput(ConfigureInput, raw);
  const key = parseAppPrivateKey(input.privateKey);
  if (!key.ok) throw new ValidationError([{ field: "input.privateKey", code: "invalid_key", message: `The private key ${key.reason}.` }]);
  await authz.requireMember();
  const orgId = authz.viewer.orgId;
  const existing = await db.prisma.githubIntegration.findUnique({ where: { orgId } });
  await authz.require(webhookTarget(existing ? "update" : "create"));
  const sealingKey = sealingKeyFor(config, "GithubIntegration");
  const data = {
    appId: input.appId,
    privateKeySealed: seal(GITHUB_KEY_SEAL, sealingKey, input.privateKey),
    webhookSecretSealed: seal(GITHUB_SECRET_SEAL, sealingKey, input.webhookSecret),
    configuredById: authz.viewer.userId,
  };
  return db.prisma.githubIntegration.upsert({ where: { orgId }, create: { orgId, ...data }, update: data });
}

/** Removes the App, its mappings and its requests: events are refused from then on. (webhook, delete). */
export async function removeGithubIntegration({ db, authz }: Pick<GithubDeps, "db" | "authz">) {
  await authz.require(webhookTarget("delete"));
  const found = await db.prisma.githubIntegration.findUnique({ where: { orgId: authz.viewer.orgId } });
  if (!found) throw new NotFoundError("GithubIntegration", "of this organization");
  await db.prisma.githubIntegration.delete({ where: { id: found.id } });
  return found;
}

const MapInput = z.object({
  repository: RepositoryFullName,
  environment: EnvironmentName,
  workspaceId: z.string().min(1).max(200),
});

/**
 * Maps a repository's environment to a workspace: its deployments wait for that workspace's
 * gate. (webhook, update), and the workspace must be one the caller may read. Mapping the same
 * environment again moves it to the new workspace. The workspace is looked up within the
 * caller's organization before any permission is checked, so another organization's workspace
 * reads exactly like one that does not exist.
 */
export async function mapGithubEnvironment({ db, authz }: Pick<GithubDeps, "db" | "authz">, raw: unknown) {
  const input = parseInput(MapInput, raw);
  const workspace = await findReadableWorkspace(db, authz, input.workspaceId);
  await authz.require(webhookTarget("update"));
  const integration = await db.prisma.githubIntegration.findUnique({ where: { orgId: authz.viewer.orgId } });
  if (!integration) throw new InvalidStateError("GithubIntegration", "unconfigured", "Configure the GitHub App (configureGithubIntegration) before mapping environments.");
  const repository = input.repository.toLowerCase();
  return db.prisma.githubEnvironmentMapping.upsert({
    where: { integrationId_repository_environment: { integrationId: integration.id, repository, environment: input.environment } },
    create: { orgId: integration.orgId, integrationId: integration.id, repository, environment: input.environment, workspaceId: workspace.id, createdById: authz.viewer.userId },
    update: { workspaceId: workspace.id, createdById: authz.viewer.userId },
  });
}

/** Ends a mapping: that environment's next deployments are rejected as unconfigured. (webhook, update). */
export async function unmapGithubEnvironment({ db, authz }: Pick<GithubDeps, "db" | "authz">, raw: unknown) {
  const { id } = parseInput(z.object({ id: z.string().min(1).max(200) }), raw);
  await authz.requireMember();
  const found = await db.prisma.githubEnvironmentMapping.findFirst({ where: { id, orgId: authz.viewer.orgId } });
  if (!found || !(await authz.can(webhookTarget("update")))) throw new NotFoundError("GithubEnvironmentMapping", id);
  await db.prisma.githubEnvironmentMapping.delete({ where: { id } });
  return found;
}

/** The integration's mappings, by repository and environment. (webhook, read). */
export async function githubMappings({ db, authz }: Pick<GithubDeps, "db" | "authz">, integrationId: string) {
  await authz.require(webhookTarget("read"));
  return db.prisma.githubEnvironmentMapping.findMany({ where: { orgId: authz.viewer.orgId, integrationId }, orderBy: [{ repository: "asc" }, { environment: "asc" }] });
}

/** The integration's newest protection requests and their answers. (webhook, read). */
export async function githubProtectionRequests({ db, authz }: Pick<GithubDeps, "db" | "authz">, integrationId: string, first: number) {
  await authz.require(webhookTarget("read"));
  return db.prisma.githubProtectionRequest.findMany({
    where: { orgId: authz.viewer.orgId, integrationId },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: Math.min(Math.max(first, 1), 100),
    include: { callbacks: { orderBy: { attempt: "asc" } } },
  });
}

// ── Events ─────────────────────────────────────────────────────────────────────────────

export interface GithubAnswer {
  status: number;
  body: Record<string, unknown>;
  /** A request was recorded: the worker should look at it now. */
  recorded: boolean;
}

const refuse = (status: number, error: string, message: string): GithubAnswer => ({ status, body: { error, message }, recorded: false });
const taken = (body: Record<string, unknown>, recorded = false): GithubAnswer => ({ status: 200, body, recorded });

export interface GithubReceiverDeps {
  db: Database;
  config: Config;
  logger: Logger;
}

export function createGithubReceiver(deps: GithubReceiverDeps) {
  const { db, config } = deps;
  const log = deps.logger.child({ module: "github" });

  /** Handles one POST to `pathname`. Never throws for the request's own faults. */
  async function handle(pathname: string, headers: Record<string, string | string[] | undefined>, rawBody: Buffer): Promise<GithubAnswer> {
    const match = /^\/integrations\/github\/([A-Za-z0-9-]{1,64})\/webhook$/.exec(pathname);
    if (!match) return refuse(404, "not_found", "GitHub posts to /integrations/github/<integration id>/webhook.");
    const integrationId = match[1]!;
    const header = (name: string) => {
      const v = headers[name];
      return typeof v === "string" ? v : undefined;
    };
    const integration = await db.prisma.githubIntegration.findUnique({ where: { id: integrationId } });
    // An unknown integration reads exactly as a bad signature: nothing there to sign for.
    const badSignature = () => refuse(401, "invalid_signature", "The request is not signed with this integration's webhook secret.");
    if (!integration) {
      log.warn({ integrationId, reason: "unknown_integration" }, "github request refused");
      return badSignature();
    }
    const secret = config.webhooks.secretKey ? unseal(GITHUB_SECRET_SEAL, config.webhooks.secretKey, integration.webhookSecretSealed) : null;
    if (!secret) {
      // Fail closed: an event is never taken unverified. GitHub redelivers on request once the key is back.
      log.error({ integrationId }, "github webhook secret cannot be opened with the configured COUNTERSIGN_WEBHOOK_SECRET_KEY");
      return refuse(503, "unconfigured", "The integration's webhook secret cannot be opened; the operator must restore the sealing key.");
    }
    if (!verifyGithubSignature(secret, header(GITHUB_SIGNATURE_HEADER), rawBody)) {
      log.warn({ integrationId, orgId: integration.orgId, reason: "invalid_signature" }, "github request refused");
      return badSignature();
    }
    const event = header(GITHUB_EVENT_HEADER);
    if (event === "ping") return taken({ ok: true, event: "ping" });
    if (event !== "deployment_protection_rule") return taken({ ignored: event ?? "no X-GitHub-Event" });
    let json: unknown;
    try {
      json = JSON.parse(rawBody.toString("utf8"));
    } catch {
      return refuse(400, "bad_payload", "The body is not JSON.");
    }
    if ((json as { action?: unknown } | null)?.action !== "requested") return taken({ ignored: `deployment_protection_rule ${String((json as { action?: unknown } | null)?.action)}`.slice(0, 100) });
    const parsed = ProtectionRuleRequested.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return refuse(400, "bad_payload", `The deployment_protection_rule event is not as GitHub sends it: ${issue?.path.join(".") || "payload"}: ${issue?.message ?? "invalid"}.`);
    }
    const payload = parsed.data;
    const repository = payload.repository.full_name.toLowerCase();
    const runId = callbackRunId(payload.deployment_callback_url, config.github.apiUrl, repository);
    const runPage = runId ? runPageUrl(payload.repository.html_url, runId) : null;
    if (!runId || !runPage) {
      // The answer carries an installation token: it goes only to the documented URL under the configured API.
      log.warn({ integrationId, orgId: integration.orgId, reason: "callback_url_refused" }, "github request refused");
      return refuse(400, "callback_url_refused", "deployment_callback_url is not {COUNTERSIGN_GITHUB_API_URL}/repos/{repository}/actions/runs/{run_id}/deployment_protection_rule for this repository.");
    }
    const mapping = await db.prisma.githubEnvironmentMapping.findUnique({
      where: { integrationId_repository_environment: { integrationId, repository, environment: payload.environment } },
    });
    const unmapped = mapping
      ? null
      : clipComment(
          `Countersign rejected this deployment: no Countersign workspace is mapped to ${repository} environment "${payload.environment}". ` +
            `An administrator maps it (mapGithubEnvironment), then re-run the job.`,
        );
    const inserted = await db.sql.query<{ id: string }>(
      `INSERT INTO github_protection_requests
         (id, "orgId", "integrationId", "bodyDigest", "deliveryId", "installationId", repository, environment, "runId", "callbackUrl", "runPageUrl",
          "workspaceId", status, state, comment, "decidedAt", "updatedAt")
       VALUES (gen_random_uuid(), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, now())
       ON CONFLICT ("integrationId", "bodyDigest") DO NOTHING
       RETURNING id`,
      [
        integration.orgId,
        integrationId,
        createHash("sha256").update(rawBody).digest("hex"),
        header(GITHUB_DELIVERY_HEADER)?.slice(0, 100) ?? null,
        String(payload.installation.id),
        repository,
        payload.environment,
        runId,
        payload.deployment_callback_url,
        runPage,
        mapping?.workspaceId ?? null,
        unmapped ? "queued" : "waiting",
        unmapped ? "rejected" : null,
        unmapped,
        unmapped ? new Date() : null,
      ],
    );
    if (inserted.length === 0) {
      // GitHub's redelivery, or a replay: the first one is the request; nothing is recorded twice.
      log.info({ integrationId, orgId: integration.orgId, reason: "already_recorded" }, "github request seen before");
      return taken({ status: "already_recorded" });
    }
    log.info({ integrationId, orgId: integration.orgId, requestId: inserted[0]!.id, mapped: !unmapped }, "github deployment protection request recorded");
    return taken({ status: unmapped ? "rejected_unmapped" : "waiting", id: inserted[0]!.id }, true);
  }

  return { handle };
}

// ── Deciding ───────────────────────────────────────────────────────────────────────────

type Waiting = { id: string; orgId: string; workspaceId: string; runPageUrl: string; planId: string | null; environment: string };

/** The plan page's URL (COUNTERSIGN_PUBLIC_URL), or null without one. */
export const planPageUrl = (config: Pick<Config, "publicUrl">, planId: string) => (config.publicUrl ? new URL(`/#plan/${planId}`, config.publicUrl).href : null);

/** The newest plan on the workspace whose run URL names the run, or null. */
async function planOfRun(sql: SqlRunner, request: Waiting) {
  const like = `${request.runPageUrl.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const rows = await sql.query<{ id: string; runUrl: string }>(
    `SELECT id, "runUrl" FROM plans WHERE "workspaceId" = $1 AND "orgId" = $2 AND lower("runUrl") LIKE $3 ORDER BY "createdAt" DESC, id DESC LIMIT 50`,
    [request.workspaceId, request.orgId, like],
  );
  return rows.find((r) => runUrlNamesRun(r.runUrl, request.runPageUrl)) ?? null;
}

/** Approved (who approved, the plan page), rejected (why it can no longer pass), or still waiting. */
async function verdictOf(sql: SqlRunner, config: Pick<Config, "publicUrl">, orgId: string, planId: string): Promise<{ state: "approved" | "rejected"; comment: string } | null> {
  const head = await loadPlanHead(sql, orgId, planId);
  if (!head) return null;
  const page = planPageUrl(config, planId);
  const where = `Countersign plan ${planId} on workspace ${head.workspaceName}${page ? ` (${page})` : ""}`;
  if (head.status === "discarded") {
    const [row] = await sql.query<{ discardReason: string | null; supersededById: string | null }>(`SELECT "discardReason", "supersededById" FROM plans WHERE id = $1`, [planId]);
    const why = row?.discardReason === "superseded" ? `was superseded by plan ${row.supersededById}` : head.archived ? "was discarded (its workspace was archived)" : "was discarded";
    return { state: "rejected", comment: clipComment(`${where} ${why}: it can no longer pass its gate.`) };
  }
  if (head.status === "failed") return { state: "rejected", comment: clipComment(`${where} was already applied and the apply failed.`) };
  if (head.status === "planned") {
    const snapshot = await evaluateLive(sql, head, 0);
    if (!snapshot.evaluation.passed) return null;
  }
  // planned and passed, or applying/applied (the gate passed for the apply to start).
  const approvers = await sql.query<{ name: string }>(
    `SELECT u.name FROM approvals a JOIN users u ON u.id = a."userId" WHERE a."planId" = $1 AND a."withdrawnAt" IS NULL ORDER BY a."createdAt", a.id`,
    [planId],
  );
  const by = approvers.length > 0 ? `approved by ${approvers.map((a) => a.name).join(", ")}` : "needed no approval";
  return { state: "approved", comment: clipComment(`${where} passed its gate: ${by}.`) };
}

/**
 * One pass over the waiting requests: each is matched to its run's plan (either may have arrived
 * first) and decided once that plan's gate passes or can no longer pass. Returns how many were
 * decided. Runs in the GitHub worker's tick (and after a matching event or plan wakes it).
 */
export async function decideWaitingRequests(db: Database, config: Pick<Config, "publicUrl">, log: Logger, limit = 200): Promise<number> {
  // GitHub holds a job at most 30 days; past that nobody is waiting for the answer.
  await db.sql.query(
    `UPDATE github_protection_requests SET status = 'failed', "lastError" = 'no plan or gate answer within GitHub''s 30-day wait', "updatedAt" = now()
      WHERE status = 'waiting' AND "createdAt" < now() - interval '30 days'`,
  );
  const waiting = await db.sql.query<Waiting>(
    `SELECT id, "orgId", "workspaceId", "runPageUrl", "planId", environment FROM github_protection_requests
      WHERE status = 'waiting' AND "workspaceId" IS NOT NULL ORDER BY "createdAt", id LIMIT $1`,
    [limit],
  );
  let decided = 0;
  for (const request of waiting) {
    try {
      const plan = await planOfRun(db.sql, request);
      if (!plan) continue;
      if (plan.id !== request.planId) {
        await db.sql.query(`UPDATE github_protection_requests SET "planId" = $2, "updatedAt" = now() WHERE id = $1 AND status = 'waiting'`, [request.id, plan.id]);
        // The plan page says it is this GitHub deployment's plan, linking the run (its runUrl).
        await setPlanOrigin(db, plan.id, "github_deployment");
      }
      const verdict = await verdictOf(db.sql, config, request.orgId, plan.id);
      if (!verdict) continue;
      const rows = await db.sql.query(
        `UPDATE github_protection_requests SET status = 'queued', state = $2, comment = $3, "decidedAt" = now(), "nextRunAt" = now(), "updatedAt" = now()
          WHERE id = $1 AND status = 'waiting' RETURNING id`,
        [request.id, verdict.state, verdict.comment],
      );
      if (rows.length > 0) {
        decided++;
        log.info({ requestId: request.id, planId: plan.id, state: verdict.state }, "github deployment protection request decided");
      }
    } catch (error) {
      log.error({ err: error, requestId: request.id }, "github deployment protection request could not be decided");
    }
  }
  return decided;
}
