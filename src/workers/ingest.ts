import { hostname } from "node:os";
import { virtualKeyDeadReasonSql } from "../domain/liveness.js";
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { redisApprovalStream, type ApprovalStream, type StreamEntry, type StreamWatch } from "../infra/approval-stream.js";
import { matchRequest, policySetHash, type ApprovalPolicy } from "../domain/approvals/policy.js";
import { APPROVAL_STREAM, decodeTicket, type ApprovalTicket } from "../gateway/errors.js";
import { canonicalJson, sha256Hex } from "../domain/canonical.js";
import { providerOfTool } from "../gateway/store.js";
import type { Database } from "../infra/db.js";
import type { EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import { findStrandedHeld, markRepublished, openTicket } from "../gateway/postgres-store.js";
import { toDomainPolicy } from "../services/approvals/policies.js";
import type { SqlRunner } from "../infra/db.js";
import { inTransaction } from "../services/approvals/sql.js";
import { enqueueApprovalRequestsFiled, organizationsListening } from "../services/webhooks.js";
import { createWorkerLoop } from "./loop.js";

/**
 * The ingest worker (seed 003, "The inbox"): drains the approval stream through a consumer
 * group, validates each entry, binds it to a live workspace, virtual key and active
 * connection, and inserts the ApprovalRequest — matched against the workspace's active
 * policies, closed at once as default_deny when no allow rule covers it.
 *
 * Acknowledgement comes only after the commit, or at once for input that can never become
 * valid. A crash between the commit and the XACK leaves the entry pending; XAUTOCLAIM hands it
 * to a live consumer, whose insert finds the same row with the same payload hash — a duplicate,
 * acknowledged, nothing filed twice. The same approval_id with another payload is a collision:
 * rejected, acknowledged, logged.
 */

export type IngestOptions = {
  db: Database;
  /** The approval stream: an ioredis client (`redis`), or any ApprovalStream (`stream`; the embedded default's is in-process). */
  redis?: Redis;
  stream?: ApprovalStream;
  events: EventBus;
  logger: Logger;
  /** Default `stream:approvals`. */
  streamKey?: string;
  /** Default `countersign-ingest`. */
  group?: string;
  /** Unique per process. Default `<host>-<pid>-<random>`. */
  consumer?: string;
  /**
   * The sweep for what a wake missed (a watch that was reconnecting, a reclaim, a republish).
   * New entries do not wait for it: the stream's watch wakes the worker. Default 10 s
   * (COUNTERSIGN_INGEST_INTERVAL_MS).
   */
  intervalMs?: number;
  /** Entries per XREADGROUP / XAUTOCLAIM and per insert transaction. Default 500. */
  batchSize?: number;
  /** Pending entries idle this long are reclaimed from whichever consumer holds them. Default 60 s. */
  claimIdleMs?: number;
  now?: () => Date;
  /**
   * After each tick, XTRIM MINID what every consumer group of the stream has read and acked, so
   * the stream does not grow without bound. Default true.
   */
  trim?: boolean;
  /**
   * Puts back on the stream the ticket of a held call (the gateway's durable record, same
   * database) whose request has not reached the inbox this long after it was held: the stream
   * lost it (Redis restarted empty). Filing is idempotent on approval_id, so a ticket that was only
   * slow is a duplicate, nothing more. Unset: no republishing (COUNTERSIGN_HELD_REPUBLISH_AFTER_MS).
   */
  republishAfterMs?: number;
  /** The approval secret the gateway sealed the kept tickets with; republishing needs it. */
  ticketSecret?: string;
  /** Runs after the commit and before the XACK: tests stop here to play a crash. */
  beforeAck?: (entryIds: string[]) => Promise<void> | void;
};

export type IngestStats = {
  read: number;
  reclaimed: number;
  inserted: number;
  defaultDenied: number;
  duplicates: number;
  collisions: number;
  invalid: number;
  unbound: number;
  /** Left pending to retry (their connection is inactive, for now). */
  deferred: number;
  /** Held calls whose ticket was put back on the stream (republishAfterMs). */
  republished: number;
};

type Entry = StreamEntry;

type Bound = { entryId: string; ticket: ApprovalTicket; canonical: string; fingerprint: string };

export type IngestWorker = {
  tick(): Promise<IngestStats>;
  start(): void;
  /**
   * Runs the next tick now instead of at the next interval: the stream watch calls it on every
   * append, and the connection watch once the stream is back after an outage.
   */
  wake(): void;
  /** Resolves once a started worker watches the stream: every later append wakes it. */
  watching(): Promise<void>;
  stop(): Promise<void>;
  readonly consumer: string;
};

export function createIngestWorker(options: IngestOptions): IngestWorker {
  const { db, events, logger } = options;
  const stream: ApprovalStream = options.stream ?? (options.redis ? redisApprovalStream(options.redis) : missingStream());
  const streamKey = options.streamKey ?? APPROVAL_STREAM;
  const group = options.group ?? "countersign-ingest";
  const consumer = options.consumer ?? `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
  const intervalMs = options.intervalMs ?? 10_000;
  const batchSize = options.batchSize ?? 500;
  const claimIdleMs = options.claimIdleMs ?? 60_000;
  const now = options.now ?? (() => new Date());
  const log = logger.child({ worker: "approval-ingest", consumer, stream: streamKey });
  const deps: IngestDeps = { db, events, log, stream, streamKey, group, batchSize, now, beforeAck: options.beforeAck };
  let groupReady = false;

  async function ensureGroup(): Promise<void> {
    if (groupReady) return;
    // From 0: tickets written before the group existed are filed too.
    await stream.xgroupCreate(streamKey, group, "0");
    groupReady = true;
  }

  async function tick(): Promise<IngestStats> {
    try {
      return await drain();
    } catch (error) {
      // Redis lost its data (restarted with nothing kept, or flushed): the group is gone with the
      // stream. Recreate it (MKSTREAM) and drain again, instead of failing every tick from now on.
      if (!String(error).includes("NOGROUP")) throw error;
      log.warn("the approval stream's consumer group is gone (Redis lost its data); recreating it");
      groupReady = false;
      return await drain();
    }
  }

  async function drain(): Promise<IngestStats> {
    await ensureGroup();
    const stats = emptyStats();
    // 0. Put back what the stream lost (held calls whose request never arrived), so this tick files it.
    if (options.republishAfterMs !== undefined && options.ticketSecret) stats.republished = await republishStranded(deps, options.republishAfterMs, options.ticketSecret);
    // 1. Reclaim what a crashed (or this) consumer left pending.
    let cursor = "0-0";
    for (let round = 0; round < 100; round++) {
      const [next, entries] = await stream.xautoclaim(streamKey, group, consumer, claimIdleMs, cursor, batchSize);
      if (entries.length > 0) {
        const batch = await processEntries(deps, entries);
        batch.reclaimed = entries.length;
        add(stats, batch);
      }
      cursor = next;
      if (cursor === "0-0") break;
    }
    // 2. Drain new entries.
    for (let round = 0; round < 1000; round++) {
      const entries = await stream.xreadgroup(streamKey, group, consumer, batchSize);
      if (entries.length === 0) break;
      add(stats, await processEntries(deps, entries));
      if (entries.length < batchSize) break;
    }
    if (options.trim !== false && stats.read > 0) await trimStream(stream, streamKey);
    return stats;
  }

  const loop = createWorkerLoop({
    intervalMs,
    tick,
    log,
    failed: "approval ingest tick failed",
    done: (stats) => {
      if (stats.read > 0) log.info(stats, "approval stream drained");
    },
  });
  let watch: StreamWatch | null = null;

  return {
    consumer,
    tick,
    start() {
      if (loop.started) return;
      // A held call reaches the inbox as soon as the gateway appends it; the interval is the sweep.
      loop.start();
      watch = stream.watch(streamKey, loop.wake);
    },
    wake: loop.wake,
    watching: () => watch?.ready ?? Promise.resolve(),
    async stop() {
      const stopping = loop.stop();
      await watch?.close();
      watch = null;
      await stopping;
    },
  };
}

/** What the ingest's jobs (republish, file, acknowledge) work with: the worker's settings, resolved. */
type IngestDeps = {
  db: Database;
  events: EventBus;
  log: Logger;
  stream: ApprovalStream;
  streamKey: string;
  group: string;
  batchSize: number;
  now: () => Date;
  beforeAck: IngestOptions["beforeAck"];
};

const emptyStats = (): IngestStats => ({ read: 0, reclaimed: 0, inserted: 0, defaultDenied: 0, duplicates: 0, collisions: 0, invalid: 0, unbound: 0, deferred: 0, republished: 0 });

function add(into: IngestStats, from: IngestStats): void {
  for (const key of Object.keys(into) as (keyof IngestStats)[]) into[key] += from[key];
}

/**
 * Puts back on the stream the tickets of held calls stranded this long (IngestOptions.republishAfterMs).
 */
async function republishStranded(deps: IngestDeps, afterMs: number, ticketSecret: string): Promise<number> {
  const { db, stream, streamKey, batchSize, now, log } = deps;
  const stranded = await findStrandedHeld(db.sql, { afterMs, now: now(), limit: batchSize });
  const done: string[] = [];
  let republished = 0;
  try {
    for (const held of stranded) {
      const ticket = openTicket(ticketSecret, held.ticket);
      if (ticket === null) {
        log.error({ approvalId: held.approvalId }, "held call's kept ticket does not open with this approval secret; not republished");
      } else {
        // The same fields the gateway wrote: the same canonical JSON, so the same fingerprint.
        await stream.xadd(streamKey, "*", "approval_id", held.approvalId, "ticket", ticket);
        republished++;
      }
      done.push(held.approvalId);
    }
  } finally {
    await markRepublished(db.sql, done, now());
  }
  if (republished > 0) log.warn({ count: republished, approvalIds: done.slice(0, 20) }, "held calls whose request had not reached the inbox were put back on the approval stream");
  return republished;
}

/**
 * Drops entries below the oldest one any group still needs: its oldest pending entry, or the
 * one after its last delivered. Every group counts, not only ours — the stream may have other
 * readers.
 */
async function trimStream(stream: ApprovalStream, streamKey: string): Promise<void> {
  let floor: [number, number] | null = null;
  for (const info of await stream.xinfoGroups(streamKey)) {
    let needed = nextId(info.lastDeliveredId);
    if (info.pending > 0) {
      const summary = await stream.xpendingSummary(streamKey, info.name);
      if (summary.smallestId) needed = parseId(summary.smallestId);
    }
    if (!floor || compareIds(needed, floor) < 0) floor = needed;
  }
  if (floor) await stream.xtrimMinId(streamKey, `${floor[0]}-${floor[1]}`);
}

/** Validates a batch of entries, files the valid ones, then acknowledges what is done with. */
async function processEntries(deps: IngestDeps, entries: Entry[]): Promise<IngestStats> {
  const { events, stream, streamKey, group, log } = deps;
  const stats = emptyStats();
  stats.read = entries.length;
  const ack: string[] = [];
  const valid: Bound[] = [];
  for (const [entryId, fields] of entries) {
    if (fields === null) {
      ack.push(entryId); // deleted from the stream while pending: nothing to file
      continue;
    }
    const decoded = decodeTicket(fields);
    if (!decoded.ok) {
      stats.invalid++;
      ack.push(entryId);
      log.warn({ entryId, issues: decoded.issues }, "invalid approval ticket rejected");
      continue;
    }
    // The canonical JSON is both what is stored and what the fingerprint hashes (ticketFingerprint).
    const canonical = canonicalJson(decoded.ticket);
    valid.push({ entryId, ticket: decoded.ticket, canonical, fingerprint: sha256Hex(canonical) });
  }
  let filed: FileResult;
  try {
    filed = await fileTickets(deps, valid);
  } catch (error) {
    // One bad entry must not hold the batch hostage: file the rest one by one.
    log.error({ err: error }, "batch insert failed; filing entries one at a time");
    filed = { ack: [], created: [], stats: emptyStats() };
    for (const entry of valid) {
      try {
        const one = await fileTickets(deps, [entry]);
        filed.ack.push(...one.ack);
        filed.created.push(...one.created);
        add(filed.stats, one.stats);
      } catch (inner) {
        log.error({ err: inner, entryId: entry.entryId, approvalId: entry.ticket.approval_id }, "approval ticket not filed; left pending");
        filed.stats.deferred++;
      }
    }
  }
  add(stats, filed.stats);
  ack.push(...filed.ack);
  if (ack.length > 0) {
    await deps.beforeAck?.(ack);
    await stream.xack(streamKey, group, ...ack);
  }
  for (const c of filed.created) events.publish("approval:changed", { orgId: c.orgId, workspaceId: c.workspaceId, requestId: c.id, reason: c.reason });
  return stats;
}

type FileResult = { ack: string[]; created: { id: string; orgId: string; workspaceId: string; reason: string }[]; stats: IngestStats };

/**
 * One transaction for the whole batch: bind, match, insert. Returns what to acknowledge once it
 * has committed. Every read is one statement per batch (the workspaces, keys, connections and
 * policies the batch names), the insert one statement for every row, and nothing is read back
 * per entry: a batch of 500 costs the same handful of statements as a batch of one. On
 * PostgreSQL it runs on the driver (one pooled connection between BEGIN and COMMIT): Prisma's
 * raw-query layer cost several times the statement itself on a 500-row insert.
 */
async function fileTickets(deps: Pick<IngestDeps, "db" | "now" | "log">, entries: Bound[]): Promise<FileResult> {
  const { db, now, log } = deps;
  const stats = emptyStats();
  const result: FileResult = { ack: [], created: [], stats };
  if (entries.length === 0) return result;

  // The same approval_id twice in one batch: the first stands, the rest are duplicates or collisions.
  const first = new Map<string, Bound>();
  const unique: Bound[] = [];
  for (const entry of entries) {
    const seen = first.get(entry.ticket.approval_id);
    if (!seen) {
      first.set(entry.ticket.approval_id, entry);
      unique.push(entry);
    } else if (seen.fingerprint === entry.fingerprint) {
      stats.duplicates++;
      result.ack.push(entry.entryId);
    } else {
      stats.collisions++;
      result.ack.push(entry.entryId);
      log.error({ entryId: entry.entryId, approvalId: entry.ticket.approval_id }, "approval_id collision: same id, different payload; rejected");
    }
  }

  const at = now();
  await inTransaction(db, async (sql) => {
    const bindings = await readBindings(sql, unique);
    const hashByWorkspace = new Map<string, string>();

    const rows: RequestRow[] = [];
    const rowEntries = new Map<string, Bound & { orgId: string; reason: string }>();
    for (const entry of unique) {
      const t = entry.ticket;
      const workspace = bindings.workspaces.get(t.workspace_id);
      const problem = bindingProblem(bindings, t);
      const expired = Date.parse(t.expires_at) <= at.getTime();
      if (problem === "connection_inactive" && !expired) {
        // It may be reactivated: leave the entry pending, XAUTOCLAIM brings it back.
        stats.deferred++;
        log.warn({ entryId: entry.entryId, approvalId: t.approval_id }, "approval ticket's connection is inactive; retrying later");
        continue;
      }
      if (problem !== null || !workspace) {
        stats.unbound++;
        result.ack.push(entry.entryId);
        log.warn({ entryId: entry.entryId, approvalId: t.approval_id, problem }, "approval ticket not bound; rejected");
        continue;
      }
      const policies = bindings.policies.get(t.workspace_id) ?? [];
      let hash = hashByWorkspace.get(t.workspace_id);
      if (hash === undefined) {
        hash = policySetHash(policies);
        hashByWorkspace.set(t.workspace_id, hash);
      }
      const match = matchRequest(policies, { tool: t.tool, environment: t.environment });
      const status = expired ? "expired" : match.defaultDeny ? "default_deny" : "pending";
      rows.push({
        id: t.approval_id,
        orgId: workspace.orgId,
        workspaceName: workspace.name,
        ticket: t,
        canonical: entry.canonical,
        fingerprint: entry.fingerprint,
        status,
        decidedAt: status === "pending" ? null : at,
        policyRevisions: JSON.stringify(match.policyRevisions),
        matchedRules: JSON.stringify(match.matchedRules),
        policySetHash: hash,
      });
      rowEntries.set(t.approval_id, { ...entry, orgId: workspace.orgId, reason: status === "pending" ? "created" : status });
    }
    if (rows.length === 0) return;

    const inserted = new Set((await insertRequests(sql, rows)).map((r) => r.id));
    // One statement tells which organizations listen; their events are queued from the rows in
    // hand (nothing read back), in one statement for the batch.
    const filedRows = rows.filter((r) => inserted.has(r.id));
    const listening = await organizationsListening(sql, [...new Set(filedRows.map((r) => r.orgId))], ["approval_request.filed", "approval_request.decided"]);
    await enqueueApprovalRequestsFiled(
      sql,
      filedRows
        .filter((r) => listening.has(r.orgId))
        .map((r) => ({
          id: r.id,
          orgId: r.orgId,
          workspaceId: r.ticket.workspace_id,
          workspaceName: r.workspaceName,
          tool: r.ticket.tool,
          environment: r.ticket.environment,
          status: r.status,
          revision: 1, // a request is filed at its first revision (the column's default)
          closeReason: r.status === "pending" ? null : r.status,
          expiresAt: new Date(r.ticket.expires_at),
        })),
    );
    const conflicting = rows.filter((r) => !inserted.has(r.id)).map((r) => r.id);
    const existing = new Map(
      conflicting.length === 0
        ? []
        : (await sql.query<{ id: string; payloadHash: string }>(`SELECT id, "payloadHash" FROM approval_requests WHERE id = ANY($1::text[])`, [conflicting])).map((r) => [r.id, r.payloadHash]),
    );
    for (const [id, entry] of rowEntries) {
      result.ack.push(entry.entryId);
      if (inserted.has(id)) {
        stats.inserted++;
        if (entry.reason === "default_deny") stats.defaultDenied++;
        result.created.push({ id, orgId: entry.orgId, workspaceId: entry.ticket.workspace_id, reason: entry.reason });
      } else if (existing.get(id) === entry.fingerprint) {
        stats.duplicates++;
      } else {
        stats.collisions++;
        log.error({ entryId: entry.entryId, approvalId: id }, "approval_id collision: same id, different payload; rejected");
      }
    }
  });
  return result;
}

/** What a batch's tickets name, read once for the batch: one statement per table. */
type Bindings = {
  workspaces: Map<string, { id: string; orgId: string; name: string; archived: boolean }>;
  keys: Map<string, { id: string; workspaceId: string; dead: string | null }>;
  connections: Map<string, { id: string; workspaceId: string; active: boolean }>;
  policies: Map<string, ApprovalPolicy[]>;
};

async function readBindings(sql: SqlRunner, entries: Bound[]): Promise<Bindings> {
  const distinct = (f: (t: ApprovalTicket) => string) => [...new Set(entries.map((e) => f(e.ticket)))].sort();
  // FOR SHARE, in id order: a policy change (FOR UPDATE on the workspace) waits for this batch,
  // so no request is filed under a policy set that is already being replaced.
  const workspaces = await sql.query<{ id: string; orgId: string; name: string; archived: boolean }>(
    `SELECT id, "orgId", name, ("archivedAt" IS NOT NULL) AS archived FROM workspaces WHERE id = ANY($1::text[]) ORDER BY id FOR SHARE`,
    [distinct((t) => t.workspace_id)],
  );
  // A key is as alive as its organization and its creator (src/domain/liveness.ts).
  const keys = await sql.query<{ id: string; workspaceId: string; dead: string | null }>(
    `SELECT k.id, k."workspaceId", ${virtualKeyDeadReasonSql("k")} AS dead FROM virtual_keys k WHERE k.id = ANY($1::text[])`,
    [distinct((t) => t.virtual_key_id)],
  );
  const connections = await sql.query<{ id: string; workspaceId: string; active: boolean }>(`SELECT id, "workspaceId", active FROM connections WHERE id = ANY($1::text[])`, [
    distinct((t) => t.connection_id),
  ]);
  // Policies of the workspaces that exist, read once per batch (not per entry).
  const policyRows =
    workspaces.length === 0
      ? []
      : await sql.query<{ id: string; workspaceId: string; revision: number; enabled: boolean; rules: unknown }>(
          `SELECT id, "workspaceId", revision, enabled, rules FROM approval_policies WHERE "workspaceId" = ANY($1::text[])`,
          [workspaces.map((w) => w.id)],
        );
  const policies = new Map<string, ApprovalPolicy[]>();
  for (const row of policyRows) {
    const list = policies.get(row.workspaceId) ?? [];
    list.push(toDomainPolicy(row as Parameters<typeof toDomainPolicy>[0]));
    policies.set(row.workspaceId, list);
  }
  return {
    workspaces: new Map(workspaces.map((w) => [w.id, w])),
    keys: new Map(keys.map((k) => [k.id, k])),
    connections: new Map(connections.map((c) => [c.id, c])),
    policies,
  };
}

/** Why a ticket does not bind to a live workspace, key and active connection, or null when it does. */
function bindingProblem(b: Bindings, t: ApprovalTicket): string | null {
  const workspace = b.workspaces.get(t.workspace_id);
  const key = b.keys.get(t.virtual_key_id);
  const connection = b.connections.get(t.connection_id);
  if (!workspace) return "unknown_workspace";
  if (workspace.archived) return "workspace_archived";
  if (!key || key.workspaceId !== t.workspace_id) return "unknown_virtual_key";
  if (key.dead) return "virtual_key_revoked";
  if (!connection || connection.workspaceId !== t.workspace_id) return "unknown_connection";
  if (!connection.active) return "connection_inactive";
  return null;
}

type RequestRow = {
  id: string;
  orgId: string;
  workspaceName: string;
  ticket: ApprovalTicket;
  canonical: string;
  fingerprint: string;
  status: "pending" | "expired" | "default_deny";
  decidedAt: Date | null;
  policyRevisions: string;
  matchedRules: string;
  policySetHash: string;
};

/**
 * One INSERT for the whole batch, a column per array (`unnest`): Prisma's createMany costs about
 * a millisecond a row here, this a fraction of one. ON CONFLICT DO NOTHING RETURNING tells the
 * rows filed now from approval ids already there (duplicates or collisions).
 */
async function insertRequests(sql: SqlRunner, rows: RequestRow[]): Promise<{ id: string }[]> {
  const col = <T>(f: (row: RequestRow) => T) => rows.map(f);
  return sql.query<{ id: string }>(
    `INSERT INTO approval_requests
       (id, "orgId", "workspaceId", "virtualKeyId", "connectionId", tool, "logicalTool", environment, "invocationId",
        "idempotencyKey", "argumentHash", "payloadHash", "requestSnapshot", "amountUsd", status, "closeReason", "decidedAt",
        "policyRevisions", "matchedRules", "policySetHash", "expiresAt", "createdAt", "updatedAt", provider)
     SELECT id, org, ws, vk, conn, tool, logical, env, inv, idem, ah, ph, snap::jsonb, amount, st::"ApprovalRequestStatus",
            CASE WHEN st = 'pending' THEN NULL ELSE st END, decided, pr::jsonb, mr::jsonb, psh, exp, created, now(), prov
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                   $10::text[], $11::text[], $12::text[], $13::text[], $14::double precision[], $15::text[], $16::timestamptz[],
                   $17::text[], $18::text[], $19::text[], $20::timestamptz[], $21::timestamptz[], $22::text[])
         AS t(id, org, ws, vk, conn, tool, logical, env, inv, idem, ah, ph, snap, amount, st, decided, pr, mr, psh, exp, created, prov)
     ON CONFLICT (id) DO NOTHING
     RETURNING id`,
    [
    col((r) => r.id),
    col((r) => r.orgId),
    col((r) => r.ticket.workspace_id),
    col((r) => r.ticket.virtual_key_id),
    col((r) => r.ticket.connection_id),
    col((r) => r.ticket.tool),
    col((r) => r.ticket.logical_tool ?? null),
    col((r) => r.ticket.environment),
    col((r) => r.ticket.invocation_id),
    col((r) => r.ticket.idempotency_key),
    col((r) => r.ticket.argument_hash),
    col((r) => r.fingerprint),
    col((r) => r.canonical),
    col((r) => r.ticket.amount_usd ?? null),
    col((r) => r.status),
    col((r) => r.decidedAt),
    col((r) => r.policyRevisions),
    col((r) => r.matchedRules),
    col((r) => r.policySetHash),
    col((r) => new Date(r.ticket.expires_at)),
    col((r) => new Date(r.ticket.created_at)),
    // The route the hold saw, pinned for delivery (older producers send no provider: the tool's).
    col((r) => r.ticket.provider ?? providerOfTool(r.ticket.tool)),
    ],
  );
}

function parseId(id: string): [number, number] {
  const [ms, seq] = id.split("-");
  return [Number(ms ?? 0), Number(seq ?? 0)];
}

function nextId(id: string): [number, number] {
  const [ms, seq] = parseId(id);
  return [ms, seq + 1];
}

function compareIds(a: [number, number], b: [number, number]): number {
  return a[0] - b[0] || a[1] - b[1];
}

function missingStream(): never {
  throw new TypeError("createIngestWorker needs `stream` (an ApprovalStream) or `redis` (an ioredis client)");
}
