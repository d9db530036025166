// The source layout (which folder may import which: the table below), checked on the tree as it
// is: every import in src/**/*.ts (value and `import type`, re-exports and dynamic imports;
// src/generated is code generated from the schema and is not read) is parsed, then
//   (a) no import cycle among src files, type-only imports included;
//   (b) each folder imports only what the table below allows.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../src");

// ── The table, once ──────────────────────────────────────────────────────────────────────
//
// A file's unit is its first folder under src/ (src/services/approvals/x.ts is "services"), or,
// for a file at the src/ root, its own name. Imports inside one unit are free. An entry is a
// unit, a folder ("generated/graphql"), a file ("graphql/context.ts"), or "type:" before either (types
// only, `import type` or an import whose every name is `type`).
//
// Rows the layering does not name by itself, stated here:
// - auth/ (who the caller is: tokens, authenticate, live sockets) shares authz/'s row: it may
//   import what authz may, and whoever may import authz may import auth.
// - errors.ts (the table's "errors": the typed error vocabulary) may import domain only.
// - clients/ (code shared by cli/ and the dashboard) may import only what both of them may:
//   generated/graphql.
// - edge/ (the server's HTTP side: the route table's types and dispatcher, the body limit, rate
//   limits, the WebSocket token lifecycle, /metrics, operation logs, CORS) sits beside app.ts:
//   app.ts alone imports it, and it may import what serving a request needs (its row says why).
// - Files at the src/ root: app.ts, main.ts, worker.ts and errors.ts have rows; any other root
//   file fails this test until it is given one.
// - generated/ is not read (it imports nothing of ours).
const DOMAIN: string[] = [
  "errors.ts", // the typed failures the domain throws (errors.ts itself imports only domain types)
];
const GATEWAY = [
  "domain",
  "generated",
  "type:infra/db.ts", // the PostgreSQL store runs its SQL on the shared pool's runner
  "infra/tracing.ts", // a span per upstream request and the traceparent it sends (loads nothing until traces are on)
  "infra/model-rows.ts", // a raw statement's row made its model's, as Prisma reads it (the agent's status read)
];
const INFRA = ["generated"];
const AUTHZ = ["domain", "infra", "errors.ts", "auth"];
// services and graphql may read Prisma's types (rows, JSON values), never import its client.
const SERVICES = ["domain", "authz", "auth", "infra", "gateway", "errors.ts", "type:generated/prisma"];
const WORKERS = ["services", ...SERVICES];
const GRAPHQL = [
  "services",
  "authz",
  "auth",
  "domain",
  "errors.ts",
  "type:infra",
  "type:generated/prisma",
  "gateway/store.ts", // a held call's provider is read from its tool name as the gateway's store reads it
];
const EDGE = [
  "domain", // pure rules and structures (the set of recently proven credentials the limits key on)
  "infra", // the settings, the pool, the event bus, the logger and the token buckets a limit counts in
  "auth", // who sent a request or opened a socket: the bearer token, authentication, live sockets
  "errors.ts", // an operation's outcome in its log line is its AppError code
  "type:graphql/context.ts", // the operation-log plugin reads the request's Context (its logger)
  "services", // /metrics reports the rounds of the live gate hub (services/gate-live.ts)
];
const CLI = [
  "services",
  "infra",
  "clients",
  "generated",
  "domain", // the admin CLI offers the permission catalog's system roles (SYSTEM_ROLE_KEYS)
];
const DASHBOARD = ["clients", "generated/graphql"];

export const MAY_IMPORT: Record<string, readonly string[]> = {
  domain: DOMAIN,
  gateway: GATEWAY,
  infra: INFRA,
  authz: AUTHZ,
  auth: AUTHZ,
  "errors.ts": ["domain"],
  services: SERVICES,
  workers: WORKERS,
  graphql: GRAPHQL,
  edge: EDGE,
  "app.ts": [...new Set(["domain", "gateway", "infra", "authz", "auth", "errors.ts", "services", "workers", "graphql", "edge", "cli", "clients", "dashboard", "generated"])],
  "main.ts": ["app.ts", "workers", "infra"],
  "worker.ts": ["app.ts", "workers", "infra"],
  cli: CLI,
  dashboard: DASHBOARD,
  clients: ["generated/graphql"],
};

// Edges the table forbids that a library forces, each with why; the test fails if one of these
// goes away (delete it here) or a new one appears (fix the import, or argue for a row).
export const KNOWN_EXCEPTIONS: Record<string, string> = {
  "graphql/builder.ts -> generated/pothos-types.ts": "the Pothos Prisma plugin needs the generated types and datamodel (generated/ is otherwise the lower units' only)",
};

