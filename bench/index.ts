// `npm run bench [-- <module> …]`: runs every bench module present and prints one table.
// A benchmark reports, it does not fail CI: the exit code is 0 whatever the figures say,
// and rows missing their target are marked FAIL. See docs/benchmarks.md.

import { existsSync } from "node:fs";
import { formatTable, type BenchRow } from "./lib.js";

/** Known modules, in the order they run; each exports `run(): Promise<BenchRow[]>`. */
const MODULES = ["stacks", "approvals", "gate", "peers", "subscribers", "http", "fleet", "gateway", "conformance", "limits", "tracing", "startup", "hostile"] as const;

interface BenchModule {
  run(): Promise<BenchRow[]>;
}

const present = (name: string) =>
  existsSync(new URL(`./${name}.ts`, import.meta.url)) || existsSync(new URL(`./${name}.js`, import.meta.url));

async function main(): Promise<void> {
  const asked = process.argv.slice(2).filter((a) => !a.startsWith("-"));
  const names = asked.length > 0 ? asked : [...MODULES];
  const rows: BenchRow[] = [];
  const problems: string[] = [];

  for (const name of names) {
    if (!/^[a-z0-9-]+$/.test(name) || !present(name)) {
      // Absent modules are another engineer's work in progress: skipped, not an error.
      process.stderr.write(`bench: ${name} — no bench/${name}.ts, skipped\n`);
      if (asked.length > 0) problems.push(`${name}: no such bench module`);
      continue;
    }
    process.stderr.write(`bench: ${name}\n`);
    const start = process.hrtime.bigint();
    try {
      const module = (await import(`./${name}.js`)) as BenchModule;
      for (const r of await module.run()) rows.push({ ...r, name: `${name}: ${r.name}` });
    } catch (error) {
      problems.push(`${name}: ${(error as Error).stack ?? String(error)}`);
    }
    process.stderr.write(`bench: ${name} done in ${(Number(process.hrtime.bigint() - start) / 1e9).toFixed(1)} s\n`);
  }

  console.log(formatTable(rows));
  const failed = rows.filter((r) => r.pass === false);
  console.log(
    `\n${rows.length} rows, ${rows.filter((r) => r.pass === true).length} on target, ${failed.length} FAIL` +
      (failed.length > 0 ? `:\n${failed.map((r) => `  FAIL ${r.name}: ${r.value} ${r.unit}, target ${r.target}`).join("\n")}` : ""),
  );
  if (problems.length > 0) console.log(`\nERRORS (the figures above are incomplete):\n${problems.map((p) => `  ${p}`).join("\n")}`);
}

try {
  await main();
} catch (error) {
  console.error(error);
}
// Reports, never gates: see the header.
process.exit(0);
