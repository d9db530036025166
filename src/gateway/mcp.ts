import { createHash, randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListTasksRequestSchema,
  ListToolsRequestSchema,
  McpError,
  SetLevelRequestSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
  type CallToolResult,
  type CancelTaskResult,
  type GetTaskResult,
  type ListTasksResult,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { type AnswerRelay, APPROVAL_ID_HEADER, APPROVAL_TOKEN_HEADER, GATEWAY_JSONRPC, IDEMPOTENCY_KEY_HEADER, type Gateway, type RpcAnswer } from "./gateway.js";
import { TASKS_CAPABILITY } from "./tasks.js";
import { capabilitySignature, type CallChannel, type RelayCapabilities, type RelayMessage } from "./upstream.js";

/**
 * The gateway on the MCP Streamable HTTP transport (the SDK's own server transport, stateless:
 * one transport and one low-level `Server` per HTTP request, nothing kept between requests). It serves
 * `initialize`, `ping`, `tools/list` and `tools/call`, and accepts the client's notifications.
 *
 * Every answer the gateway gives a `tools/call` is a JSON-RPC answer on HTTP 200 here: the
 * transport (and the SDK's client) treat any other status as a transport failure, so a held call
 * is the JSON-RPC error -32003 `approval_required` with its data (docs/held-tool-calls.md). The
 * plain JSON-RPC POST beside it keeps the HTTP statuses (423 and the rest).
 *
 * A tools/call is answered JSON unless its upstream talks during the call: then the answer turns
 * into an SSE stream at the upstream's first progress, log message or request, carries those
 * (progress under the caller's own progress token; requests under ids of the gateway's own), and
 * ends with the result. The client answers a relayed request by POSTing its JSON-RPC response
 * here, with the same virtual key (202). What a client can answer is what it declared at
 * `initialize`: the gateway keeps no session state, so the session id it hands out carries those
 * capabilities (`cs1.<capabilities>.<uuid>`); a request without a session id is a client that
 * declared nothing (its upstream's requests are answered -32601), and an id the gateway did not
 * mint is 404 (the client initializes again).
 *
 * A single `tools/call` request (what an agent sends most) is answered without building a
 * Server: the same checks the transport makes (Accept, Content-Type, MCP-Protocol-Version) and
 * the same JSON answer; every other message goes through the SDK's Server and transport.
 *
 * Before this handler runs, src/gateway/http.ts has checked the request's Origin (403), its rate
 * (429 with Retry-After: MCP Streamable HTTP is HTTP, and the SDK's client surfaces any non-2xx
 * as a StreamableHTTPError carrying the status) and its virtual key (401, before the body is
 * read), for the fast path and the transport alike; it passes `keyCheckedByRoute`, so
 * initialize, ping and notifications are not checked twice. The authority stays with the
 * gateway: `tools/call` reads the key in the same database round trip as its route, and
 * `tools/list` reads it once itself (a key revoked since is the JSON-RPC error -32001
 * `unauthorized`). Mounted alone, the handler authenticates every other message first.
 *
 * With `gateway.tasks` (src/gateway/tasks.ts) it advertises `capabilities.tasks` and serves held
 * calls as MCP tasks: a `tools/call` with `params.task` answers a task for what the gateway holds,
 * and `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel` read and withdraw the key's own.
 */
const callParams = z.object({ name: z.string(), arguments: z.record(z.string(), z.unknown()).optional() });

export type McpHandler = (req: IncomingMessage, res: ServerResponse, body: unknown) => Promise<void>;

export type McpHandlerOptions = {
  serverInfo?: { name: string; version: string };
  instructions?: string;
  /**
   * The gateway's route (src/gateway/http.ts) checked the virtual key before it read the body:
   * initialize, ping and notifications are then served without reading the key again. Unset (an
   * embedder mounting the handler alone), every message is authenticated here first.
   */
  keyCheckedByRoute?: boolean;
};

export function createMcpHandler(gateway: Gateway, options: McpHandlerOptions = {}): McpHandler {
  const waiting = new Waiting(gateway.answers);
  const serverInfo = options.serverInfo ?? { name: "countersign-gateway", version: "1.0.0" };
  const instructions =
    options.instructions ??
    "Tools are namespaced by connection (`<connection>.<tool>`). A destructive call in production may be held for human approval: call a tool marked execution.taskSupport as an MCP task and read its result with tasks/result once approved; without a task, the error -32003 approval_required carries approval_id, tool, expires_at and inbox_url, and the identical call is re-issued with x-obol-approval-id and x-obol-approval-token once approved.";

  return async (req, res, body) => {
    const header = (name: string) => {
      const value = req.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const authorization = header("authorization");
    const sessionId = header("mcp-session-id");
    const declared = sessionId === undefined ? {} : capabilitiesOfSession(sessionId);
    if (declared === null) {
      // Not a session this gateway minted (or from an older format): the client starts a new one.
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }));
      return;
    }
    const messages = Array.isArray(body) ? (body as unknown[]) : [body];
    const onlyCalls = messages.every((m) => typeof m === "object" && m !== null && (m as { method?: unknown }).method === "tools/call");
    // The hot path: one tools/call is answered here, with the transport's own checks and wire
    // format (a JSON answer on HTTP 200, no session), without building a Server for it. Its
    // params are validated once, by the gateway (malformed: -32602 invalid_params, on HTTP 200).
    if (!Array.isArray(body) && onlyCalls && isRequest(body)) {
      const refused = transportRefusal(req);
      if (refused) {
        res.writeHead(refused.status, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: refused.message }, id: null }));
        return;
      }
      const call = {
        authorization,
        approvalId: header(APPROVAL_ID_HEADER),
        approvalToken: header(APPROVAL_TOKEN_HEADER),
        idempotencyKey: header(IDEMPOTENCY_KEY_HEADER),
        body: { jsonrpc: "2.0", id: body.id, method: "tools/call", params: body.params },
      };
      // The answer is JSON until the upstream sends something to relay (progress, a question for
      // the client), then an SSE stream ending with the result. A task answers at once: nothing to relay.
      const stream = new CallStream(res, waiting, authorization, declared, progressTokenOf(body.params));
      const rpc: { result?: unknown; error?: unknown } =
        gateway.tasks && wantsTask(body.params) ? await gateway.tasks.callTool(call) : ((await gateway.handleToolCall({ ...call, relay: stream.channel })).body as { result?: unknown; error?: unknown });
      stream.finish(rpc.error ? { jsonrpc: "2.0", id: body.id, error: rpc.error } : { jsonrpc: "2.0", id: body.id, result: rpc.result });
      return;
    }
    // tasks/result blocks until its task ends (hours, for a held call): answered here, as an SSE
    // stream that keeps the request open past every idle timeout (src/gateway/tasks.ts decides
    // when it ends; this writes what waits).
    if (gateway.tasks && !Array.isArray(body) && isRequest(body) && body.method === "tasks/result") {
      const refused = transportRefusal(req);
      if (refused) {
        res.writeHead(refused.status, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: refused.message }, id: null }));
        return;
      }
      await answerTaskResult(gateway.tasks, res, authorization, body);
      return;
    }
    // Malformed tools/call params would reach the SDK's handler as an internal error (-32603):
    // answered here as what they are, invalid params (-32602), on HTTP 200 like every answer.
    // (`null` or a number is a message too, for the transport to refuse: never read as an object here.)
    const malformed = messages.find((m) => isObject(m) && m.method === "tools/call" && !callParams.safeParse(m.params).success) as { id?: unknown } | undefined;
    if (malformed && !Array.isArray(body)) {
      res.writeHead(200, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: malformed.id ?? null, error: { code: GATEWAY_JSONRPC.invalidParams, message: "invalid_params", data: { error: "invalid_params", message: "tools/call takes a tool name and, optionally, arguments as a JSON object" } } }));
      return;
    }
    // Mounted behind the gateway's route, the key was checked before the body was read; alone,
    // the handler checks it here. tools/list and tools/call read the key again themselves either way.
    if (!onlyCalls && !options.keyCheckedByRoute) {
      if (!(await gateway.authenticate({ authorization }))) {
        res.writeHead(401, { "content-type": "application/json", "www-authenticate": 'Bearer realm="countersign-gateway"', "cache-control": "no-store" });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: GATEWAY_JSONRPC.unauthorized, message: "unauthorized: send a live virtual key as `Authorization: Bearer <key>`" } }));
        return;
      }
    }
    // The client's answers to relayed requests: handed to the call that waits for them (only
    // one made with the same key), and accepted like any response (202).
    if (messages.length > 0 && messages.every(isResponse) && transportRefusal(req) === null) {
      const owner = ownerOf(authorization);
      for (const m of messages as JsonRpcResponse[]) waiting.answer(owner, m);
      res.writeHead(202).end();
      return;
    }

    const tasks = gateway.tasks;
    const server = new Server(serverInfo, { capabilities: { tools: {}, logging: {}, ...(tasks ? { tasks: TASKS_CAPABILITY } : {}) }, instructions });
    // Upstreams' log messages are relayed as they send them, on the call's stream; the level is
    // the upstream's own (the gateway keeps no session to carry it to them).
    server.setRequestHandler(SetLevelRequestSchema, async () => ({}));
    server.setRequestHandler(ListToolsRequestSchema, async () => {
      const listed = await gateway.listTools({ authorization });
      if (!listed.ok) throw new RpcError(GATEWAY_JSONRPC.unauthorized, "unauthorized", undefined);
      return { tools: listed.tools };
    });
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      const call = {
        authorization,
        approvalId: header(APPROVAL_ID_HEADER),
        approvalToken: header(APPROVAL_TOKEN_HEADER),
        idempotencyKey: header(IDEMPOTENCY_KEY_HEADER),
        body: { jsonrpc: "2.0", id: 0, method: "tools/call", params: request.params },
      };
      if (tasks && wantsTask(request.params)) return taskAnswer(await tasks.callTool(call)) as CallToolResult;
      const answer = await gateway.handleToolCall(call);
      const rpc = answer.body as { result?: CallToolResult; error?: { code: number; message: string; data?: unknown } };
      if (rpc.error) throw new RpcError(rpc.error.code, rpc.error.message, rpc.error.data);
      return rpc.result!;
    });
    if (tasks) {
      // Each answer is built in tasks.ts in the shape the SDK names here.
      server.setRequestHandler(GetTaskRequestSchema, async (request) => taskAnswer(await tasks.get({ authorization, taskId: request.params.taskId })) as GetTaskResult);
      server.setRequestHandler(GetTaskPayloadRequestSchema, async (request, extra) => taskAnswer(await tasks.result({ authorization, taskId: request.params.taskId, signal: extra.signal })) as CallToolResult);
      server.setRequestHandler(ListTasksRequestSchema, async (request) => taskAnswer(await tasks.list({ authorization, cursor: request.params?.cursor })) as ListTasksResult);
      server.setRequestHandler(CancelTaskRequestSchema, async (request) => taskAnswer(await tasks.cancel({ authorization, taskId: request.params.taskId })) as CancelTaskResult);
    }
    const initialize = !Array.isArray(body) && isObject(body) && body.method === "initialize";
    const transport = new StreamableHTTPServerTransport({
      // Only initialize mints a session id: it carries what the client declared it can answer.
      sessionIdGenerator: initialize ? () => sessionIdFor(initializeCapabilities(body)) : undefined,
      enableJsonResponse: true,
    });
    res.on("close", () => {
      void transport.close().catch(() => {});
      void server.close().catch(() => {});
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  };
}

