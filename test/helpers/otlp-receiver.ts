import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

// A real OTLP/HTTP trace receiver for tests: POST /v1/traces in the JSON encoding (the OTLP
// specification's ExportTraceServiceRequest), answering 200 with an empty partial success.

export type AttributeValue = string | number | boolean | null;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  kind: number;
  attributes: Record<string, AttributeValue>;
  status: { code?: number; message?: string };
  /** The resource it came with (service.name, service.version). */
  resource: Record<string, AttributeValue>;
}

export interface OtlpReceiver {
  /** The base, as OTEL_EXPORTER_OTLP_ENDPOINT takes it (the exporter adds /v1/traces). */
  endpoint: string;
  spans: ReceivedSpan[];
  /** Exports in the protobuf encoding, kept as they came (no decoder here): their bodies. */
  protobuf: Buffer[];
  /** Requests that were not a POST of JSON or protobuf to /v1/traces. */
  rejected: number;
  close(): Promise<void>;
}

type OtlpAnyValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean };
type OtlpKeyValue = { key: string; value?: OtlpAnyValue };

function attributes(list: OtlpKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of list ?? []) {
    if (!value) out[key] = null;
    else if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
    else out[key] = JSON.stringify(value);
  }
  return out;
}

/** OTLP/JSON carries ids as hex; base64 (protobuf's JSON mapping) is accepted too. */
function hexId(id: string | undefined): string | null {
  if (!id) return null;
  return /^[0-9a-f]+$/i.test(id) ? id.toLowerCase() : Buffer.from(id, "base64").toString("hex");
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const protobuf: Buffer[] = [];
  const receiver = { rejected: 0 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/traces" && req.headers["content-type"] === "application/x-protobuf") {
        protobuf.push(Buffer.concat(chunks));
        // An empty ExportTraceServiceResponse.
        res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
        return;
      }
      if (req.method !== "POST" || req.url !== "/v1/traces" || !String(req.headers["content-type"]).startsWith("application/json")) {
        receiver.rejected++;
        res.writeHead(415).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        resourceSpans?: Array<{ resource?: { attributes?: OtlpKeyValue[] }; scopeSpans?: Array<{ spans?: Array<Record<string, unknown>> }> }>;
      };
      for (const rs of body.resourceSpans ?? []) {
        const resource = attributes(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const span of ss.spans ?? []) {
            spans.push({
              traceId: hexId(span.traceId as string)!,
              spanId: hexId(span.spanId as string)!,
              parentSpanId: hexId(span.parentSpanId as string | undefined),
              name: span.name as string,
              kind: span.kind as number,
              attributes: attributes(span.attributes as OtlpKeyValue[]),
              status: (span.status as ReceivedSpan["status"]) ?? {},
              resource,
            });
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    protobuf,
    get rejected() {
      return receiver.rejected;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Whether `span` sits under `ancestor` (following parent ids among the received spans). */
export function descendsFrom(spans: readonly ReceivedSpan[], span: ReceivedSpan, ancestor: ReceivedSpan): boolean {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  let current: ReceivedSpan | undefined = span;
  for (let depth = 0; current && depth < 100; depth++) {
    if (current.parentSpanId === ancestor.spanId) return true;
    current = current.parentSpanId ? byId.get(current.parentSpanId) : undefined;
  }
  return false;
}
