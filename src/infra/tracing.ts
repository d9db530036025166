// OpenTelemetry traces, off unless an OTLP endpoint is configured (docs/operations.md, Traces).
//
// This module loads nothing of OpenTelemetry: startTracing() imports the SDK (./tracing-sdk.ts)
// only when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. Until then
// every helper below is one null check, so a node without traces pays nothing on the request path
// (test/infra/tracing-off.test.ts). The SDK's own state is process-wide (OpenTelemetry's global
// tracer provider, Prisma's global instrumentation hook), and so is the handle kept here.

import type { Plugin } from "graphql-yoga";
import type { Logger } from "./logger.js";
import type { ActiveTracing, SpanHandle, SpanOptions, TraceProtocol, TracingSettings } from "./tracing-types.js";

export type { ActiveTracing, SpanAttributes, SpanHandle, SpanOptions, TraceProtocol, TracingSettings } from "./tracing-types.js";

export const TRACE_PROTOCOLS: readonly TraceProtocol[] = ["http/protobuf", "http/json"];

/**
 * Reads the OpenTelemetry environment variables (the specification's names and defaults): the
 * protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else
 * http/protobuf; grpc is not supported and says so rather than exporting nothing.
 */
export function tracingSettings(env: Record<string, string | undefined>): TracingSettings | null {
  const tracesEndpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!tracesEndpoint && !endpoint) return null;
  const url = tracesEndpoint || `${endpoint!.replace(/\/+$/, "")}/v1/traces`;
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new Error("not http(s)");
  } catch {
    throw new Error(`the OTLP traces endpoint ${JSON.stringify(url)} is not an http(s) URL (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)`);
  }
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() || env.OTEL_EXPORTER_OTLP_PROTOCOL?.trim() || "http/protobuf") as TraceProtocol;
  if (!TRACE_PROTOCOLS.includes(protocol)) {
    throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL ${JSON.stringify(protocol)} is not supported: use ${TRACE_PROTOCOLS.join(" or ")}`);
  }
  return { url, protocol, serviceName: env.OTEL_SERVICE_NAME?.trim() || "countersign" };
}

let active: ActiveTracing | null = null;

/**
 * Starts exporting traces when the environment asks for it (tracingSettings); returns null, and
 * loads nothing, when it does not. Call it before the database and Redis are opened. A second
 * call returns the running one. A setting it cannot honour (grpc, an endpoint that is not
 * http(s), an unknown sampler) throws: the process does not start exporting nothing.
 */
export async function startTracing(env: Record<string, string | undefined> = process.env, logger?: Logger): Promise<ActiveTracing | null> {
  if (active) return active;
  const settings = tracingSettings(env);
  if (!settings) return null;
  const sdk = await import("./tracing-sdk.js");
  active = await sdk.startSdk(settings, logger, env);
  logger?.info({ url: settings.url, protocol: settings.protocol, serviceName: settings.serviceName }, "exporting traces (OpenTelemetry)");
  return active;
}

/** Flushes and stops the exporter (the drain's last step); nothing when traces are off. */
export async function stopTracing(): Promise<void> {
  const running = active;
  active = null;
  await running?.shutdown();
}

/** The GraphQL operation span's plugin, or nothing when traces are off. */
export function graphqlTracingPlugins(): Plugin[] {
  return active ? [active.graphqlPlugin] : [];
}

/** fn inside a span when traces are on; fn alone (null handle) when they are off. */
export function inSpan<T>(name: string, options: SpanOptions, fn: (span: SpanHandle | null) => Promise<T>): Promise<T> {
  return active ? active.inSpan(name, options, fn) : fn(null);
}

/** Adds `traceparent` for the active span to outgoing headers when traces are on. */
export function injectTraceContext(headers: Record<string, string>): void {
  active?.inject(headers);
}

/**
 * The active span's W3C traceparent when traces are on and a span is active, else null: stored with
 * queued work (a delivery job, a webhook delivery) so the attempt that runs it later, on whatever
 * node, continues the trace that queued it (SpanOptions.parent).
 */
export function currentTraceparent(): string | null {
  return active?.traceparent() ?? null;
}

/** Whether traces are being exported (tests, and wrappers that are only built when they are). */
export function tracingActive(): boolean {
  return active !== null;
}
