import { seal, unseal } from "../domain/seal.js";
import type { ApprovalRequest, GatewayInvocation, PrismaClient } from "../generated/prisma/client.js";
import { modelRow } from "../infra/model-rows.js";
import type { Prisma } from "../generated/prisma/client.js";
import type { SqlRunner } from "../infra/db.js";
import { liveVirtualKeySql } from "../domain/liveness.js";
import type { ApprovalStatus } from "./errors.js";
import { providerOfTool, type Execution, type ExecutionState, type GatewayConnection, type GatewayKey, type GatewayRoute, type GatewayStore, type HeldInvocation, type HeldState } from "./store.js";

/**
 * The gateway's store on Countersign's PostgreSQL: keys, workspaces and connections are the
 * control plane's rows (one database, read at every call), the held records and executions are
 * the gateway's own (GatewayInvocation, GatewayExecution).
 *
 * Routing: a logical tool `<connection>.<operation>` is served by the workspace's connection
 * named `<connection>`, and runs there as the concrete tool `<provider>.<operation>`.
 */
export type PostgresGatewayStoreOptions = {
  ticketSecret?: string | undefined;
  /**
   * Control's check before it mints authority for an approved request (seed 003, "Preflight"):
   * null when it may, else the code that stops it. Without one, an approved request's status
   * carries no token (fail closed). Countersign passes src/services/approvals/authority.ts.
   */
  authority?: ((approvalId: string) => Promise<string | null>) | undefined;
  /**
   * The database's own driver, for the reads an agent repeats (the call's statement, the status
   * poll's, tools/list's): prepared statements, without Prisma's query compiler. Without it the
   * same SQL runs through Prisma's raw query.
   */
  sql?: SqlRunner | undefined;
};

