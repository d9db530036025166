// HCP Terraform / Terraform Enterprise run tasks (docs/integrations.md): an organization's run
// task (its sealed HMAC key and the member its plans are submitted as), the mapping from HCP
// workspaces to Countersign workspaces, and the requests HCP posts to
// /integrations/hcp-terraform/<run task id>/run-task.
//
// A request is taken only when X-TFC-Task-Signature is the HMAC-SHA512 of the raw body under the
// task's key (compared in constant time); an unknown id reads exactly like a bad signature. HCP's
// verification request (access_token "test-token") is answered 200 and does nothing else. Every
// other request is recorded (one row per HCP task result: HCP sending it again changes nothing)
// and answered 200 at once; the worker (src/workers/hcp-run-task.ts) fetches the plan JSON,
// submits it, and reports the gate back to HCP.

import { randomBytes } from "node:crypto";
import http from "node:http";
import https from "node:https";
import { z } from "zod";
import { Authz, type SignedInAuthz } from "../authz/authz.js";
import { seal, sealingKeyFor, unseal } from "../domain/seal.js";
import { hmacHex, sameSecret } from "../domain/signing.js";
import { networkFailure, OutboundAddressRefused, outboundConnectOptions } from "../gateway/outbound.js";
import { NotFoundError, ValidationError } from "../errors.js";
import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import type { Logger } from "../infra/logger.js";
import { parseInput } from "./parse.js";
import { webhookTarget } from "./webhooks.js";
import { findWorkspaceFor } from "./workspaces.js";

export const HCP_RUN_TASK_PREFIX = "/integrations/hcp-terraform/";
export const runTaskPath = (id: string) => `${HCP_RUN_TASK_PREFIX}${id}/run-task`;
/** HCP's request carries the run's metadata only (the plan is fetched): a few KiB. */
export const HCP_MAX_BODY_BYTES = 64 * 1024;
/** The largest plan JSON fetched from HCP. */
export const HCP_MAX_PLAN_BYTES = 50 * 1024 * 1024;
export const HCP_SIGNATURE_HEADER = "x-tfc-task-signature";
/** The access token HCP sends in the request it makes when a run task is created or changed. */
export const HCP_VERIFICATION_TOKEN = "test-token";
/** HCP errors a task with no progress update for 10 minutes: a waiting gate is re-reported at least this often. */
export const HCP_HEARTBEAT_MS = 5 * 60_000;
export const MAX_HCP_MAPPINGS = 500;

const HMAC_SEAL = "hcp-run-task-hmac-seal-v1";
const TOKEN_SEAL = "hcp-run-task-token-seal-v1";
const ENTITY = "HcpRunTask";

export interface HcpDeps {
  db: Database;
  authz: SignedInAuthz;
  config: Config;
}

export const signRunTaskBody = (key: string, body: Buffer | string) => hmacHex("sha512", key, body);

/** The plaintext HMAC key of a run task row, or null when the configured key cannot open it. */
export function openHmacKey(config: Config, sealed: string): string | null {
  return config.webhooks.secretKey ? unseal(HMAC_SEAL, config.webhooks.secretKey, sealed) : null;
}
export function sealAccessToken(config: Config, token: string): string {
  return seal(TOKEN_SEAL, sealingKeyFor(config, ENTITY), token);
}
export function openAccessToken(config: Config, sealed: string): string | null {
  return config.webhooks.secretKey ? unseal(TOKEN_SEAL, config.webhooks.secretKey, sealed) : null;
}

const newHmacKey = () => randomBytes(32).toString("base64url");

// ── Configuration ──────────────────────────────────────────────────────────────────────

/** The organization's run task, or null. Needs (webhook, read). */
export async function findHcpRunTask({ db, authz }: Pick<HcpDeps, "db" | "authz">) {
  await authz.require(webhookTarget("read"));
  return db.prisma.hcpRunTask.findUnique({ where: { orgId: authz.viewer.orgId } });
}

