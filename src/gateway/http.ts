import type { IncomingMessage, ServerResponse } from "node:http";
import { APPROVAL_ID_HEADER, APPROVAL_TOKEN_HEADER, GATEWAY_JSONRPC, IDEMPOTENCY_KEY_HEADER, RESUME_PATH, type Gateway, type GatewayResponse } from "./gateway.js";
import { sha256Hex } from "../domain/canonical.js";
import { jsonTextProblem, MAX_JSON_DEPTH } from "../domain/text.js";
import { createMcpHandler, resumeTaskResult } from "./mcp.js";
import { RecentSet } from "../domain/recent-set.js";
import { inSpan } from "../infra/tracing.js";

/**
 * The gateway's HTTP surface, for node:http servers. `<toolsPath>` serves two clients: a request
 * whose Accept lists `text/event-stream` (every MCP Streamable HTTP client must send it) is
 * served by the MCP transport (src/gateway/mcp.ts: initialize, ping, tools/list, tools/call);
 * any other POST is the plain JSON-RPC `tools/call` with HTTP statuses (423 for a held call).
 * `GET <approvalsPath>/{id}` is the agent's status read; `POST /internal/v1/approvals/resume` is
 * the service-authenticated resume.
 *
 * Every route makes the same checks, in this order, before it reads a body:
 *   1. Origin: a request that carries an `Origin` not allowed is 403 (MCP 2025-11-25, Streamable
 *      HTTP, "Security Warning": a browser page must not reach a local or internal gateway).
 *   2. The rate: per virtual key once the key is known to be live, per client address before
 *      (429 with Retry-After).
 *   3. The credential: the virtual key (tools, status) or the service token (resume); without a
 *      valid one, 401 — the body of a stranger is never read.
 *   4. The body: at most `maxBodyBytes`, valid UTF-8, JSON, at most MAX_JSON_DEPTH deep, storable
 *      text (src/domain/text.ts), at most MAX_BATCH messages in a JSON-RPC batch.
 */
export type GatewayHttpOptions = {
  /** Where tools/call is served; null serves resume only. Default `/v1/mcp`. */
  toolsPath?: string | null;
  resumePath?: string;
  /**
   * Where the agent reads its requests: `GET <approvalsPath>/{approval_id}` with its virtual key.
   * Null serves none. Default `/v1/approvals`.
   */
  approvalsPath?: string | null;
  /** Request bodies above this are refused. Default 1 MiB. */
  maxBodyBytes?: number;
  /**
   * Origins (`scheme://host[:port]`) a browser page may call the gateway from. A request with an
   * `Origin` header naming any other (`null` included) is 403; one without the header (an agent,
   * not a browser) passes. Default: none.
   */
  allowedOrigins?: readonly string[];
  /** The request rate; default none (unlimited). Countersign passes its configured limiter. */
  rateLimit?: GatewayRateLimiter | null;
  /**
   * The client's address a request without a proven key is counted against. Default: the
   * socket's peer. Countersign passes its trusted-proxy resolver (X-Forwarded-For only from a
   * configured proxy), so a proxy's own address is never everyone's.
   */
  clientAddress?: (req: IncomingMessage) => string | undefined;
};

/** One request's turn: taken, or refused with the time until one is back. */
export type RateTake = { ok: true } | { ok: false; retryAfterMs: number };

/**
 * Where request allowances are counted, by key (`vkey:<sha256 of the key>`, `addr:<address>`).
 * In-process today (src/infra/token-buckets.ts's TokenBuckets); a shared store (Redis) fits the same
 * shape, which is why `take` may answer later.
 */
export interface GatewayRateLimiter {
  take(key: string): RateTake | Promise<RateTake>;
}

/** A JSON-RPC batch larger than this is refused whole (MCP 2025-06-18 and later send no batches at all). */
export const MAX_BATCH = 32;

/** JSON-RPC code of a request refused for its rate (HTTP 429, beside Retry-After). */
export const RATE_LIMITED_JSONRPC_CODE = -32011;
/** JSON-RPC code of a refused Origin: the SDK transport's own answer (-32000 on HTTP 403). */
export const ORIGIN_REFUSED_JSONRPC_CODE = -32000;

