import { errors, jwtVerify, SignJWT, type JWTPayload } from "jose";
import { z } from "zod";

/**
 * Short-lived HS256 approval tokens (seed 003, "Resume" step 2 and "Resuming from the agent
 * side"). Control mints one after re-verifying human authority; the gateway accepts a call as
 * approved only when the token verifies — signature, issuer, audience, expiry with no clock-skew
 * leeway — and every bound claim matches the live request.
 */

export const APPROVAL_TOKEN_ISSUER = "obol-control";
export const APPROVAL_TOKEN_AUDIENCE = "obol-gateway";
export const APPROVAL_TOKEN_TTL_SECONDS = 300;
/** RFC 7518 §3.2: an HS256 key must be at least as long as the hash output (32 bytes). */
export const MIN_SECRET_BYTES = 32;

const ALGORITHM = "HS256";

/** The six things a token is bound to. Any of them differing from the live call means "not approved". */
export type ApprovalTokenClaims = {
  approvalId: string;
  workspaceId: string;
  keyId: string;
  tool: string;
  argumentHash: string;
  idempotencyKey: string;
};

export type ApprovalTokenFailure =
  | "malformed"
  | "bad_signature"
  | "expired"
  | "wrong_issuer"
  | "wrong_audience"
  | "missing_claim";

export type VerifyResult =
  | { ok: true; claims: ApprovalTokenClaims; expiresAt: Date }
  | { ok: false; reason: ApprovalTokenFailure };

export type MintOptions = { issuer?: string; audience?: string; ttlSeconds?: number; now?: Date };
export type VerifyOptions = { issuer?: string; audience?: string; now?: Date };

/** A secret that is too short, or an unusable ttl: the deployment is misconfigured, not the token. */
export class ApprovalTokenConfigError extends Error {
  override readonly name = "ApprovalTokenConfigError";
}

/** Claim names on the wire. snake_case, like every other field the gateway and control exchange. */
const WIRE = {
  approvalId: "approval_id",
  workspaceId: "workspace_id",
  keyId: "key_id",
  tool: "tool",
  argumentHash: "argument_hash",
  idempotencyKey: "idempotency_key",
} as const satisfies Record<keyof ApprovalTokenClaims, string>;

const BOUND_CLAIMS = Object.keys(WIRE) as (keyof ApprovalTokenClaims)[];

const claimValue = z.string().min(1);
const claimsSchema = z.object({
  approval_id: claimValue,
  workspace_id: claimValue,
  key_id: claimValue,
  tool: claimValue,
  argument_hash: z.string().regex(/^[0-9a-f]{64}$/),
  idempotency_key: claimValue,
});

export async function mintApprovalToken(
  secret: string | Uint8Array,
  claims: ApprovalTokenClaims,
  opts: MintOptions = {},
): Promise<string> {
  const key = secretKey(secret);
  const ttlSeconds = opts.ttlSeconds ?? APPROVAL_TOKEN_TTL_SECONDS;
  if (!Number.isInteger(ttlSeconds) || ttlSeconds <= 0) {
    throw new ApprovalTokenConfigError(`ttlSeconds must be a positive integer, got ${ttlSeconds}`);
  }
  const payload = Object.fromEntries(BOUND_CLAIMS.map((name) => [WIRE[name], claims[name]]));
  const parsed = claimsSchema.safeParse(payload);
  if (!parsed.success) {
    throw new ApprovalTokenConfigError(`refusing to mint a token with invalid claims: ${z.prettifyError(parsed.error)}`);
  }
  const issuedAt = Math.floor((opts.now ?? new Date()).getTime() / 1000);
  return new SignJWT(parsed.data)
    .setProtectedHeader({ alg: ALGORITHM, typ: "JWT" })
    .setIssuer(opts.issuer ?? APPROVAL_TOKEN_ISSUER)
    .setAudience(opts.audience ?? APPROVAL_TOKEN_AUDIENCE)
    .setIssuedAt(issuedAt)
    .setExpirationTime(issuedAt + ttlSeconds)
    .sign(key);
}

/**
 * Verifies signature (HS256 only — `none`, RS256 and every other alg fail as `bad_signature`),
 * issuer, audience and expiry. There is no clock-skew leeway: a token is expired from the
 * instant `now >= exp` (jose's `exp <= now` with `clockTolerance: 0`), so at exp itself it no
 * longer verifies. `exp` is required: a token without one would never expire.
 */
export async function verifyApprovalToken(
  secret: string | Uint8Array,
  token: string,
  opts: VerifyOptions = {},
): Promise<VerifyResult> {
  const key = secretKey(secret);
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, key, {
      algorithms: [ALGORITHM],
      issuer: opts.issuer ?? APPROVAL_TOKEN_ISSUER,
      audience: opts.audience ?? APPROVAL_TOKEN_AUDIENCE,
      requiredClaims: ["exp"],
      clockTolerance: 0,
      ...(opts.now ? { currentDate: opts.now } : {}),
    }));
  } catch (error) {
    return { ok: false, reason: failureOf(error) };
  }
  const parsed = claimsSchema.safeParse(payload);
  if (!parsed.success) return { ok: false, reason: "missing_claim" };
  const claims = Object.fromEntries(BOUND_CLAIMS.map((name) => [name, parsed.data[WIRE[name]]])) as ApprovalTokenClaims;
  return { ok: true, claims, expiresAt: new Date((payload.exp ?? 0) * 1000) };
}

/**
 * Every bound claim must equal the live request exactly: the approval id from the header, the
 * workspace and key the virtual key resolves to, the concrete tool, the canonical argument hash
 * and the effective idempotency key. Any mismatch means approved = false.
 */
export function claimsMatch(
  claims: ApprovalTokenClaims,
  live: ApprovalTokenClaims,
): { ok: true } | { ok: false; mismatched: (keyof ApprovalTokenClaims)[] } {
  const mismatched = BOUND_CLAIMS.filter((name) => claims[name] !== live[name]);
  return mismatched.length === 0 ? { ok: true } : { ok: false, mismatched };
}

function secretKey(secret: string | Uint8Array): Uint8Array {
  const key = typeof secret === "string" ? new TextEncoder().encode(secret) : secret;
  if (key.byteLength < MIN_SECRET_BYTES) {
    throw new ApprovalTokenConfigError(`the approval token secret must be at least ${MIN_SECRET_BYTES} bytes`);
  }
  return key;
}

function failureOf(error: unknown): ApprovalTokenFailure {
  if (error instanceof errors.JWTExpired) return "expired";
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.reason === "missing") return "missing_claim";
    if (error.claim === "iss") return "wrong_issuer";
    if (error.claim === "aud") return "wrong_audience";
    return "malformed";
  }
  if (error instanceof errors.JWSSignatureVerificationFailed || error instanceof errors.JOSEAlgNotAllowed) {
    return "bad_signature";
  }
  // JWSInvalid, JWTInvalid, JOSENotSupported (e.g. crit headers), anything unparsable.
  return "malformed";
}