/**
 * One `tasks/result`, answered as it waits. A task already terminal is answered JSON at once.
 * One that is still working turns the answer into an SSE stream (MCP Streamable HTTP lets the
 * server answer any POSTed request with one, and send notifications on it before the response):
 * every `keepAliveMs` it writes a progress notification when the request asked for progress
 * (`params._meta.progressToken`; the SDK client's `resetTimeoutOnProgress` then keeps its own
 * request timeout from firing), an SSE comment otherwise (which every SSE reader skips, and which
 * keeps proxies from closing an idle connection); the last event is the answer. The client going
 * away (the response closes) aborts the wait.
 */
/** The tasks/result streams that can be resumed (their priming event sent), by the gateway's tasks. */
const resumableWaits = new WeakMap<object, Set<ServerResponse>>();

/**
 * Cuts every tasks/result stream of this gateway that a client can resume (it has its event id),
 * as a restart would: each client reconnects with Last-Event-ID and its wait goes on wherever the
 * balancer sends it. A drain calls this when the node stops accepting, so open waits do not hold
 * the shutdown for its whole bound. Returns how many were cut.
 */
export function cutTaskWaits(gateway: Gateway): number {
  const open = gateway.tasks ? resumableWaits.get(gateway.tasks) : undefined;
  if (!open) return 0;
  const cut = [...open];
  open.clear();
  for (const res of cut) res.destroy();
  return cut.length;
}

