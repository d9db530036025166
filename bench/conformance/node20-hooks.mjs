// Module hooks for running @modelcontextprotocol/conformance on Node 20: its build imports
// `globSync` from "fs", which Node adds in 22. The suite's own imports of "fs" are given the real
// module plus a `globSync` that walks a folder for `**/<name>` (the one pattern it uses, in its
// results summary). Nothing else is changed; on Node 22 and later this file is not loaded.

const shim = `import fs from "node:fs";
import path from "node:path";
export * from "node:fs";
export default fs;
export function globSync(pattern, options = {}) {
  const cwd = options.cwd ?? process.cwd();
  const m = /^\\*\\*\\/([^*/]+)$/.exec(pattern);
  if (!m) throw new Error("globSync on Node 20: only **/<name> patterns are supported");
  const out = [];
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(cwd, rel), { withFileTypes: true })) {
      const r = rel ? path.join(rel, e.name) : e.name;
      if (e.isDirectory()) walk(r);
      else if (e.name === m[1]) out.push(r);
    }
  };
  walk("");
  return out;
}`;

export async function resolve(specifier, context, next) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL?.includes("/@modelcontextprotocol/conformance/")) {
    return { url: `data:text/javascript,${encodeURIComponent(shim)}`, shortCircuit: true };
  }
  return next(specifier, context);
}
