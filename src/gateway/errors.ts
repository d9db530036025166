import { z } from "zod";
import { argumentHash, canonicalJson, CanonicalJsonError, sha256Hex } from "../domain/canonical.js";

/**
 * What the agent sees when a call is held, and the ticket that travels to the inbox
 * (seed 003, "What the agent sees" and "The inbox").
 */

// ─── approval_required ────────────────────────────────────────────────────────────────────────

export const APPROVAL_REQUIRED_HTTP_STATUS = 423;
export const APPROVAL_REQUIRED_JSONRPC_CODE = -32003;

export type ApprovalRequiredData = {
  error: "approval_required";
  approval_id: string;
  tool: string;
  /** ISO 8601, UTC. */
  expires_at: string;
  /** Present only when an inbox is configured. */
  inbox_url?: string;
};

export type ApprovalRequiredInput = { approvalId: string; tool: string; expiresAt: Date | string; inboxUrl?: string | undefined };

export function approvalRequiredBody(input: ApprovalRequiredInput): ApprovalRequiredData {
  return {
    error: "approval_required",
    approval_id: input.approvalId,
    tool: input.tool,
    expires_at: toIso(input.expiresAt),
    ...(input.inboxUrl ? { inbox_url: input.inboxUrl } : {}),
  };
}

export function approvalRequiredHttp(input: ApprovalRequiredInput): {
  status: typeof APPROVAL_REQUIRED_HTTP_STATUS;
  body: ApprovalRequiredData;
} {
  return { status: APPROVAL_REQUIRED_HTTP_STATUS, body: approvalRequiredBody(input) };
}

/**
 * The message carries the approval id too: many clients show an error's message and nothing of
 * its data, and the id is what the agent (or the person beside it) needs to go on.
 */
export function approvalRequiredMessage(input: ApprovalRequiredInput): string {
  return `approval_required: ${input.tool} is held for review as approval ${input.approvalId} (until ${toIso(input.expiresAt)})`;
}

export function approvalRequiredJsonRpc(input: ApprovalRequiredInput): {
  code: typeof APPROVAL_REQUIRED_JSONRPC_CODE;
  message: string;
  data: ApprovalRequiredData;
} {
  return { code: APPROVAL_REQUIRED_JSONRPC_CODE, message: approvalRequiredMessage(input), data: approvalRequiredBody(input) };
}

// ─── not_ready ─────────────────────────────────────────────────────────────────────────────────

export const NOT_READY_HTTP_STATUS = 503;
/**
 * -32004: the next free code after approval_required's -32003 in the JSON-RPC server-error range
 * (-32000…-32099), so a client that already branches on -32003 finds its sibling next to it.
 */
export const NOT_READY_JSONRPC_CODE = -32004;
/** The inbox drains stream:approvals every ten seconds: retrying sooner rarely helps. */
export const NOT_READY_RETRY_AFTER_SECONDS = 10;

/**
 * - `approval_stream_unavailable`: the ticket could not be written to stream:approvals, so
 *   nothing was held.
 * - `held_record_missing`: a resume found no committed held record (an orphan ticket).
 * - `task_waits_exhausted`: this virtual key already has as many `tasks/result` waits open on
 *   this gateway process as it may (src/gateway/tasks.ts, `maxWaitsPerKey`): end one, or read
 *   the task with `tasks/get` meanwhile.
 */
export type NotReadyReason = "approval_stream_unavailable" | "held_record_missing" | "task_waits_exhausted";

export type NotReadyData = {
  error: "not_ready";
  reason: NotReadyReason;
  retryable: true;
  retry_after_seconds: number;
};

export function notReadyBody(reason: NotReadyReason, retryAfterSeconds = NOT_READY_RETRY_AFTER_SECONDS): NotReadyData {
  if (!Number.isInteger(retryAfterSeconds) || retryAfterSeconds < 0) {
    throw new RangeError(`retryAfterSeconds must be a non-negative integer, got ${retryAfterSeconds}`);
  }
  return { error: "not_ready", reason, retryable: true, retry_after_seconds: retryAfterSeconds };
}

