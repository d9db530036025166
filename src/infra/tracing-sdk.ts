// The OpenTelemetry SDK, loaded by startTracing (./tracing.ts) only when traces are on: the
// tracer provider with a batch processor and the OTLP/HTTP exporter, and the instrumentations.
// What a span may carry is decided here (docs/operations.md, Traces): names, ids, counts and
// SQL text with its placeholders; never GraphQL variables, Redis keys or values, or tokens.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Context, DiagLogger } from "@opentelemetry/api";
import type { NodeTracerProvider, Sampler } from "@opentelemetry/sdk-trace-node";
import type { Plugin } from "graphql-yoga";
import type { Logger } from "./logger.js";
import type { ActiveTracing, SpanHandle, TracingSettings } from "./tracing-types.js";

/**
 * The packages, imported here and not at the top: the server bundle (scripts/bundle.mjs) keeps
 * them outside it, so a node without traces neither loads nor parses them.
 */
async function loadSdk() {
  const [api, node, resources, jsonExporter, protobufExporter, envelop, ioredis, prisma] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/sdk-trace-node"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/exporter-trace-otlp-proto"),
    import("@envelop/opentelemetry"),
    import("@opentelemetry/instrumentation-ioredis"),
    import("@prisma/instrumentation"),
  ]);
  return { api, node, resources, jsonExporter, protobufExporter, envelop, ioredis, prisma };
}
type Sdk = Awaited<ReturnType<typeof loadSdk>>;

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
  // The SDK's components log as (component, message): the message is the line, the component a field.
  const warn = (message: string, ...args: unknown[]) => (args.length ? log.warn({ component: message }, args.map(String).join(" ")) : log.warn(message));
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
function instrumentRedis(sdk: Sdk, provider: NodeTracerProvider): void {
  const instrumentation = new sdk.ioredis.IORedisInstrumentation({ enabled: false, requireParentSpan: true, dbStatementSerializer: redisStatement });
  instrumentation.setTracerProvider(provider);
  const require = createRequire(import.meta.url);
  const ioredis = require("ioredis") as object;
  const version = (require("ioredis/package.json") as { version: string }).version;
  const definitions = (instrumentation as unknown as { init(): Array<{ name: string; patch?: (exports: object, version: string) => unknown }> }).init();
  for (const definition of definitions) if (definition.name === "ioredis") definition.patch?.(ioredis, version);
}

/** OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, as the specification names them (default parentbased_always_on). */
function samplerFromEnv({ node }: Sdk, env: Record<string, string | undefined>): Sampler {
  const { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler } = node;
  const name = env.OTEL_TRACES_SAMPLER?.trim() || "parentbased_always_on";
  const arg = Number(env.OTEL_TRACES_SAMPLER_ARG ?? "1");
  const ratio = () => new TraceIdRatioBasedSampler(Number.isFinite(arg) && arg >= 0 && arg <= 1 ? arg : 1);
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return ratio();
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: ratio() });
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    default:
      throw new Error(`OTEL_TRACES_SAMPLER ${JSON.stringify(name)} is not supported: use always_on, always_off, traceidratio or their parentbased_ forms`);
  }
}

/**
 * A Prisma query outside any traced work (a worker's poll, start-up's reads) starts no trace of
 * its own: without this every idle tick would export one. Its child spans follow its decision.
 */
function withoutOrphanQueries({ api, node }: Sdk, inner: Sampler): Sampler {
  return {
    shouldSample(ctx: Context, traceId, name, kind, attributes, links) {
      if (name.startsWith("prisma:") && !api.trace.getSpan(ctx)) return { decision: node.SamplingDecision.NOT_RECORD };
      return inner.shouldSample(ctx, traceId, name, kind, attributes, links);
    },
    toString: () => `WithoutOrphanQueries{${inner.toString()}}`,
  };
}

export async function startSdk(settings: TracingSettings, logger?: Logger, env: Record<string, string | undefined> = process.env): Promise<ActiveTracing> {
  const sdk = await loadSdk();
  const { context, diag, propagation, SpanKind, SpanStatusCode, trace, DiagLogLevel } = sdk.api;
  const { defaultResource, detectResources, envDetector, resourceFromAttributes } = sdk.resources;
  const sampler = withoutOrphanQueries(sdk, samplerFromEnv(sdk, env));
  if (logger) diag.setLogger(diagLogger(logger), DiagLogLevel.WARN);
  const exporter = settings.protocol === "http/json" ? new sdk.jsonExporter.OTLPTraceExporter({ url: settings.url }) : new sdk.protobufExporter.OTLPTraceExporter({ url: settings.url });
  const resource = defaultResource()
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(resourceFromAttributes({ "service.name": settings.serviceName, "service.version": packageVersion() }));
  const provider = new sdk.node.NodeTracerProvider({ resource, sampler, spanProcessors: [new sdk.node.BatchSpanProcessor(exporter)] });
  // The async-local context (a span follows its work across awaits) and W3C trace context.
  provider.register();
  // Prisma Client reads its hook from a global on every query (no module patching).
  const prisma = new sdk.prisma.PrismaInstrumentation();
  prisma.setTracerProvider(provider);
  prisma.enable();
  instrumentRedis(sdk, provider);

  const tracer = provider.getTracer(TRACER_NAME, packageVersion());
  // A client's own traceparent is not taken as the operation's parent: there is no HTTP server
  // instrumentation, so the operation span starts a trace of ours (docs/threats.md, Traces).
  const graphqlPlugin = sdk.envelop.useOpenTelemetry(
    { variables: false, result: false, resolvers: false, document: false },
    provider,
    SpanKind.SERVER,
    {},
    TRACER_NAME,
  ) as unknown as Plugin;

  /**
   * The context a stored or sent traceparent names (the W3C propagator parses it; tracestate is not
   * carried). One it cannot parse leaves the active context as it is: the work then starts, or
   * stays in, a trace of its own rather than failing.
   */
  const continued = (traceparent: string): Context => {
    const extracted = propagation.extract(context.active(), { traceparent });
    return trace.getSpanContext(extracted) ? extracted : context.active();
  };

  return {
    exporter: { url: settings.url, protocol: settings.protocol },
    graphqlPlugin,
    inSpan(name, options, fn) {
      const parent = options.parent ? continued(options.parent) : context.active();
      if (options.requireParent && !trace.getSpan(parent)) return fn(null);
      const kind = options.kind === "client" ? SpanKind.CLIENT : options.kind === "server" ? SpanKind.SERVER : SpanKind.INTERNAL;
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
    traceparent() {
      const carrier: Record<string, string> = {};
      propagation.inject(context.active(), carrier);
      return carrier.traceparent ?? null;
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
