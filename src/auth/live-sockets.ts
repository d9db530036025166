// Every authenticated WebSocket on this process, by the API token it authenticated with.
//
// A socket authenticates once, at connection_init, and every operation on it acts as that
// token. So a token that stops being valid must end its sockets, not only its next request:
// - revokeApiToken publishes "auth:token_revoked" (over Redis, to every process): the token's
//   sockets close at once;
// - a timer per socket fires at the token's expiresAt;
// - "authz:changed" (a member deactivated, an organization deleted, ...) re-checks the sockets
//   of that organization in one query, and so does a sweep every REVALIDATE_MS of every socket,
//   so a revocation whose event was lost (the bus down) still takes effect within that time.
// A socket whose token is no longer valid is closed with 4401 "Unauthorized": graphql-ws
// clients treat 4401 as fatal and do not reconnect with the same token (4403 they retry).

import { liveApiTokenSql } from "../domain/liveness.js";
import type { SqlRunner } from "../infra/db.js";
import type { EventBus, Topics } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";

export const TOKEN_INVALID_CLOSE = { code: 4401, reason: "Unauthorized: the token was revoked or has expired" } as const;
/** How often every socket's token is re-checked, whatever the bus delivered. */
export const REVALIDATE_MS = 30_000;
/** setTimeout's largest delay; a later expiry re-arms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface LiveSocket {
  tokenId: string;
  orgId: string;
  userId: string;
  expiresAt: Date | null;
  /** Open operations on the socket by graphql-ws id → kind (the root field, e.g. planGate). */
  readonly operations: Map<string, string>;
  /** Whether graphql-ws still runs operation `id` (an operation refused after it was counted is not). */
  isOpen(id: string): boolean;
  close(code: number, reason: string): void;
}

interface Entry {
  socket: LiveSocket;
  timer: NodeJS.Timeout | null;
}

/**
 * The tokens among `tokenIds` that still authenticate and whose user is an active member of a
 * live organization (what every permission check would need anyway).
 */
export async function liveTokenIds(sql: SqlRunner, tokenIds: readonly string[]): Promise<Set<string>> {
  if (tokenIds.length === 0) return new Set();
  const rows = await sql.query<{ id: string }>(
    `SELECT t.id FROM api_tokens t WHERE t.id = ANY($1::text[]) AND ${liveApiTokenSql("t")}`,
    [[...new Set(tokenIds)]],
  );
  return new Set(rows.map((r) => r.id));
}

export class LiveSockets {
  private readonly byToken = new Map<string, Set<Entry>>();
  private readonly entries = new Map<LiveSocket, Entry>();
  private iterators: AsyncIterator<unknown>[] = [];
  private sweep: NodeJS.Timeout | null = null;

  constructor(
    private readonly sql: SqlRunner,
    private readonly events: EventBus,
    private readonly logger: Logger,
  ) {}

  /** Subscribes to the bus and starts the sweep. */
  start(): void {
    const revoked = this.events.subscribe("auth:token_revoked");
    const authz = this.events.subscribe("authz:changed");
    this.iterators = [revoked, authz];
    void this.consume<Topics["auth:token_revoked"]>(revoked, (e) => this.closeToken(e.tokenId, "revoked"));
    void this.consume<Topics["authz:changed"]>(authz, (e) => void this.revalidate(e.orgId));
    this.sweep = setInterval(() => void this.revalidate(null), REVALIDATE_MS);
    this.sweep.unref();
  }

  stop(): void {
    if (this.sweep) clearInterval(this.sweep);
    this.sweep = null;
    for (const it of this.iterators) void it.return?.();
    this.iterators = [];
    for (const entry of this.entries.values()) if (entry.timer) clearTimeout(entry.timer);
  }

  add(socket: LiveSocket): void {
    const entry: Entry = { socket, timer: null };
    this.entries.set(socket, entry);
    let set = this.byToken.get(socket.tokenId);
    if (!set) this.byToken.set(socket.tokenId, (set = new Set()));
    set.add(entry);
    this.arm(entry);
  }

