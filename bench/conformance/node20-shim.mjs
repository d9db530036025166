// `node --import ./bench/conformance/node20-shim.mjs node_modules/.bin/conformance …` on Node 20
// (see node20-hooks.mjs).
import { register } from "node:module";

register("./node20-hooks.mjs", import.meta.url);
