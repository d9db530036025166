import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Protocol } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  McpError,
  type CallToolResult,
  type ClientCapabilities,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { pipeline, Readable, Transform } from "node:stream";
import type { OutboundPolicy } from "../domain/address-policy.js";
import { openConnectionCredential } from "./connection-credential.js";
import { isNetworkFailure, networkFailure, outboundConnectOptions } from "./outbound.js";
import { inSpan, injectTraceContext, tracingActive } from "../infra/tracing.js";

/**
 * The gateway's side of its upstreams: every connection is a real MCP server on the Streamable
 * HTTP transport. One connected SDK `Client` per connection is kept and reused (no `initialize`
 * per call), together with its tools list; both are dropped when the connection's url,
 * credential or `updatedAt` change, and the client is reconnected after a transport failure.
 *
 * A call is two-way: the upstream may answer it as an SSE stream that carries, before the result,
 * its progress, its log messages and requests of its own (ping, elicitation, sampling, roots).
 * Each call runs on a client of its own over the session's transport settings (no second
 * `initialize`), whose POST answer is read as it arrives: ping is answered at once, progress and
 * log messages go to the caller's `CallChannel`, and elicitation, sampling and roots are relayed
 * to the caller when the caller declared that capability — otherwise, and when no caller is
 * attached (an approved call executed by the delivery worker), they are answered at once with
 * JSON-RPC -32601, so a call never waits on a question nobody will answer. The upstream's session
 * is per set of caller capabilities: an upstream sees exactly what its caller can answer.
 */

/** The capabilities a caller declared that the gateway relays (its `initialize` capabilities). */
export type RelayCapabilities = Pick<ClientCapabilities, "elicitation" | "sampling" | "roots">;

/** A JSON-RPC message without its `jsonrpc` and `id`: what goes on the caller's stream. */
export type RelayMessage = { method: string; params?: Record<string, unknown> | undefined };

/**
 * The caller's side of one call: where the upstream's progress, log messages and requests go.
 * `request` resolves with the caller's result, or rejects with an McpError (the caller's own
 * JSON-RPC error, or the gateway's when the caller went away or did not answer in time).
 */
export type CallChannel = {
  capabilities: RelayCapabilities;
  /** The caller's `_meta.progressToken`: upstream progress is relayed under this token, and only when there is one. */
  progressToken?: string | number | undefined;
  notify(message: RelayMessage): void;
  request(message: RelayMessage, signal: AbortSignal): Promise<Record<string, unknown>>;
};

/** The longest a relayed request (an elicitation a person answers) may wait for the caller. */
export const RELAY_ANSWER_TIMEOUT_MS = 10 * 60_000;

export const DEFAULT_UPSTREAM_TIMEOUT_MS = 10_000;
const MISSING_TOOL_REREAD_MS = 5_000;

/** What the gateway needs of a connection to reach its upstream. */
export type UpstreamConnection = {
  id: string;
  url: string | null;
  /** `sealConnectionCredential(approvalSecret, <Authorization header value>)`, or null. */
  credentialSealed: string | null;
  timeoutMs: number | null;
  /** Any change to the row (ISO string or Date) retires the cached client and tools list. */
  updatedAt: Date | string;
};

export type UpstreamErrorCode =
  /** The connection has no url. */
  | "upstream_not_configured"
  /** Unreachable, refused the connection, answered a transport error, or its credential cannot be opened. */
  | "upstream_unavailable"
  /** No answer within the connection's timeout. */
  | "upstream_timeout"
  /** The upstream answered a JSON-RPC error of its own (its code is kept, never its message). */
  | "upstream_error";

export class UpstreamError extends Error {
  constructor(
    readonly code: UpstreamErrorCode,
    message: string,
    /** The upstream's own JSON-RPC error code, for `upstream_error`. */
    readonly upstreamCode?: number,
  ) {
    super(message);
    this.name = "UpstreamError";
  }
}

export type UpstreamTool = Pick<Tool, "name" | "description" | "inputSchema" | "outputSchema" | "annotations" | "title">;

