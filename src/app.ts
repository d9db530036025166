import { randomUUID } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server } from "node:http";
import { createYoga, maskError, type YogaInitialContext } from "graphql-yoga";
import { WebSocketServer, type WebSocket } from "ws";
import { maxAliasesPlugin } from "@escape.tech/graphql-armor-max-aliases";
import { maxDepthPlugin } from "@escape.tech/graphql-armor-max-depth";
import { maxTokensPlugin } from "@escape.tech/graphql-armor-max-tokens";
import { costLimitPlugin } from "@escape.tech/graphql-armor-cost-limit";
import { GraphQLError, type DocumentNode } from "graphql";
import { authenticateWithEpoch, type Authenticated, type Viewer } from "./auth/authenticate.js";
import { bearerFrom, hashToken } from "./auth/tokens.js";
import { Authz } from "./authz/authz.js";
import { EpochCache, type PrincipalCache } from "./authz/principal.js";
import type { Context } from "./graphql/context.js";
import { RequestLoaders } from "./graphql/request-loaders.js";
import { schema } from "./graphql/schema/index.js";
import { useSharedEventResults } from "./graphql/shared-events.js";
import { useGraphqlJsExecute } from "./graphql/engine.js";
import { handBodyToYoga, readBodyWithinLimit, refusedAsNotUtf8 } from "./edge/body-limit.js";
import { createDispatcher, limitByAddress, sendJson, type HttpRoute } from "./edge/http.js";
import { clientAddressResolver, keyLabel } from "./edge/rate-limit.js";
import { retryAfterSeconds } from "./infra/token-buckets.js";
import { countRefusals, type CountedLimits } from "./infra/limit-refusals.js";
import { createSharedLimits, type RateBuckets } from "./infra/shared-limits.js";
import { useCreationLimiter } from "./services/personal-organizations.js";
import { createGatewayRoutes, type GatewayRateLimiter } from "./gateway/http.js";
import { cutTaskWaits } from "./gateway/mcp.js";
import type { Infra } from "./infra/index.js";
import { prepareDatabase } from "./services/startup.js";
import { createWorkers } from "./workers/index.js";
import { EMBEDDED_APPROVALS_PATH, EMBEDDED_TOOLS_PATH, type ApprovalsRuntime } from "./workers/runtime.js";
import type { WebhookWorker } from "./workers/webhook-delivery.js";
import type { GithubWorker } from "./workers/github-delivery.js";
import { createDashboardHttp } from "./dashboard/http.js";
import { AppError } from "./errors.js";
import { EXPLORER_ASSETS, explorerOptions, renderExplorer } from "./dashboard/explorer.js";
import { createOperatorControls } from "./edge/operator.js";
import { serveGraphqlWs } from "./edge/graphql-ws.js";
import { createGithubReceiver, GITHUB_MAX_BODY_BYTES, GITHUB_WEBHOOK_PREFIX } from "./services/github.js";
import { createSlackInteractivity, SLACK_INTERACTIVITY_PREFIX, SLACK_MAX_BODY_BYTES } from "./services/slack.js";
import { createHcpRunTaskReceiver, HCP_MAX_BODY_BYTES, HCP_RUN_TASK_PREFIX } from "./services/hcp-run-task.js";
import { guardSubscribe, isUnavailableError, unavailableGraphQLError } from "./infra/faults.js";
import { graphqlTracingPlugins } from "./infra/tracing.js";

/** Start-up's database work (migrate, system roles, bootstrap or demo org), for main.ts. */
export { prepareDatabase };

/**
 * The composition root: this file mounts the extra HTTP routes, GraphQL and the background
 * workers; main.ts and tests call createApp, and nothing under src/ imports it back
 * (test/layout.test.ts).
 */
