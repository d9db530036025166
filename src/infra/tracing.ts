// OpenTelemetry traces, off unless an OTLP endpoint is configured (docs/operations.md, Traces).
//
// This module loads nothing of OpenTelemetry: startTracing() imports the SDK (./tracing-sdk.ts)
// only when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. Until then
// every helper below is one null check, so a node without traces pays nothing on the request path
// (test/infra/tracing-off.test.ts). The SDK's own state is process-wide (OpenTelemetry's global
// tracer provider, Prisma's global instrumentation hook), and so is the handle kept here.

import type { Plugin } from "graphql-yoga";
import type { Logger } from "./logger.js";

export type SpanAttributes = Record<string, string | number | boolean>;

/** What a running span lets its caller add once the work's outcome is known. */
export interface SpanHandle {
  setAttributes(attributes: SpanAttributes): void;
  /** Marks the span failed with a short reason (never a payload). */
  fail(reason: string): void;
}

/** The SDK side, set by startTracing (src/infra/tracing-sdk.ts). */
export interface ActiveTracing {
  /** Where spans go and how they are encoded, for the start-up line. */
  readonly exporter: { url: string; protocol: TraceProtocol };
  /** One span per GraphQL operation (envelop's OpenTelemetry plugin, no variables, no document). */
  readonly graphqlPlugin: Plugin;
  /** Runs fn inside a new span, the active context's child; only when that context has a span, with `requireParent`. */
  inSpan<T>(name: string, options: SpanOptions, fn: (span: SpanHandle | null) => Promise<T>): Promise<T>;
  /** Writes the active context's W3C `traceparent` (and `tracestate`) into outgoing headers. */
  inject(headers: Record<string, string>): void;
  /** Exports the spans still queued now (tests; the drain uses shutdown). */
  flush(): Promise<void>;
  /** Flushes the spans still queued and stops exporting. */
  shutdown(): Promise<void>;
}

export interface SpanOptions {
  kind: "client" | "internal";
  attributes?: SpanAttributes;
  /** Record the span only inside a traced piece of work (an operation, a delivery): raw SQL, say. */
  requireParent?: boolean;
}

export type TraceProtocol = "http/protobuf" | "http/json";
export const TRACE_PROTOCOLS: readonly TraceProtocol[] = ["http/protobuf", "http/json"];

/** The OTLP settings of the standard OTEL_* variables, or null when traces are off. */
export interface TracingSettings {
  /** The traces endpoint itself: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  url: string;
  protocol: TraceProtocol;
  serviceName: string;
}

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
 * call returns the running one.
 */
export async function startTracing(env: Record<string, string | undefined> = process.env, logger?: Logger): Promise<ActiveTracing | null> {
  if (active) return active;
  const settings = tracingSettings(env);
  if (!settings) return null;
  const sdk = await import("./tracing-sdk.js");
  active = await sdk.startSdk(settings, logger);
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

/** Whether traces are being exported (tests, and wrappers that are only built when they are). */
export function tracingActive(): boolean {
  return active !== null;
}
