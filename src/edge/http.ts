import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";

/** What answers one route: true when it answered, false when the path names nothing after all (404). */
export type HttpHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean> | boolean;

/**
 * A body signed by a third party with a secret shared with an integration (Slack, HCP Terraform,
 * GitHub). Such a route is reachable by anyone who knows its path, so it takes a per-address
 * allowance before any body is read (`limitByAddress`); test/edge/ checks every one does.
 */
export type SignatureCredential = `${string}-signature`;

/** The credential a route takes; the edge tests send a valid one, and none. */
export type RouteCredential = "none" | "api-token" | "virtual-key" | "service-token" | "metrics-token" | SignatureCredential;

export const isSignatureCredential = (credential: RouteCredential): credential is SignatureCredential => credential.endsWith("-signature");

/**
 * One HTTP route the server mounts. src/app.ts declares every route in one table (ROUTES there),
 * the server dispatches from it and nothing else, and test/edge/ reads the same table, so a new
 * route is covered by the edge tests the day it is added.
 */
export interface HttpRoute {
  /** The module that serves it (logs, docs/threats.md). */
  readonly owner: string;
  /** The methods it answers; any other is 405 with Allow. */
  readonly methods: readonly string[];
  /** An exact path, or with `prefix` every path that starts with it. */
  readonly path: string;
  readonly prefix?: boolean;
  readonly credential: RouteCredential;
  readonly handle: HttpHandler;
}

/** One request's turn at an allowance: taken, or refused with the time until one is back. */
export type AllowanceTake = { ok: true } | { ok: false; retryAfterMs: number };

/**
 * The route with an allowance per client address taken before its handler reads anything: past
 * it, 429 with Retry-After and the body unread. `take` null: no limit (configured off).
 */
export function limitByAddress(
  route: HttpRoute,
  take: ((key: string) => Promise<AllowanceTake> | AllowanceTake) | null,
  addressOf: (req: IncomingMessage) => string | undefined,
): HttpRoute {
  if (!take) return route;
  return {
    ...route,
    handle: async (req, res, url) => {
      const taken = await take(`addr:${addressOf(req) ?? "unknown"}`);
      if (!taken.ok) {
        const seconds = Math.max(1, Math.ceil(taken.retryAfterMs / 1000));
        sendJson(res, 429, { error: "rate_limited", retry_after_seconds: seconds }, { "retry-after": String(seconds), connection: "close" });
        req.resume();
        return true;
      }
      return route.handle(req, res, url);
    },
  };
}

export function matchRoute(routes: readonly HttpRoute[], pathname: string): HttpRoute | null {
  for (const route of routes) {
    if (route.prefix ? pathname.startsWith(route.path) : pathname === route.path) return route;
  }
  return null;
}

type ErrorLogger = { error(obj: object, msg: string): void };

/**
 * The server's one request listener: the route for the path, 404 without one, 405 for a method
 * it does not take. Never rejects: whatever a handler throws is answered 500 with an error id
 * (logged with the error), or, when the answer had already begun, the socket is closed. A request
 * can fail; it cannot take the process, or anyone else's requests, down with it.
 */
export function createDispatcher(routes: readonly HttpRoute[], logger: ErrorLogger) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // A client that goes away mid-body or mid-answer: an 'error' nobody listens to would be thrown.
    req.on("error", () => {});
    res.on("error", () => {});
    let route: HttpRoute | null = null;
    try {
      const url = new URL(req.url ?? "/", "http://localhost");
      route = matchRoute(routes, url.pathname);
      if (!route) return sendJson(res, 404, { error: "not_found" });
      const method = req.method ?? "GET";
      if (!route.methods.includes(method)) return sendJson(res, 405, { error: "method_not_allowed" }, { allow: route.methods.join(", ") });
      if (!(await route.handle(req, res, url)) && !res.headersSent) sendJson(res, 404, { error: "not_found" });
    } catch (error) {
      answerUnexpected(req, res, error, logger, route?.owner);
    }
  };
}

/** 500 with an error id the log line carries too; a half-sent answer is cut (the client sees the failure). */
export function answerUnexpected(req: IncomingMessage, res: ServerResponse, error: unknown, logger: ErrorLogger, owner?: string): void {
  const errorId = randomUUID();
  try {
    logger.error({ err: error, errorId, method: req.method, path: safePath(req), owner }, "unexpected error answering a request");
  } catch {}
  if (res.headersSent || res.writableEnded) {
    res.destroy();
    return;
  }
  sendJson(res, 500, { error: "internal_error", message: `Unexpected error (id ${errorId})`, error_id: errorId }, { connection: "close" });
  // Whatever of the body is still coming is discarded, so the client can read the answer.
  req.resume();
}

function safePath(req: IncomingMessage): string {
  const raw = req.url ?? "/";
  const q = raw.indexOf("?");
  return (q === -1 ? raw : raw.slice(0, q)).slice(0, 200);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store", ...headers }).end(JSON.stringify(body));
}