/** The extra HTTP routes and background workers composed beside GraphQL. */
export interface Services {
  config: Infra["config"];
  /** The gateway's and the dashboard's routes, for the route table (createApp). */
  routes: HttpRoute[];
  /** Held tool calls: the ingest and delivery workers, and the embedded gateway when mounted. */
  approvals: ApprovalsRuntime;
  /** Rate limits and open-operation caps, in Redis when REDIS_URL is set (src/infra/shared-limits.ts), their refusals counted. */
  limits: CountedLimits;
  /** Outbound webhook delivery (docs/webhooks.md). */
  webhooks: WebhookWorker;
  /** GitHub deployment protection rule answers (docs/integrations.md). */
  github: GithubWorker;
  close(): Promise<void>;
}

function createServices(deps: Infra): Services {
  const workers = createWorkers(deps);
  const { approvals, webhooks, github } = workers;
  const routes: HttpRoute[] = [];
  const limits = countRefusals(createSharedLimits({ redisUrl: deps.config.redisUrl, keyPrefix: deps.config.limitsKeyPrefix, logger: deps.logger.child({ module: "limits" }) }));
  // Personal organizations: createBurst at once, createPerHour after it (0: only the burst, ever).
  const creation = limits.buckets("personal-org", Math.max(deps.config.personalOrganizations.createPerHour / 3600, 1e-9), deps.config.personalOrganizations.createBurst);
  useCreationLimiter(deps.config.personalOrganizations, { take: (person) => creation.take(person) });
  if (approvals.gateway) {
    // The embedded gateway (src/workers/runtime.ts): its Origin allow-list and its rate per
    // virtual key (or client address) apply before any body is read (src/gateway/http.ts).
    const edge = deps.config.gatewayEdge;
    routes.push(
      ...createGatewayRoutes(approvals.gateway, {
        toolsPath: EMBEDDED_TOOLS_PATH,
        approvalsPath: EMBEDDED_APPROVALS_PATH,
        maxBodyBytes: deps.config.maxBodyBytes,
        allowedOrigins: edge.allowedOrigins,
        rateLimit: edge.rps > 0 ? loggedLimiter(limits.buckets("gateway", edge.rps, edge.burst), deps.logger) : null,
        clientAddress: clientAddressResolver(deps.config.trustedProxies),
      }),
    );
  }
  // The live gate dashboard at / and the explorer's assets (src/dashboard/).
  const dashboard = createDashboardHttp();
  for (const path of ["/", "/index.html", "/dashboard/app.js", "/dashboard/style.css", "/dashboard/plan-page.css"]) {
    routes.push({ owner: "dashboard", methods: ["GET", "HEAD"], path, credential: "none", handle: dashboard });
  }
  routes.push({ owner: "dashboard", methods: ["GET", "HEAD"], path: `${EXPLORER_ASSETS}/`, prefix: true, credential: "none", handle: dashboard });
  // Routes third parties post signed bodies to (Slack, HCP Terraform, GitHub) share one allowance
  // per client address, taken before the body is read: a flood of made-up ids from one address
  // is refused at the edge instead of costing a database read each.
  const integrationEdge = deps.config.integrationEdge;
  const integrationLimit = integrationEdge.rps > 0 ? loggedLimiter(limits.buckets("integration", integrationEdge.rps, integrationEdge.burst), deps.logger, "integration") : null;
  /**
   * A route a third party posts a signed body to: the allowance per address, then the body within
   * its limit, then the receiver's answer (JSON, or an empty body), then what follows the answer.
   */
  const signedRoute = <A extends { status: number; body?: unknown }>(route: {
    owner: HttpRoute["owner"];
    path: string;
    credential: HttpRoute["credential"];
    maxBodyBytes: number;
    receive: (pathname: string, headers: IncomingHttpHeaders, body: Buffer) => Promise<A>;
    /** Run after the answer is sent (Slack wants its answer within three seconds). */
    after?: (answer: A) => void;
  }): HttpRoute =>
    limitByAddress(
      {
        owner: route.owner,
        methods: ["POST"],
        path: route.path,
        prefix: true,
        credential: route.credential,
        handle: async (req, res, url) => {
          const body = await readBodyWithinLimit(req, res, Math.min(deps.config.maxBodyBytes, route.maxBodyBytes));
          if (!body) return true;
          const answer = await route.receive(url.pathname, req.headers, body);
          if (answer.body !== undefined && answer.body !== null) sendJson(res, answer.status, answer.body);
          else res.writeHead(answer.status, { "cache-control": "no-store" }).end();
          route.after?.(answer);
          return true;
        },
      },
      integrationLimit && ((key) => integrationLimit.take(key)),
      clientAddressResolver(deps.config.trustedProxies),
    );
  // Approving from Slack: clicks Slack posts, signed with the integration's secret (src/services/slack.ts);
  // the message is updated after the answer.
  const slack = createSlackInteractivity(deps);
  routes.push(signedRoute({
    owner: "slack",
    path: SLACK_INTERACTIVITY_PREFIX,
    credential: "slack-signature",
    maxBodyBytes: SLACK_MAX_BODY_BYTES,
    receive: (path, headers, body) => slack.handle(path, headers, body),
    after: (answer) => {
      if (answer.responseUrl) void slack.send(answer.responseUrl, answer.replies);
    },
  }));
  // HCP Terraform run tasks: requests HCP posts, signed with the task's HMAC key (src/services/hcp-run-task.ts).
  // Answered at once; the plan is fetched and the gate reported by the worker (durably, from the row).
  const hcp = createHcpRunTaskReceiver(deps);
  routes.push(signedRoute({
    owner: "hcp-run-task",
    path: HCP_RUN_TASK_PREFIX,
    credential: "hcp-signature",
    maxBodyBytes: HCP_MAX_BODY_BYTES,
    receive: (path, headers, body) => hcp.handle(path, headers, body),
    after: (answer) => {
      if (answer.recorded) workers.hcpRunTasks.wake();
    },
  }));
  // A GitHub custom deployment protection rule: events GitHub posts, signed with the App's webhook
  // secret (src/services/github.ts); the answers go out from the GitHub worker, at once when they can
  // be (an unmapped environment, a plan already there).
  const githubReceiver = createGithubReceiver(deps);
  routes.push(signedRoute({
    owner: "github",
    path: GITHUB_WEBHOOK_PREFIX,
    credential: "github-signature",
    maxBodyBytes: GITHUB_MAX_BODY_BYTES,
    receive: (path, headers, body) => githubReceiver.handle(path, headers, body),
    after: (answer) => {
      if (answer.recorded) github.wake();
    },
  }));
  // Background work runs in the API process unless COUNTERSIGN_WORKERS=none (then `npm run worker`).
  if (deps.config.workers === "all") workers.start();
  return {
    config: deps.config,
    approvals,
    limits,
    webhooks,
    github,
    routes,
    async close() {
      await workers.close();
      await limits.close();
    },
  };
}