// ── Parsing ──────────────────────────────────────────────────────────────────────────────

export interface Edge {
  from: string;
  to: string;
  typeOnly: boolean;
}

/** The source with comments blanked out, strings and template literals kept. */
function withoutComments(src: string): string {
  let out = "";
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    const n = src[i + 1];
    if (c === "/" && n === "/") {
      while (i < src.length && src[i] !== "\n") i++;
    } else if (c === "/" && n === "*") {
      const end = src.indexOf("*/", i + 2);
      i = end < 0 ? src.length : end + 2;
      out += " ";
    } else if (c === '"' || c === "'" || c === "`") {
      let j = i + 1;
      while (j < src.length && src[j] !== c) j += src[j] === "\\" ? 2 : 1;
      out += src.slice(i, j + 1);
      i = j + 1;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

// `import … from "x"`, `export … from "x"` (the clause is names, braces, commas, `*`, `as`,
// `type`), `import("x")` and `import "x"`.
const IMPORT = /\b(?:import|export)\s+([\w\s{},*$]*?)\s*from\s*["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)|\bimport\s*["']([^"']+)["']/g;

function isTypeOnly(clause: string): boolean {
  const c = clause.trim();
  if (/^type\b/.test(c) && !/^type\s*,/.test(c)) return true;
  // `import { type A, type B } from` with no default and no namespace: types only.
  const braces = /^\{([^}]*)\}$/.exec(c);
  if (!braces) return false;
  const names = braces[1]!.split(",").map((s) => s.trim()).filter(Boolean);
  return names.length > 0 && names.every((s) => /^type\s/.test(s));
}

export function sourceFiles(root: string): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (relative(root, path) !== "generated") walk(path);
      } else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) files.push(path);
    }
  };
  walk(root);
  return files.sort();
}

/** Every relative import of every src file, as paths relative to root (x.js resolved to x.ts). */
export function importEdges(root: string): Edge[] {
  const edges: Edge[] = [];
  for (const file of sourceFiles(root)) {
    const text = withoutComments(readFileSync(file, "utf8"));
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[2] ?? m[3] ?? m[4]!;
      if (!spec.startsWith(".")) continue;
      const to = relative(root, resolve(dirname(file), spec)).replace(/\.js$/, ".ts");
      edges.push({ from: relative(root, file), to, typeOnly: m[2] !== undefined && isTypeOnly(m[1]!) });
    }
  }
  return edges;
}

// ── The two rules ────────────────────────────────────────────────────────────────────────

/** One import cycle (its files, first repeated at the end), or null. */
export function findCycle(edges: readonly Edge[]): string[] | null {
  const next = new Map<string, string[]>();
  for (const e of edges) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (file: string): string[] | null => {
    state.set(file, "open");
    stack.push(file);
    for (const to of [...new Set(next.get(file) ?? [])].sort()) {
      if (state.get(to) === "open") return [...stack.slice(stack.indexOf(to)), to];
      if (!state.has(to)) {
        const found = visit(to);
        if (found) return found;
      }
    }
    stack.pop();
    state.set(file, "done");
    return null;
  };
  for (const file of [...next.keys()].sort()) {
    if (state.has(file)) continue;
    const found = visit(file);
    if (found) return found;
  }
  return null;
}

export const unitOf = (path: string) => path.split("/")[0]!;

function allowed(edge: Edge, table: Record<string, readonly string[]>): boolean {
  const from = unitOf(edge.from);
  const to = unitOf(edge.to);
  if (from === to) return true;
  const row = table[from];
  if (!row) return false;
  return row.some((entry) => {
    const typeOnly = entry.startsWith("type:");
    const target = typeOnly ? entry.slice(5) : entry;
    if (typeOnly && !edge.typeOnly) return false;
    return target === to || target === edge.to || edge.to.startsWith(`${target}/`);
  });
}

/** "from -> to" for every import the table does not allow. */
export function violations(edges: readonly Edge[], table: Record<string, readonly string[]> = MAY_IMPORT): string[] {
  return [...new Set(edges.filter((e) => !allowed(e, table)).map((e) => `${e.from} -> ${e.to}`))].sort();
}

// ── The tree as it is ────────────────────────────────────────────────────────────────────

