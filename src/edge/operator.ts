// What an operator relies on at the API's edge, in one place for src/app.ts to wire:
// rate limits and the WebSocket quota, the WebSocket's token lifecycle, /metrics, one log line
// per operation, and CORS. docs/operations.md describes each for operators.

import type { IncomingMessage, ServerResponse } from "node:http";
import { GraphQLError, Kind, getOperationAST, type DocumentNode } from "graphql";
import type { Plugin } from "graphql-yoga";
import type { WebSocket } from "ws";
import { SocketTokenReads, type Viewer } from "../auth/authenticate.js";
import { LiveSockets, TOKEN_INVALID_CLOSE, type LiveSocket } from "../auth/live-sockets.js";
import { bearerFrom, hashToken } from "../auth/tokens.js";
import { AppError } from "../errors.js";
import type { Context } from "../graphql/context.js";
import { gateHub } from "../services/gate-live.js";
import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import type { EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import { retryAfterSeconds } from "../infra/token-buckets.js";
import type { CountedLimits } from "../infra/limit-refusals.js";
import { createMetrics } from "./metrics.js";
import { RecentSet } from "../domain/recent-set.js";
import { clientAddressResolver, keyLabel, rateKeyOf } from "./rate-limit.js";

/**
 * The API's path: the rate limit applies to it. Probes, the scrape, the dashboard's assets and
 * the gateway's endpoints (which authenticate with their own keys) are not limited here.
 */
const GRAPHQL_PATH = "/graphql";

export const RATE_LIMITED = "RATE_LIMITED";

/**
 * What graphql-ws's server context carries for us (ctx.extra), made when the socket opens
 * (src/edge/graphql-ws.ts): the upgrade request itself is not kept for the socket's life.
 */
class SocketExtra {
  /** Set once the socket authenticated (onConnect). */
  live?: AuthenticatedSocket;

  constructor(
    readonly socket: WebSocket,
    /** The client's address (X-Forwarded-For from a trusted proxy), for the limits before authentication. */
    readonly address: string | undefined,
  ) {}
}
interface WsContext {
  connectionParams?: Readonly<Record<string, unknown>>;
  subscriptions: Record<string, unknown>;
  extra: unknown;
}

/**
 * A socket that authenticated (SocketExtra.live): what LiveSockets and the operation quota keep
 * of it. A class, not an object of arrows: one lives per socket, its methods are shared
 * (docs/benchmarks.md, "What a subscriber costs").
 */
class AuthenticatedSocket implements LiveSocket {
  readonly operations = new Map<string, string>();
  /** The operations counted toward the token's cap across processes, by graphql-ws id (made on the first). */
  private leaseIds: Set<string> | null = null;

  constructor(
    private readonly ctx: WsContext,
    private readonly socket: WebSocket,
    /** Who the socket authenticated as: its operations' contexts share this object while their token reads agree with it. */
    readonly viewer: Viewer,
    /** The token's hash. */
    private readonly tokenHash: string,
    /** This socket's part of its leases' names. */
    readonly leaseId: string,
  ) {}

  get tokenId(): string {
    return this.viewer.tokenId;
  }

  get orgId(): string {
    return this.viewer.orgId;
  }

  get userId(): string {
    return this.viewer.userId;
  }

  get expiresAt(): Date | null {
    return this.viewer.expiresAt ?? null;
  }

  /** The token's rate-limit key. */
  get rateKey(): string {
    return `token:${this.tokenHash}`;
  }

  get leases(): ReadonlySet<string> {
    return this.leaseIds ?? EMPTY_LEASES;
  }

  addLease(id: string): void {
    (this.leaseIds ??= new Set()).add(id);
  }

  /** False if `id` held no lease. */
  deleteLease(id: string): boolean {
    return this.leaseIds?.delete(id) ?? false;
  }

  isOpen(id: string): boolean {
    return id in this.ctx.subscriptions;
  }

  close(code: number, reason: string): void {
    this.socket.close(code, reason);
  }
}

/** The outcome of an operation from its errors: "ok", or the code of the first error. */
export function outcomeOf(errors: readonly unknown[] | undefined): string {
  if (!errors || errors.length === 0) return "ok";
  const first = errors[0] as GraphQLError;
  const original = first.originalError;
  if (original instanceof AppError) return original.code;
  if (typeof first.extensions?.code === "string") return first.extensions.code;
  // A GraphQLError of its own (variables that do not coerce, a limit) is the request's fault.
  return original && !(original instanceof GraphQLError) ? "UNEXPECTED" : "BAD_REQUEST";
}

const EMPTY_LEASES: ReadonlySet<string> = new Set();

/** One line, no stack: the first error's message, shortened. */
function firstMessage(errors: readonly unknown[]): string {
  const m = String((errors[0] as Error)?.message ?? "");
  return m.length > 200 ? `${m.slice(0, 200)}…` : m;
}

export function createOperatorControls(deps: { config: Config; db: Database; events: EventBus; logger: Logger; limits: CountedLimits }) {
  const { config, db, events, logger } = deps;
  const sockets = new LiveSockets(db.sql, events, logger.child({ module: "websockets" }));
  /** Token reads for connection_init and each operation's context on a socket, batched (src/auth/authenticate.ts). */
  const socketTokens = new SocketTokenReads(db.sql);
  sockets.start();
  const metrics = createMetrics({ config, db, events, sockets });
  deps.limits.onRefused(metrics.limitRefused);
  const hub = gateHub(db, events);
  hub.roundListeners.add(metrics.gateRound);
  // Shared by every API process on one Redis (src/infra/shared-limits.ts), per process without it.
  const buckets = deps.limits.buckets("graphql", config.rateLimit.rps, config.rateLimit.burst);
  const openOperations = deps.limits.openOperations("graphql", config.rateLimit.maxSubscriptionsPerToken);
  let socketSeq = 0;
  // The client's address for the unauthenticated limits: X-Forwarded-For only from a trusted proxy.
  const clientAddress = clientAddressResolver(config.trustedProxies);
  // Token hashes that authenticated recently: a request is counted against its token only once it is known valid.
  const known = new RecentSet();
  // Rate keys refused lately, each until its Retry-After: their requests wait for the take before anything else.
  const refusedLately = new RecentSet(1_000, 10_000);
  /**
   * Whether a request's token may be read while its rate is taken (not after): a token known
   * valid (charged to itself) and not refused lately. Anything else is read only once admitted,
   * so the requests a rate refuses cost at most one token read per token and Retry-After (the
   * first refusal's), and made-up tokens none.
   */
  const readsAlongside = (key: string) => key.startsWith("token:") && !refusedLately.has(key);
  /** The API's rate, every take of it: a refused key is refused lately until its Retry-After. */
  const limiter = {
    async take(key: string) {
      const taken = await buckets.take(key);
      if (!taken.ok) refusedLately.remember(key, taken.retryAfterMs);
      return taken;
    },
  };
  const maxOps = config.rateLimit.maxSubscriptionsPerToken;

  const rateLimitedError = (message: string, retryAfterMs?: number) =>
    new GraphQLError(message, { extensions: { code: RATE_LIMITED, ...(retryAfterMs ? { retryAfterSeconds: retryAfterSeconds(retryAfterMs) } : {}) } });

  /** One line per refused or finished operation; unexpected failures are logged by maskError (app.ts). */
  const logOperation = (log: Logger, name: string | null | undefined, type: string, errors: readonly unknown[] | undefined, seconds: number, refused?: string) => {
    const outcome = refused ?? outcomeOf(errors);
    metrics.operation(name, type, outcome, seconds);
    const line = { operation: name ?? null, type, outcome, durationMs: Math.round(seconds * 10_000) / 10, errors: errors?.length ?? 0 };
    if (outcome === "ok" || outcome === "UNEXPECTED") log.info(line, "graphql operation");
    else log[outcome === RATE_LIMITED ? "warn" : "info"]({ ...line, message: firstMessage(errors!) }, "graphql operation refused");
  };

  const requestLogger = (context: unknown) => {
    const c = context as Partial<Context> & { request?: Request };
    return c.logger ?? logger.child({ requestId: c.request?.headers.get("x-request-id") ?? undefined });
  };
  const operationName = (context: unknown) => (context as { params?: { operationName?: string } }).params?.operationName;
  const validationRefused = (context: unknown, document: DocumentNode, started: number, errors: readonly unknown[]) => {
    const op = getOperationAST(document, operationName(context));
    logOperation(requestLogger(context), op?.name?.value ?? operationName(context), op?.operation ?? "unknown", errors, (performance.now() - started) / 1000, "GRAPHQL_VALIDATION_FAILED");
  };

  /**
   * A subscription's line, once its subscribe has answered. One hook object for every
   * subscription, its start kept by the arguments until then: envelop keeps what onSubscribe
   * returned for as long as the subscription lives, so a closure over the start per operation
   * was a closure and a context per subscriber.
   */
  const subscribeStarted = new WeakMap<object, number>();
  const subscribeLogged: Exclude<Awaited<ReturnType<NonNullable<Plugin<Context>["onSubscribe"]>>>, void> = {
    onSubscribeResult({ args, result }) {
      const started = subscribeStarted.get(args) ?? performance.now();
      subscribeStarted.delete(args);
      const op = getOperationAST(args.document, args.operationName);
      const errors = !(Symbol.asyncIterator in (result as object)) ? ((result as { errors?: unknown[] }).errors ?? undefined) : undefined;
      logOperation((args.contextValue as Context).logger, op?.name?.value ?? args.operationName, "subscription", errors, (performance.now() - started) / 1000);
    },
  };

  const plugin: Plugin<Context> = {
    // Refused before execution: a syntax error or the token limit (parse), a validation error
    // or a depth / alias / cost limit (validate). One line each, at info, never a stack.
    onParse({ context }) {
      const started = performance.now();
      return ({ result }) => {
        if (result instanceof Error) logOperation(requestLogger(context), operationName(context), "unknown", [result], (performance.now() - started) / 1000, "GRAPHQL_PARSE_FAILED");
      };
    },
    onValidate({ context, params, validateFn, setValidationFn }) {
      const started = performance.now();
      // graphql-armor's depth and alias limits throw out of validation rather than return errors.
      // (Inline callbacks: tsx names every arrow kept in a variable, on every request.)
      setValidationFn((...args: Parameters<typeof validateFn>) => {
        try {
          return validateFn(...args);
        } catch (error) {
          validationRefused(context, params.documentAST as DocumentNode, started, [error]);
          throw error;
        }
      });
      return ({ valid, result }) => {
        if (!valid) validationRefused(context, params.documentAST as DocumentNode, started, result);
      };
    },
    onExecute({ args }) {
      const started = performance.now();
      const op = getOperationAST(args.document, args.operationName);
      return {
        onExecuteDone({ result }) {
          const errors = "errors" in result && Array.isArray(result.errors) ? result.errors : undefined;
          logOperation((args.contextValue as Context).logger, op?.name?.value ?? args.operationName, op?.operation ?? "unknown", errors, (performance.now() - started) / 1000);
        },
      };
    },
    onSubscribe({ args }) {
      subscribeStarted.set(args, performance.now());
      return subscribeLogged;
    },
  };

  const extraOf = (ctx: WsContext) => ctx.extra as SocketExtra;
  type Live = NonNullable<SocketExtra["live"]>;
  const release = (live: Live, id: string) => {
    if (live.deleteLease(id)) openOperations.release(live.tokenId, `${live.leaseId}:${id}`);
  };
  /** Operations that ended without onComplete (an execution that failed): their slots go back. */
  const releaseEnded = (live: Live) => {
    for (const id of [...live.leases]) if (!live.isOpen(id)) release(live, id);
  };

  // The bearer token's hash, computed once per HTTP request: the rate key, authentication and
  // `authenticated` all need it (a sha256 each otherwise).
  const tokenHashes = new WeakMap<IncomingMessage, string | null>();
  const tokenHashOf = (req: IncomingMessage): string | null => {
    let hash = tokenHashes.get(req);
    if (hash === undefined) {
      const bearer = bearerFrom(req.headers.authorization);
      hash = bearer ? hashToken(bearer) : null;
      tokenHashes.set(req, hash);
    }
    return hash;
  };

  return {
    sockets,
    socketTokens,
    metrics,
    plugin,
    tokenHashOf,

    /** Remembers a token (by its hash) that authenticated, so its requests count against it (not the address). */
    authenticated(tokenHash: string) {
      known.remember(tokenHash);
    },

    /**
     * Before any other route: serves /metrics, and answers 429 with Retry-After to a request over
     * its rate. True when it answered.
     *
     * `alongside` starts the reading of the token while its rate is taken (readsAlongside): with
     * the limits in Redis the take is a round trip, which then overlaps the token's own read
     * instead of coming before it. Whether the request is answered, and how, still waits for the take.
     */
    async http(req: IncomingMessage, res: ServerResponse, url: URL, alongside?: (tokenHash: string) => void): Promise<boolean> {
      if (url.pathname === "/metrics" && req.method === "GET") {
        await metrics.handle(req, res);
        return true;
      }
      if (url.pathname !== GRAPHQL_PATH) return false;
      const tokenHash = tokenHashOf(req);
      const key = rateKeyOf(known, tokenHash, clientAddress(req));
      if (alongside && tokenHash && readsAlongside(key)) alongside(tokenHash);
      const taken = await limiter.take(key);
      if (taken.ok) return false;
      metrics.rateLimited("http");
      const seconds = retryAfterSeconds(taken.retryAfterMs);
      logger.warn({ key: keyLabel(key), path: url.pathname, retryAfterSeconds: seconds }, "request rate limited");
      const body = { errors: [{ message: `Rate limit exceeded: at most ${config.rateLimit.rps} requests per second. Retry after ${seconds} s.`, extensions: { code: RATE_LIMITED, retryAfterSeconds: seconds } }] };
      res.writeHead(429, { "content-type": "application/json; charset=utf-8", "retry-after": String(seconds) }).end(JSON.stringify(body));
      return true;
    },

    /** CORS (graphql-yoga's `cors`): only listed origins, never with credentials; others get no CORS headers. */
    cors(request: Request) {
      const origin = request.headers.get("origin");
      if (!origin || !config.corsOrigins.includes(origin)) return false as const;
      return {
        origin: [origin],
        credentials: false,
        methods: ["GET", "POST", "OPTIONS"],
        allowedHeaders: ["authorization", "content-type", "x-request-id"],
        maxAge: 600,
      };
    },

    /** graphql-ws hooks: the socket authenticates once, at connection_init, or is closed. */
    ws: {
      connectionInitWaitTimeout: config.wsInitTimeoutMs,
      /** A socket's `extra` (src/edge/graphql-ws.ts), from its upgrade request. */
      extra(socket: WebSocket, request: IncomingMessage): SocketExtra {
        return new SocketExtra(socket, clientAddress(request));
      },
      async onConnect(ctx: WsContext): Promise<boolean> {
        const extra = extraOf(ctx);
        const raw = ctx.connectionParams?.authorization ?? ctx.connectionParams?.Authorization;
        const bearer = bearerFrom(typeof raw === "string" ? raw : null);
        const tokenHash = bearer ? hashToken(bearer) : null;
        const key = rateKeyOf(known, tokenHash, extra.address);
        // The token and its liveness (liveTokenIds' rule) in one read, batched with the
        // connections and operations arriving beside it; while the rate is taken when it may be.
        const early = tokenHash && readsAlongside(key) ? socketTokens.read(tokenHash) : null;
        early?.catch(() => {});
        const taken = await limiter.take(key);
        if (!taken.ok) {
          metrics.rateLimited("ws_connect");
          // 1013 "Try Again Later": clients may reconnect, after a while.
          extra.socket.close(1013, "Rate limited: try again later");
          return false;
        }
        let viewer: Viewer | null;
        let live: boolean;
        let sharedHash: string | undefined;
        try {
          const read = await (early ?? socketTokens.read(tokenHash));
          viewer = read?.viewer ?? null;
          live = read?.live ?? false;
          sharedHash = read?.tokenHash;
        } catch (error) {
          // The database cannot say who this is: refuse for now with a code clients retry
          // (1013 "Try Again Later"; a 4500 would make graphql-ws clients give up for good).
          logger.warn({ err: { message: (error as Error).message } }, "websocket refused: the token could not be checked");
          extra.socket.close(1013, "Try again later: the token could not be checked");
          return false;
        }
        if (!viewer || !live) {
          logger.info({ address: extra.address }, "websocket refused: no valid token in connection_init");
          // 4401: graphql-ws clients do not retry it (4403, the library's default here, they do).
          extra.socket.close(TOKEN_INVALID_CLOSE.code, "Unauthorized: send a valid token as connectionParams.authorization");
          return false;
        }
        known.remember(tokenHash!);
        const socket = new AuthenticatedSocket(ctx, extra.socket, viewer, sharedHash ?? tokenHash!, `${++socketSeq}`);
        extra.live = socket;
        sockets.add(socket);
        // Closed while we were authenticating: onClose has run already.
        if (extra.socket.readyState !== extra.socket.OPEN) sockets.remove(socket);
        return true;
      },
      /** Before an operation starts: the token's rate. */
      async admit(ctx: WsContext): Promise<GraphQLError[] | null> {
        const live = extraOf(ctx).live;
        if (!live) return [new GraphQLError("Unauthorized", { extensions: { code: "UNAUTHENTICATED" } })];
        const taken = await limiter.take(live.rateKey);
        if (!taken.ok) {
          metrics.rateLimited("ws_operation");
          return [rateLimitedError(`Rate limit exceeded: at most ${config.rateLimit.rps} operations per second.`, taken.retryAfterMs)];
        }
        return null;
      },
      /** Whether an operation's token may be read while admit takes its rate (readsAlongside). */
      readsAlongside(ctx: WsContext): boolean {
        const live = extraOf(ctx).live;
        return live !== undefined && readsAlongside(live.rateKey);
      },
      /** A parse or validation that threw (a syntax error, a limit), as the operation's errors. */
      refusal(error: unknown): GraphQLError[] {
        if (error instanceof GraphQLError) return [new GraphQLError(error.message, { extensions: { ...error.extensions, code: error.extensions?.code ?? "BAD_REQUEST" } })];
        throw error;
      },
      /**
       * Counts an operation that is starting (by its root field) toward the token's quota of open
       * operations, across processes; its errors when the token has no room left.
       */
      async track(ctx: WsContext, id: string, document: DocumentNode, operationName: string | null | undefined): Promise<GraphQLError[] | null> {
        const live = extraOf(ctx).live;
        if (!live) return [new GraphQLError("Unauthorized", { extensions: { code: "UNAUTHENTICATED" } })];
        if (openOperations.enabled) {
          releaseEnded(live);
          const lease = `${live.leaseId}:${id}`;
          if (!(await openOperations.acquire(live.tokenId, lease, () => sockets.operationsOf(live.tokenId)))) {
            metrics.rateLimited("ws_subscriptions");
            return [rateLimitedError(`Too many open subscriptions: at most ${maxOps} per token. Complete one first.`)];
          }
          live.addLease(id);
          // Ended while the lease was taken (the client completed it, the socket closed).
          if (!live.isOpen(id) || extraOf(ctx).socket.readyState !== extraOf(ctx).socket.OPEN) release(live, id);
        }
        const op = getOperationAST(document, operationName);
        const first = op?.selectionSet.selections[0];
        live.operations.set(id, first?.kind === Kind.FIELD ? first.name.value : (op?.operation ?? "unknown"));
        return null;
      },
      onComplete(ctx: WsContext, id: string) {
        const live = extraOf(ctx).live;
        live?.operations.delete(id);
        if (live) release(live, id);
      },
      onClose(ctx: WsContext) {
        const live = extraOf(ctx).live;
        if (!live) return;
        sockets.remove(live);
        for (const id of [...live.leases]) release(live, id);
      },
    },

    async close() {
      hub.roundListeners.delete(metrics.gateRound);
      sockets.stop();
      await metrics.close();
    },
  };
}

export type OperatorControls = ReturnType<typeof createOperatorControls>;
