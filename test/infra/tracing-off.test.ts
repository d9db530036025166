// Traces off (no OTEL_EXPORTER_OTLP_ENDPOINT): nothing of the OpenTelemetry SDK is loaded, no
// tracer provider or Prisma hook is registered, and a request runs as it did before traces
// existed. Run in a child process, so the module graph is the app's alone (docs/operations.md, Traces).

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** Packages that only tracing loads (src/infra/tracing-sdk.ts). */
const SDK_PACKAGES = [
  "@opentelemetry/sdk-trace-node",
  "@opentelemetry/sdk-trace-base",
  "@opentelemetry/sdk-trace",
  "@opentelemetry/exporter-trace-otlp-http",
  "@opentelemetry/exporter-trace-otlp-proto",
  "@opentelemetry/otlp-exporter-base",
  "@opentelemetry/instrumentation",
  "@opentelemetry/instrumentation-ioredis",
  "@opentelemetry/resources",
  "@envelop/opentelemetry",
  "@prisma/instrumentation",
  "src/infra/tracing-sdk.ts",
];

function probe(env: NodeJS.ProcessEnv): Promise<{ out: any; modules: string[] }> {
  const dir = mkdtempSync(path.join(tmpdir(), "tracing-off-"));
  const log = path.join(dir, "modules.log");
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "--import", "./test/infra/fixtures/record-modules.mjs", "test/infra/fixtures/tracing-off-probe.ts"],
      { cwd: root, env: { ...env, MODULE_LOG: log }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("error", reject);
    child.on("exit", (code) => {
      try {
        if (code !== 0) throw new Error(`the probe exited ${code}: ${stderr}`);
        const modules = readFileSync(log, "utf8").split("\n").filter(Boolean);
        resolve({ out: JSON.parse(stdout), modules: [...modules] });
      } catch (error) {
        reject(error);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

const packagePath = (name: string) => (name.startsWith("src/") ? `/${name}` : `/node_modules/${name}/`);
const loadedOf = (files: string[]) => SDK_PACKAGES.filter((name) => files.some((f) => f.includes(packagePath(name))));

it("without an OTLP endpoint, a viewer query loads no OpenTelemetry SDK module and registers no tracer provider or Prisma hook", async () => {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("OTEL_")));
  const { out, modules } = await probe(env);
  expect(out.tracing).toBe(false);
  expect(out.viewer).toBe("Admin");
  // The probe saw the app's graph (the check would pass on an empty log otherwise).
  expect(modules.some((m) => m.includes("/src/app.ts"))).toBe(true);
  expect(modules.some((m) => m.includes("/node_modules/graphql-yoga/"))).toBe(true);
  expect(loadedOf(modules)).toEqual([]);
  expect(loadedOf(out.required)).toEqual([]);
  expect(out.registered).toEqual([]);
  expect(out.prismaInstrumentation).toBe(false);
}, 300_000);

it("the same probe with an endpoint set does load them (the check above can fail)", async () => {
  const env = { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" };
  const { out, modules } = await probe(env);
  expect(out.tracing).toBe(true);
  expect(out.viewer).toBe("Admin");
  expect(loadedOf(modules)).toContain("@opentelemetry/sdk-trace-node");
  expect(loadedOf(modules)).toContain("src/infra/tracing-sdk.ts");
  expect(out.registered).toContain("trace");
  expect(out.prismaInstrumentation).toBe(true);
}, 300_000);