/**
 * Creates the organization's run task with a new HMAC key, returned once (HCP asks for it when
 * the run task is added there). The viewer is recorded as the member plans are submitted as.
 * Needs (webhook, create); one per organization.
 */
export async function createHcpRunTask({ db, authz, config }: HcpDeps) {
  await authz.require(webhookTarget("create"));
  const viewer = authz.viewer;
  if (viewer.isServiceAccount) throw ValidationError.field("input", "service_account", "A run task submits plans as a person: configure it signed in as a member, not a service account.");
  const hmacKey = newHmacKey();
  const sealed = seal(HMAC_SEAL, sealingKeyFor(config, ENTITY), hmacKey);
  const existing = await db.prisma.hcpRunTask.findUnique({ where: { orgId: viewer.orgId } });
  if (existing) throw ValidationError.field("input", "exists", "The organization already has a run task: update it (a new key, or you as its member) or delete it first.");
  const runTask = await db.prisma.hcpRunTask.create({ data: { orgId: viewer.orgId, hmacKeySealed: sealed, configuredById: viewer.userId } });
  return { runTask, hmacKey };
}

const UpdateInput = z.object({ rotateHmacKey: z.boolean().nullish() });

/**
 * The viewer becomes the member plans are submitted as (recorded); with rotateHmacKey a new key
 * is made and returned once (HCP's run task must be given it). Needs (webhook, update).
 */
export async function updateHcpRunTask({ db, authz, config }: HcpDeps, raw: unknown) {
  const input = parseInput(UpdateInput, raw ?? {});
  await authz.require(webhookTarget("update"));
  const viewer = authz.viewer;
  if (viewer.isServiceAccount) throw ValidationError.field("input", "service_account", "A run task submits plans as a person: update it signed in as a member, not a service account.");
  const found = await db.prisma.hcpRunTask.findUnique({ where: { orgId: viewer.orgId } });
  if (!found) throw new NotFoundError(ENTITY, "of this organization");
  const hmacKey = input.rotateHmacKey ? newHmacKey() : null;
  const runTask = await db.prisma.hcpRunTask.update({
    where: { id: found.id },
    data: { configuredById: viewer.userId, ...(hmacKey ? { hmacKeySealed: seal(HMAC_SEAL, sealingKeyFor(config, ENTITY), hmacKey) } : {}) },
  });
  return { runTask, hmacKey };
}

/** Removes the run task, its mappings and requests (their tokens with them). Needs (webhook, delete). */
export async function deleteHcpRunTask({ db, authz }: Pick<HcpDeps, "db" | "authz">) {
  await authz.require(webhookTarget("delete"));
  const found = await db.prisma.hcpRunTask.findUnique({ where: { orgId: authz.viewer.orgId } });
  if (!found) throw new NotFoundError(ENTITY, "of this organization");
  await db.prisma.hcpRunTask.delete({ where: { id: found.id } });
  return found;
}

/** HCP's organization names: letters, digits, `-` and `_`. Workspace names likewise; ids are ws-…. */
const HcpName = z.string().trim().min(1).max(90).regex(/^[A-Za-z0-9_-]+$/, "letters, digits, - and _ (as HCP Terraform names them)");

const MappingInput = z.object({
  hcpOrganization: HcpName,
  hcpWorkspace: HcpName,
  workspaceId: z.string().min(1).max(200),
});

/**
 * Maps an HCP workspace (name or ws-… id) to a Countersign workspace. Needs (webhook, update) and
 * (workspace, plan) on that workspace: whoever routes plans into a workspace could submit them.
 * The workspace is looked up within the caller's organization before any permission is checked,
 * so another organization's workspace reads exactly like one that does not exist.
 */
