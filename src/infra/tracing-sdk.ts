// The OpenTelemetry SDK, loaded by startTracing (./tracing.ts) only when traces are on: the
// tracer provider with a batch processor and the OTLP/HTTP exporter, and the instrumentations.
// What a span may carry is decided here (docs/operations.md, Traces): names, ids, counts and
// SQL text with its placeholders; never GraphQL variables, Redis keys or values, or tokens.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { context, diag, propagation, SpanKind, SpanStatusCode, trace, type DiagLogger, DiagLogLevel } from "@opentelemetry/api";
import { useOpenTelemetry } from "@envelop/opentelemetry";
import { IORedisInstrumentation } from "@opentelemetry/instrumentation-ioredis";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtobufExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { PrismaInstrumentation } from "@prisma/instrumentation";
import type { Plugin } from "graphql-yoga";
import type { Logger } from "./logger.js";
import type { ActiveTracing, SpanHandle, TracingSettings } from "./tracing.js";

const TRACER_NAME = "countersign";

function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: string }).version ?? "unknown";
  } catch {
    return "unknown";
  }
}

/** The SDK's own complaints (an export that failed, a full queue) as warn lines of ours. */
function diagLogger(logger: Logger): DiagLogger {
  const log = logger.child({ module: "tracing" });
  const warn = (message: string, ...args: unknown[]) => log.warn({ detail: args.map(String).join(" ") || undefined }, message);
  return { error: warn, warn, info: () => {}, debug: () => {}, verbose: () => {} };
}

/**
 * Redis spans name the command only: a key holds a token's hash or a limit's subject and a value
 * can hold a payload, so neither is recorded (instrumentation-ioredis records them by default).
 */
export const redisStatement = (command: string): string => command;

/**
 * ioredis is loaded before traces start (main.ts imports the app first, and the server bundle
 * keeps ioredis outside), so the instrumentation's require hook would never see it: its patch is
 * applied to the loaded module instead (the prototype every client shares).
 */
function instrumentRedis(provider: NodeTracerProvider): void {
  const instrumentation = new IORedisInstrumentation({ enabled: false, requireParentSpan: true, dbStatementSerializer: redisStatement });
  instrumentation.setTracerProvider(provider);
  const require = createRequire(import.meta.url);
  const ioredis = require("ioredis") as object;
  const version = (require("ioredis/package.json") as { version: string }).version;
  const definitions = (instrumentation as unknown as { init(): Array<{ name: string; patch?: (exports: object, version: string) => unknown }> }).init();
  for (const definition of definitions) if (definition.name === "ioredis") definition.patch?.(ioredis, version);
}

export async function startSdk(settings: TracingSettings, logger?: Logger): Promise<ActiveTracing> {
  if (logger) diag.setLogger(diagLogger(logger), DiagLogLevel.WARN);
  const exporter = settings.protocol === "http/json" ? new JsonExporter({ url: settings.url }) : new ProtobufExporter({ url: settings.url });
  const resource = defaultResource()
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(resourceFromAttributes({ "service.name": settings.serviceName, "service.version": packageVersion() }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
  // The async-local context (a span follows its work across awaits) and W3C trace context.
  provider.register();
  // Prisma Client reads its hook from a global on every query (no module patching).
  const prisma = new PrismaInstrumentation();
  prisma.setTracerProvider(provider);
  prisma.enable();
  instrumentRedis(provider);

  const tracer = provider.getTracer(TRACER_NAME, packageVersion());
  // A client's own traceparent is not taken as the operation's parent: there is no HTTP server
  // instrumentation, so the operation span starts a trace of ours (docs/threats.md, Traces).
  const graphqlPlugin = useOpenTelemetry(
    { variables: false, result: false, resolvers: false, document: false },
    provider,
    SpanKind.SERVER,
    {},
    TRACER_NAME,
  ) as unknown as Plugin;

  return {
    exporter: { url: settings.url, protocol: settings.protocol },
    graphqlPlugin,
    inSpan(name, options, fn) {
      const parent = context.active();
      if (options.requireParent && !trace.getSpan(parent)) return fn(null);
      const kind = options.kind === "client" ? SpanKind.CLIENT : SpanKind.INTERNAL;
      return tracer.startActiveSpan(name, { kind, attributes: options.attributes }, parent, async (span) => {
        const handle: SpanHandle = {
          setAttributes: (attributes) => void span.setAttributes(attributes),
          fail: (reason) => void span.setStatus({ code: SpanStatusCode.ERROR, message: reason }),
        };
        try {
          return await fn(handle);
        } catch (error) {
          // The error's kind only: a message can quote what it failed on.
          span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : "error" });
          throw error;
        } finally {
          span.end();
        }
      });
    },
    inject(headers) {
      propagation.inject(context.active(), headers);
    },
    flush: () => provider.forceFlush(),
    async shutdown() {
      await provider.shutdown().catch((error: unknown) => logger?.warn({ err: error }, "traces could not all be flushed"));
      prisma.disable();
      trace.disable();
      context.disable();
      propagation.disable();
      diag.disable();
    },
  };
}