/** The credential a route takes (src/edge/http.ts's RouteCredential). */
export type GatewayRouteCredential = "virtual-key" | "service-token";

/** One of the gateway's routes, as Countersign's route table declares it (src/edge/http.ts's HttpRoute). */
export type GatewayRoute = {
  owner: "gateway";
  methods: readonly string[];
  path: string;
  prefix?: boolean;
  credential: GatewayRouteCredential;
  handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean>;
};

export type GatewayHttpHandler = (req: IncomingMessage, res: ServerResponse, url?: URL) => Promise<boolean>;

/** The gateway's routes: the tools endpoint, the agent's status read, resume. */
export function createGatewayRoutes(gateway: Gateway, options: GatewayHttpOptions = {}): GatewayRoute[] {
  const toolsPath = options.toolsPath === undefined ? "/v1/mcp" : options.toolsPath;
  const resumePath = options.resumePath ?? RESUME_PATH;
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const approvalsPrefix = options.approvalsPath === undefined ? "/v1/approvals/" : options.approvalsPath === null ? null : `${options.approvalsPath.replace(/\/+$/, "")}/`;
  const allowedOrigins = new Set(options.allowedOrigins ?? []);
  const limiter = options.rateLimit ?? null;
  const addressOf = options.clientAddress ?? ((req: IncomingMessage) => req.socket.remoteAddress);
  // Virtual-key hashes that proved live on this process in the last minute: a request with one is
  // counted against its key and its body is read without asking the database first (the call
  // itself still checks the key, so a revoked key is refused all the same).
  const known = new RecentSet();
  // admit() below checks the key before any body is read: the MCP handler need not again.
  const mcp = createMcpHandler(gateway, { keyCheckedByRoute: true });

  const header = (req: IncomingMessage, name: string) => {
    const value = req.headers[name];
    return Array.isArray(value) ? value[0] : value;
  };

  /** Origin, rate and credential, in that order; false when it answered (a refusal). */
  async function admit(req: IncomingMessage, res: ServerResponse, route: RouteKind): Promise<boolean> {
    const origin = header(req, "origin");
    if (origin !== undefined && !allowedOrigins.has(origin)) {
      return refusal(res, route, 403, "origin_not_allowed", `requests from the origin ${JSON.stringify(origin.slice(0, 200))} are not allowed`, {}, ORIGIN_REFUSED_JSONRPC_CODE);
    }
    const authorization = header(req, "authorization");
    if (route === "resume") {
      // The service's own calls are not limited: only a request without the token counts, per address.
      const service = gateway.authenticateService({ authorization });
      if (service === "ok") return true;
      if (!(await take(`addr:${addressOf(req) ?? "unknown"}`, res, route))) return false;
      if (service === "disabled") return refusal(res, route, 404, "resume_disabled", "this gateway has no service token configured");
      return refusal(res, route, 401, "service_unauthorized", "send the gateway service token as `Authorization: Bearer <token>`");
    }
    const presented = bearer(authorization);
    const keyHash = presented ? sha256Hex(presented) : null;
    const isKnown = keyHash !== null && known.has(keyHash);
    // A key counts against itself only once it proved live: inventing keys buys no fresh allowance.
    if (!(await take(isKnown ? `vkey:${keyHash}` : `addr:${addressOf(req) ?? "unknown"}`, res, route))) return false;
    if (isKnown) return true;
    if (keyHash === null || !(await gateway.authenticate({ authorization }))) {
      return refusal(res, route, 401, "unauthorized", "send a live virtual key as `Authorization: Bearer <key>`", { "www-authenticate": 'Bearer realm="countersign-gateway"' }, GATEWAY_JSONRPC.unauthorized);
    }
    known.remember(keyHash);
    return true;
  }

  async function take(key: string, res: ServerResponse, route: RouteKind): Promise<boolean> {
    if (!limiter) return true;
    const taken = await limiter.take(key);
    if (taken.ok) return true;
    const seconds = Math.max(1, Math.ceil(taken.retryAfterMs / 1000));
    return refusal(res, route, 429, "rate_limited", `too many requests; retry after ${seconds} s`, { "retry-after": String(seconds) }, RATE_LIMITED_JSONRPC_CODE, { retry_after_seconds: seconds });
  }

  /**
   * An admitted request in a server span of its own when traces are on, under which the upstream
   * call it makes is recorded; only the answer's status is recorded, and an answer from
   * `failedFrom` on marks the span failed. An agent's request is the root of its trace (an agent's
   * `traceparent` is not taken, docs/threats.md "Traces"); `parent` is given only for the service's
   * own call.
   */
  function servedSpan(name: string, res: ServerResponse, serve: () => Promise<void>, options: { parent?: string; failedFrom?: number } = {}): Promise<boolean> {
    const failedFrom = options.failedFrom ?? 500;
    return inSpan(name, { kind: "server", parent: options.parent }, async (span) => {
      await serve();
      span?.setAttributes({ "http.response.status_code": res.statusCode });
      if (res.statusCode >= failedFrom) span?.fail(`answered ${res.statusCode}`);
      return true;
    });
  }

  const routes: GatewayRoute[] = [];
  if (toolsPath !== null) {
    routes.push({
      owner: "gateway",
      // Stateless: no standalone stream to GET and no session to DELETE (the client expects 405).
      // A GET is served only as the resumption of a broken tasks/result stream (Last-Event-ID).
      methods: ["POST", "GET"],
      path: toolsPath,
      credential: "virtual-key",
      async handle(req, res) {
        if (req.method === "GET") {
          if (!req.headers["last-event-id"] || !gateway.tasks) {
            send(res, { status: 405, headers: { allow: "POST" }, body: { error: "method_not_allowed" } });
            return true;
          }
          if (!(await admit(req, res, "tools"))) return true;
          if (!(await resumeTaskResult(gateway, req, res))) send(res, { status: 405, headers: { allow: "POST" }, body: { error: "method_not_allowed" } });
          return true;
        }
        if (!(await admit(req, res, "tools"))) return true;
        return servedSpan("gateway tools", res, async () => {
          const body = await readJson(req, res, maxBodyBytes);
          if (!body.ok) return;
          if (/text\/event-stream/i.test(String(req.headers.accept ?? ""))) {
            await mcp(req, res, body.value);
            return;
          }
          send(
            res,
            await gateway.handleToolCall({
              authorization: header(req, "authorization"),
              approvalId: header(req, APPROVAL_ID_HEADER),
              approvalToken: header(req, APPROVAL_TOKEN_HEADER),
              idempotencyKey: header(req, IDEMPOTENCY_KEY_HEADER),
              body: body.value,
            }),
          );
        });
      },
    });
  }
  if (approvalsPrefix !== null) {
    routes.push({
      owner: "gateway",
      methods: ["GET", "HEAD"],
      path: approvalsPrefix,
      prefix: true,
      credential: "virtual-key",
      async handle(req, res, url) {
        if (!(await admit(req, res, "approvals"))) return true;
        return servedSpan("gateway approval status", res, async () => {
          let approvalId: string;
          try {
            approvalId = decodeURIComponent(url.pathname.slice(approvalsPrefix.length));
          } catch {
            approvalId = "";
          }
          send(res, await gateway.approvalStatus({ authorization: header(req, "authorization"), approvalId }));
        });
      },
    });
  }
  routes.push({
    owner: "gateway",
    methods: ["POST"],
    path: resumePath,
    credential: "service-token",
    async handle(req, res) {
      if (!(await admit(req, res, "resume"))) return true;
      // Only the service's own call gets this far, so only its traceparent is taken: the approval
      // delivery's span, under which the held call's execution and its upstream call are recorded.
      // A refused resume is a failed delivery: any 4xx marks the span.
      return servedSpan(
        "gateway resume",
        res,
        async () => {
          const body = await readJson(req, res, maxBodyBytes);
          if (body.ok) send(res, await gateway.resume({ authorization: header(req, "authorization"), body: body.value }));
        },
        { parent: header(req, "traceparent"), failedFrom: 400 },
      );
    },
  });
  return routes;
}

