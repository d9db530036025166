import type { SqlRunner } from "../infra/db.js";
import { liveApiTokenSql } from "../domain/liveness.js";
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
  return { viewer: viewerOf(row), authzEpoch: row.authzEpoch };
}

function viewerOf(row: TokenRow): Viewer {
  return {
    userId: row.userId,
    orgId: row.orgId,
    tokenId: row.tokenId,
    name: row.name,
    email: row.email,
    isServiceAccount: row.isServiceAccount,
    expiresAt: row.expiresInMs === null ? null : new Date(Date.now() + row.expiresInMs),
  };
}

/** Resolves a bearer token to its viewer, or null for an unknown, revoked or expired token. */
export async function authenticate(sql: SqlRunner, token: string | null): Promise<Viewer | null> {
  return token ? ((await authenticateWithEpoch(sql, hashToken(token)))?.viewer ?? null) : null;
}

// ── Sockets: the token reads of connections and operations that arrive together, batched ───────

const TOKENS_SQL = `
  SELECT t."tokenHash", t.id AS "tokenId", t."userId", t."orgId",
         (t."lastUsedAt" IS NULL OR t."lastUsedAt" < now() - interval '1 minute') AS "touch",
         (EXTRACT(EPOCH FROM (t."expiresAt" - now())) * 1000)::float8 AS "expiresInMs",
         u.name, u.email, u."isServiceAccount",
         ${liveApiTokenSql("t")} AS "live",
         (SELECT "epoch" FROM "authz_epoch" WHERE "id" = 1)::float8 AS "authzEpoch"
    FROM api_tokens t JOIN users u ON u.id = t."userId"
   WHERE t."tokenHash" = ANY($1::text[]) AND t."revokedAt" IS NULL AND (t."expiresAt" IS NULL OR t."expiresAt" > now())`;

/** A token read for a socket: the viewer and epoch, and whether the token is live (liveTokenIds' rule) as a socket's must be. Shared by the reads of one batch: read only. */
export interface SocketAuthenticated extends Authenticated {
  readonly viewer: Viewer;
  readonly live: boolean;
  /** The token's hash, as one string for every read that agrees on the viewer (a socket keeps it). */
  readonly tokenHash: string;
}

/** How many tokens' last viewers SocketTokenReads keeps for sharing (past it, it starts over). */
const SHARED_VIEWERS = 10_000;

/** Whether two reads of a token found the same viewer (a socket's operations then share its object). */
function sameViewer(a: Viewer, b: Viewer): boolean {
  return (
    a.tokenId === b.tokenId &&
    a.userId === b.userId &&
    a.orgId === b.orgId &&
    a.name === b.name &&
    a.email === b.email &&
    a.isServiceAccount === b.isServiceAccount &&
    (a.expiresAt ?? null)?.getTime() === (b.expiresAt ?? null)?.getTime()
  );
}

interface Waiter {
  resolve(value: SocketAuthenticated | null): void;
  reject(error: unknown): void;
}

/**
 * The WebSocket side's token reads (connection_init, and each operation's context), batched: the
 * reads asked for in one turn of the event loop go out as one statement after it, as many tokens
 * as they name. Each read is still taken after its request arrived (none joins a statement
 * already sent), so a token revoked before a connection or an operation arrived fails it exactly
 * as authenticateWithEpoch would; only the round trips are shared. Opening many subscriptions at
 * once spent most of its CPU writing one statement per read to PostgreSQL (a CPU profile of
 * `npm run bench -- subscribers`: docs/benchmarks.md).
 */
export class SocketTokenReads {
  private pending: Map<string, Waiter[]> | null = null;
  /**
   * Each token's last answer: a read that finds the same viewer (sameViewer) answers with that
   * object and hash string, so the sockets and operations of one token share them instead of a
   * copy each (they live as long as the subscriptions: docs/benchmarks.md, "What a subscriber
   * costs"). Only memory is shared: every read is still its own statement's answer.
   */
  private readonly lastViewers = new Map<string, { tokenHash: string; viewer: Viewer }>();

  constructor(private readonly sql: SqlRunner) {}

  private shared(tokenHash: string, fresh: Viewer): { tokenHash: string; viewer: Viewer } {
    const last = this.lastViewers.get(tokenHash);
    if (last && sameViewer(last.viewer, fresh)) return last;
    if (!last && this.lastViewers.size >= SHARED_VIEWERS) this.lastViewers.clear();
    const kept = { tokenHash, viewer: fresh };
    this.lastViewers.set(tokenHash, kept);
    return kept;
  }

  read(tokenHash: string | null): Promise<SocketAuthenticated | null> {
    if (!tokenHash) return Promise.resolve(null);
    if (!this.pending) {
      this.pending = new Map();
      setImmediate(() => void this.flush());
    }
    let waiters = this.pending.get(tokenHash);
    if (!waiters) this.pending.set(tokenHash, (waiters = []));
    return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
  }

  private async flush(): Promise<void> {
    const batch = this.pending!;
    this.pending = null;
    try {
      const rows = await this.sql.query<TokenRow & { tokenHash: string; live: boolean }>(TOKENS_SQL, [[...batch.keys()]], { prepare: true });
      const touched = rows.filter((r) => r.touch).map((r) => r.tokenId);
      if (touched.length > 0) await this.sql.query(`UPDATE api_tokens SET "lastUsedAt" = now() WHERE id = ANY($1::text[])`, [touched], { prepare: true });
      const byHash = new Map(rows.map((r) => [r.tokenHash, r]));
      for (const [hash, waiters] of batch) {
        const row = byHash.get(hash);
        // One answer per token, shared by the reads it answers (a viewer is never written to):
        // a subscriber's context holds it for as long as it lives.
        const answer = row ? { ...this.shared(hash, viewerOf(row)), authzEpoch: row.authzEpoch, live: row.live } : null;
        for (const w of waiters) w.resolve(answer);
      }
    } catch (error) {
      for (const waiters of batch.values()) for (const w of waiters) w.reject(error);
    }
  }
}
