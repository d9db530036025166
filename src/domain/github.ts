// A GitHub custom deployment protection rule, the parts that are plain rules (docs/integrations.md):
// the webhook signature, the shape of a deployment_protection_rule event, which callback URLs
// Countersign answers, which CI run URL names a deployment's run, and the App's JWT.
//
// GitHub's documented protocol: every webhook delivery carries `X-Hub-Signature-256: sha256=<hex
// HMAC-SHA256 of the raw body under the App's webhook secret>`; a deployment_protection_rule
// event (action `requested`) names the environment, the deployment and a
// `deployment_callback_url` (`{api}/repos/{owner}/{repo}/actions/runs/{run_id}/deployment_protection_rule`)
// the App answers with `{ environment_name, state: approved | rejected, comment }`, authenticated
// with an installation access token that a JWT (RS256, iss = App id, at most ten minutes) buys
// at `POST {api}/app/installations/{id}/access_tokens`.

import { createPrivateKey, createSign, type KeyObject } from "node:crypto";
import { z } from "zod";
import { sameSecret, sha256Signature } from "./signing.js";

export const GITHUB_SIGNATURE_HEADER = "x-hub-signature-256";
export const GITHUB_EVENT_HEADER = "x-github-event";
export const GITHUB_DELIVERY_HEADER = "x-github-delivery";

/** Whether `header` is the body's signature under `secret` (compared in constant time). */
export function verifyGithubSignature(secret: string, header: string | undefined, body: Buffer): boolean {
  if (!header || !/^sha256=[0-9a-f]{64}$/.test(header)) return false;
  return sameSecret(header, sha256Signature(secret, body));
}

/** owner/name as GitHub allows them (letters, digits, `-`, `_`, `.`). */
export const RepositoryFullName = z
  .string()
  .max(200)
  .regex(/^[A-Za-z0-9-]{1,39}\/[A-Za-z0-9._-]{1,100}$/, "a repository's full name, owner/name");
/** GitHub's environment names: up to 255 characters, no control characters. */
export const EnvironmentName = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[^\u0000-\u001f\u007f]+$/, "an environment name without control characters")
  .refine((name) => name.trim().length > 0, "an environment name, not blank");

/** The fields of a deployment_protection_rule `requested` event Countersign reads. */
export const ProtectionRuleRequested = z.object({
  action: z.literal("requested"),
  environment: EnvironmentName,
  event: z.string().max(100).optional(),
  deployment_callback_url: z.string().max(2048),
  deployment: z
    .object({ id: z.number().int().optional(), sha: z.string().max(100).optional(), ref: z.string().max(500).optional(), url: z.string().max(2048).optional() })
    .passthrough()
    .nullish(),
  installation: z.object({ id: z.number().int().positive() }).passthrough(),
  repository: z.object({ full_name: RepositoryFullName, html_url: z.string().max(2048) }).passthrough(),
});
export type ProtectionRuleRequested = z.infer<typeof ProtectionRuleRequested>;

/**
 * The run id of a callback URL Countersign may answer (an installation token is sent with the
 * answer): exactly `{apiUrl}/repos/{repository}/actions/runs/{digits}/deployment_protection_rule`
 * for the event's own repository, nothing after it. Anything else is null.
 */
export function callbackRunId(callbackUrl: string, apiUrl: string, repository: string): string | null {
  let url: URL;
  let api: URL;
  try {
    url = new URL(callbackUrl);
    api = new URL(apiUrl);
  } catch {
    return null;
  }
  if (url.origin !== api.origin || url.username || url.password || url.search || url.hash) return null;
  const prefix = `${api.pathname.replace(/\/+$/, "")}/repos/`;
  if (!url.pathname.startsWith(prefix)) return null;
  const match = /^([^/]+\/[^/]+)\/actions\/runs\/(\d{1,20})\/deployment_protection_rule$/.exec(url.pathname.slice(prefix.length));
  if (!match || match[1]!.toLowerCase() !== repository.toLowerCase()) return null;
  return match[2]!;
}

/**
 * The workflow run's page, from the repository's html_url GitHub sent (signed) and the run id:
 * `https://<host>/{owner}/{repo}/actions/runs/{run_id}`. Null when html_url is not an http(s) URL.
 */
export function runPageUrl(repositoryHtmlUrl: string, runId: string): string | null {
  let url: URL;
  try {
    url = new URL(repositoryHtmlUrl);
  } catch {
    return null;
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.username || url.password || url.search || url.hash) return null;
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}/actions/runs/${runId}`;
}

/**
 * Whether a plan's run URL (`plan submit --run-url`) names this run: the run page itself, or one
 * of its attempts or jobs (`…/attempts/N`, `…/job/N`), a trailing slash allowed. Owner and
 * repository compare without case, as GitHub's do; another run, another repository, or a longer
 * run id never match.
 */
export function runUrlNamesRun(runUrl: string, runPage: string): boolean {
  const a = runUrl.toLowerCase();
  const b = runPage.toLowerCase();
  if (!a.startsWith(b)) return false;
  return /^(?:\/attempts\/\d{1,10}|\/job\/\d{1,20})?\/?$/.test(a.slice(b.length));
}

/** The App's private key, or why it is not one (GitHub's keys are RSA PEM). */
export function parseAppPrivateKey(pem: string): { ok: true; key: KeyObject } | { ok: false; reason: string } {
  try {
    const key = createPrivateKey({ key: pem, format: "pem" });
    if (key.asymmetricKeyType !== "rsa") return { ok: false, reason: `is a ${key.asymmetricKeyType} key; a GitHub App's private key is RSA` };
    return { ok: true, key };
  } catch {
    return { ok: false, reason: "is not a PEM private key (the .pem file GitHub generated for the App)" };
  }
}

/** GitHub asks that an App's JWT expire at most ten minutes after it is issued. */
export const APP_JWT_LIFETIME_SECONDS = 9 * 60;

/** The App's JWT: RS256, iss = App id, issued 60 s in the past (clock drift), expiring in nine minutes. */
export function appJwt(appId: string, key: KeyObject, nowSeconds = Math.floor(Date.now() / 1000)): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const unsigned = `${part({ alg: "RS256", typ: "JWT" })}.${part({ iat: nowSeconds - 60, exp: nowSeconds + APP_JWT_LIFETIME_SECONDS, iss: appId })}`;
  const signature = createSign("RSA-SHA256").update(unsigned).sign(key).toString("base64url");
  return `${unsigned}.${signature}`;
}

/** GitHub shows the comment with the rule's answer; it is kept short. */
export const MAX_COMMENT_LENGTH = 1000;
export const clipComment = (comment: string) => (comment.length > MAX_COMMENT_LENGTH ? `${comment.slice(0, MAX_COMMENT_LENGTH - 1)}…` : comment);
