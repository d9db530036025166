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

/**
 * Resolves a bearer token to its viewer, or null for an unknown, revoked or expired token.
 * One indexed query; last-use time is written at most once a minute per token.
 */
export async function authenticate(sql: SqlRunner, token: string | null): Promise<Viewer | null> {
  if (!token) return null;
  const rows = await sql.query<Viewer & { lastUsedAt: Date | null; expiresInMs: number | null }>(
    // The time left, not the stored timestamp: it is zone-less, and this process's clock may differ from the database's.
    `SELECT t.id AS "tokenId", t."userId", t."orgId", t."lastUsedAt",
            (EXTRACT(EPOCH FROM (t."expiresAt" - now())) * 1000)::float8 AS "expiresInMs", u.name, u.email, u."isServiceAccount"
       FROM api_tokens t JOIN users u ON u.id = t."userId"
      WHERE t."tokenHash" = $1 AND t."revokedAt" IS NULL AND (t."expiresAt" IS NULL OR t."expiresAt" > now())`,
    [hashToken(token)],
  );
  const row = rows[0];
  if (!row) return null;
  if (!row.lastUsedAt || Date.now() - new Date(row.lastUsedAt).getTime() > 60_000) {
    await sql.query(`UPDATE api_tokens SET "lastUsedAt" = now() WHERE id = $1`, [row.tokenId]);
  }
  const { lastUsedAt: _ignored, expiresInMs, ...viewer } = row;
  return { ...viewer, expiresAt: expiresInMs === null ? null : new Date(Date.now() + expiresInMs) };
}