export function notReadyHttp(
  reason: NotReadyReason,
  retryAfterSeconds = NOT_READY_RETRY_AFTER_SECONDS,
): { status: typeof NOT_READY_HTTP_STATUS; headers: { "Retry-After": string }; body: NotReadyData } {
  const body = notReadyBody(reason, retryAfterSeconds);
  return { status: NOT_READY_HTTP_STATUS, headers: { "Retry-After": String(body.retry_after_seconds) }, body };
}

export function notReadyJsonRpc(
  reason: NotReadyReason,
  retryAfterSeconds = NOT_READY_RETRY_AFTER_SECONDS,
): { code: typeof NOT_READY_JSONRPC_CODE; message: "not_ready"; data: NotReadyData } {
  return { code: NOT_READY_JSONRPC_CODE, message: "not_ready", data: notReadyBody(reason, retryAfterSeconds) };
}

// ─── the request's outcome, as the agent reads it ─────────────────────────────────────────────────

/**
 * Every status an agent can read for a held call. `pending` and `approved` are open; the rest are
 * closed: the identical retry (same key, same idempotency key, same arguments) is answered with
 * `approval_closed` naming the status, and only a new idempotency key opens a new request
 * (seed 003: "a new request with a new idempotency key is required").
 */
export const APPROVAL_STATUSES = ["pending", "approved", "rejected", "default_deny", "invalidated", "expired", "failed", "withdrawn"] as const;
export type ApprovalStatus = (typeof APPROVAL_STATUSES)[number];
export const CLOSED_APPROVAL_STATUSES = ["rejected", "default_deny", "invalidated", "expired", "failed", "withdrawn"] as const satisfies readonly ApprovalStatus[];
export type ClosedApprovalStatus = (typeof CLOSED_APPROVAL_STATUSES)[number];

export function isClosedApprovalStatus(status: ApprovalStatus): status is ClosedApprovalStatus {
  return (CLOSED_APPROVAL_STATUSES as readonly string[]).includes(status);
}

/** The next free code after executionInProgress (-32006), in the JSON-RPC server-error range. */
export const APPROVAL_CLOSED_JSONRPC_CODE = -32007;
/** The plain HTTP POST's status for it: the request's state conflicts with running this call again. */
export const APPROVAL_CLOSED_HTTP_STATUS = 409;

export type ApprovalClosedData = {
  error: "approval_closed";
  status: ClosedApprovalStatus;
  approval_id: string;
  tool: string;
  /** Why it closed, when known: `policy_changed`, a delivery error code (`key_unavailable`, …), `execution_failed`. */
  reason?: string;
  retryable: false;
  message: string;
};

export type ApprovalClosedInput = { status: ClosedApprovalStatus; approvalId: string; tool: string; reason?: string | null | undefined };

const CLOSED_MESSAGES: Record<ClosedApprovalStatus, string> = {
  rejected: "a reviewer rejected this call",
  default_deny: "no approval policy lets anyone review this call",
  invalidated: "the approval policies changed after this call was held",
  expired: "the approval request expired before it was approved",
  failed: "the approved call could not be executed",
  withdrawn: "its agent withdrew this call before it ran",
};

export function approvalClosedBody(input: ApprovalClosedInput): ApprovalClosedData {
  return {
    error: "approval_closed",
    status: input.status,
    approval_id: input.approvalId,
    tool: input.tool,
    ...(input.reason ? { reason: input.reason } : {}),
    retryable: false,
    message: `${CLOSED_MESSAGES[input.status]}; send a new idempotency key to open a new request`,
  };
}

export function approvalClosedJsonRpc(input: ApprovalClosedInput): {
  code: typeof APPROVAL_CLOSED_JSONRPC_CODE;
  message: "approval_closed";
  data: ApprovalClosedData;
} {
  return { code: APPROVAL_CLOSED_JSONRPC_CODE, message: "approval_closed", data: approvalClosedBody(input) };
}

/**
 * The JSON-RPC error a held call's status answers a `tools/call` with: open requests (pending,
 * approved and not yet executed) keep answering approval_required (-32003) with the same id; a
 * closed one answers approval_closed (-32007) naming its status. For any transport (the plain
 * POST and the MCP Streamable HTTP one).
 */
