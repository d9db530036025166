// The server as one ES module (esbuild), so `npm start` loads one file instead of tsx compiling
// ~190 TypeScript files on the fly. Built by `npm install` (scripts/generate.mjs) and checked on
// every start (scripts/start.mjs): the file is named by a hash of the sources it was built
// from, so a bundle of other sources is never run — changed sources rebuild it (well under a
// second) before it starts.
//
// What goes in the hash: every file under src/ (the generated Prisma client included), this
// script, package.json, package-lock.json and tsconfig.json. Bundled dependencies are those
// package-lock.json names (an `npm install` that changes one changes the lock, and runs
// postinstall, which rebuilds); a file edited by hand inside node_modules is not noticed.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const BUNDLE_DIR = path.join(ROOT, "node_modules", ".cache", "countersign", "server");
const ENTRY = path.join(ROOT, "src", "main.ts");
// The OpenTelemetry SDK is loaded only when traces are on (src/infra/tracing-sdk.ts): kept out,
// a node without traces does not parse its 1.5 MB at every start.
const TRACING = ["@opentelemetry/sdk-trace-node", "@opentelemetry/resources", "@opentelemetry/exporter-trace-otlp-http", "@opentelemetry/exporter-trace-otlp-proto", "@envelop/opentelemetry", "@opentelemetry/instrumentation-ioredis", "@prisma/instrumentation"];
const EXTERNAL = ["@electric-sql/pglite", "@cedar-policy/cedar-wasm", "@prisma/client", "esbuild", "pino", "@graphql-yoga/render-graphiql", "tsx", "ioredis", ...TRACING];
const HASHED_FILES = ["scripts/bundle.mjs", "package.json", "package-lock.json", "tsconfig.json"];

function filesUnder(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(full));
    else if (entry.isFile()) out.push(full);
  }
  return out;
}

/** A hash of everything the bundle is built from (names and contents). */
export function sourceHash() {
  const hash = createHash("sha256");
  const files = [...filesUnder(path.join(ROOT, "src")), ...HASHED_FILES.map((f) => path.join(ROOT, f))].sort();
  for (const file of files) {
    let contents;
    try {
      contents = readFileSync(file);
    } catch (error) {
      if (error.code !== "ENOENT") throw error;
      contents = Buffer.from("\0missing");
    }
    hash.update(`${path.relative(ROOT, file)}\0${contents.length}\0`).update(contents);
  }
  return hash.digest("hex").slice(0, 32);
}

export const bundlePath = (hash) => path.join(BUNDLE_DIR, `main-${hash}.mjs`);

/**
 * Each source file keeps its own import.meta.url (migrate.ts finds prisma/migrations/ and the
 * dashboard its assets relative to their own file), as under tsx.
 */
const ownImportMetaUrl = {
  name: "own-import-meta-url",
  setup(build) {
    build.onLoad({ filter: /\.[cm]?ts$/ }, (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const source = readFileSync(args.path, "utf8");
      return { contents: source.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)), loader: "ts" };
    });
  },
};

/**
 * graphql-js as its ES modules (`index.mjs`, the package's `module` field) rather than its CommonJS
 * `main`: imported from CommonJS, each of its exports is a getter called on every use, and
 * graphql-js's executor and type predicates use them for every field of every answer (a CPU profile
 * of the workspace list on 2026-12-04 put a fifth of execution in those getters). Everything that
 * imports or requires graphql gets this one copy.
 */
const graphqlAsModules = {
  name: "graphql-as-modules",
  setup(build) {
    build.onResolve({ filter: /^graphql(\/.*)?$/ }, async (args) => {
      if (args.pluginData?.graphqlAsModules) return undefined;
      const found = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: { graphqlAsModules: true } });
      if (found.errors.length > 0) return found;
      const module = found.path.replace(/\.js$/, ".mjs");
      return { ...found, path: existsSync(module) ? module : found.path };
    });
    // graphql-js checks `instanceof` twice outside production (NODE_ENV), to name a second copy of
    // graphql loaded beside the first. The bundle holds exactly one, so the check can only cost:
    // every failed type predicate (isNonNullType on a nullable type, …) took its slow path, for each
    // variable coerced and each field completed (a tenth of the check API's batch in a CPU profile).
    build.onLoad({ filter: /[\\/]graphql[\\/]jsutils[\\/]instanceOf\.mjs$/ }, (args) => {
      const source = readFileSync(args.path, "utf8");
      const patched = source.replace(GRAPHQL_DEVELOPMENT_CHECK, "true");
      if (patched === source) throw new Error(`${args.path} no longer reads ${GRAPHQL_DEVELOPMENT_CHECK}: see scripts/bundle.mjs`);
      return { contents: patched, loader: "js" };
    });
  },
};
const GRAPHQL_DEVELOPMENT_CHECK = "process.env.NODE_ENV === 'production'";

/** Builds the bundle for `hash` (written beside its final name, then renamed in) and drops older ones. */
export async function buildBundle(hash = sourceHash()) {
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [ENTRY],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // Dependencies are bundled too (one file to load instead of ~1,000: a third of a restart's
    // CPU), except those that read their own files (WebAssembly, data, a native binary) or are
    // only loaded later (GraphiQL's assets).
    external: EXTERNAL,
    // CommonJS dependencies inside an ES module still call require() for Node's built-ins.
    banner: { js: 'import { createRequire as __countersignRequire } from "node:module"; const require = __countersignRequire(import.meta.url);' },
    sourcemap: "external",
    write: false,
    outfile: bundlePath(hash),
    logLevel: "silent",
    plugins: [ownImportMetaUrl, graphqlAsModules],
  });
  mkdirSync(BUNDLE_DIR, { recursive: true });
  const final = bundlePath(hash);
  const tmp = `${final}.tmp-${process.pid}`;
  for (const file of result.outputFiles) {
    if (file.path.endsWith(".map")) writeFileSync(`${final}.map`, file.contents);
    else writeFileSync(tmp, `${file.text}\n//# sourceMappingURL=${path.basename(final)}.map\n`);
  }
  renameSync(tmp, final);
  for (const name of readdirSync(BUNDLE_DIR)) {
    if (name.startsWith("main-") && !name.startsWith(path.basename(final)) && !name.includes(".tmp-")) rmSync(path.join(BUNDLE_DIR, name), { force: true });
  }
  return final;
}

/** The bundle built from the sources as they are now: the existing one, or a new build. */
export async function currentBundle() {
  const hash = sourceHash();
  const file = bundlePath(hash);
  if (existsSync(file)) return { file, built: false };
  await buildBundle(hash);
  // A file edited while esbuild read the sources: build again rather than name it wrongly.
  const after = sourceHash();
  return { file: after === hash ? file : await buildBundle(after), built: true };
}