describe("source layout", () => {
  const edges = importEdges(SRC);

  it("reads the imports of every src file", () => {
    // A parser that silently matched nothing would pass both rules below.
    expect(sourceFiles(SRC).length).toBeGreaterThan(100);
    expect(edges.length).toBeGreaterThan(400);
    expect(edges).toContainEqual({ from: "main.ts", to: "app.ts", typeOnly: false });
    expect(edges).toContainEqual({ from: "graphql/context.ts", to: "infra/db.ts", typeOnly: true });
  });

  it("has no import cycle among src files, type-only imports included", () => {
    const cycle = findCycle(edges);
    expect(cycle && cycle.join(" -> "), "import cycle").toBeNull();
  });

  it("gives every unit under src/ a row in the table", () => {
    const units = [...new Set(sourceFiles(SRC).map((f) => unitOf(relative(SRC, f))))].sort();
    expect(units.filter((u) => !(u in MAY_IMPORT))).toEqual([]);
  });

  it("imports across units only what the table allows", () => {
    const found = violations(edges);
    expect(found.filter((v) => !(v in KNOWN_EXCEPTIONS)), "imports the table forbids").toEqual([]);
    expect(Object.keys(KNOWN_EXCEPTIONS).filter((v) => !found.includes(v)), "exceptions no longer needed").toEqual([]);
  });

  it("imports nothing under src/ from app.ts but main.ts", () => {
    expect(edges.filter((e) => e.to === "app.ts").map((e) => e.from)).toEqual(["main.ts"]);
  });
});

// ── The checker can fail ─────────────────────────────────────────────────────────────────

describe("the layout checker", () => {
  /** The import edges of a src tree made of these files (written to a temporary folder, then removed). */
  function edgesOf(files: Record<string, string>): Edge[] {
    const root = mkdtempSync(join(tmpdir(), "layout-"));
    try {
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), text);
      }
      return importEdges(root);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }

  it("reports the path of a cycle made of type-only imports", () => {
    const edges = edgesOf({
      "app.ts": 'import { createServices } from "./services/index.js";\nexport interface AppDeps { a: 1 }\n',
      "services/index.ts": 'import type { AppDeps } from "../app.js";\nimport { h } from "../dashboard/http.js";\nexport type HttpHandler = () => void;\n',
      "dashboard/http.ts": 'import type {\n  HttpHandler,\n} from "../services/index.js";\nexport const h = 1;\n',
      "domain/x.ts": '// import { y } from "../app.js";\nexport const s = "import(\\"../app.js\\")";\n',
    });
    expect(edges).toHaveLength(4);
    expect(edges.filter((e) => e.typeOnly).map((e) => e.from).sort()).toEqual(["dashboard/http.ts", "services/index.ts"]);
    expect(findCycle(edges)).toEqual(["app.ts", "services/index.ts", "app.ts"]);
    expect(violations(edges)).toEqual(["dashboard/http.ts -> services/index.ts", "services/index.ts -> app.ts", "services/index.ts -> dashboard/http.ts"]);
  });

  it("a file entry allows that file alone, and edge/ is app.ts's only", () => {
    const edges = edgesOf({
      "edge/a.ts": 'import type { Context } from "../graphql/context.js";\nimport { schema } from "../graphql/schema/index.js";\n',
      "edge/b.ts": 'import { contextOf } from "../graphql/context.js";\nimport type { X } from "../graphql/contexts.js";\n',
      "services/c.ts": 'import { TokenBuckets } from "../edge/rate-limit.js";\n',
      "app.ts": 'import { createOperatorControls } from "./edge/operator.js";\n',
    });
    expect(violations(edges)).toEqual([
      "edge/a.ts -> graphql/schema/index.ts",
      "edge/b.ts -> graphql/context.ts",
      "edge/b.ts -> graphql/contexts.ts",
      "services/c.ts -> edge/rate-limit.ts",
    ]);
  });

  it("tells type from value imports for graphql's `type:infra`, and re-exports and dynamic imports count", () => {
    const edges = edgesOf({
      "graphql/a.ts": 'import type { Db } from "../infra/db.js";\nimport { type Tx, txSql } from "../infra/db.js";\n',
      "graphql/b.ts": 'export { x } from "../workers/runtime.js";\nconst m = await import("../cli/index.js");\n',
      "domain/c.ts": 'import { type A, type B } from "../gateway/x.js";\n',
    });
    expect(violations(edges)).toEqual([
      "domain/c.ts -> gateway/x.ts",
      "graphql/a.ts -> infra/db.ts",
      "graphql/b.ts -> cli/index.ts",
      "graphql/b.ts -> workers/runtime.ts",
    ]);
  });
});