export type UpstreamPoolOptions = {
  /** Opens the sealed credential. Without one, a connection with a credential is unavailable. */
  approvalSecret?: string | undefined;
  /** For connections without their own timeoutMs. Default 10 s. */
  defaultTimeoutMs?: number;
  /** How long a tools list is trusted before it is read again. Default 60 s. */
  toolsTtlMs?: number;
  /**
   * Which addresses an upstream may have (src/domain/address-policy.ts). Default: public only
   * (the operator's COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE is passed here).
   */
  addresses?: OutboundPolicy;
  /**
   * The fetch the transports use. Default `createUpstreamFetch(addresses)`; the embedded default
   * wraps that one to reach its in-process demo upstream. A replacement must apply the policy.
   */
  fetch?: typeof fetch;
  clientInfo?: { name: string; version: string };
};

export type UpstreamPool = {
  /** The upstream's tools (cached). Throws UpstreamError. */
  tools(connection: UpstreamConnection): Promise<UpstreamTool[]>;
  /** One tool by its upstream name, or null when the upstream does not serve it (the list is read again once first). */
  tool(connection: UpstreamConnection, name: string): Promise<UpstreamTool | null>;
  /**
   * `tools/call` on the upstream. A result with `isError` is a result, not an error. Throws
   * UpstreamError. `channel` is the caller's stream; without one, the upstream's requests other
   * than ping are answered -32601. The connection's timeout is the longest the upstream may stay
   * silent (every message it sends restarts it; it stops while the caller answers a relayed request).
   */
  call(connection: UpstreamConnection, name: string, args: Record<string, unknown>, channel?: CallChannel | null): Promise<CallToolResult>;
  /** A round trip to the upstream now (MCP `ping`). Throws UpstreamError. */
  ping(connection: UpstreamConnection): Promise<void>;
  /** Drops the cached client and tools list of one connection. */
  forget(connectionId: string): void;
  close(): Promise<void>;
};

type Entry = {
  version: string;
  /** The session's client per set of caller capabilities (`capabilitySignature`); "" is none. */
  clients: Map<string, Promise<Client>>;
  tools: { at: number; list: UpstreamTool[]; byName: Map<string, UpstreamTool> } | null;
  loading: Promise<UpstreamTool[]> | null;
};

