// The dashboard's and explorer's HTTP routes, served beside /graphql by app.ts:
//   GET /                      the dashboard page
//   GET /dashboard/app.js      src/dashboard/app.ts bundled for the browser by esbuild (once, on
//                              first request, then kept in memory)
//   GET /dashboard/style.css
//   GET /explorer/<v>/start.js src/dashboard/explorer-start.ts bundled (the explorer's fetcher)
//   GET /dashboard/plan-page.css  the plan page's and decided calls' styles (loaded by dom.ts)
//   GET /explorer/<v>/…        GraphiQL's bundle, styles and editor workers (render-graphiql)
// Everything else falls through to GraphQL.
import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { EXPLORER_ASSETS, EXPLORER_STYLE } from "./explorer.js";

/** edge/http.ts's HttpHandler, restated so that dashboard/ imports nothing from the server side. */
type HttpHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean> | boolean;

interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer | null;
  /** Immutable assets (versioned URL) may be cached by the browser. */
  immutable: boolean;
}

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

// The page holds a bearer token: only our own scripts and connections.
const DASHBOARD_CSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

function asset(type: string, body: string | Buffer, immutable = false): Asset {
  const buffer = typeof body === "string" ? Buffer.from(body) : body;
  return { type, body: buffer, gzip: buffer.length > 1024 ? gzipSync(buffer) : null, immutable };
}

/** A browser bundle of one entry and what it imports (graphql-ws's browser client, the documents). */
async function buildBundle(entry: string, format: "esm" | "iife"): Promise<string> {
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [here(entry)],
    bundle: true,
    format,
    platform: "browser",
    target: ["es2022"],
    minify: true,
    write: false,
    logLevel: "silent",
    legalComments: "none",
  });
  return result.outputFiles[0]!.text;
}

/** The dashboard bundle: app.ts and what it imports. */
export const buildDashboardBundle = () => buildBundle("./app.ts", "esm");

async function explorerAsset(name: string): Promise<Asset | null> {
  // Ours: they change without the version in the path changing, so revalidated, never immutable.
  if (name === "start.js") return asset("text/javascript; charset=utf-8", await buildBundle("./explorer-start.ts", "iife"));
  if (name === "countersign.css") return asset("text/css; charset=utf-8", EXPLORER_STYLE);
  const graphiql = await import("@graphql-yoga/render-graphiql/graphiql");
  const sources: Record<string, [string, string]> = {
    "graphiql.js": ["text/javascript; charset=utf-8", graphiql.js],
    "graphiql.css": ["text/css; charset=utf-8", graphiql.css],
    "editor.worker.js": ["text/javascript; charset=utf-8", graphiql.editorWorkerService],
    "json.worker.js": ["text/javascript; charset=utf-8", graphiql.jsonWorker],
    "graphql.worker.js": ["text/javascript; charset=utf-8", graphiql.graphqlWorker],
  };
  const source = sources[name];
  return source ? asset(source[0], source[1], true) : null;
}

function send(req: IncomingMessage, res: ServerResponse, a: Asset, extra: Record<string, string> = {}): void {
  const gzip = a.gzip && /\bgzip\b/.test(String(req.headers["accept-encoding"] ?? ""));
  const body = gzip ? a.gzip! : a.body;
  res.writeHead(200, {
    "content-type": a.type,
    "content-length": String(body.length),
    "cache-control": a.immutable ? "public, max-age=31536000, immutable" : "no-cache",
    "x-content-type-options": "nosniff",
    vary: "accept-encoding",
    ...(gzip ? { "content-encoding": "gzip" } : {}),
    ...extra,
  });
  res.end(req.method === "HEAD" ? undefined : body);
}

export function createDashboardHttp(): HttpHandler {
  const cache = new Map<string, Promise<Asset | null>>();
  const cached = (key: string, make: () => Promise<Asset | null>) => {
    let entry = cache.get(key);
    if (!entry) {
      entry = make();
      cache.set(key, entry);
      // A failed build is retried on the next request rather than cached, and a path that names
      // no asset is not kept (the explorer's prefix takes any name: the map must not grow with them).
      entry.then(
        (found) => found === null && cache.delete(key),
        () => cache.delete(key),
      );
    }
    return entry;
  };

  const handle: HttpHandler = async (req, res, url) => {
    if (req.method !== "GET" && req.method !== "HEAD") return false;
    const path = url.pathname;
    let a: Asset | null = null;
    if (path === "/" || path === "/index.html") {
      a = await cached("/", async () => asset("text/html; charset=utf-8", readFileSync(here("./index.html"))));
      send(req, res, a!, { "content-security-policy": DASHBOARD_CSP, "referrer-policy": "no-referrer" });
      return true;
    }
    if (path === "/dashboard/style.css") a = await cached(path, async () => asset("text/css; charset=utf-8", readFileSync(here("./style.css"))));
    else if (path === "/dashboard/plan-page.css") a = await cached(path, async () => asset("text/css; charset=utf-8", readFileSync(here("./plan-page.css"))));
    else if (path === "/dashboard/app.js") a = await cached(path, async () => asset("text/javascript; charset=utf-8", await buildDashboardBundle()));
    else if (path.startsWith(`${EXPLORER_ASSETS}/`)) a = await cached(path, () => explorerAsset(path.slice(EXPLORER_ASSETS.length + 1)));
    else return false;
    if (!a) return false;
    send(req, res, a);
    return true;
  };
  return async (req, res, url) => {
    try {
      return await handle(req, res, url);
    } catch (error) {
      // A broken bundle must say so, not hang the request.
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
      res.end(`Dashboard asset failed: ${(error as Error).message}`);
      return true;
    }
  };
}