export function createPostgresGatewayStore(prisma: PrismaClient, options: PostgresGatewayStoreOptions = {}): GatewayStore {
  /** A read on the paths an agent repeats (each call, each status poll): one prepared statement, without Prisma's query compiler. */
  const read = <Row>(text: string, params: unknown[]): Promise<Row[]> =>
    options.sql ? options.sql.query<Row & Record<string, unknown>>(text, params, { prepare: true }) : prisma.$queryRawUnsafe<Row[]>(text, ...params);
  return {
    async findKeyByHash(keyHash) {
      // One statement: the key, its workspace (tier included) and the workspace's newest gate
      // policy version, so a policy set saved by any process is seen on the very next call. A key
      // whose organization was deleted or whose creator left reads as revoked (KEY_LIVE).
      const [key] = await read<KeyRow>(FIND_KEY_SQL, [keyHash]);
      if (!key) return null;
      return {
        id: key.id,
        workspaceId: key.workspaceId,
        keyHash: key.keyHash,
        revoked: key.revoked,
        workspace: { id: key.workspaceId, environment: key.environment, archived: key.archived, production: key.production, policyVersion: key.policyVersion },
      };
    },

    async loadPolicySet(workspaceId) {
      const row = await prisma.gatewayPolicyVersion.findFirst({
        where: { workspaceId },
        orderBy: { version: "desc" },
        select: { workspaceId: true, version: true, policies: true },
      });
      return row ?? null;
    },

    async resolveRoute(workspaceId, logicalTool) {
      const split = splitLogicalTool(logicalTool);
      if (!split) return null;
      const connection = await prisma.connection.findUnique({
        where: { workspaceId_name: { workspaceId, name: split.name } },
        include: { toolOverrides: { where: { tool: split.operation }, select: { destructive: true } } },
      });
      if (!connection) return null;
      return toRoute(connection, split.operation, connection.toolOverrides[0]?.destructive ?? null);
    },

    async resolveCall(keyHash, logicalTool) {
      // One round trip: key, workspace, the connection named by the tool's namespace, and its
      // override for the tool (and the workspace's gate policy version).
      const split = splitLogicalTool(logicalTool);
      type Row = { k: KeyJson; w: WorkspaceJson; c: ConnectionRow | null; o: boolean | null; policyVersion: number };
      const params = [keyHash, split?.name ?? "", split?.operation ?? ""];
      const rows = await read<Row>(RESOLVE_CALL_SQL, params);
      const row = rows[0];
      if (!row) return { key: null, route: null };
      const key = toGatewayKey({ ...row.k, workspace: row.w }, row.policyVersion);
      return { key, route: split && row.c ? toRoute(row.c, split.operation, row.o) : null };
    },

    async listConnections(workspaceId) {
      const rows = await read<{ c: ConnectionRow; overrides: { tool: string; destructive: boolean }[] }>(LIST_CONNECTIONS_SQL, [workspaceId]);
      return rows.map((row) => toConnection(row.c, row.overrides));
    },

    async findConnection(connectionId) {
      const c = await prisma.connection.findUnique({ where: { id: connectionId }, include: { toolOverrides: { select: { tool: true, destructive: true } } } });
      return c ? toConnection(c, c.toolOverrides) : null;
    },

    async createHeld({ ticket, ...record }) {
      // The ticket carries the raw arguments: kept only sealed (never readable in the row), and
      // only when there is a secret to seal it with.
      const sealed = ticket !== undefined && options.ticketSecret ? sealTicket(options.ticketSecret, ticket) : null;
      await prisma.gatewayInvocation.create({ data: { ...record, ticket: sealed, state: "AwaitingApproval" satisfies HeldState } });
    },

    async findHeld(approvalId) {
      const [found] = await read<{ row: Record<string, unknown> }>(FIND_HELD_SQL, [approvalId]);
      return found ? toHeld(modelRow<GatewayInvocation>("GatewayInvocation", found.row)) : null;
    },

    async findAwaiting(virtualKeyId, idempotencyKey, argumentHash, now) {
      const row = await prisma.gatewayInvocation.findFirst({
        where: { virtualKeyId, idempotencyKey, argumentHash, state: "AwaitingApproval", expiresAt: { gt: now } },
        orderBy: { createdAt: "desc" },
      });
      return row ? toHeld(row) : null;
    },

    async findLatestHeld(virtualKeyId, idempotencyKey, argumentHash) {
      const row = await prisma.gatewayInvocation.findFirst({ where: { virtualKeyId, idempotencyKey, argumentHash }, orderBy: { createdAt: "desc" } });
      return row ? toHeld(row) : null;
    },

    async findApprovalOutcome(approvalId, now) {
      const [found] = await read<{ row: Record<string, unknown>; deliveryErrorCode: string | null }>(FIND_OUTCOME_SQL, [approvalId]);
      if (!found) return null;
      const row = modelRow<ApprovalRequest>("ApprovalRequest", found.row);
      const expired = row.expiresAt.getTime() <= now.getTime();
      let status: ApprovalStatus = row.status;
      let reason = row.closeReason;
      if (row.status === "pending" && expired) {
        status = "expired"; // the expiry sweep has not closed it yet: it is closed all the same
      } else if (row.status === "approved" && row.executionStatus === "failed") {
        status = "failed";
        reason = found.deliveryErrorCode ?? "execution_failed";
      } else if (row.status === "approved" && row.executionStatus !== "executed" && expired) {
        // Approved too late to run: resume and the re-issue both refuse an expired hold.
        status = "expired";
        reason = "approval_expired";
      }
      let notExecutable: string | null = null;
      if (status === "approved" && row.executionStatus !== "executed") {
        notExecutable = expired ? "approval_expired" : options.authority ? await options.authority(approvalId) : "authority_unchecked";
      }
      return {
        approvalId: row.id,
        workspaceId: row.workspaceId,
        virtualKeyId: row.virtualKeyId,
        tool: row.tool,
        argumentHash: row.argumentHash,
        idempotencyKey: row.idempotencyKey,
        status,
        reason: status === "pending" || status === "approved" ? null : reason,
        executionStatus: row.executionStatus,
        expiresAt: row.expiresAt,
        decidedAt: row.decidedAt,
        notExecutable,
      };
    },

    async setHeldState(approvalId, state, result) {
      await prisma.gatewayInvocation.update({
        where: { approvalId },
        data: {
          state,
          // The ticket (raw arguments included) is kept only while the call awaits approval.
          ...(state !== "AwaitingApproval" ? { ticket: null } : {}),
          ...(result !== undefined ? { result: result as Prisma.InputJsonValue } : {}),
          ...(state === "Executed" ? { executedAt: new Date() } : {}),
        },
      });
    },

    async findExecution(virtualKeyId, idempotencyKey) {
      const row = await prisma.gatewayExecution.findUnique({ where: { virtualKeyId_idempotencyKey: { virtualKeyId, idempotencyKey } } });
      return row ? toExecution(row) : null;
    },

    async claimExecution(claim) {
      // ON CONFLICT DO NOTHING: the primary key (virtualKeyId, idempotencyKey) lets exactly one in.
      const { count } = await prisma.gatewayExecution.createMany({
        data: [{ ...claim, state: "Executing" satisfies ExecutionState }],
        skipDuplicates: true,
      });
      if (count === 1) return { claimed: true };
      const existing = await prisma.gatewayExecution.findUniqueOrThrow({
        where: { virtualKeyId_idempotencyKey: { virtualKeyId: claim.virtualKeyId, idempotencyKey: claim.idempotencyKey } },
      });
      return { claimed: false, existing: toExecution(existing) };
    },

    async finishExecution(key, outcome) {
      await prisma.gatewayExecution.update({
        where: { virtualKeyId_idempotencyKey: { virtualKeyId: key.virtualKeyId, idempotencyKey: key.idempotencyKey } },
        data:
          outcome.state === "Executed"
            ? { state: outcome.state, result: (outcome.result ?? null) as Prisma.InputJsonValue, finishedAt: new Date() }
            : { state: outcome.state, error: outcome.error, finishedAt: new Date() },
      });
    },
  };
}

