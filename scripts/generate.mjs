// Runs on `npm install` (postinstall): every generated artifact the code imports.
// Prisma's engine download never runs (package.json's allowScripts denies dependencies' install
// scripts, and prisma.config.ts selects the JS engine), so nothing is fetched outside the npm
// registry.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const prismaCli = fileURLToPath(new URL("../node_modules/prisma/build/index.js", import.meta.url));
execFileSync(process.execPath, [prismaCli, "generate"], { cwd: root, stdio: "inherit" });

// Typed operation documents for the CLI, the dashboard and the tests (codegen.ts), through
// graphql-codegen's client preset (scripts/codegen.ts, run by tsx, a runtime dependency).
const codegenScript = fileURLToPath(new URL("./codegen.ts", import.meta.url));
const tsxCli = fileURLToPath(new URL("../node_modules/tsx/dist/cli.mjs", import.meta.url));
if (existsSync(fileURLToPath(new URL("../node_modules/@graphql-codegen/client-preset/package.json", import.meta.url)))) {
  execFileSync(process.execPath, [tsxCli, codegenScript], { cwd: root, stdio: "inherit" });
  console.log("Generated typed operation documents in src/generated/graphql/");
} else {
  // An install without dev dependencies: the clients need `npm install` (with dev) once.
  console.warn("graphql-codegen is not installed (dev dependency): src/generated/graphql/ not generated; the CLI and dashboard need it.");
}

// The embedded default's migrated, empty database (scripts/pglite-snapshot.ts) and the server's
// bundle (scripts/bundle.mjs): a first `npm start` then neither runs initdb and every migration
// nor compiles the sources. Both are caches: when either is missing or stale, `npm start` still
// serves the sources as they are, only slower (or, for the bundle, rebuilds it first).
// A failure here warns instead of failing the install: `npm start` works without either.
try {
  execFileSync(process.execPath, [tsxCli, fileURLToPath(new URL("./pglite-snapshot.ts", import.meta.url))], { cwd: root, stdio: "inherit" });
} catch (error) {
  console.warn(`The embedded database snapshot was not made (${error.message.split("\n")[0]}): a first \`npm start\` runs initdb and the migrations itself.`);
}
try {
  const { buildBundle } = await import("./bundle.mjs");
  await buildBundle();
  console.log("Built the server bundle (node_modules/.cache/countersign/server/)");
} catch (error) {
  console.warn(`The server bundle was not built (${error.message.split("\n")[0]}): \`npm start\` builds it, or runs the sources through tsx.`);
}
