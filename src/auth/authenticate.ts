import type { SqlRunner } from "../infra/db.js";
import { hashToken } from "./tokens.js";

/** Who a request acts as: one user (or service account) in one organization. */
export interface Viewer {
  userId: string;
  orgId: string;
  tokenId: string;
  name: string;
  email: string;
  isServiceAccount: boolean;
  /** When the token stops authenticating (null: never); a WebSocket closes then (live-sockets.ts). */
  expiresAt?: Date | null;
}

/** A viewer, and the authz epoch read in the same statement as its token (src/authz/principal.ts, EpochCache). */
export interface Authenticated {
  viewer: Viewer;
  authzEpoch: number;
}

// The token row is read on every request, never kept: a revoked or expired token (revokeApiToken
// or a plain UPDATE, in any process) fails the very next request. The authz epoch comes in the
// same statement (one snapshot, one round trip), so a principal kept under it is as current as
// the token. The time left, not the stored timestamp: it is zone-less, and this process's clock
// may differ from the database's.
const TOKEN_SQL = `
  SELECT t.id AS "tokenId", t."userId", t."orgId",
         (t."lastUsedAt" IS NULL OR t."lastUsedAt" < now() - interval '1 minute') AS "touch",
         (EXTRACT(EPOCH FROM (t."expiresAt" - now())) * 1000)::float8 AS "expiresInMs",
         u.name, u.email, u."isServiceAccount",
         (SELECT "epoch" FROM "authz_epoch" WHERE "id" = 1)::float8 AS "authzEpoch"
    FROM api_tokens t JOIN users u ON u.id = t."userId"
   WHERE t."tokenHash" = $1 AND t."revokedAt" IS NULL AND (t."expiresAt" IS NULL OR t."expiresAt" > now())`;

interface TokenRow extends Omit<Viewer, "expiresAt"> {
  /** Last use is written at most once a minute per token (decided by the database's clock). */
  touch: boolean;
  expiresInMs: number | null;
  authzEpoch: number;
}

/**
 * Resolves a bearer token, given as its hash (hashToken), to its viewer and the authz epoch, or
 * null for an unknown, revoked or expired token. One indexed, prepared statement; last-use time
 * is written at most once a minute.
 */
export async function authenticateWithEpoch(sql: SqlRunner, tokenHash: string | null): Promise<Authenticated | null> {
  if (!tokenHash) return null;
  const rows = await sql.query<TokenRow>(TOKEN_SQL, [tokenHash], { prepare: true });
  const row = rows[0];
  if (!row) return null;
  if (row.touch) {
    await sql.query(`UPDATE api_tokens SET "lastUsedAt" = now() WHERE id = $1`, [row.tokenId], { prepare: true });
  }
  const viewer: Viewer = {
    userId: row.userId,
    orgId: row.orgId,
    tokenId: row.tokenId,
    name: row.name,
    email: row.email,
    isServiceAccount: row.isServiceAccount,
    expiresAt: row.expiresInMs === null ? null : new Date(Date.now() + row.expiresInMs),
  };
  return { viewer, authzEpoch: row.authzEpoch };
}

/** Resolves a bearer token to its viewer, or null for an unknown, revoked or expired token. */
export async function authenticate(sql: SqlRunner, token: string | null): Promise<Viewer | null> {
  return token ? ((await authenticateWithEpoch(sql, hashToken(token)))?.viewer ?? null) : null;
}