/** The longest `originalError.message` an answer carries (yoga's request parser quotes the body in it). */
const MAX_QUOTED_ERROR_CHARS = 200;

/**
 * An error yoga made of a request it could not take, its `originalError` message cut to
 * MAX_QUOTED_ERROR_CHARS: yoga's request parser attaches JSON.parse's SyntaxError, whose message
 * quotes the whole body (an invalid body of 1 MiB came back as ~1.4 MB of JSON). The
 * originalError itself stays: yoga reads its presence to answer 400 rather than 200.
 */
function withQuoteCut(error: GraphQLError): GraphQLError {
  const quoted = error.extensions?.originalError as { name?: unknown; message?: unknown } | undefined;
  if (typeof quoted?.message !== "string" || quoted.message.length <= MAX_QUOTED_ERROR_CHARS) return error;
  // Not between the two halves of a surrogate pair.
  const high = quoted.message.charCodeAt(MAX_QUOTED_ERROR_CHARS - 1);
  const message = `${quoted.message.slice(0, high >= 0xd800 && high <= 0xdbff ? MAX_QUOTED_ERROR_CHARS - 1 : MAX_QUOTED_ERROR_CHARS)}…`;
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    extensions: { ...error.extensions, originalError: { ...quoted, message } },
  });
}

/** The gateway's limiter, writing one warn line per refusal as the API's does (docs/operations.md, Logs). */
function loggedLimiter(buckets: RateBuckets, logger: Infra["logger"], label = "gateway"): GatewayRateLimiter {
  return {
    async take(key) {
      const taken = await buckets.take(key);
      if (!taken.ok) logger.warn({ key: keyLabel(key), path: label, retryAfterSeconds: retryAfterSeconds(taken.retryAfterMs) }, "request rate limited");
      return taken;
    },
  };
}