export function createUpstreamPool(options: UpstreamPoolOptions = {}): UpstreamPool {
  const defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS;
  const toolsTtlMs = options.toolsTtlMs ?? 60_000;
  const clientInfo = options.clientInfo ?? { name: "countersign-gateway", version: "1.0.0" };
  const entries = new Map<string, Entry>();
  const transportFetch = tracedFetch(options.fetch ?? createUpstreamFetch(options.addresses ?? { allowPrivate: false }));

  const versionOf = (c: UpstreamConnection) => `${c.url ?? ""}\n${c.credentialSealed ?? ""}\n${c.updatedAt instanceof Date ? c.updatedAt.toISOString() : String(c.updatedAt)}`;
  const timeoutOf = (c: UpstreamConnection) => (c.timeoutMs && c.timeoutMs > 0 ? c.timeoutMs : defaultTimeoutMs);

  function entryOf(c: UpstreamConnection): Entry {
    const version = versionOf(c);
    const existing = entries.get(c.id);
    if (existing && existing.version === version) return existing;
    if (existing) retire(existing);
    const entry: Entry = { version, clients: new Map(), tools: null, loading: null };
    entries.set(c.id, entry);
    return entry;
  }

  function retire(entry: Entry): void {
    const clients = [...entry.clients.values()];
    entry.clients.clear();
    entry.tools = null;
    for (const client of clients) client.then((cl) => cl.close()).catch(() => {});
  }

  function headersOf(c: UpstreamConnection): Record<string, string> {
    if (!c.credentialSealed) return {};
    const credential = options.approvalSecret ? openConnectionCredential(options.approvalSecret, c.credentialSealed) : null;
    // A credential that cannot be opened is never replaced by none: the upstream is unavailable.
    if (credential === null) throw new UpstreamError("upstream_unavailable", "the connection's credential cannot be opened with this gateway's secret");
    return { authorization: credential };
  }

  function connect(c: UpstreamConnection, entry: Entry, capabilities: RelayCapabilities): Promise<Client> {
    const signature = capabilitySignature(capabilities);
    const existing = entry.clients.get(signature);
    if (existing) return existing;
    if (!c.url) return Promise.reject(new UpstreamError("upstream_not_configured", "the connection has no upstream url"));
    let url: URL;
    try {
      url = new URL(c.url);
    } catch {
      return Promise.reject(new UpstreamError("upstream_not_configured", "the connection's upstream url is not a URL"));
    }
    const attempt = (async () => {
      const transport = new StreamableHTTPClientTransport(url, {
        requestInit: { headers: headersOf(c) },
        fetch: transportFetch,
        // A stateless upstream has no standalone stream to resume; never retry in the background.
        reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1_000, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1 },
      });
      // The caller's capabilities, as the upstream's session sees them: an upstream asks only
      // what its caller can answer (and one that asks anyway is answered -32601).
      const client = new Client(clientInfo, { capabilities: sessionCapabilities(capabilities) });
      client.onerror = () => {}; // failures surface on the request that met them
      try {
        await client.connect(transport, { timeout: timeoutOf(c) });
      } catch (error) {
        await client.close().catch(() => {});
        throw toUpstreamError(error, "connect");
      }
      client.onclose = () => {
        if (entry.clients.get(signature) === attempt) entry.clients.delete(signature);
      };
      return client;
    })();
    entry.clients.set(signature, attempt);
    // A failed connect is not cached: the next request tries again.
    attempt.catch(() => {
      if (entry.clients.get(signature) === attempt) entry.clients.delete(signature);
    });
    return attempt;
  }

  /**
   * Runs one request on the connection's client; a transport failure drops the client. A 404 on
   * a client that has a session is the upstream having forgotten it (it restarted): the request
   * was not processed, so it is sent once more on a new session. Nothing else is retried: a call
   * that may have reached the upstream is never sent twice.
   */
  async function withClient<T>(c: UpstreamConnection, run: (client: Client, timeout: number) => Promise<T>, capabilities: RelayCapabilities = {}): Promise<T> {
    const entry = entryOf(c);
    const signature = capabilitySignature(capabilities);
    for (let attempt = 0; ; attempt++) {
      // The session is up (initialize answered, initialized sent) before any call is sent on it.
      const client = await connect(c, entry, capabilities);
      try {
        return await run(client, timeoutOf(c));
      } catch (error) {
        const mapped = toUpstreamError(error, "request");
        const stale = entry.clients.get(signature);
        if (mapped.code !== "upstream_error" && stale) {
          entry.clients.delete(signature);
          stale.then((cl) => cl.close()).catch(() => {});
        }
        const sessionLost = error instanceof StreamableHTTPError && error.code === 404 && sessionOf(client) !== undefined;
        if (sessionLost && attempt === 0) continue;
        throw mapped;
      }
    }
  }

  async function loadTools(c: UpstreamConnection, entry: Entry): Promise<UpstreamTool[]> {
    if (entry.loading) return entry.loading;
    const loading = withClient(c, async (client, timeout) => {
      const list: UpstreamTool[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 100; page++) {
        const answer = await client.listTools(cursor ? { cursor } : undefined, { timeout });
        for (const t of answer.tools) list.push({ name: t.name, description: t.description, inputSchema: t.inputSchema, outputSchema: t.outputSchema, annotations: t.annotations, title: t.title });
        cursor = answer.nextCursor;
        if (!cursor) break;
      }
      if (entries.get(c.id) === entry) entry.tools = { at: Date.now(), list, byName: new Map(list.map((t) => [t.name, t])) };
      return list;
    }).finally(() => {
      entry.loading = null;
    });
    entry.loading = loading;
    return loading;
  }

  /** Call clients between calls, per session client (a replaced session drops its own). */
  const idleCallClients = new WeakMap<Client, CallClient[]>();

  /** A client for calls on `session`'s settings: its session id and protocol version, no second initialize. */
  async function callClientFor(session: Client, c: UpstreamConnection): Promise<CallClient> {
    const idle = idleCallClients.get(session)?.pop();
    if (idle) return idle;
    const shared = session.transport instanceof StreamableHTTPClientTransport ? session.transport : null;
    const transport = new StreamableHTTPClientTransport(new URL(c.url!), {
      requestInit: { headers: headersOf(c) },
      fetch: transportFetch,
      ...(shared?.sessionId ? { sessionId: shared.sessionId } : {}),
      // An upstream that closes the call's stream early (SSE polling) is read again from its last event.
      reconnectionOptions: { maxRetries: 2, initialReconnectionDelay: 1_000, maxReconnectionDelay: 5_000, reconnectionDelayGrowFactor: 2 },
    });
    if (shared?.protocolVersion) transport.setProtocolVersion(shared.protocolVersion);
    const client = new CallClient(clientInfo, { capabilities: ANSWERABLE });
    client.onerror = () => {};
    const relay = (method: string, capable: (caps: RelayCapabilities) => boolean) => async (request: { params?: Record<string, unknown> }, extra: { signal: AbortSignal }) => {
      const call = client.current;
      const channel = call?.channel ?? null;
      if (!call || !channel || !capable(channel.capabilities)) {
        throw new McpError(ErrorCode.MethodNotFound, channel ? `the client did not declare the capability ${method} needs` : `no client is attached to this call to answer ${method}`);
      }
      call.pending++;
      call.arm();
      const signal = AbortSignal.any([extra.signal, call.aborter.signal, AbortSignal.timeout(RELAY_ANSWER_TIMEOUT_MS)]);
      try {
        return await channel.request({ method, params: request.params }, signal);
      } finally {
        call.pending--;
        call.arm();
      }
    };
    client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
      const mode = request.params.mode ?? "form";
      const declared = (caps: RelayCapabilities) => caps.elicitation !== undefined && (mode === "url" ? caps.elicitation.url !== undefined : caps.elicitation.form !== undefined || caps.elicitation.url === undefined);
      const caps = client.current?.channel?.capabilities;
      if (caps?.elicitation !== undefined && !declared(caps)) throw new McpError(ErrorCode.InvalidParams, `the client does not support ${mode}-mode elicitation`);
      return (await relay("elicitation/create", declared)(request, extra)) as never;
    });
    client.setRequestHandler(CreateMessageRequestSchema, async (request, extra) => (await relay("sampling/createMessage", (caps) => caps.sampling !== undefined)(request, extra)) as never);
    client.setRequestHandler(ListRootsRequestSchema, async (request, extra) => (await relay("roots/list", (caps) => caps.roots !== undefined)(request, extra)) as never);
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => client.current?.channel?.notify({ method: n.method, params: n.params }));
    await client.connect(transport);
    const onmessage = transport.onmessage;
    transport.onmessage = (message) => {
      client.current?.arm(); // the upstream is alive: its silence is timed from its last message
      onmessage?.(message);
    };
    return client;
  }

  /**
   * One tools/call on a call client of its own, so that what the upstream sends on the call's
   * stream belongs to this call and to no other. A client whose call ended cleanly serves the
   * next call on the same session.
   */
  async function callOnce(session: Client, c: UpstreamConnection, name: string, args: Record<string, unknown>, channel: CallChannel | null, timeout: number): Promise<CallToolResult> {
    const client = await callClientFor(session, c);
    const aborter = new AbortController();
    const call: CallState = {
      channel,
      aborter,
      pending: 0,
      timer: undefined,
      arm() {
        clearTimeout(call.timer);
        call.timer = call.pending === 0 ? setTimeout(() => aborter.abort(new McpError(ErrorCode.RequestTimeout, "the upstream did not answer in time")), timeout) : undefined;
      },
    };
    client.current = call;
    call.arm();
    let clean = false;
    try {
      const token = channel?.progressToken;
      const onprogress =
        token === undefined
          ? undefined
          : (p: { progress: number; total?: number; message?: string }) =>
              channel!.notify({ method: "notifications/progress", params: { progressToken: token, progress: p.progress, ...(p.total !== undefined ? { total: p.total } : {}), ...(p.message !== undefined ? { message: p.message } : {}) } });
      // The silence timer above is the call's timeout; the SDK's own is only a backstop.
      const result = (await client.callTool({ name, arguments: args }, undefined, { signal: aborter.signal, timeout: 24 * 3_600_000, ...(onprogress ? { onprogress } : {}) })) as CallToolResult;
      clean = true;
      return result;
    } finally {
      clearTimeout(call.timer);
      client.current = null;
      const idle = idleCallClients.get(session) ?? [];
      if (clean && call.pending === 0 && idle.length < MAX_IDLE_CALL_CLIENTS) {
        idle.push(client);
        idleCallClients.set(session, idle);
      } else await client.close().catch(() => {});
    }
  }

  const fresh = (entry: Entry) => entry.tools !== null && Date.now() - entry.tools.at < toolsTtlMs;

  return {
    async tools(c) {
      const entry = entryOf(c);
      if (fresh(entry)) return entry.tools!.list;
      return loadTools(c, entry);
    },
    async tool(c, name) {
      const entry = entryOf(c);
      if (fresh(entry)) {
        const hit = entry.tools!.byName.get(name);
        if (hit) return hit;
      }
      // Stale, or missing from a list older than a few seconds: read it again (the upstream may
      // have added the tool since). A name missing from a list just read is unknown, without
      // another read: unknown names never turn into a stream of reads of the upstream.
      if (fresh(entry) && Date.now() - entry.tools!.at < MISSING_TOOL_REREAD_MS) return null;
      await loadTools(c, entry);
      return entry.tools?.byName.get(name) ?? null;
    },
    async call(c, name, args, channel) {
      return withClient(c, (session, timeout) => callOnce(session, c, name, args, channel ?? null, timeout), channel?.capabilities ?? {});
    },
    async ping(c) {
      await withClient(c, (client, timeout) => client.ping({ timeout }));
    },
    forget(connectionId) {
      const entry = entries.get(connectionId);
      if (entry) retire(entry);
      entries.delete(connectionId);
    },
    async close() {
      const all = [...entries.values()];
      entries.clear();
      await Promise.all(all.flatMap((e) => [...e.clients.values()].map(async (client) => (await client.catch(() => null))?.close().catch(() => {}))));
    },
  };
}