export function approvalStatusJsonRpc(
  input: { status: ApprovalStatus; approvalId: string; tool: string; expiresAt: Date | string; inboxUrl?: string | undefined; reason?: string | null | undefined },
): ReturnType<typeof approvalRequiredJsonRpc> | ReturnType<typeof approvalClosedJsonRpc> {
  if (isClosedApprovalStatus(input.status)) return approvalClosedJsonRpc({ status: input.status, approvalId: input.approvalId, tool: input.tool, reason: input.reason });
  return approvalRequiredJsonRpc({ approvalId: input.approvalId, tool: input.tool, expiresAt: input.expiresAt, inboxUrl: input.inboxUrl });
}

// ─── the approval ticket ──────────────────────────────────────────────────────────────────────

/** Tickets expire 24 hours after creation. */
export const TICKET_TTL_MS = 24 * 60 * 60 * 1000;
export const APPROVAL_STREAM = "stream:approvals";

/**
 * The held call as it travels on the private approval stream. `arguments` are raw and private:
 * they may go into the request snapshot, never into a receipt, audit envelope or reviewer view.
 */
export type ApprovalTicket = {
  approval_id: string;
  workspace_id: string;
  virtual_key_id: string;
  connection_id: string;
  /** The connection's provider at hold time: resume pins it (absent only from older producers). */
  provider?: string;
  tool: string;
  logical_tool?: string;
  environment: string;
  destructive: boolean;
  arguments: Record<string, unknown>;
  argument_hash: string;
  idempotency_key: string;
  created_at: string;
  expires_at: string;
  amount_usd?: number;
  invocation_id: string;
};

export type TicketIssue = { path: string; message: string };
export type DecodedTicket = { ok: true; ticket: ApprovalTicket } | { ok: false; permanent: true; issues: TicketIssue[] };

/** Ids are opaque to the ticket, but printable and bounded: they end up in keys, URLs and logs. */
const id = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, "expected an id: 1-128 of A-Z a-z 0-9 . _ : -");
const name = z.string().min(1).max(256).regex(/^\S+$/, "expected a name without whitespace");
const idempotencyKey = z.string().min(1).max(255).regex(/^[\x21-\x7e]+$/, "expected 1-255 printable ASCII characters");
/** Written by `Date#toISOString`: UTC, millisecond precision, so equal instants are equal strings. */
const isoInstant = z.iso.datetime({ precision: 3 });

const ticketSchema = z
  .strictObject({
    approval_id: id,
    workspace_id: id,
    virtual_key_id: id,
    connection_id: id,
    provider: z.string().min(1).max(64).regex(/^[A-Za-z0-9][A-Za-z0-9_-]*$/, "expected a provider: letters, digits, '_' and '-'").optional(),
    tool: name,
    logical_tool: name.optional(),
    environment: name,
    destructive: z.boolean(),
    // z.custom keeps the parsed object itself: z.record would rebuild it and silently drop an own
    // `__proto__` key, and the hash check below must see the arguments exactly as sent.
    arguments: z.custom<Record<string, unknown>>(isPlainObject, "expected a JSON object"),
    argument_hash: z.string().regex(/^[0-9a-f]{64}$/, "expected a lowercase sha256 hex digest"),
    idempotency_key: idempotencyKey,
    created_at: isoInstant,
    expires_at: isoInstant,
    amount_usd: z.number().nonnegative().optional(),
    invocation_id: id,
  })
  .superRefine((ticket, ctx) => {
    const created = Date.parse(ticket.created_at);
    const expires = Date.parse(ticket.expires_at);
    if (expires - created !== TICKET_TTL_MS) {
      ctx.addIssue({ code: "custom", path: ["expires_at"], message: "expires_at must be exactly 24 hours after created_at" });
    }
    let hash: string | undefined;
    try {
      hash = argumentHash(ticket.arguments);
    } catch (error) {
      if (!(error instanceof CanonicalJsonError)) throw error;
      ctx.addIssue({ code: "custom", path: ["arguments"], message: error.message });
    }
    if (hash !== undefined && hash !== ticket.argument_hash) {
      ctx.addIssue({ code: "custom", path: ["argument_hash"], message: "argument_hash is not the hash of arguments" });
    }
  });

export type NewTicketInput = Omit<ApprovalTicket, "argument_hash" | "created_at" | "expires_at">;

