// Runs on `npm install` (postinstall): every generated artifact the code imports.
// Prisma's engine download never runs (npm 11 skips dependencies' install scripts, and
// prisma.config.ts selects the JS engine), so nothing is fetched outside the npm registry.
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const prismaCli = fileURLToPath(new URL("../node_modules/prisma/build/index.js", import.meta.url));
execFileSync(process.execPath, [prismaCli, "generate"], { cwd: root, stdio: "inherit" });
