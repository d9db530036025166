// Dependency outages as answers, not crashes.
//
// One classifier (isUnavailableError) says whether a failure means "a dependency is unreachable
// for now" — PostgreSQL stopped, restarting or refusing connections, a connection cut — rather
// than a bug. Such a failure is answered as retryable: HTTP 503 with Retry-After, GraphQL
// extensions.code SERVICE_UNAVAILABLE with retryAfterSeconds; over graphql-ws it ends that one
// operation, never the socket (graphql-ws clients treat close code 4500 as fatal and never
// reconnect).

import { randomUUID } from "node:crypto";
import { GraphQLError } from "graphql";
import type { Logger } from "./logger.js";

export const SERVICE_UNAVAILABLE = "SERVICE_UNAVAILABLE";

/** Node socket errors that mean the peer is unreachable or went away. */
const SOCKET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "ENETUNREACH", "ECONNABORTED", "ENOTFOUND", "EAI_AGAIN"]);
/**
 * Prisma's codes for the same (driver adapters map the driver's errors to these): P1001 can't
 * reach the server, P1002 timed out reaching it, P1008 socket timeout, P1017 server closed the
 * connection, P2024 timed out waiting for a pool connection, P2037 too many connections.
 */
const PRISMA_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024", "P2037"]);
/** Driver-adapter error kinds (meta.driverAdapterError.cause.kind) for the same. */
const ADAPTER_KINDS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections"]);
/** node-postgres errors without a code that mean the connection is gone. */
const PG_MESSAGES = [
  /connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /client has encountered a connection error and is not queryable/i,
  /cannot use a pool after calling end/i,
  /connection (is )?closed/i,
];

/**
 * PostgreSQL SQLSTATEs: class 08 (connection exception), 57P01 admin_shutdown, 57P02
 * crash_shutdown, 57P03 cannot_connect_now (starting up or shutting down), 53300
 * too_many_connections.
 */
function isUnavailableSqlState(code: string): boolean {
  return /^08[0-9A-Z]{3}$/.test(code) || code === "57P01" || code === "57P02" || code === "57P03" || code === "53300";
}

/**
 * Whether `error` (or anything it wraps: GraphQL originalError, cause, Prisma's driver-adapter
 * meta, AggregateError members) says a dependency is unreachable for now.
 */
export function isUnavailableError(error: unknown, depth = 0): boolean {
  if (depth > 8 || error === null || typeof error !== "object") return false;
  const e = error as {
    code?: unknown;
    message?: unknown;
    kind?: unknown;
    originalCode?: unknown;
    originalError?: unknown;
    cause?: unknown;
    meta?: { driverAdapterError?: unknown };
    errors?: unknown;
    name?: unknown;
  };
  if (typeof e.code === "string") {
    if (SOCKET_CODES.has(e.code) || PRISMA_CODES.has(e.code) || isUnavailableSqlState(e.code)) return true;
  }
  if (typeof e.originalCode === "string" && isUnavailableSqlState(e.originalCode)) return true;
  if (typeof e.kind === "string" && ADAPTER_KINDS.has(e.kind)) return true;
  if (e.name === "MaxRetriesPerRequestError") return true;
  if (typeof e.message === "string" && PG_MESSAGES.some((re) => re.test(e.message as string))) return true;
  if (e.name === "PrismaClientInitializationError") return true;
  const inner = [e.originalError, e.cause, e.meta?.driverAdapterError, ...(Array.isArray(e.errors) ? e.errors : [])];
  return inner.some((x) => x !== error && isUnavailableError(x, depth + 1));
}

/**
 * The GraphQL error a client gets while a dependency is down. `http` makes graphql-yoga answer
 * 503 with Retry-After (it strips the `http` extension from the body).
 */
export function unavailableGraphQLError(retryAfterSeconds: number, options: { http?: boolean; path?: readonly (string | number)[] } = {}): GraphQLError {
  return new GraphQLError("A dependency of this service is unavailable; retry shortly.", {
    path: options.path,
    extensions: {
      code: SERVICE_UNAVAILABLE,
      retryable: true,
      retryAfterSeconds,
      ...(options.http === false ? {} : { http: { status: 503, headers: { "Retry-After": String(retryAfterSeconds) } } }),
    },
  });
}

/**
 * A graphql-ws onSubscribe hook that never throws: graphql-ws closes the whole socket with 4500
 * on a throw from it (authentication and context building read the database). A dependency
 * outage ends that one operation with SERVICE_UNAVAILABLE; anything else with a masked error
 * carrying the id that is logged.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function guardSubscribe<F extends (...args: any[]) => Promise<unknown>>(onSubscribe: F, options: { logger: Logger; retryAfterSeconds: number }): F {
  return (async (...args: Parameters<F>) => {
    try {
      return await onSubscribe(...args);
    } catch (error) {
      // Already shaped by the error mask (the context factory's failures pass through it): sent
      // as it is, less the HTTP-only extension.
      if (error instanceof GraphQLError && typeof error.extensions?.code === "string") {
        const { http: _http, ...extensions } = error.extensions as Record<string, unknown>;
        if (error.extensions.code === SERVICE_UNAVAILABLE) options.logger.warn("subscription refused: a dependency is unavailable");
        return [new GraphQLError(error.message, { extensions })];
      }
      if (isUnavailableError(error)) {
        options.logger.warn({ err: String(error) }, "subscription refused: a dependency is unavailable");
        return [unavailableGraphQLError(options.retryAfterSeconds, { http: false })];
      }
      const errorId = randomUUID();
      options.logger.error({ err: error, errorId }, "unexpected error starting a subscription");
      return [new GraphQLError(`Unexpected error (id ${errorId})`, { extensions: { code: "INTERNAL_SERVER_ERROR", errorId } })];
    }
  }) as F;
}