export async function addHcpWorkspaceMapping({ db, authz }: Pick<HcpDeps, "db" | "authz">, raw: unknown) {
  const input = parseInput(MappingInput, raw);
  const workspace = await findWorkspaceFor(db, authz, input.workspaceId, "plan");
  await authz.require(webhookTarget("update"));
  const viewer = authz.viewer;
  const runTask = await db.prisma.hcpRunTask.findUnique({ where: { orgId: viewer.orgId } });
  if (!runTask) throw new NotFoundError(ENTITY, "of this organization");
  const count = await db.prisma.hcpWorkspaceMapping.count({ where: { runTaskId: runTask.id } });
  if (count >= MAX_HCP_MAPPINGS) throw ValidationError.field("input", "too_many", `A run task has at most ${MAX_HCP_MAPPINGS} workspace mappings.`);
  const existing = await db.prisma.hcpWorkspaceMapping.findFirst({ where: { runTaskId: runTask.id, hcpOrganization: input.hcpOrganization, hcpWorkspace: input.hcpWorkspace } });
  if (existing) throw ValidationError.field("input.hcpWorkspace", "exists", `${input.hcpOrganization}/${input.hcpWorkspace} is already mapped: remove that mapping first.`);
  return db.prisma.hcpWorkspaceMapping.create({
    data: { orgId: viewer.orgId, runTaskId: runTask.id, hcpOrganization: input.hcpOrganization, hcpWorkspace: input.hcpWorkspace, workspaceId: workspace.id, createdById: viewer.userId },
  });
}

/** Needs (webhook, update). A mapping of another organization reads as unknown: looked up before the permission is checked. */
export async function removeHcpWorkspaceMapping({ db, authz }: Pick<HcpDeps, "db" | "authz">, id: string) {
  await authz.requireMember();
  const found = await db.prisma.hcpWorkspaceMapping.findFirst({ where: { id, orgId: authz.viewer.orgId } });
  if (!found) throw new NotFoundError("HcpWorkspaceMapping", id);
  await authz.require(webhookTarget("update"));
  await db.prisma.hcpWorkspaceMapping.delete({ where: { id: found.id } });
  return found;
}

export async function hcpMappings(db: Database, runTaskId: string) {
  return db.prisma.hcpWorkspaceMapping.findMany({ where: { runTaskId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
}

/** The newest requests with their callback attempts, for (webhook, read). */
export async function hcpRecentRequests(db: Database, runTaskId: string, first: number) {
  return db.prisma.hcpRunTaskRequest.findMany({
    where: { runTaskId },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: Math.min(Math.max(first, 1), 100),
    include: { callbackAttempts: { orderBy: [{ at: "asc" }, { id: "asc" }] } },
  });
}

// ── Requests from HCP ──────────────────────────────────────────────────────────────────

/** The fields of HCP's request Countersign reads (payload_version 1); the rest is ignored. */
const RunTaskPayload = z.object({
  payload_version: z.literal(1),
  stage: z.string().max(40),
  access_token: z.string().min(1).max(4096),
  organization_name: z.string().max(200),
  workspace_name: z.string().max(200),
  workspace_id: z.string().max(200),
  run_id: z.string().max(200),
  run_app_url: z.string().max(2048).nullish(),
  task_result_id: z.string().min(1).max(200),
  task_result_callback_url: z.string().max(2048),
  plan_json_api_url: z.string().max(2048).nullish(),
});
export type RunTaskPayload = z.infer<typeof RunTaskPayload>;

/** The stages that have a plan to fetch. */
const PLAN_STAGES = new Set(["post_plan", "pre_apply"]);

export interface HcpAnswer {
  status: number;
  body: Record<string, unknown> | null;
  /** A request was recorded: the worker has work. */
  recorded: boolean;
}

const refuse = (status: number, error: string, message: string): HcpAnswer => ({ status, body: { error, message }, recorded: false });
const BAD_SIGNATURE = () => refuse(401, "invalid_signature", "The request is not signed with this run task's HMAC key (X-TFC-Task-Signature).");

/** A URL Countersign may send HCP's access token to, or why not. */
export function hcpUrlProblem(config: Config, raw: string): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "is not a URL";
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && config.hcp.allowPrivate)) return "is not https";
  if (url.username || url.password) return "carries credentials";
  if (!config.hcp.hosts.includes(url.hostname.toLowerCase())) return "names a host outside COUNTERSIGN_HCP_HOSTS";
  return null;
}

