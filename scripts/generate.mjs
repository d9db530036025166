// Runs on `npm install` (postinstall): every generated artifact the code imports.
// Prisma's engine download never runs (npm 11 skips dependencies' install scripts, and
// prisma.config.ts selects the JS engine), so nothing is fetched outside the npm registry.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const prismaCli = fileURLToPath(new URL("../node_modules/prisma/build/index.js", import.meta.url));
execFileSync(process.execPath, [prismaCli, "generate"], { cwd: root, stdio: "inherit" });

// Typed operation documents for the CLI, the dashboard and the tests (codegen.ts).
const codegenCli = fileURLToPath(new URL("../node_modules/@graphql-codegen/cli/esm/bin.js", import.meta.url));
if (existsSync(codegenCli)) {
  execFileSync(process.execPath, [codegenCli, "--config", "codegen.ts"], { cwd: root, stdio: "inherit" });
  console.log("Generated typed operation documents in src/generated/graphql/");
} else {
  // An install without dev dependencies: the clients need `npm install` (with dev) once.
  console.warn("graphql-codegen is not installed (dev dependency): src/generated/graphql/ not generated; the CLI and dashboard need it.");
}