/**
 * The gateway's routes as one handler, for a server of its own: false for a path it does not
 * serve (so it composes with other routes), 405 for a method a route does not take, and a
 * handler's throw answered 500 rather than left to the server.
 */
export function createGatewayHttpHandler(gateway: Gateway, options: GatewayHttpOptions = {}): GatewayHttpHandler {
  const routes = createGatewayRoutes(gateway, options);
  return async (req, res, url = new URL(req.url ?? "/", "http://localhost")) => {
    const route = routes.find((r) => (r.prefix ? url.pathname.startsWith(r.path) : url.pathname === r.path));
    if (!route) return false;
    if (!route.methods.includes(req.method ?? "GET")) {
      send(res, { status: 405, headers: { allow: route.methods.join(", ") }, body: { error: "method_not_allowed" } });
      return true;
    }
    try {
      return await route.handle(req, res, url);
    } catch {
      if (!res.headersSent) send(res, { status: 500, headers: { connection: "close" }, body: { error: "internal_error" } });
      else res.destroy();
      return true;
    }
  };
}

type RouteKind = "tools" | "approvals" | "resume";

/**
 * A refusal before the body is read. The tools endpoint answers in JSON-RPC (an MCP client reads
 * the error from the body; the id is null, the request unread), the others in plain JSON.
 */
