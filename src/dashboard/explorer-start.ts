// The explorer's start script (served as /explorer/<v>/start.js, bundled by http.ts): reads the
// page's options, prefills the token header, and gives GraphiQL a fetcher of our own.
//
// Why a fetcher: yoga's GraphiQL sends the header editor's headers with HTTP requests only; its
// WebSocket opens with an empty connection_init payload, and the server authenticates a socket
// there and nowhere else. This fetcher sends queries and mutations over HTTP with the tab's
// headers, and subscriptions over graphql-ws with the same headers as the connection_init
// payload: one socket per distinct set of headers, so a tab with another token gets a socket of
// its own. A refused or closed socket is shown as a GraphQL error saying why.
import { getOperationAST, parse } from "graphql";
import { createClient, type Client } from "graphql-ws/client";
import { TOKEN_STORAGE_KEY } from "./session.js";

interface FetcherParams {
  query: string;
  operationName?: string | null;
  variables?: Record<string, unknown> | null;
}
interface FetcherOpts {
  headers?: Record<string, unknown>;
}
type Result = { data?: unknown; errors?: Array<{ message: string; extensions?: Record<string, unknown> }> };

declare const YogaGraphiQL: { renderYogaGraphiQL(root: Element, options: Record<string, unknown>): void };

const endpoint = new URL("/graphql", location.href);

function isSubscription(params: FetcherParams): boolean {
  try {
    return getOperationAST(parse(params.query), params.operationName ?? undefined)?.operation === "subscription";
  } catch {
    return false; // the server answers a syntax error with its own message
  }
}

function stringHeaders(headers: Record<string, unknown> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers ?? {})) if (v !== undefined && v !== null) out[k] = String(v);
  return out;
}

/** The authorization value whatever its spelling in the header editor. */
function authorizationOf(headers: Record<string, string>): string | undefined {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === "authorization");
  return key ? headers[key] : undefined;
}

/** Why a socket ended, in words (graphql-ws hands over a CloseEvent or an Event). */
function socketProblem(error: unknown): Result {
  if (Array.isArray(error)) return { errors: error as Result["errors"] };
  const close = error as { code?: number; reason?: string };
  if (typeof close?.code === "number") {
    const auth = close.code === 4401 || close.code === 4403;
    return {
      errors: [
        {
          message: auth
            ? `The server refused the subscription's connection (${close.code}${close.reason ? ` ${close.reason}` : ""}): put a valid token in the Authorization header.`
            : `The subscription's connection closed (${close.code}${close.reason ? ` ${close.reason}` : ""}).`,
          extensions: { code: auth ? "UNAUTHENTICATED" : "SOCKET_CLOSED", closeCode: close.code },
        },
      ],
    };
  }
  return { errors: [{ message: `Countersign is not reachable over WebSocket at ${endpoint.host}.`, extensions: { code: "UNREACHABLE" } }] };
}

const sockets = new Map<string, Client>();

function socketFor(headers: Record<string, string>): Client {
  const key = JSON.stringify(Object.entries(headers).sort());
  let client = sockets.get(key);
  if (!client) {
    const authorization = authorizationOf(headers);
    client = createClient({
      url: `${endpoint.protocol === "https:" ? "wss:" : "ws:"}//${endpoint.host}${endpoint.pathname}`,
      // The tab's headers, with `authorization` spelled as the server reads it.
      connectionParams: { ...headers, ...(authorization !== undefined ? { authorization } : {}) },
      lazy: true,
      retryAttempts: 0,
    });
    const forget = () => sockets.get(key) === client && sockets.delete(key);
    client.on("closed", forget);
    sockets.set(key, client);
  }
  return client;
}

async function* subscribe(params: FetcherParams, headers: Record<string, string>): AsyncGenerator<Result> {
  const iterator = socketFor(headers).iterate({ query: params.query, operationName: params.operationName ?? undefined, variables: params.variables ?? {} });
  try {
    for await (const message of iterator) yield message as Result;
  } catch (error) {
    yield socketProblem(error);
  }
}

async function post(params: FetcherParams, headers: Record<string, string>): Promise<Result> {
  let response: Response;
  try {
    response = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/graphql-response+json, application/json", ...headers },
      body: JSON.stringify({ query: params.query, operationName: params.operationName ?? undefined, variables: params.variables ?? {} }),
      credentials: "same-origin",
    });
  } catch {
    return { errors: [{ message: `Countersign is not reachable at ${endpoint.origin}: is the server running?`, extensions: { code: "UNREACHABLE" } }] };
  }
  try {
    return (await response.json()) as Result;
  } catch {
    return { errors: [{ message: `${endpoint.href} answered HTTP ${response.status} without a GraphQL response.` }] };
  }
}

export function explorerFetcher(params: FetcherParams, opts?: FetcherOpts): Promise<Result> | AsyncGenerator<Result> {
  const headers = stringHeaders(opts?.headers);
  return isSubscription(params) ? subscribe(params, headers) : post(params, headers);
}

function start(): void {
  const assets = document.currentScript?.getAttribute("data-assets") ?? "";
  const options = JSON.parse(document.getElementById("explorer-options")!.textContent!) as Record<string, unknown> & { defaultTabs?: Array<{ headers?: string | null }> };
  const url = new URL(location.href);
  let token = url.searchParams.get("token");
  if (token) {
    sessionStorage.setItem(TOKEN_STORAGE_KEY, token);
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  } else {
    token = sessionStorage.getItem(TOKEN_STORAGE_KEY);
  }
  if (token) {
    const headers = JSON.stringify({ Authorization: `Bearer ${token.replace(/^Bearer\s+/i, "")}` }, null, 2);
    options.headers = headers;
    options.defaultHeaders = headers;
    for (const tab of options.defaultTabs ?? []) tab.headers = headers;
  }
  options.fetcher = explorerFetcher;
  const workers: Record<string, string> = { editorWorkerService: "editor.worker.js", json: "json.worker.js", graphql: "graphql.worker.js" };
  (self as unknown as { MonacoEnvironment: unknown }).MonacoEnvironment = {
    globalAPI: false,
    getWorkerUrl: (_id: string, label: string) => `${assets}/${workers[label] ?? workers.editorWorkerService}`,
  };
  const script = document.createElement("script");
  script.src = `${assets}/graphiql.js`;
  script.onload = () => YogaGraphiQL.renderYogaGraphiQL(document.getElementById("root")!, options);
  document.body.appendChild(script);
}

start();
