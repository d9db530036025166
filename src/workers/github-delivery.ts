// The GitHub deployment protection worker (docs/integrations.md): each tick decides the waiting
// requests (src/services/github.ts) and delivers the decided answers to GitHub.
//
// - Lease: as webhook delivery does (src/workers/webhook-delivery.ts): one UPDATE … FOR UPDATE
//   SKIP LOCKED moves due rows to `delivering` and bumps their fence; only the holder of the
//   current fence writes the outcome back, and an expired lease (a worker that died, a restart)
//   is taken over, so an answer is still sent after a restart.
// - Each attempt: the App's JWT (RS256, iss = App id, nine minutes) buys an installation token at
//   POST {api}/app/installations/{id}/access_tokens, narrowed to the repository and to
//   deployments: write; the answer is POSTed to the request's callback URL with it. The token
//   lives in this function's variables for that one attempt and is never written anywhere.
// - Every attempt is recorded (github_callback_attempts); a failure is retried with the webhooks'
//   backoff until COUNTERSIGN_WEBHOOK_MAX_ATTEMPTS, then the row is `failed`.
// - Outbound: COUNTERSIGN_GITHUB_API_URL only (the callback URL was checked to be under it when
//   the event arrived), through the outbound address policy: the host resolved once, every
//   address checked, the connection made to a checked one, no redirect followed. Private and
//   loopback addresses are refused unless COUNTERSIGN_GITHUB_ALLOW_PRIVATE=1.

import { randomUUID } from "node:crypto";
import http from "node:http";
import https from "node:https";
import type { OutboundPolicy } from "../domain/address-policy.js";
import { appJwt, parseAppPrivateKey } from "../domain/github.js";
import { unseal } from "../domain/seal.js";
import { networkFailure, OutboundAddressRefused, outboundConnectOptions } from "../gateway/outbound.js";
import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import type { Logger } from "../infra/logger.js";
import { decideWaitingRequests, GITHUB_KEY_SEAL } from "../services/github.js";
import { createWorkerLoop } from "./loop.js";
import { settleDelivery, type DeliveryOutcome } from "./leased-delivery.js";

export interface GithubWorker {
  /** One pass: decide what can be decided, then lease due answers and send them. */
  tick(): Promise<{ decided: number; attempted: number }>;
  /** Runs the next tick now (an event was recorded, a plan changed). */
  wake(): void;
  start(): void;
  stop(): Promise<void>;
  readonly owner: string;
}

interface Leased {
  id: string;
  fence: number;
  attempts: number;
  installationId: string;
  repository: string;
  environment: string;
  callbackUrl: string;
  state: string;
  comment: string | null;
  appId: string;
  privateKeySealed: string;
}

type Outcome = DeliveryOutcome;

type Answer = { status: number; body: string } | { status: null; error: string; permanent: boolean };

const GITHUB_HEADERS = {
  accept: "application/vnd.github+json",
  "x-github-api-version": "2022-11-28",
  "user-agent": "Countersign-GitHub-App/1",
  "content-type": "application/json",
};
/** Enough of an access_tokens answer to read the token; anything longer is cut. */
const MAX_ANSWER_BYTES = 64 * 1024;

async function postJson(url: URL, body: string, headers: Record<string, string>, timeoutMs: number, policy: OutboundPolicy): Promise<Answer> {
  let lookup: Awaited<ReturnType<typeof outboundConnectOptions>>["lookup"];
  try {
    ({ lookup } = await outboundConnectOptions(url, policy));
  } catch (error) {
    if (!(error instanceof OutboundAddressRefused)) throw error;
    return { status: null, error: `refused: ${networkFailure(error, "the GitHub API")}`, permanent: error.reason === "refused" };
  }
  return new Promise((resolve) => {
    const client = url.protocol === "https:" ? https : http;
    const req = client.request(
      url,
      { method: "POST", headers: { ...GITHUB_HEADERS, ...headers, "content-length": String(Buffer.byteLength(body)) }, lookup, timeout: timeoutMs, agent: false },
      (res) => {
        // A redirect is an answer, never followed (its target is not checked).
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size <= MAX_ANSWER_BYTES) chunks.push(chunk);
        });
        const done = () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") });
        res.on("end", done);
        res.on("error", done);
      },
    );
    const timedOut = Object.assign(new Error("timed out"), { code: "ETIMEDOUT" });
    const timer = setTimeout(() => req.destroy(timedOut), timeoutMs);
    req.on("timeout", () => req.destroy(timedOut));
    req.on("error", (error) => {
      clearTimeout(timer);
      resolve({ status: null, error: networkFailure(error, "the GitHub API"), permanent: false });
    });
    req.on("close", () => clearTimeout(timer));
    req.end(body);
  });
}