  remove(socket: LiveSocket): void {
    const entry = this.entries.get(socket);
    if (!entry) return;
    this.entries.delete(socket);
    if (entry.timer) clearTimeout(entry.timer);
    const set = this.byToken.get(socket.tokenId);
    set?.delete(entry);
    if (set?.size === 0) this.byToken.delete(socket.tokenId);
  }

  /** Open operations of a token across its sockets on this process. */
  operationsOf(tokenId: string): number {
    let n = 0;
    for (const entry of this.byToken.get(tokenId) ?? []) n += prune(entry.socket).size;
    return n;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Open operations on this process by kind. */
  operationsByKind(): Map<string, number> {
    const out = new Map<string, number>();
    for (const { socket } of this.entries.values()) {
      for (const kind of prune(socket).values()) out.set(kind, (out.get(kind) ?? 0) + 1);
    }
    return out;
  }

  /** Closes every socket of a token (revoked, expired, or no longer valid). */
  closeToken(tokenId: string, why: string): void {
    const set = this.byToken.get(tokenId);
    if (!set) return;
    for (const entry of [...set]) {
      this.logger.info({ tokenId, userId: entry.socket.userId, why }, "websocket closed: token no longer valid");
      this.remove(entry.socket);
      entry.socket.close(TOKEN_INVALID_CLOSE.code, TOKEN_INVALID_CLOSE.reason);
    }
  }

  /** Checks running, by organization ("" for all), and whether another was asked for meanwhile. */
  private readonly checking = new Map<string, { again: boolean; done: Promise<void> }>();

  /**
   * Re-checks the tokens of one organization's sockets (null: every socket) and closes the
   * invalid. A burst of events costs at most one check running and one more after it.
   */
  revalidate(orgId: string | null): Promise<void> {
    const key = orgId ?? "";
    const running = this.checking.get(key);
    if (running) {
      running.again = true;
      return running.done;
    }
    const entry = { again: false, done: Promise.resolve() };
    entry.done = (async () => {
      try {
        do {
          entry.again = false;
          await this.check(orgId);
        } while (entry.again);
      } finally {
        this.checking.delete(key);
      }
    })();
    this.checking.set(key, entry);
    return entry.done;
  }

  private async check(orgId: string | null): Promise<void> {
    const tokenIds = [...this.byToken.keys()].filter((id) => {
      if (orgId === null) return true;
      const [first] = this.byToken.get(id)!;
      return first?.socket.orgId === orgId;
    });
    if (tokenIds.length === 0) return;
    let live: Set<string>;
    try {
      live = await liveTokenIds(this.sql, tokenIds);
    } catch (error) {
      // The database cannot say: keep the sockets (every operation still authorizes on its own)
      // and try again at the next event or sweep.
      this.logger.warn({ err: { message: (error as Error).message } }, "websocket token check failed");
      return;
    }
    for (const id of tokenIds) if (!live.has(id)) this.closeToken(id, "invalid");
  }

  private arm(entry: Entry) {
    const { expiresAt } = entry.socket;
    if (!expiresAt) return;
    const ms = expiresAt.getTime() - Date.now();
    if (ms <= 0) return this.closeToken(entry.socket.tokenId, "expired");
    entry.timer = setTimeout(() => {
      entry.timer = null;
      if (expiresAt.getTime() - Date.now() > 0) return this.arm(entry);
      this.closeToken(entry.socket.tokenId, "expired");
    }, Math.min(ms, MAX_TIMER_MS));
    entry.timer.unref();
  }

  private async consume<E>(iterator: AsyncIterator<E>, handle: (event: E) => void) {
    try {
      for (;;) {
        const { value, done } = await iterator.next();
        if (done) return;
        if (value && typeof value === "object") handle(value);
      }
    } catch {
      // The bus closed.
    }
  }
}

/** The socket's operations, without any graphql-ws no longer runs. */
function prune(socket: LiveSocket): Map<string, string> {
  for (const id of socket.operations.keys()) if (!socket.isOpen(id)) socket.operations.delete(id);
  return socket.operations;
}