/** Operation limits: every operation is bounded before it executes. */
export const OPERATION_LIMITS = { maxDepth: 12, maxAliases: 30, maxTokens: 5000, maxCost: 20000 } as const;

/**
 * A subscription's direct writer (Context.subscriptionSink). It writes only while the socket is
 * open and has nothing waiting to be written: a client that does not keep up makes it refuse, so
 * its messages take the ordinary path, where graphql-ws awaits each write and the hub's queue
 * keeps only the newest status, instead of piling up in the socket's buffer.
 */
export function socketSink(
  socket: Pick<WebSocket, "readyState" | "OPEN" | "bufferedAmount" | "send">,
  id: string,
): NonNullable<Context["subscriptionSink"]> {
  return new SocketSink(socket, id);
}

/** A class, not an object of arrows: one lives per subscription, its method is shared. */
class SocketSink implements NonNullable<Context["subscriptionSink"]> {
  constructor(
    private readonly socket: Pick<WebSocket, "readyState" | "OPEN" | "bufferedAmount" | "send">,
    readonly id: string,
  ) {}

  send(data: string): boolean {
    const { socket } = this;
    if (socket.readyState !== socket.OPEN || socket.bufferedAmount > 0) return false;
    socket.send(data);
    return true;
  }
}

export function createApp(deps: Infra) {
  const { db, events, logger } = deps;
  const services = createServices(deps);
  // Rate limits, the WebSocket token lifecycle, /metrics, operation logs, CORS (src/edge/operator.ts).
  const operator = createOperatorControls({ ...deps, limits: services.limits });

  // Principals kept across requests under the authz epoch each request reads with its token.
  const principals: PrincipalCache = new EpochCache();

  // HTTP requests whose token is being read already, started while their rate was taken (the graphql route below).
  const tokenReads = new WeakMap<IncomingMessage, Promise<Authenticated | null>>();
  const readTokenOf = (req: IncomingMessage) => (tokenHash: string) => {
    const read = authenticateWithEpoch(db.sql, tokenHash);
    // A request refused by its rate never awaits it; one that goes on gets its failure in the context.
    read.catch(() => {});
    tokenReads.set(req, read);
  };

  /** `tokenHash`: the bearer token's hash (null without one), as the rate limiter computed it; `read`: its read, when started already. */
  async function buildContext(tokenHash: string | null, requestId: string, read?: Promise<Authenticated | null>): Promise<Context> {
    const authenticated = await (read ?? authenticateWithEpoch(db.sql, tokenHash));
    const viewer = authenticated?.viewer ?? null;
    if (viewer) operator.authenticated(tokenHash!);
    return { ...contextOf(requestId, viewer, authenticated), logger: logger.child({ requestId, userId: viewer?.userId }) };
  }

  /** What every operation's context holds but its logger, for `viewer` as `authenticated` read it. */
  function contextOf(requestId: string, viewer: Viewer | null, authenticated: Authenticated | null): Omit<Context, "logger"> {
    return {
      requestId,
      db,
      events,
      viewer,
      authz: new Authz(db.sql, viewer, authenticated ? { cache: principals, epoch: authenticated.authzEpoch } : null),
      config: deps.config,
      upstreams: services.approvals.upstreams,
      loaders: new RequestLoaders(),
    };
  }

  /**
   * An operation on a socket: what yoga adds to its SocketOperation (the initial context, which
   * gives it its logger). Its token is read batched with those arriving beside it; a read that
   * agrees with the socket's answers with the socket's own viewer object (SocketTokenReads).
   */
  async function buildSocketContext(tokenHash: string | null, requestId: string): Promise<Omit<Context, "logger">> {
    const authenticated = await operator.socketTokens.read(tokenHash);
    const viewer = authenticated?.viewer ?? null;
    if (viewer) operator.authenticated(tokenHash!);
    return contextOf(requestId, viewer, authenticated);
  }

  /**
   * The initial context of an operation on a socket (graphql-ws's onSubscribe below): yoga's
   * context factory adds the rest (buildSocketContext) to this object. Its logger is a child made
   * each time it is asked for, not kept: a subscription's context lives as long as the
   * subscription, and logs once, when it starts (docs/benchmarks.md, "What a subscriber costs").
   */
  class SocketOperation {
    declare requestId: string;
    declare viewer: Viewer | null;

    constructor(
      readonly params: unknown,
      readonly connectionParams: Readonly<Record<string, unknown>> | undefined,
      readonly request: Request,
    ) {}

    get logger(): Context["logger"] {
      return logger.child({ requestId: this.requestId, userId: this.viewer?.userId });
    }
  }

  const yoga = createYoga<{ req?: IncomingMessage }, Context>({
    schema,
    logging: false,
    // The explorer: our own assets, the token header prefilled (from ?token= or the dashboard's
    // sessionStorage), one example tab per operations/ file (src/dashboard/explorer.ts).
    graphiql: explorerOptions(),
    renderGraphiQL: renderExplorer,
    landingPage: false,
    // The body limit is ours, applied before yoga (readBodyWithinLimit below, 413 before parsing);
    // yoga's own would only re-stream the body already read through a TransformStream.
    maxRequestBodySize: false,
    cors: operator.cors,
    context: async (initial: YogaInitialContext & { req?: IncomingMessage; connectionParams?: Record<string, unknown> }) => {
      const requestId = initial.request.headers.get("x-request-id") ?? randomUUID();
      // A graphql-ws operation (onSubscribe below): its token.
      if (initial instanceof SocketOperation) {
        const fromWs = initial.connectionParams?.authorization ?? initial.connectionParams?.Authorization;
        const bearer = typeof fromWs === "string" ? bearerFrom(fromWs) : null;
        // Without `logger`: yoga assigns this onto `initial`, whose logger is its own (SocketOperation).
        return buildSocketContext(bearer ? hashToken(bearer) : null, requestId) as Promise<Context>;
      }
      // An HTTP request: node's req is yoga's server context (requestListener below), its token
      // hashed once for the rate limit and here; without it (yoga.fetch in tests), the header.
      if (initial.req) return buildContext(operator.tokenHashOf(initial.req), requestId, tokenReads.get(initial.req));
      const bearer = bearerFrom(initial.request.headers.get("authorization"));
      return buildContext(bearer ? hashToken(bearer) : null, requestId);
    },
    maskedErrors: {
      maskError(error, message, isDev) {
        const original = (error as GraphQLError).originalError;
        if (original instanceof AppError) {
          // Expected failures outside a result union (queries, subscriptions) keep their code.
          const e = error as GraphQLError;
          return new GraphQLError(original.message, {
            nodes: e.nodes,
            path: e.path,
            extensions: { ...e.extensions, code: original.code, ...("missing" in original ? { missing: original.missing } : {}) },
          });
        }
        if ((error as GraphQLError).extensions?.code) return withQuoteCut(error as GraphQLError);
        // PostgreSQL (or Redis) unreachable: retryable, 503 + Retry-After over HTTP (infra/faults.ts).
        if (isUnavailableError(original ?? error)) return unavailableGraphQLError(deps.config.unavailableRetryAfterSeconds, { path: (error as GraphQLError).path });
        // The request's own fault (a limit, variables that do not coerce): logged once, at info, by the operator plugin.
        if (!original || original instanceof GraphQLError) {
          const e = error as GraphQLError;
          return new GraphQLError(e.message, { nodes: e.nodes, source: e.source, positions: e.positions, path: e.path, extensions: { ...e.extensions, code: "BAD_REQUEST" } });
        }
        const errorId = randomUUID();
        logger.error({ err: original ?? error, errorId }, "unexpected error");
        const masked = maskError(error, `Unexpected error (id ${errorId})`, isDev) as GraphQLError;
        return masked;
      },
    },
    plugins: [
      useGraphqlJsExecute(),
      // A span per operation when traces are on (src/infra/tracing.ts); none otherwise.
      ...graphqlTracingPlugins(),
      // One structured line per operation (refused ones at info or warn, no stack), and its metrics.
      operator.plugin,
      // planGate / workspaceGates: one execution per (operation, snapshot), shared by subscribers.
      useSharedEventResults(),
      maxDepthPlugin({ n: OPERATION_LIMITS.maxDepth, ignoreIntrospection: true, flattenFragments: true }),
      maxAliasesPlugin({ n: OPERATION_LIMITS.maxAliases }),
      maxTokensPlugin({ n: OPERATION_LIMITS.maxTokens }),
      costLimitPlugin({ maxCost: OPERATION_LIMITS.maxCost, ignoreIntrospection: true }),
    ],
  });

  /**
   * Every HTTP route the server mounts, in one table: the server dispatches from it and nothing
   * else (404 for a path it does not name, 405 for a method a route does not take, 500 with an
   * error id for whatever a handler throws), and test/edge/ sends its hostile requests to each
   * route it lists. WebSocket upgrades at /graphql are graphql-ws's (below), not a route.
   */
  const routes: HttpRoute[] = [
    { owner: "operator", methods: ["GET"], path: "/metrics", credential: "metrics-token", handle: (req, res, url) => operator.http(req, res, url) },
    {
      owner: "app",
      methods: ["GET", "HEAD"],
      path: "/healthz",
      credential: "none",
      handle: (_req, res) => (sendJson(res, 200, { status: "ok" }), true),
    },
    {
      owner: "app",
      methods: ["GET", "HEAD"],
      path: "/readyz",
      credential: "none",
      handle: async (_req, res) => {
        // Draining (SIGTERM): not ready, so the balancer's health checks take the node out while it still serves.
        if (draining) return (sendJson(res, 503, { status: "draining" }), true);
        const [database, eventBus] = await Promise.all([
          db.sql.query("SELECT 1").then(() => true, () => false),
          events.ping().catch(() => false),
        ]);
        const ready = database && eventBus;
        sendJson(res, ready ? 200 : 503, { status: ready ? "ready" : "unavailable", database, eventBus });
        return true;
      },
    },
    ...services.routes,
    {
      owner: "graphql",
      methods: ["GET", "POST", "OPTIONS"],
      path: yoga.graphqlEndpoint,
      credential: "api-token",
      handle: async (req, res, url) => {
        // The token's rate (429 with Retry-After), then the body limit (413) and a text body that
        // is not UTF-8 (400), before yoga parses.
        // A token known valid is read while its rate is taken (operator.http).
        if (await operator.http(req, res, url, readTokenOf(req))) return true;
        const body = await readBodyWithinLimit(req, res, deps.config.maxBodyBytes);
        if (!body || refusedAsNotUtf8(req, res, body)) return true;
        handBodyToYoga(req, body);
        await yoga.requestListener(req, res);
        return true;
      },
    },
  ];

  let draining = false;
  const dispatch = createDispatcher(routes, logger);
  // Draining, every answer closes its connection: a client's next request opens a new one, which
  // the balancer sends to a node that is ready.
  const httpServer: Server = createServer((req, res) => {
    if (draining) res.setHeader("connection", "close");
    return dispatch(req, res);
  });

  // What yoga's context takes as the request of an operation on a socket: one for all of them,
  // as none has a request of its own (a Request with its headers, signal and URL was ~1.5 KiB
  // per subscriber: docs/benchmarks.md, "What a subscriber costs"). It carries no token:
  // the context authenticates an operation on a socket with its connectionParams (above). POST:
  // a socket carries mutations too (yoga refuses mutations on a GET request).
  const WS_OPERATION_REQUEST = new Request(`http://localhost${yoga.graphqlEndpoint}`, { method: "POST" });
  // A message over the body limit closes the socket with 1009 (message too big) before parsing.
  const wsServer = new WebSocketServer({ server: httpServer, path: yoga.graphqlEndpoint, maxPayload: deps.config.maxBodyBytes });
  const wsCleanup = serveGraphqlWs(
    {
      onConnect: operator.ws.onConnect,
      onComplete: operator.ws.onComplete,
      onClose: operator.ws.onClose,
      // HTTP and WebSocket share one context factory (graphql-yoga's graphql-ws example).
      execute: (args: any) => args.rootValue.execute(args),
      subscribe: (args: any) => args.rootValue.subscribe(args),
      // Never throws (a throw closes the whole socket with 4500): a failure ends that operation only.
      onSubscribe: guardSubscribe(async (ctx, id, params) => {
        // The token's rate, taken while the operation's context reads its token (batched) when
        // it may (operator.ts, readsAlongside); nothing is parsed or run before it answers.
        const admitting = operator.ws.admit(ctx);
        // The operation's context starts from what it reads of the socket, not a copy of
        // graphql-ws's own state (held for as long as a subscription lives, and read by nothing).
        const { schema: s, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped(
          new SocketOperation(params, ctx.connectionParams, WS_OPERATION_REQUEST),
        );
        const context = operator.ws.readsAlongside(ctx) ? (async () => contextFactory())() : null;
        // An operation refused by its rate or its document never awaits it; one that goes on gets its failure.
        context?.catch(() => {});
        const refused = await admitting;
        if (refused) return refused;
        let document: DocumentNode;
        try {
          document = parse(params.query);
          const errors = validate(s, document);
          if (errors.length) return errors;
        } catch (error) {
          // A syntax error or a graphql-armor limit throws: refuse the operation, not the socket (4500).
          return operator.ws.refusal(error);
        }
        const args = {
          schema: s,
          operationName: params.operationName,
          document,
          variableValues: params.variables,
          contextValue: await (context ?? contextFactory()),
          rootValue: { execute, subscribe },
        };
        // Lets a shared event result be written straight to this socket (graphql/shared-events.ts).
        args.contextValue.subscriptionSink = socketSink(ctx.extra.socket, id);
        // The token's open operations, counted across processes: over its cap, refused.
        const capped = await operator.ws.track(ctx, id, args.document, params.operationName);
        if (capped) return capped;
        return args;
      }, { logger, retryAfterSeconds: deps.config.unavailableRetryAfterSeconds }),
    },
    wsServer,
    { extra: operator.ws.extra, connectionInitWaitTimeout: operator.ws.connectionInitWaitTimeout, logger: logger.child({ module: "websockets" }) },
  );

  return {
    yoga,
    httpServer,
    routes: routes as readonly HttpRoute[],
    services,
    operator,
    async listen(port: number, host: string): Promise<number> {
      await new Promise<void>((resolve) => httpServer.listen(port, host, resolve));
      const address = httpServer.address();
      return typeof address === "object" && address ? address.port : port;
    },
    /** /readyz answers 503 from now on; everything else is served as before (docs/operations.md, Drain). */
    drain() {
      draining = true;
    },
    get draining() {
      return draining;
    },
    /**
     * Stops accepting connections, closes WebSockets with 1001, lets in-flight requests finish
     * (those still running after `requestsMs` are cut), then stops the workers.
     */
    async close(options: { requestsMs?: number } = {}) {
      draining = true;
      const closed = new Promise<void>((resolve) => httpServer.close(() => resolve()));
      httpServer.closeIdleConnections?.();
      await wsCleanup.dispose();
      wsServer.close();
      // Agents waiting on tasks/result resume elsewhere at once (Last-Event-ID) instead of holding this node's exit.
      if (services.approvals.gateway) cutTaskWaits(services.approvals.gateway);
      let bound: NodeJS.Timeout | undefined;
      await Promise.race([closed, new Promise<void>((resolve) => (bound = setTimeout(resolve, options.requestsMs ?? 10_000)))]);
      clearTimeout(bound);
      httpServer.closeAllConnections?.();
      await operator.close();
      await services.close();
    },
  };
}

export type App = ReturnType<typeof createApp>;