export function createHcpRunTaskReceiver(deps: { db: Database; config: Config; logger: Logger }) {
  const { db, config } = deps;
  const log = deps.logger.child({ module: "hcp-run-task" });

  /** Handles one POST to `pathname`. Never throws for the request's own faults. */
  async function handle(pathname: string, headers: Record<string, string | string[] | undefined>, rawBody: Buffer): Promise<HcpAnswer> {
    const match = /^\/integrations\/hcp-terraform\/([A-Za-z0-9-]{1,64})\/run-task$/.exec(pathname);
    if (!match) return refuse(404, "not_found", "HCP Terraform posts to /integrations/hcp-terraform/<run task id>/run-task.");
    const runTaskId = match[1]!;
    const signature = headers[HCP_SIGNATURE_HEADER];
    const runTask = await db.prisma.hcpRunTask.findUnique({ where: { id: runTaskId } });
    // An unknown run task reads as a bad signature: nothing there to sign for, and nothing said of what exists.
    if (!runTask) {
      log.warn({ runTaskId, reason: "unknown_run_task" }, "hcp run task request refused");
      return BAD_SIGNATURE();
    }
    const key = openHmacKey(config, runTask.hmacKeySealed);
    if (!key) {
      // Fail closed: never taken unverified. The key may come back (a restart with the right one).
      log.error({ runTaskId }, "hcp run task HMAC key cannot be opened with the configured COUNTERSIGN_WEBHOOK_SECRET_KEY");
      return refuse(503, "unconfigured", "The run task's HMAC key cannot be opened; the operator must restore the sealing key.");
    }
    if (!signatureMatches(key, rawBody, typeof signature === "string" ? signature : "")) {
      log.warn({ runTaskId, orgId: runTask.orgId, reason: typeof signature === "string" && signature ? "mismatch" : "missing" }, "hcp run task request refused");
      return BAD_SIGNATURE();
    }
    let json: unknown;
    try {
      json = JSON.parse(rawBody.toString("utf8"));
    } catch {
      return refuse(400, "bad_payload", "The body is not JSON.");
    }
    if ((json as { access_token?: unknown } | null)?.access_token === HCP_VERIFICATION_TOKEN) {
      // HCP's check when the run task is created or changed: the URL answers and the key matches.
      log.info({ runTaskId, orgId: runTask.orgId }, "hcp run task verification request answered");
      return { status: 200, body: null, recorded: false };
    }
    const parsed = RunTaskPayload.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return refuse(400, "bad_payload", `The body is not a run task request as HCP Terraform sends it: ${issue?.path.join(".") || "body"}: ${issue?.message ?? "invalid"}.`);
    }
    const payload = parsed.data;
    const callbackProblem = hcpUrlProblem(config, payload.task_result_callback_url);
    if (callbackProblem) {
      // The token would go where HCP is not: nothing is sent, and nobody could be told.
      log.warn({ runTaskId, orgId: runTask.orgId, reason: "callback_url_refused" }, "hcp run task request refused");
      return refuse(400, "callback_url_refused", `task_result_callback_url ${callbackProblem}.`);
    }
    const decided = await decideAtReceipt(runTask.id, payload);
    const rows = await db.sql.query<{ id: string }>(
      `INSERT INTO hcp_run_task_requests
         (id, "orgId", "runTaskId", "taskResultId", "runId", "runUrl", stage, "hcpOrganization", "hcpWorkspaceName", "hcpWorkspaceId",
          "workspaceId", "planJsonUrl", "callbackUrl", "accessTokenSealed", "decidedStatus", "decidedMessage", "deadlineAt", "updatedAt")
       VALUES (gen_random_uuid()::text, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, now() + ($16::int * interval '1 millisecond'), now())
       ON CONFLICT ("runTaskId", "taskResultId") DO NOTHING
       RETURNING id`,
      [
        runTask.orgId,
        runTask.id,
        payload.task_result_id,
        payload.run_id,
        safeRunUrl(payload.run_app_url),
        payload.stage,
        payload.organization_name,
        payload.workspace_name,
        payload.workspace_id,
        decided.workspaceId,
        payload.plan_json_api_url ?? null,
        payload.task_result_callback_url,
        sealAccessToken(config, payload.access_token),
        decided.status,
        decided.message,
        config.hcp.resultDeadlineMs,
      ],
    );
    log.info({ runTaskId, orgId: runTask.orgId, taskResultId: payload.task_result_id, runId: payload.run_id, repeat: rows.length === 0, decided: decided.status }, "hcp run task request taken");
    return { status: 200, body: null, recorded: rows.length > 0 };
  }

  /** The mapped workspace, or the failure HCP is told at once (never a guessed workspace). */
  async function decideAtReceipt(runTaskId: string, p: RunTaskPayload): Promise<{ workspaceId: string | null; status: "failed" | null; message: string | null }> {
    const fail = (message: string) => ({ workspaceId: null, status: "failed" as const, message });
    if (!PLAN_STAGES.has(p.stage)) return fail(`Countersign gates a plan: attach this run task at the post-plan or pre-apply stage (it was called at ${p.stage.slice(0, 40)}).`);
    if (!p.plan_json_api_url) return fail("HCP Terraform sent no plan_json_api_url: there is no plan to gate.");
    const planProblem = hcpUrlProblem(config, p.plan_json_api_url);
    if (planProblem) return fail(`The plan_json_api_url ${planProblem}: Countersign does not send HCP's token there.`);
    const [mapping] = await db.sql.query<{ workspaceId: string }>(
      `SELECT "workspaceId" FROM hcp_workspace_mappings
        WHERE "runTaskId" = $1 AND "hcpOrganization" = $2 AND ("hcpWorkspace" = $3 OR "hcpWorkspace" = $4)
        ORDER BY ("hcpWorkspace" = $4) DESC LIMIT 1`,
      [runTaskId, p.organization_name, p.workspace_name, p.workspace_id],
    );
    if (!mapping) return fail(`The HCP workspace ${p.organization_name}/${p.workspace_name} is not mapped to a Countersign workspace; an administrator maps it (addHcpWorkspaceMapping), then re-run.`);
    return { workspaceId: mapping.workspaceId, status: null, message: null };
  }

  return { handle };
}

