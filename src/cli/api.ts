// The chatops client's transport: queries and mutations over fetch (GraphQL over HTTP), and
// subscriptions over graphql-ws with `ws`, both carrying `Authorization: Bearer <token>`.
// Every failure becomes a CliError whose message says what to do next.
import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";
import type { TypedDocumentString } from "../generated/graphql/graphql.js";

export const DEFAULT_URL = "http://localhost:4000";

export const GET_A_TOKEN =
  "Get a token: on the embedded default (`npm start` with no DATABASE_URL) one is printed for each demo member at first start; " +
  "otherwise ask an admin to run `npm run cli -- admin create-token --org <org-slug> --email <your email>`. " +
  "Then `export COUNTERSIGN_TOKEN=cs_…`.";

/** An expected failure: printed as its message (and hint), exit code 1. */
export class CliError extends Error {
  override readonly name = "CliError";
  readonly code: string;
  readonly hint: string | undefined;
  readonly details: unknown;
  constructor(code: string, message: string, options: { hint?: string; details?: unknown } = {}) {
    super(message);
    this.code = code;
    this.hint = options.hint;
    this.details = options.details;
  }
}

interface GraphQLResponse<T> {
  data?: T | null;
  errors?: Array<{ message: string; extensions?: { code?: string } & Record<string, unknown> }>;
}

export interface ApiOptions {
  url?: string | undefined;
  token?: string | undefined;
  /** How many times a dropped subscription connection is retried (default 5). */
  retryAttempts?: number;
}

/** `http://host:port` (with or without a trailing /graphql) → the HTTP and WebSocket endpoints. */
export function endpoints(base: string): { http: string; ws: string } {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new CliError("bad_url", `COUNTERSIGN_URL is not a URL: ${base}`, { hint: `Use e.g. ${DEFAULT_URL}` });
  }
  if (!url.pathname.endsWith("/graphql")) url.pathname = `${url.pathname.replace(/\/$/, "")}/graphql`;
  const http = url.toString();
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return { http, ws: url.toString() };
}

/**
 * The API at COUNTERSIGN_URL as COUNTERSIGN_TOKEN. A missing token or a bad URL surfaces on the
 * first call, so a command checks its arguments (usage, exit 2) before it needs either.
 */
export class Api {
  readonly url: string;
  private readonly token: string;
  private wsClient: Client | null = null;
  /** How many times a dropped subscription connection is retried; set before subscribing. */
  retryAttempts: number;

  constructor(options: ApiOptions) {
    this.url = options.url || DEFAULT_URL;
    this.token = (options.token ?? "").trim().replace(/^Bearer\s+/i, "");
    this.retryAttempts = options.retryAttempts ?? 5;
  }

  private get authorization(): string {
    if (!this.token) throw new CliError("no_token", "COUNTERSIGN_TOKEN is not set.", { hint: GET_A_TOKEN });
    return `Bearer ${this.token}`;
  }

  private get http(): string {
    return endpoints(this.url).http;
  }

  private get ws(): string {
    return endpoints(this.url).ws;
  }

