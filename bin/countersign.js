#!/usr/bin/env node
// `npx countersign …`: runs the TypeScript CLI through tsx (a runtime dependency).
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const tsx = fileURLToPath(new URL("../node_modules/tsx/dist/cli.mjs", import.meta.url));
const entry = fileURLToPath(new URL("../src/cli/index.ts", import.meta.url));
const result = spawnSync(process.execPath, [tsx, entry, ...process.argv.slice(2)], { stdio: "inherit" });
process.exit(result.status ?? 1);