function signatureMatches(key: string, body: Buffer, given: string): boolean {
  return sameSecret(given.trim().toLowerCase(), signRunTaskBody(key, body));
}

/** The HCP run's page as the plan's run URL: an http(s) URL without credentials, or none. */
function safeRunUrl(raw: string | null | undefined): string | null {
  if (!raw || raw.length > 2048) return null;
  try {
    const url = new URL(raw);
    return (url.protocol === "https:" || url.protocol === "http:") && !url.username && !url.password ? raw : null;
  } catch {
    return null;
  }
}

/** The member plans are submitted as, as the API would see them signed in (their grants decide). */
export function memberAuthz(db: Database, orgId: string, userId: string): SignedInAuthz {
  return new Authz(db.sql, { orgId, userId, tokenId: "", name: "", email: "", isServiceAccount: false }) as SignedInAuthz;
}

// ── Outbound: the plan JSON, and task-results ──────────────────────────────────────────

export interface HttpOutcome {
  ok: boolean;
  status: number | null;
  error: string | null;
  /** Retrying will not help (refused address or host, a 4xx other than 408/429). */
  permanent: boolean;
  body?: Buffer;
}

const MAX_REDIRECTS = 3;

/**
 * GETs the plan JSON with HCP's token. HCP answers json-output with a temporary redirect to a
 * pre-signed download: followed (at most three) only to a host in COUNTERSIGN_HCP_HOSTS, under the
 * outbound address policy, and the token is sent only to the first URL's host.
 */