async function answerTaskResult(tasks: NonNullable<Gateway["tasks"]>, res: ServerResponse, authorization: string | undefined, body: { id: string | number; params?: unknown }): Promise<void> {
  const params = isObject(body.params) ? body.params : {};
  const progressToken = progressTokenOf(params);
  const aborter = new AbortController();
  const gone = () => aborter.abort();
  res.on("close", gone);
  let streaming = false;
  let keepAlive: NodeJS.Timeout | undefined;
  let progress = 0;
  let statusMessage = "";
  const tick = () => {
    if (res.writableEnded || res.destroyed) return;
    if (progressToken === undefined) res.write(": waiting\n\n");
    else res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken, progress: ++progress, message: statusMessage } })}\n\n`);
  };
  const onWaiting = (message: string) => {
    statusMessage = message;
    if (streaming || res.writableEnded || res.destroyed) return;
    streaming = true;
    if (!res.headersSent) res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" });
    // The priming event: its id names the wait, so a client whose stream breaks (this process
    // restarts) reconnects with GET and Last-Event-ID, and any gateway process answers it there.
    if (typeof params["taskId"] === "string") {
      res.write(`id: ${resumptionId(params["taskId"], body.id)}\nretry: ${RESUME_RETRY_MS}\ndata: \n\n`);
      let open = resumableWaits.get(tasks);
      if (!open) resumableWaits.set(tasks, (open = new Set()));
      open.add(res);
    }
    tick();
    keepAlive = setInterval(tick, tasks.keepAliveMs);
  };
  let answer: RpcAnswer;
  try {
    answer = await tasks.result({ authorization, taskId: params["taskId"], signal: aborter.signal, onWaiting });
  } catch {
    answer = { error: { code: ErrorCode.InternalError, message: "task_result_unavailable", data: { error: "task_result_unavailable", message: "the task could not be read; call tasks/result again" } } };
  } finally {
    clearInterval(keepAlive);
    res.off("close", gone);
    resumableWaits.get(tasks)?.delete(res);
  }
  if (res.writableEnded || res.destroyed) return;
  const message = JSON.stringify("error" in answer ? { jsonrpc: "2.0", id: body.id, error: answer.error } : { jsonrpc: "2.0", id: body.id, result: answer.result });
  if (streaming || res.headersSent) {
    res.end(`event: message\ndata: ${message}\n\n`);
    return;
  }
  res.writeHead(200, { "content-type": "application/json" });
  res.end(message);
}

/** How soon (ms) a client whose tasks/result stream broke reconnects (the SSE `retry` field). */
const RESUME_RETRY_MS = 1_000;
const RESUMPTION_ID = /^cs-task\.([A-Za-z0-9][A-Za-z0-9._:-]{0,127})\.([A-Za-z0-9_-]{1,200})$/;

/** A waiting tasks/result's SSE event id: the task and the JSON-RPC id its answer must carry. */
function resumptionId(taskId: string, requestId: string | number): string {
  return `cs-task.${taskId}.${Buffer.from(JSON.stringify(requestId)).toString("base64url")}`;
}

function parseResumptionId(value: string): { taskId: string; requestId: string | number } | null {
  const m = RESUMPTION_ID.exec(value);
  if (!m) return null;
  try {
    const id: unknown = JSON.parse(Buffer.from(m[2]!, "base64url").toString("utf8"));
    if (typeof id === "string" ? id.length > 256 : !(typeof id === "number" && Number.isInteger(id))) return null;
    return { taskId: m[1]!, requestId: id as string | number };
  } catch {
    return null;
  }
}

/**
 * `GET` with `Last-Event-ID` from a tasks/result stream that broke (Streamable HTTP's resumption):
 * the same wait, on whichever process the client reached, answered on this SSE stream with the
 * original request's id. The task is read for the key presenting it, as every task is (another
 * key gets what an unknown id gets). False when the request is not such a resumption.
 */
export async function resumeTaskResult(gateway: Gateway, req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  const last = req.headers["last-event-id"];
  const resumed = gateway.tasks && typeof last === "string" ? parseResumptionId(last) : null;
  if (!resumed || !gateway.tasks || !String(req.headers.accept ?? "").includes("text/event-stream")) return false;
  const authorization = Array.isArray(req.headers.authorization) ? req.headers.authorization[0] : req.headers.authorization;
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" });
  await answerTaskResult(gateway.tasks, res, authorization, { id: resumed.requestId, params: { taskId: resumed.taskId } });
  return true;
}

/** A task-augmented request carries `params.task` (an object; MCP 2025-11-25, "Tasks"). */
function wantsTask(params: unknown): boolean {
  return isObject(params) && isObject(params["task"]);
}

/** A task answer as the handler's return, or its JSON-RPC error thrown for the SDK to answer. */
function taskAnswer(answer: RpcAnswer): Record<string, unknown> {
  if ("error" in answer) throw new RpcError(answer.error.code, answer.error.message, answer.error.data);
  return answer.result;
}

// ─── the two-way call stream ─────────────────────────────────────────────────────────────────

type JsonRpcResponse = { jsonrpc: "2.0"; id: string | number; result?: unknown; error?: { code: number; message: string; data?: unknown } };

type Pending = { owner: string; resolve(result: Record<string, unknown>): void; reject(error: Error): void };

/** The ids the gateway gives the requests it relays to clients. */
const RELAYED_ID = /^countersign-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Requests relayed to clients that wait for their answer, by the id the gateway gave them (one
 * registry per handler). A client's answer settles the request it names when this process's
 * call asked it and the answer comes with the call's own key; an answer to an id no call here
 * waits for goes to the relay (GatewayOptions.answers), and every process settles what it holds
 * from the relay by the same rule. Another key's answer, or one to nothing, changes nothing.
 */
class Waiting {
  private readonly pending = new Map<string, Pending>();

  constructor(private readonly relay: AnswerRelay | null) {
    relay?.subscribe(({ owner, message }) => {
      if (typeof owner === "string" && isResponse(message)) this.settle(owner, message);
    });
  }

  add(id: string, pending: Pending): void {
    this.pending.set(id, pending);
  }

  take(id: string): Pending | undefined {
    const pending = this.pending.get(id);
    this.pending.delete(id);
    return pending;
  }

  /** An answer POSTed to this process. */
  answer(owner: string, m: JsonRpcResponse): void {
    if (this.settle(owner, m) || !this.relay || typeof m.id !== "string" || !RELAYED_ID.test(m.id)) return;
    this.relay.publish({ owner, message: m });
  }

  /** Whether a call here asked `m.id` (then it is settled, or dropped when another key answers). */
  private settle(owner: string, m: JsonRpcResponse): boolean {
    const pending = typeof m.id === "string" ? this.pending.get(m.id) : undefined;
    if (!pending) return false;
    if (pending.owner !== owner) return true;
    this.pending.delete(m.id as string);
    if (m.error) pending.reject(new McpError(typeof m.error.code === "number" ? m.error.code : ErrorCode.InternalError, String(m.error.message ?? "error"), m.error.data));
    else pending.resolve(isObject(m.result) ? m.result : {});
    return true;
  }
}

/**
 * One tools/call's answer: JSON, until the upstream first sends something to relay; from then
 * an SSE stream, which ends with the result. Requests relayed on it wait in `waiting` until the
 * client answers, the signal aborts, or the client's stream closes.
 */
class CallStream {
  private streaming = false;
  private closed = false;
  private readonly mine = new Set<string>();
  readonly channel: CallChannel;

  constructor(
    private readonly res: ServerResponse,
    private readonly waiting: Waiting,
    /** The call's Authorization: its digest is who may answer (computed only when something is asked). */
    private readonly authorization: string | undefined,
    capabilities: RelayCapabilities,
    progressToken: string | number | undefined,
  ) {
    res.on("close", () => {
      this.closed = true;
      for (const id of this.mine) {
        const pending = this.waiting.take(id);
        pending?.reject(new McpError(ErrorCode.InternalError, "the client's stream closed before it answered"));
      }
      this.mine.clear();
    });
    this.channel = {
      capabilities,
      progressToken,
      notify: (message) => this.send({ jsonrpc: "2.0", ...message }),
      request: (message, signal) => this.request(message, signal),
    };
  }

  private send(message: object): boolean {
    if (this.closed || this.res.writableEnded) return false;
    if (!this.streaming) {
      this.streaming = true;
      this.res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    }
    this.res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    return true;
  }

  private request(message: RelayMessage, signal: AbortSignal): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(new McpError(ErrorCode.InternalError, "the call ended before the client was asked"));
      const id = `countersign-${randomUUID()}`;
      const done = () => {
        this.waiting.take(id);
        this.mine.delete(id);
        signal.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        done();
        reject(new McpError(ErrorCode.InternalError, "the client did not answer in time"));
      };
      this.waiting.add(id, {
        owner: ownerOf(this.authorization),
        resolve: (result) => (done(), resolve(result)),
        reject: (error) => (done(), reject(error)),
      });
      this.mine.add(id);
      signal.addEventListener("abort", onAbort, { once: true });
      if (!this.send({ jsonrpc: "2.0", id, method: message.method, ...(message.params !== undefined ? { params: message.params } : {}) })) {
        done();
        reject(new McpError(ErrorCode.InternalError, "the client's stream is closed"));
      }
    });
  }

  /** The call's answer: the last event of the stream, or the JSON body when nothing was relayed. */
  finish(message: object): void {
    if (this.closed || this.res.writableEnded) return;
    if (this.streaming) {
      this.res.end(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
      return;
    }
    this.res.writeHead(200, { "content-type": "application/json" });
    this.res.end(JSON.stringify(message));
  }
}

/** Whose answers a relayed request takes: a digest of the Authorization header that made the call. */
function ownerOf(authorization: string | undefined): string {
  return createHash("sha256").update(authorization ?? "", "utf8").digest("base64url");
}

function progressTokenOf(params: unknown): string | number | undefined {
  const token = isObject(params) && isObject(params._meta) ? params._meta.progressToken : undefined;
  return typeof token === "string" || (typeof token === "number" && Number.isFinite(token)) ? token : undefined;
}

function isResponse(value: unknown): value is JsonRpcResponse {
  if (!isObject(value) || value.jsonrpc !== "2.0" || "method" in value) return false;
  if (typeof value.id !== "string" && typeof value.id !== "number") return false;
  return ("result" in value) !== ("error" in value) && (!("error" in value) || (isObject(value.error) && typeof value.error.code === "number"));
}

// ─── the session id: what the client declared ──────────────────────────────────────────────────

const SESSION_ID = /^cs1\.(e(f?)(u?))?(s(t?)(c?))?(r(l?))?\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function initializeCapabilities(body: Record<string, unknown>): RelayCapabilities {
  const declared = isObject(body.params) && isObject(body.params.capabilities) ? body.params.capabilities : {};
  const out: RelayCapabilities = {};
  if (isObject(declared.elicitation)) {
    const e = declared.elicitation;
    out.elicitation = { ...(isObject(e.form) || !isObject(e.url) ? { form: {} } : {}), ...(isObject(e.url) ? { url: {} } : {}) };
  }
  if (isObject(declared.sampling)) out.sampling = { ...(isObject(declared.sampling.tools) ? { tools: {} } : {}), ...(isObject(declared.sampling.context) ? { context: {} } : {}) };
  if (isObject(declared.roots)) out.roots = declared.roots.listChanged === true ? { listChanged: true } : {};
  return out;
}

/** A session id that carries the client's relayable capabilities (no state is kept for it). */
export function sessionIdFor(capabilities: RelayCapabilities): string {
  return `cs1.${capabilitySignature(capabilities)}.${randomUUID()}`;
}

/** The capabilities a session id carries, or null for an id this gateway did not mint. */
export function capabilitiesOfSession(id: string): RelayCapabilities | null {
  const m = SESSION_ID.exec(id);
  if (!m || (m[1] !== undefined && !m[2] && !m[3])) return null;
  const out: RelayCapabilities = {};
  if (m[1] !== undefined) out.elicitation = { ...(m[2] ? { form: {} } : {}), ...(m[3] ? { url: {} } : {}) };
  if (m[4] !== undefined) out.sampling = { ...(m[5] ? { tools: {} } : {}), ...(m[6] ? { context: {} } : {}) };
  if (m[7] !== undefined) out.roots = m[8] ? { listChanged: true } : {};
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

function isRequest(value: unknown): value is { jsonrpc: "2.0"; id: string | number; method: string; params?: unknown } {
  if (typeof value !== "object" || value === null) return false;
  const v = value as { jsonrpc?: unknown; id?: unknown };
  return v.jsonrpc === "2.0" && (typeof v.id === "string" || (typeof v.id === "number" && Number.isInteger(v.id)));
}

/** What the SDK's Streamable HTTP transport refuses before it reads a POST (the same statuses and codes). */
function transportRefusal(req: IncomingMessage): { status: number; message: string } | null {
  const accept = String(req.headers.accept ?? "");
  if (!accept.includes("application/json") || !accept.includes("text/event-stream")) return { status: 406, message: "Not Acceptable: Client must accept both application/json and text/event-stream" };
  if (!String(req.headers["content-type"] ?? "").includes("application/json")) return { status: 415, message: "Unsupported Media Type: Content-Type must be application/json" };
  const version = req.headers["mcp-protocol-version"];
  if (typeof version === "string" && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
    return { status: 400, message: `Bad Request: Unsupported protocol version: ${version} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(", ")})` };
  }
  return null;
}

/** Thrown from a handler, the SDK's server answers it as this JSON-RPC error (code, message and data as they are). */
class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data: unknown,
  ) {
    super(message);
  }
}