export function createGithubWorker(deps: { db: Database; config: Config; logger: Logger; batchSize?: number }): GithubWorker {
  const { db, config } = deps;
  const settings = config.github;
  const log = deps.logger.child({ module: "github" });
  const owner = `github-${randomUUID()}`;
  const batchSize = deps.batchSize ?? 20;
  // Two requests per attempt (token, callback), each bounded by the timeout.
  const leaseMs = 2 * settings.timeoutMs + 30_000;
  const policy = { allowPrivate: settings.allowPrivate };

  async function lease(): Promise<Leased[]> {
    return db.sql.query<Leased>(
      `UPDATE github_protection_requests r
          SET status = 'delivering', "leaseOwner" = $1, "leaseExpiresAt" = now() + ($2::int * interval '1 millisecond'),
              fence = r.fence + 1, attempts = r.attempts + 1, "updatedAt" = now()
         FROM github_integrations i
        WHERE i.id = r."integrationId" AND r.id IN (
          SELECT id FROM github_protection_requests
           WHERE (status = 'queued' AND "nextRunAt" <= now()) OR (status = 'delivering' AND "leaseExpiresAt" < now())
           ORDER BY "nextRunAt", id
           LIMIT $3
           FOR UPDATE SKIP LOCKED)
        RETURNING r.id, r.fence, r.attempts, r."installationId", r.repository, r.environment, r."callbackUrl", r.state, r.comment,
                  i."appId", i."privateKeySealed"`,
      [owner, leaseMs, batchSize],
    );
  }

  async function finish(job: Leased, outcome: Outcome): Promise<void> {
    await db.sql.query(
      `INSERT INTO github_callback_attempts (id, "requestId", attempt, state, "responseCode", error) VALUES (gen_random_uuid(), $1, $2, $3, $4, $5)`,
      [job.id, job.attempts, job.state, outcome.status, outcome.error],
    );
    await settleDelivery(db, "github_protection_requests", job, outcome, settings);
  }

  /** An installation token for this answer, or why there is none. Held only by the caller's attempt. */
  async function installationToken(job: Leased): Promise<{ token: string } | Outcome> {
    const pem = config.webhooks.secretKey ? unseal(GITHUB_KEY_SEAL, config.webhooks.secretKey, job.privateKeySealed) : null;
    if (!pem) return { ok: false, status: null, error: "the App's private key cannot be opened with the configured COUNTERSIGN_WEBHOOK_SECRET_KEY", permanent: false };
    const key = parseAppPrivateKey(pem);
    if (!key.ok) return { ok: false, status: null, error: `the App's private key ${key.reason}`, permanent: true };
    const url = new URL(`${settings.apiUrl}/app/installations/${encodeURIComponent(job.installationId)}/access_tokens`);
    const repositoryName = job.repository.split("/")[1]!;
    const answer = await postJson(
      url,
      JSON.stringify({ repositories: [repositoryName], permissions: { deployments: "write" } }),
      { authorization: `Bearer ${appJwt(job.appId, key.key)}` },
      settings.timeoutMs,
      policy,
    );
    if (answer.status === null) return { ok: false, status: null, error: `installation token: ${answer.error}`, permanent: answer.permanent };
    if (answer.status !== 201 && answer.status !== 200) return { ok: false, status: answer.status, error: `installation token: HTTP ${answer.status}`, permanent: false };
    let token: unknown;
    try {
      token = (JSON.parse(answer.body) as { token?: unknown }).token;
    } catch {}
    if (typeof token !== "string" || token.length === 0 || token.length > 1000) return { ok: false, status: answer.status, error: "installation token: the answer carries no token", permanent: false };
    return { token };
  }

  async function deliver(job: Leased): Promise<void> {
    const token = await installationToken(job);
    if (!("token" in token)) {
      log.warn({ requestId: job.id, attempt: job.attempts, error: token.error }, "github answer failed");
      return finish(job, token);
    }
    const answer = await postJson(
      new URL(job.callbackUrl),
      JSON.stringify({ environment_name: job.environment, state: job.state, comment: job.comment ?? "" }),
      { authorization: `Bearer ${token.token}` },
      settings.timeoutMs,
      policy,
    );
    const outcome: Outcome =
      answer.status === null
        ? { ok: false, status: null, error: answer.error, permanent: answer.permanent }
        : { ok: answer.status >= 200 && answer.status < 300, status: answer.status, error: answer.status >= 200 && answer.status < 300 ? null : `HTTP ${answer.status}`, permanent: false };
    if (!outcome.ok) log.warn({ requestId: job.id, attempt: job.attempts, error: outcome.error }, "github answer failed");
    else log.info({ requestId: job.id, state: job.state }, "github answer delivered");
    await finish(job, outcome);
  }

  async function tick(): Promise<{ decided: number; attempted: number }> {
    const decided = await decideWaitingRequests(db, config, log);
    const jobs = await lease();
    await Promise.all(jobs.map((job) => deliver(job).catch((error: unknown) => log.error({ err: error, requestId: job.id }, "github answer crashed"))));
    return { decided, attempted: jobs.length };
  }

  const loop = createWorkerLoop({ intervalMs: settings.intervalMs, tick, log, failed: "github tick failed" });

  return { owner, tick, wake: loop.wake, start: loop.start, stop: loop.stop };
}
