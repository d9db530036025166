// What the tracing front (./tracing.ts) and the SDK side (./tracing-sdk.ts) agree on: the front
// loads the SDK only when traces are on, so neither imports the other for its types.

import type { Plugin } from "graphql-yoga";

export type SpanAttributes = Record<string, string | number | boolean>;

export type TraceProtocol = "http/protobuf" | "http/json";

/** The OTLP settings, as read from the standard OTEL_* variables (tracingSettings in ./tracing.ts). */
export interface TracingSettings {
  /** The traces endpoint itself: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  url: string;
  protocol: TraceProtocol;
  serviceName: string;
}

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
  /** The active span's W3C `traceparent`, to store beside queued work; null outside a span. */
  traceparent(): string | null;
  /** Exports the spans still queued now (tests; the drain uses shutdown). */
  flush(): Promise<void>;
  /** Flushes the spans still queued and stops exporting. */
  shutdown(): Promise<void>;
}

export interface SpanOptions {
  kind: "client" | "internal" | "server";
  attributes?: SpanAttributes;
  /** Record the span only inside a traced piece of work (an operation, a delivery): raw SQL, say. */
  requireParent?: boolean;
  /**
   * The W3C `traceparent` the span continues instead of the active context: one stored with queued
   * work, or sent by an authenticated caller of our own. Absent, null or not a valid traceparent:
   * the active context, as without it.
   */
  parent?: string | null;
}