/** What the gateway's per-call client answers (it relays or refuses each itself). */
const ANSWERABLE: ClientCapabilities = { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} };

/** One call's state, where its call client's handlers find it. */
type CallState = { channel: CallChannel | null; aborter: AbortController; pending: number; timer: NodeJS.Timeout | undefined; arm(): void };

/** Call clients kept between calls, per upstream session. */
const MAX_IDLE_CALL_CLIENTS = 16;

/** A client for calls on an existing session: it connects without a second `initialize`. */
class CallClient extends Client {
  current: CallState | null = null;

  override async connect(transport: Transport): Promise<void> {
    await (Protocol.prototype.connect as (this: unknown, t: Transport) => Promise<void>).call(this, transport);
  }
}

/** The upstream session's capabilities for a caller's: only what the gateway can relay. */
function sessionCapabilities(c: RelayCapabilities): ClientCapabilities {
  return {
    ...(c.elicitation !== undefined ? { elicitation: c.elicitation } : {}),
    ...(c.sampling !== undefined ? { sampling: c.sampling } : {}),
    ...(c.roots !== undefined ? { roots: c.roots } : {}),
  };
}

/** One string per set of capabilities (the key of the upstream session that carries them). */
export function capabilitySignature(c: RelayCapabilities): string {
  const e = c.elicitation;
  return [
    e !== undefined ? `e${e.form !== undefined || e.url === undefined ? "f" : ""}${e.url !== undefined ? "u" : ""}` : "",
    c.sampling !== undefined ? `s${c.sampling.tools !== undefined ? "t" : ""}${c.sampling.context !== undefined ? "c" : ""}` : "",
    c.roots !== undefined ? `r${c.roots.listChanged ? "l" : ""}` : "",
  ].join("");
}