/** Builds a ticket whose hash and expiry are derived, never supplied: created now, expiring in 24 h. */
export function newApprovalTicket(input: NewTicketInput, now: Date = new Date()): ApprovalTicket {
  const ticket: ApprovalTicket = {
    ...withoutUndefined(input),
    argument_hash: argumentHash(input.arguments),
    created_at: now.toISOString(),
    expires_at: new Date(now.getTime() + TICKET_TTL_MS).toISOString(),
  };
  return assertTicket(ticket);
}

/**
 * XADD field/value pairs: `approval_id` (readable without parsing) and `ticket` (the canonical
 * JSON). Refuses an invalid ticket — the producer, not the inbox, should find that bug.
 */
export function encodeTicket(ticket: ApprovalTicket): ["approval_id", string, "ticket", string] {
  const valid = assertTicket(withoutUndefined(ticket));
  return ["approval_id", valid.approval_id, "ticket", canonicalJson(valid)];
}

/**
 * Decodes a stream entry's fields — the flat `[field, value, …]` list ioredis returns, or an
 * object. Every failure is permanent: the same bytes can never become valid on retry, so the
 * worker may acknowledge them at once.
 */
export function decodeTicket(fields: readonly string[] | Readonly<Record<string, string>>): DecodedTicket {
  const read = readFields(fields);
  if (!read.ok) return fail(read.issues);
  const { approval_id: headerId, ticket: json } = read.values;
  if (json === undefined) return fail([{ path: "ticket", message: "missing ticket field" }]);
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return fail([{ path: "ticket", message: "ticket is not JSON" }]);
  }
  const parsed = ticketSchema.safeParse(raw);
  if (!parsed.success) {
    return fail(parsed.error.issues.map((issue) => ({ path: ["ticket", ...issue.path.map(String)].join("."), message: issue.message })));
  }
  if (headerId !== parsed.data.approval_id) {
    return fail([{ path: "approval_id", message: "approval_id field does not match the ticket" }]);
  }
  return { ok: true, ticket: parsed.data as ApprovalTicket };
}

/** sha256 of the ticket's canonical JSON: a repeated approval_id with another fingerprint is a collision. */
export function ticketFingerprint(ticket: ApprovalTicket): string {
  return sha256Hex(canonicalJson(withoutUndefined(ticket)));
}

function assertTicket(ticket: ApprovalTicket): ApprovalTicket {
  const parsed = ticketSchema.safeParse(ticket);
  if (!parsed.success) throw new TypeError(`invalid approval ticket: ${z.prettifyError(parsed.error)}`);
  return parsed.data as ApprovalTicket;
}

function readFields(
  fields: readonly string[] | Readonly<Record<string, string>>,
): { ok: true; values: Partial<Record<"approval_id" | "ticket", string>> } | { ok: false; issues: TicketIssue[] } {
  const pairs: [string, unknown][] = [];
  if (Array.isArray(fields)) {
    if (fields.length % 2 !== 0) return { ok: false, issues: [{ path: "", message: "odd number of stream fields" }] };
    for (let i = 0; i < fields.length; i += 2) pairs.push([String(fields[i]), fields[i + 1]]);
  } else {
    pairs.push(...Object.entries(fields));
  }
  const values: Partial<Record<"approval_id" | "ticket", string>> = {};
  const issues: TicketIssue[] = [];
  for (const [field, value] of pairs) {
    if (field !== "approval_id" && field !== "ticket") issues.push({ path: field, message: "unexpected stream field" });
    else if (values[field] !== undefined) issues.push({ path: field, message: "duplicate stream field" });
    else if (typeof value !== "string") issues.push({ path: field, message: "expected a string" });
    else values[field] = value;
  }
  if (values.approval_id === undefined && !issues.some((i) => i.path === "approval_id")) {
    issues.push({ path: "approval_id", message: "missing approval_id field" });
  }
  return issues.length > 0 ? { ok: false, issues } : { ok: true, values };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function fail(issues: TicketIssue[]): DecodedTicket {
  return { ok: false, permanent: true, issues };
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

function toIso(value: Date | string): string {
  const date = typeof value === "string" ? new Date(value) : value;
  if (Number.isNaN(date.getTime())) throw new RangeError(`not a valid instant: ${String(value)}`);
  return date.toISOString();
}