  /** One query or mutation. GraphQL errors (outside result unions) throw a CliError. */
  async request<TResult, TVariables>(document: TypedDocumentString<TResult, TVariables>, variables?: TVariables): Promise<TResult> {
    const { authorization, http } = this;
    let response: Response;
    try {
      response = await fetch(http, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/graphql-response+json, application/json", authorization },
        body: JSON.stringify({ query: document.toString(), variables: variables ?? {} }),
      });
    } catch (error) {
      throw this.unreachable(error);
    }
    let body: GraphQLResponse<TResult>;
    try {
      body = (await response.json()) as GraphQLResponse<TResult>;
    } catch {
      throw new CliError("bad_response", `${this.http} answered HTTP ${response.status} without a GraphQL response.`, {
        hint: "Check that COUNTERSIGN_URL points at a Countersign server.",
      });
    }
    if (body.errors?.length) throw fromGraphQLErrors(body.errors);
    if (!body.data) throw new CliError("bad_response", `${this.http} answered HTTP ${response.status} with no data.`);
    return body.data;
  }

  /**
   * A subscription: `onNext` runs for each message, in order; resolves when the server
   * completes it, `onNext` returns "stop" or `signal` aborts; rejects on an error.
   */
  subscribe<TResult, TVariables>(
    document: TypedDocumentString<TResult, TVariables>,
    variables: TVariables,
    onNext: (data: TResult) => "stop" | void | Promise<"stop" | void>,
    signal?: AbortSignal,
  ): Promise<void> {
    let client: Client;
    try {
      client = this.socket();
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      let chain = Promise.resolve();
      const finish = (error?: unknown) => {
        if (settled) return;
        settled = true;
        unsubscribe();
        if (error) reject(error);
        else resolve();
      };
      const unsubscribe = client.subscribe<TResult>(
        { query: document.toString(), variables: (variables ?? {}) as Record<string, unknown> },
        {
          next: (message) => {
            chain = chain.then(async () => {
              if (settled) return;
              if (message.errors?.length) return finish(fromGraphQLErrors(message.errors));
              if (message.data && (await onNext(message.data)) === "stop") finish();
            }).catch(finish);
          },
          error: (error) => void chain.then(() => finish(this.socketError(error))),
          complete: () => void chain.then(() => finish()),
        },
      );
      if (signal?.aborted) finish();
      else signal?.addEventListener("abort", () => finish(), { once: true });
    });
  }

  async close(): Promise<void> {
    await this.wsClient?.dispose();
    this.wsClient = null;
  }

  private socket(): Client {
    if (this.wsClient) return this.wsClient;
    const { authorization, ws } = this;
    this.wsClient = createClient({
      url: ws,
      webSocketImpl: WebSocket,
      connectionParams: { authorization },
      lazy: true,
      // A dropped connection is retried; re-subscribing sends the current status first.
      retryAttempts: this.retryAttempts,
      // Exponential from 1 s, capped at 30 s (with jitter), so a long wait keeps reconnecting.
      retryWait: (retries) => new Promise((resolve) => setTimeout(resolve, Math.min(1000 * 2 ** retries, 30_000) + Math.random() * 1000)),
      shouldRetry: (event) => !isCloseEvent(event) || event.code < 4400 || event.code >= 4500,
    });
    return this.wsClient;
  }

  private unreachable(error: unknown): CliError {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? (error as Error).message;
    return new CliError("unreachable", `Cannot reach Countersign at ${this.url} (${why}).`, {
      hint: "Is the server running (`npm start`)? Set COUNTERSIGN_URL if it listens elsewhere.",
    });
  }

  private socketError(error: unknown): CliError {
    if (error instanceof CliError) return error;
    if (Array.isArray(error)) return fromGraphQLErrors(error);
    if (isCloseEvent(error)) {
      return new CliError("socket_closed", `The subscription connection to ${this.ws} closed (${error.code}${error.reason ? ` ${error.reason}` : ""}).`, {
        hint: error.code === 4403 || error.code === 4401 ? GET_A_TOKEN : "Check COUNTERSIGN_URL and that the server is running.",
      });
    }
    const message = (error as { message?: string }).message ?? String(error);
    if (/ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ECONNRESET/.test(message) || (error as { type?: string }).type === "error") {
      return new CliError("unreachable", `Cannot reach Countersign at ${this.url} over WebSocket (${message || "connection failed"}).`, {
        hint: "Is the server running (`npm start`)? Set COUNTERSIGN_URL if it listens elsewhere.",
      });
    }
    return new CliError("socket_error", message);
  }
}

function isCloseEvent(value: unknown): value is { code: number; reason: string } {
  return typeof value === "object" && value !== null && "code" in value && typeof (value as { code: unknown }).code === "number" && "reason" in value;
}

function fromGraphQLErrors(errors: ReadonlyArray<NonNullable<GraphQLResponse<unknown>["errors"]>[number]>): CliError {
  const first = errors[0]!;
  const code = first.extensions?.code ?? "graphql_error";
  const message = errors.map((e) => e.message).join("; ");
  if (code === "UNAUTHENTICATED") {
    return new CliError("unauthenticated", "The server did not accept COUNTERSIGN_TOKEN (unknown, revoked or expired).", { hint: GET_A_TOKEN });
  }
  if (code === "GRAPHQL_VALIDATION_FAILED") {
    return new CliError("schema_mismatch", `The server rejected the operation: ${message}`, {
      hint: "This CLI and the server disagree on the schema: update one of them (npm install runs the generator).",
    });
  }
  return new CliError(String(code).toLowerCase(), message, { details: errors });
}

/** A mutation result union's error member (anything with `code` and `message`). */
export interface MutationError {
  __typename: string;
  code: string;
  message: string;
  missing?: { resourceType: string; action: string; matchValue: string | null } | null;
  issues?: Array<{ field: string; code: string; message: string }>;
  currentRevision?: number | null;
  resource?: string;
  state?: string;
}

/** A typed mutation error as a CliError that says what to do next. */
export function fromMutationError(error: MutationError): CliError {
  switch (error.__typename) {
    case "UnauthenticatedError":
      return new CliError("unauthenticated", error.message, { hint: GET_A_TOKEN, details: error });
    case "PermissionDeniedError": {
      const m = error.missing;
      const tuple = m ? ` You lack (${m.resourceType}, ${m.action}${m.matchValue ? `, ${m.matchValue}` : ""}).` : "";
      return new CliError("permission_denied", `${error.message}.${tuple}`.replace(/\.\./g, "."), {
        hint: "Ask an admin for a role granting it (`countersign whoami` shows who you are).",
        details: error,
      });
    }
    case "NotFoundError":
      return new CliError("not_found", error.message, { hint: "Check the id (`countersign workspaces` lists what you can see).", details: error });
    case "ValidationError":
      return new CliError("validation", [error.message, ...(error.issues ?? []).map((i) => `  ${i.field}: ${i.message}`)].join("\n"), { details: error });
    case "ConflictError":
      return new CliError("conflict", error.message, { hint: "Re-read the current state and try again.", details: error });
    case "InvalidStateError":
      return new CliError("invalid_state", error.message, { details: error });
    default:
      return new CliError(error.code || "error", error.message, { details: error });
  }
}