export async function fetchPlanJson(config: Config, rawUrl: string, token: string): Promise<HttpOutcome> {
  let url = new URL(rawUrl);
  const tokenHost = url.host;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const problem = hcpUrlProblem(config, url.href);
    if (problem) return { ok: false, status: null, error: `refused: the plan URL ${problem}`, permanent: true };
    const headers: Record<string, string> = { accept: "application/json", "user-agent": "Countersign-RunTask/1" };
    if (url.host === tokenHost) headers.authorization = `Bearer ${token}`;
    const outcome = await request("GET", url, headers, null, config, HCP_MAX_PLAN_BYTES);
    if (outcome.location && outcome.status !== null && outcome.status >= 300 && outcome.status < 400) {
      url = new URL(outcome.location, url);
      continue;
    }
    return outcome;
  }
  return { ok: false, status: null, error: "refused: too many redirects", permanent: true };
}

/** One task-results PATCH (JSON:API), with HCP's token. */
export async function patchTaskResult(config: Config, callbackUrl: string, token: string, result: { status: string; message: string; url: string | null }): Promise<HttpOutcome> {
  const url = new URL(callbackUrl);
  const problem = hcpUrlProblem(config, url.href);
  if (problem) return { ok: false, status: null, error: `refused: the callback URL ${problem}`, permanent: true };
  const body = JSON.stringify({
    data: { type: "task-results", attributes: { status: result.status, message: result.message, ...(result.url ? { url: result.url } : {}) } },
  });
  return request("PATCH", url, { "content-type": "application/vnd.api+json", authorization: `Bearer ${token}`, "user-agent": "Countersign-RunTask/1" }, body, config, 64 * 1024);
}

async function request(
  method: string,
  url: URL,
  headers: Record<string, string>,
  body: string | null,
  config: Config,
  maxBytes: number,
): Promise<HttpOutcome & { location?: string }> {
  let lookup: Awaited<ReturnType<typeof outboundConnectOptions>>["lookup"];
  try {
    ({ lookup } = await outboundConnectOptions(url, { allowPrivate: config.hcp.allowPrivate }));
  } catch (error) {
    if (!(error instanceof OutboundAddressRefused)) throw error;
    return { ok: false, status: null, error: `refused: ${networkFailure(error, "HCP Terraform")}`, permanent: error.reason === "refused" };
  }
  const timeoutMs = config.hcp.timeoutMs;
  return new Promise((resolve) => {
    const client = url.protocol === "https:" ? https : http;
    const req = client.request(
      url,
      { method, headers: { ...headers, ...(body !== null ? { "content-length": String(Buffer.byteLength(body)) } : {}) }, lookup, timeout: timeoutMs, agent: false },
      (res) => {
        const status = res.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > maxBytes) {
            res.destroy();
            resolve({ ok: false, status, error: `the answer is larger than ${maxBytes} bytes`, permanent: true });
            return;
          }
          chunks.push(chunk);
        });
        res.on("end", () => {
          const ok = status >= 200 && status < 300;
          const location = typeof res.headers.location === "string" ? res.headers.location : undefined;
          const permanent = status >= 400 && status < 500 && status !== 408 && status !== 429;
          resolve({ ok, status, error: ok ? null : `HTTP ${status}`, permanent, body: Buffer.concat(chunks), location });
        });
        res.on("error", () => resolve({ ok: false, status, error: "the answer was cut off", permanent: false }));
      },
    );
    const timedOut = Object.assign(new Error("timed out"), { code: "ETIMEDOUT" });
    const timer = setTimeout(() => req.destroy(timedOut), timeoutMs);
    req.on("timeout", () => req.destroy(timedOut));
    req.on("error", (error) => resolve({ ok: false, status: null, error: networkFailure(error, "HCP Terraform"), permanent: false }));
    req.on("close", () => clearTimeout(timer));
    req.end(body ?? undefined);
  });
}

/** For tests and tooling: a key in the shape createHcpRunTask makes. */
export const newRunTaskHmacKey = newHmacKey;