type KeyRow = {
  id: string;
  workspaceId: string;
  keyHash: string;
  revoked: boolean;
  environment: string;
  production: boolean;
  archived: boolean;
  policyVersion: number;
};

function toHeld(row: {
  approvalId: string;
  workspaceId: string;
  virtualKeyId: string;
  connectionId: string;
  provider: string | null;
  upstreamUrl: string | null;
  tool: string;
  logicalTool: string | null;
  invocationId: string;
  argumentHash: string;
  idempotencyKey: string;
  state: string;
  createdAt: Date;
  expiresAt: Date;
}): HeldInvocation {
  return {
    approvalId: row.approvalId,
    workspaceId: row.workspaceId,
    virtualKeyId: row.virtualKeyId,
    connectionId: row.connectionId,
    provider: row.provider ?? providerOfTool(row.tool),
    upstreamUrl: row.upstreamUrl,
    tool: row.tool,
    logicalTool: row.logicalTool,
    invocationId: row.invocationId,
    argumentHash: row.argumentHash,
    idempotencyKey: row.idempotencyKey,
    state: row.state as HeldState,
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
  };
}

function toExecution(row: {
  virtualKeyId: string;
  idempotencyKey: string;
  approvalId: string;
  invocationId: string;
  state: string;
  result: unknown;
  error: string | null;
}): Execution {
  return { ...row, state: row.state as ExecutionState };
}

/** A held call's ticket (sealed), to be written to the stream again. */
export type StrandedHeld = { approvalId: string; ticket: string };

const TICKET_SEAL = "held-ticket-seal-v1";

/**
 * Sealed under a key derived from the approval secret (which control and the gateway share):
 * the held row never holds the raw arguments in a form a reader of the database can see.
 */
export const sealTicket = (secret: string, ticket: string): string => seal(TICKET_SEAL, secret, ticket);

/** The ticket, or null when it was sealed under another secret (or altered). */
export const openTicket = (secret: string, sealed: string): string | null => unseal(TICKET_SEAL, secret, sealed);