function sessionOf(client: Client): string | undefined {
  const transport = client.transport;
  return transport instanceof StreamableHTTPClientTransport ? transport.sessionId : undefined;
}

/**
 * What failed, in the gateway's words: never what the upstream answered (no body, no JSON key,
 * no message of its own, no socket error text). A URL pointed at something that is not an MCP
 * server learns nothing about it beyond "not an MCP server" (docs/threats.md).
 */
function toUpstreamError(error: unknown, phase: "connect" | "request"): UpstreamError {
  if (error instanceof UpstreamError) return error;
  if (error instanceof McpError) {
    if (error.code === ErrorCode.RequestTimeout) return new UpstreamError("upstream_timeout", "the upstream did not answer in time");
    if (error.code === ErrorCode.ConnectionClosed) return new UpstreamError("upstream_unavailable", "the upstream closed the connection");
    if (phase === "connect") return new UpstreamError("upstream_unavailable", "the upstream is not an MCP server (it refused initialize)");
    return new UpstreamError("upstream_error", `the upstream answered JSON-RPC error ${error.code}`, error.code);
  }
  if (error instanceof StreamableHTTPError) {
    const status = error.code ?? -1;
    if (status >= 300 && status < 400) return new UpstreamError("upstream_unavailable", "the upstream answered a redirect, which is not followed");
    if (status === 401 || status === 403) return new UpstreamError("upstream_unavailable", `the upstream refused the credential (HTTP ${status})`);
    if (status >= 400 && status < 600) return new UpstreamError("upstream_unavailable", `the upstream answered HTTP ${Math.floor(status / 100)}xx`);
    return new UpstreamError("upstream_unavailable", "the upstream is not an MCP server (its answer is not MCP)");
  }
  if (isNetworkFailure(error)) return new UpstreamError("upstream_unavailable", networkFailure(error, "the upstream"));
  // A parse or schema failure of the answer, an unsupported protocol version: not MCP.
  return new UpstreamError("upstream_unavailable", "the upstream is not an MCP server (its answer is not MCP)");
}

