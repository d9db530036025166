import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { createYoga, maskError, type Plugin, type YogaInitialContext } from "graphql-yoga";
import { useServer } from "graphql-ws/use/ws";
import { WebSocketServer, type WebSocket } from "ws";
import { maxAliasesPlugin } from "@escape.tech/graphql-armor-max-aliases";
import { maxDepthPlugin } from "@escape.tech/graphql-armor-max-depth";
import { maxTokensPlugin } from "@escape.tech/graphql-armor-max-tokens";
import { costLimitPlugin } from "@escape.tech/graphql-armor-cost-limit";
import { GraphQLError } from "graphql";
import { authenticate } from "./auth/authenticate.js";
import { bearerFrom } from "./auth/tokens.js";
import { Authz } from "./authz/authz.js";
import type { Context } from "./graphql/context.js";
import { schema } from "./graphql/schema/index.js";
import { useSharedEventResults } from "./graphql/shared-events.js";
import type { Config } from "./infra/config.js";
import type { Database } from "./infra/db.js";
import type { EventBus } from "./infra/events.js";
import type { Logger } from "./infra/logger.js";
import { createServices } from "./services/index.js";
import { AppError } from "./errors.js";
import { explorerOptions, renderExplorer } from "./dashboard/explorer.js";
import { guardSubscribe, isUnavailableError, unavailableGraphQLError } from "./infra/faults.js";

export interface AppDeps {
  config: Config;
  db: Database;
  events: EventBus;
  logger: Logger;
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
  return {
    id,
    send: (data) => {
      if (socket.readyState !== socket.OPEN || socket.bufferedAmount > 0) return false;
      socket.send(data);
      return true;
    },
  };
}

export function createApp(deps: AppDeps) {
  const { db, events, logger } = deps;
  const services = createServices(deps);

  async function buildContext(authorization: string | null | undefined, requestId: string): Promise<Context> {
    const viewer = await authenticate(db.sql, bearerFrom(authorization));
    return {
      requestId,
      logger: logger.child({ requestId, userId: viewer?.userId }),
      db,
      events,
      viewer,
      authz: new Authz(db.sql, viewer),
      services,
    };
  }

  const yoga = createYoga<{ req?: IncomingMessage }, Context>({
    schema,
    logging: false,
    // The explorer: our own assets, the token header prefilled (from ?token= or the dashboard's
    // sessionStorage), one example tab per operations/ file (src/dashboard/explorer.ts).
    graphiql: explorerOptions(),
    renderGraphiQL: renderExplorer,
    landingPage: false,
    context: async (initial: YogaInitialContext & { req?: IncomingMessage; connectionParams?: Record<string, unknown> }) => {
      const requestId = initial.request.headers.get("x-request-id") ?? randomUUID();
      const fromWs = initial.connectionParams?.authorization ?? initial.connectionParams?.Authorization;
      const authorization = typeof fromWs === "string" ? fromWs : initial.request.headers.get("authorization");
      return buildContext(authorization, requestId);
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
        if ((error as GraphQLError).extensions?.code) return error as Error;
        // PostgreSQL (or Redis) unreachable: retryable, 503 + Retry-After over HTTP (infra/faults.ts).
        if (isUnavailableError(original ?? error)) return unavailableGraphQLError(deps.config.unavailableRetryAfterSeconds, { path: (error as GraphQLError).path });
        const errorId = randomUUID();
        logger.error({ err: original ?? error, errorId }, "unexpected error");
        const masked = maskError(error, `Unexpected error (id ${errorId})`, isDev) as GraphQLError;
        return masked;
      },
    },
    plugins: [
      <Plugin<Context>>{
        // One structured line per operation, carrying the request id its context logger has.
        onExecute({ args }) {
          const started = performance.now();
          const ctx = args.contextValue as Context;
          return {
            onExecuteDone({ result }) {
              const errors = "errors" in result && Array.isArray(result.errors) ? result.errors.length : 0;
              ctx.logger.info(
                { operation: args.operationName ?? null, durationMs: Math.round((performance.now() - started) * 10) / 10, errors },
                "graphql operation",
              );
            },
          };
        },
      },
      // planGate / workspaceGates: one execution per (operation, snapshot), shared by subscribers.
      useSharedEventResults(),
      maxDepthPlugin({ n: OPERATION_LIMITS.maxDepth, ignoreIntrospection: true, flattenFragments: true }),
      maxAliasesPlugin({ n: OPERATION_LIMITS.maxAliases }),
      maxTokensPlugin({ n: OPERATION_LIMITS.maxTokens }),
      costLimitPlugin({ maxCost: OPERATION_LIMITS.maxCost, ignoreIntrospection: true }),
    ],
  });

  const httpServer: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname === "/healthz") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ status: "ok" }));
      return;
    }
    if (url.pathname === "/readyz") {
      const [database, eventBus] = await Promise.all([
        db.sql.query("SELECT 1").then(() => true, () => false),
        events.ping(),
      ]);
      const ready = database && eventBus;
      res
        .writeHead(ready ? 200 : 503, { "content-type": "application/json" })
        .end(JSON.stringify({ status: ready ? "ready" : "unavailable", database, eventBus }));
      return;
    }
    const extra = services.http?.(req, res, url);
    if (extra && (await extra)) return;
    return yoga.requestListener(req, res);
  });

  const wsServer = new WebSocketServer({ server: httpServer, path: yoga.graphqlEndpoint });
  const wsCleanup = useServer(
    {
      // HTTP and WebSocket share one context factory (graphql-yoga's graphql-ws example).
      execute: (args: any) => args.rootValue.execute(args),
      subscribe: (args: any) => args.rootValue.subscribe(args),
      // Never throws (a throw closes the whole socket with 4500): a failure ends that operation only.
      onSubscribe: guardSubscribe(async (ctx, id, params) => {
        const { schema: s, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
          ...ctx,
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params,
          connectionParams: ctx.connectionParams,
          request: new Request("http://localhost/graphql", {
            headers: { authorization: String(ctx.connectionParams?.authorization ?? "") },
          }),
        });
        const args = {
          schema: s,
          operationName: params.operationName,
          document: parse(params.query),
          variableValues: params.variables,
          contextValue: await contextFactory(),
          rootValue: { execute, subscribe },
        };
        // Lets a shared event result be written straight to this socket (graphql/shared-events.ts).
        args.contextValue.subscriptionSink = socketSink(ctx.extra.socket, id);
        const errors = validate(args.schema, args.document);
        if (errors.length) return errors;
        return args;
      }, { logger, retryAfterSeconds: deps.config.unavailableRetryAfterSeconds }),
    },
    wsServer,
  );

  return {
    yoga,
    httpServer,
    services,
    async listen(port: number, host: string): Promise<number> {
      await new Promise<void>((resolve) => httpServer.listen(port, host, resolve));
      const address = httpServer.address();
      return typeof address === "object" && address ? address.port : port;
    },
    async close() {
      await wsCleanup.dispose();
      wsServer.close();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
      httpServer.closeAllConnections?.();
      await services.close();
    },
  };
}

export type App = ReturnType<typeof createApp>;