/**
 * Held records whose request never reached the inbox: still AwaitingApproval and unexpired, with
 * no approval request of their id, held (or last put back on the stream) longer ago than
 * `afterMs` times 2^(times already put back, at most 6) — so a ticket the inbox keeps rejecting
 * (its connection was deleted, say) is retried ever more rarely, not every tick. Oldest first.
 * Reads the gateway's table and the inbox's in one database: the embedded gateway's case.
 */
export async function findStrandedHeld(sql: SqlRunner, options: { afterMs: number; now: Date; limit: number }): Promise<StrandedHeld[]> {
  return sql.query<StrandedHeld>(
    `SELECT g."approvalId", g.ticket FROM gateway_invocations g
      WHERE g.state = 'AwaitingApproval' AND g.ticket IS NOT NULL AND g."expiresAt" > $1::timestamptz
        AND COALESCE(g."republishedAt", g."createdAt")
            <= $1::timestamptz - make_interval(secs => $2::double precision * power(2, LEAST(g."republishCount", 6)) / 1000.0)
        AND NOT EXISTS (SELECT 1 FROM approval_requests r WHERE r.id = g."approvalId")
      ORDER BY g."createdAt"
      LIMIT $3`,
    [options.now, options.afterMs, options.limit],
  );
}

/** Records that these tickets were written to the stream again at `now`. */
export async function markRepublished(sql: SqlRunner, approvalIds: string[], now: Date): Promise<void> {
  if (approvalIds.length === 0) return;
  await sql.query(
    `UPDATE gateway_invocations SET "republishedAt" = $2::timestamptz, "republishCount" = "republishCount" + 1
      WHERE "approvalId" = ANY($1::text[])`,
    [approvalIds, now],
  );
}

// ─── the hot path's statement and its rows ──────────────────────────────────────────────────────

/**
 * Whether a key may act at all: not revoked, its organization not deleted, its creator still an
 * active member (src/domain/liveness.ts). Every key read here answers `revoked` through it, so
 * tools/list, tools/call, the agent's status read and resume refuse a dead key alike.
 */
const KEY_LIVE = liveVirtualKeySql("k");

/** A held record, as its model's row (src/infra/model-rows.ts). */
export const FIND_HELD_SQL = `SELECT to_json(g) AS row FROM gateway_invocations g WHERE g."approvalId" = $1`;

/** An approval request with its delivery's error code: what the agent's status read reports. */
export const FIND_OUTCOME_SQL = `SELECT to_json(r) AS row, d."errorCode" AS "deliveryErrorCode"
   FROM approval_requests r LEFT JOIN delivery_jobs d ON d."requestId" = r.id
  WHERE r.id = $1`;

export const FIND_KEY_SQL = `SELECT k.id, k."workspaceId", k."keyHash", (NOT ${KEY_LIVE}) AS revoked,
        w.environment, w.production, (w."archivedAt" IS NOT NULL) AS archived,
        COALESCE((SELECT max(v.version) FROM gateway_policy_versions v WHERE v."workspaceId" = w.id), 0)::int AS "policyVersion"
   FROM virtual_keys k JOIN workspaces w ON w.id = k."workspaceId"
  WHERE k."keyHash" = $1`;

/** A connection `c` as the gateway reads it (ConnectionRow), in both statements below. */
const CONNECTION_JSON = `json_build_object('id', c.id, 'workspaceId', c."workspaceId", 'name', c.name, 'provider', c.provider,
          'active', c.active, 'url', c.url, 'credentialSealed', c."credentialSealed", 'timeoutMs', c."timeoutMs", 'updatedAt', c."updatedAt")`;

/** A workspace's connections, by name, each with its tool overrides: what tools/list serves. */
const LIST_CONNECTIONS_SQL = `SELECT ${CONNECTION_JSON} AS c,
        COALESCE((SELECT json_agg(json_build_object('tool', o.tool, 'destructive', o.destructive))
                    FROM connection_tool_overrides o WHERE o."connectionId" = c.id), '[]'::json) AS overrides
   FROM connections c
  WHERE c."workspaceId" = $1
  ORDER BY c.name`;