// ─── destructive ─────────────────────────────────────────────────────────────────────────────

export type DestructiveSource = "override" | "annotation" | "fallback";

/**
 * Whether a call of an upstream tool is destructive (the gate holds destructive calls in
 * production), in this order:
 * 1. the connection's override for the tool, set by an admin;
 * 2. the upstream's annotations: `readOnlyHint: true` is not destructive; otherwise an explicit
 *    `destructiveHint` decides; `readOnlyHint: false` alone is destructive (MCP's default for
 *    `destructiveHint`);
 * 3. fallback, for a tool with neither hint: destructive (MCP's defaults, and fail closed). An
 *    admin override is how such a tool is marked safe.
 */
export function classifyTool(tool: Pick<UpstreamTool, "annotations"> | null, override: boolean | null): { destructive: boolean; source: DestructiveSource } {
  if (override !== null) return { destructive: override, source: "override" };
  const a = tool?.annotations;
  if (a?.readOnlyHint === true) return { destructive: false, source: "annotation" };
  if (typeof a?.destructiveHint === "boolean") return { destructive: a.destructiveHint, source: "annotation" };
  if (a?.readOnlyHint === false) return { destructive: true, source: "annotation" };
  return { destructive: true, source: "fallback" };
}

// ─── the transport's fetch ─────────────────────────────────────────────────────────────────────

const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 64 });
const httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 64 });

const CHECKED_ADDRESSES_TTL_MS = 10_000;

/** An answer larger than this is refused, not buffered: an upstream cannot fill the gateway's memory. */
export const MAX_UPSTREAM_ANSWER_BYTES = 16 * 1024 * 1024;

/**
 * The upstream transports' fetch, under the outbound address policy: every request (the POSTs,
 * the standalone GET stream, DELETE) goes over node:http to an address checked when it connects
 * (src/gateway/outbound.ts), and no redirect is followed here (the SDK follows one only within
 * the URL's origin, through this same fetch, so each hop is checked again). A POST's JSON answer
 * is read whole on a keep-alive agent, which costs a fraction of undici's fetch on the hot path;
 * an SSE answer (a POST's or a GET's) is handed on as it arrives: the upstream may ask something
 * on it (ping, elicitation) and wait for the answer before it finishes. Either is refused past
 * MAX_UPSTREAM_ANSWER_BYTES.
 */