function refusal(res: ServerResponse, route: RouteKind, status: number, error: string, message: string, headers: Record<string, string> = {}, code: number = GATEWAY_JSONRPC.invalidRequest, data: Record<string, unknown> = {}): false {
  const body = route === "tools" ? { jsonrpc: "2.0", id: null, error: { code, message: `${error}: ${message}`, data: { error, ...data } } } : { error, message, ...data };
  send(res, { status, headers, body });
  return false;
}


function send(res: ServerResponse, response: GatewayResponse): void {
  res.writeHead(response.status, { "content-type": "application/json", "cache-control": "no-store", ...response.headers });
  res.end(JSON.stringify(response.body));
}

function bearer(header: string | null | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The body as JSON, or a typed 400/413 (`{"error": <code>, "message", ...}`) already answered.
 * Over the limit the rest of the body is read and discarded (never kept) so the client reads the 413.
 */
async function readJson(req: IncomingMessage, res: ServerResponse, limit: number): Promise<{ ok: true; value: unknown } | { ok: false }> {
  const refuse = (status: number, error: string, message: string, detail: Record<string, unknown> = {}) => {
    send(res, { status, headers: status === 413 ? { connection: "close" } : {}, body: { error, message, ...detail } });
    return { ok: false as const };
  };
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    return refuse(413, "payload_too_large", `the body is larger than ${limit} bytes`, { max_bytes: limit });
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const within = await new Promise<boolean>((resolve) => {
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off("data", onData);
        chunks.length = 0;
        req.resume();
        resolve(false);
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => resolve(true));
    // A client gone mid-body: nothing to answer.
    req.once("error", () => resolve(false));
    req.once("aborted", () => resolve(false));
  });
  if (!within) {
    if (req.destroyed) return { ok: false };
    return refuse(413, "payload_too_large", `the body is larger than ${limit} bytes`, { max_bytes: limit });
  }
  let text: string;
  try {
    text = utf8.decode(Buffer.concat(chunks, size));
  } catch {
    return refuse(400, "invalid_utf8", "the body is not valid UTF-8");
  }
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    return refuse(400, "invalid_json", "the body is not JSON");
  }
  // A batch too large is refused before its members are walked (5,000 of them: ~2.4 ms).
  if (Array.isArray(value) && value.length > MAX_BATCH) {
    return refuse(400, "batch_too_large", `a JSON-RPC batch holds at most ${MAX_BATCH} messages`, { max_batch: MAX_BATCH });
  }
  // The one storable-text rule (src/domain/text.ts), depth included: a held call must be
  // storable as jsonb, and nothing downstream walks a value nested past MAX_JSON_DEPTH.
  const found = jsonTextProblem(value);
  if (found) {
    const error = found.problem.code === "too_deep" ? "too_deep" : "unstorable_text";
    return refuse(400, error, found.problem.message, { path: found.path.slice(0, MAX_JSON_DEPTH).join("."), ...(error === "too_deep" ? { max_depth: MAX_JSON_DEPTH } : {}) });
  }
  return { ok: true, value };
}