// The workspace's newest gate policy version rides along (as findKeyByHash reads it for the
// per-workspace gate), so the hot path stays one statement.
const RESOLVE_CALL_SQL = `SELECT json_build_object('id', k.id, 'workspaceId', k."workspaceId", 'keyHash', k."keyHash", 'live', ${KEY_LIVE}) AS k,
        json_build_object('id', w.id, 'environment', w.environment, 'production', w.production, 'archivedAt', w."archivedAt") AS w,
        CASE WHEN c.id IS NULL THEN NULL ELSE ${CONNECTION_JSON} END AS c,
        o.destructive AS o,
        COALESCE((SELECT max(v.version) FROM gateway_policy_versions v WHERE v."workspaceId" = w.id), 0)::int AS "policyVersion"
   FROM virtual_keys k
   JOIN workspaces w ON w.id = k."workspaceId"
   LEFT JOIN connections c ON c."workspaceId" = k."workspaceId" AND c.name = $2
   LEFT JOIN connection_tool_overrides o ON o."connectionId" = c.id AND o.tool = $3
  WHERE k."keyHash" = $1`;

type KeyJson = { id: string; workspaceId: string; keyHash: string; live: boolean };
type WorkspaceJson = { id: string; environment: string; production?: boolean; archivedAt: Date | string | null };
type ConnectionRow = {
  id: string;
  workspaceId: string;
  name: string;
  provider: string;
  active: boolean;
  url: string | null;
  credentialSealed: string | null;
  timeoutMs: number | null;
  updatedAt: Date | string;
};

/** The key as the gateway sees it, from the hot statement's JSON rows. */
function toGatewayKey(key: KeyJson & { workspace: WorkspaceJson }, policyVersion?: number): GatewayKey {
  // The tier and the gate's policy version travel with the workspace for the per-workspace gate.
  const workspace = {
    id: key.workspace.id,
    environment: key.workspace.environment,
    archived: key.workspace.archivedAt !== null,
    production: key.workspace.production === true,
    ...(policyVersion !== undefined ? { policyVersion } : {}),
  };
  return { id: key.id, workspaceId: key.workspaceId, keyHash: key.keyHash, revoked: key.live !== true, workspace };
}

/** `<connection>.<operation>`: the connection's name carries no dot, the operation is the upstream's tool. */
function splitLogicalTool(logicalTool: string): { name: string; operation: string } | null {
  const dot = logicalTool.indexOf(".");
  if (dot <= 0 || dot === logicalTool.length - 1) return null;
  return { name: logicalTool.slice(0, dot), operation: logicalTool.slice(dot + 1) };
}

function upstreamOf(c: ConnectionRow) {
  return { id: c.id, url: c.url, credentialSealed: c.credentialSealed, timeoutMs: c.timeoutMs, updatedAt: isoOf(c.updatedAt) };
}

/** Prisma's Date, or to_jsonb's `timestamp(3)` text (UTC, without a zone): one ISO string either way. */
function isoOf(value: Date | string): string {
  if (value instanceof Date) return value.toISOString();
  return new Date(/[zZ]|[+-]\d\d:?\d\d$/.test(value) ? value : `${value}Z`).toISOString();
}

function toRoute(c: ConnectionRow, operation: string, override: boolean | null): GatewayRoute {
  return { connectionId: c.id, provider: c.provider, tool: `${c.provider}.${operation}`, active: c.active, upstreamTool: operation, upstream: upstreamOf(c), override };
}

function toConnection(c: ConnectionRow, overrides: { tool: string; destructive: boolean }[]): GatewayConnection {
  return {
    id: c.id,
    workspaceId: c.workspaceId,
    name: c.name,
    provider: c.provider,
    active: c.active,
    upstream: upstreamOf(c),
    overrides: Object.fromEntries(overrides.map((o) => [o.tool, o.destructive])),
  };
}