export function createUpstreamFetch(policy: OutboundPolicy): typeof fetch {
  // A host's checked addresses are reused for a few seconds (the hot path does not resolve per
  // call); reusing them is safe, as the socket still goes only to addresses that were checked.
  const checked = new Map<string, { at: number; lookup: LookupFunction }>();
  const connectOptions = async (url: URL) => {
    const hit = checked.get(url.hostname);
    if (hit && Date.now() - hit.at < CHECKED_ADDRESSES_TTL_MS) return hit;
    const { lookup } = await outboundConnectOptions(url, policy);
    if (checked.size > 1_000) checked.clear();
    const entry = { at: Date.now(), lookup };
    checked.set(url.hostname, entry);
    return entry;
  };
  return async (input, init) => {
    const method = (init?.method ?? "GET").toUpperCase();
    const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new UpstreamError("upstream_not_configured", "the connection's upstream url is not http(s)");
    const headers: Record<string, string> = {};
    const given = init?.headers;
    (given instanceof Headers ? given : new Headers(given)).forEach((value, name) => (headers[name] = value));
    const body = typeof init?.body === "string" ? init.body : init?.body == null ? "" : null;
    if (body === null) throw new TypeError("the upstream fetch sends string bodies only");
    if (body !== "" || method === "POST") headers["content-length"] = String(Buffer.byteLength(body));
    const signal = init?.signal ?? undefined;
    const aborted = () => (signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
    if (signal?.aborted) throw aborted();
    const { lookup } = await connectOptions(url);
    return new Promise<Response>((resolve, reject) => {
      const secure = url.protocol === "https:";
      const req = (secure ? httpsRequest : httpRequest)(url, { method, headers, lookup, agent: secure ? httpsAgent : httpAgent }, (res) => {
        const status = res.statusCode ?? 502;
        const empty = status === 204 || status === 304 || method === "HEAD";
        if (method !== "POST" || /^\s*text\/event-stream/i.test(String(res.headers["content-type"] ?? ""))) {
          if (empty) {
            res.resume();
            resolve(new Response(null, { status, headers: responseHeaders(res.headers) }));
            return;
          }
          let size = 0;
          const capped = new Transform({
            transform(chunk: Buffer, _encoding, done) {
              size += chunk.length;
              if (size > MAX_UPSTREAM_ANSWER_BYTES) done(new UpstreamError("upstream_unavailable", "the upstream's answer is too large"));
              else done(null, chunk);
            },
          });
          pipeline(res, capped, () => {});
          resolve(new Response(Readable.toWeb(capped) as ReadableStream<Uint8Array>, { status, headers: responseHeaders(res.headers) }));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (c: Buffer) => {
          size += c.length;
          if (size > MAX_UPSTREAM_ANSWER_BYTES) {
            res.destroy();
            reject(new UpstreamError("upstream_unavailable", "the upstream's answer is too large"));
          } else chunks.push(c);
        });
        res.on("error", reject);
        res.on("end", () => {
          const payload = empty || chunks.length === 0 ? null : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
          resolve(bufferedResponse(url, status, res.headers, payload));
        });
      });
      const onAbort = () => req.destroy(aborted());
      signal?.addEventListener("abort", onAbort, { once: true });
      req.on("close", () => signal?.removeEventListener("abort", onAbort));
      req.on("error", reject);
      req.end(body);
    });
  };
}

/**
 * Traces on: a span per request to an upstream (its method, host and status, never the URL's
 * path or query, which may carry a credential) and the W3C traceparent sent with it, so the
 * upstream's own spans join the trace. Off: the fetch as it is.
 */
function tracedFetch(base: typeof fetch): typeof fetch {
  if (!tracingActive()) return base;
  return (input, init) => {
    const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url);
    const method = (init?.method ?? "GET").toUpperCase();
    const attributes = { "http.request.method": method, "server.address": url.hostname, "server.port": Number(url.port || (url.protocol === "https:" ? 443 : 80)) };
    return inSpan(`mcp upstream ${method}`, { kind: "client", attributes }, async (span) => {
      const headers: Record<string, string> = {};
      new Headers(init?.headers).forEach((value, name) => (headers[name] = value));
      injectTraceContext(headers);
      const response = await base(input, { ...init, headers });
      span?.setAttributes({ "http.response.status_code": response.status });
      if (response.status >= 400) span?.fail(`HTTP ${response.status}`);
      return response;
    });
  };
}

/**
 * A POST's answer read whole, as the SDK's transport reads a Response (status, ok, headers.get,
 * json, text, body?.cancel, url): no WHATWG Response, Headers or body stream is built for it, which
 * was most of the gateway's cost of reading an upstream's JSON answer. Anything else a caller
 * asks of it is absent; it is a Response only as far as the transport's use goes.
 */
function bufferedResponse(url: URL, status: number, raw: IncomingHttpHeaders, payload: Buffer | null): Response {
  let used = false;
  const read = (): string => {
    if (used) throw new TypeError("Body is unusable: Body has already been read");
    used = true;
    return payload === null ? "" : payload.toString("utf8");
  };
  const headers = {
    get(name: string): string | null {
      const value = raw[name.toLowerCase()];
      return value === undefined ? null : Array.isArray(value) ? value.join(", ") : String(value);
    },
    has: (name: string) => raw[name.toLowerCase()] !== undefined,
    forEach: (fn: (value: string, name: string) => void) => responseHeaders(raw).forEach(fn),
  };
  const response = {
    status,
    ok: status >= 200 && status < 300,
    statusText: "",
    redirected: false,
    type: "basic",
    url: url.href,
    headers,
    body: null,
    get bodyUsed() {
      return used;
    },
    text: async () => read(),
    json: async (): Promise<unknown> => JSON.parse(read()),
    arrayBuffer: async () => {
      read();
      return payload === null ? new ArrayBuffer(0) : payload.buffer.slice(payload.byteOffset, payload.byteOffset + payload.byteLength);
    },
  };
  return response as unknown as Response;
}

function responseHeaders(raw: IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  return headers;
}
