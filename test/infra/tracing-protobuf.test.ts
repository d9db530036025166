// The default OTLP encoding (http/protobuf, as the specification sets it): with only an endpoint
// set, spans reach /v1/traces as application/x-protobuf, the service named in them.

import { afterAll, beforeAll, expect, it } from "vitest";
import { inSpan, startTracing, stopTracing, type ActiveTracing } from "../../src/infra/tracing.js";
import { startOtlpReceiver, type OtlpReceiver } from "../helpers/otlp-receiver.js";

let otlp: OtlpReceiver;
let tracing: ActiveTracing;

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  tracing = (await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint, OTEL_SERVICE_NAME: "countersign-protobuf-probe" }))!;
});
afterAll(async () => {
  await stopTracing();
  await otlp.close();
});

it("with only OTEL_EXPORTER_OTLP_ENDPOINT set, spans are exported as http/protobuf to <endpoint>/v1/traces", async () => {
  expect(tracing.exporter.protocol).toBe("http/protobuf");
  await inSpan("protobuf-encoded span", { kind: "internal", attributes: { "countersign.probe": "yes" } }, async () => {});
  await tracing.flush();
  expect(otlp.rejected).toBe(0);
  expect(otlp.spans).toEqual([]);
  // Protobuf carries strings as their UTF-8 bytes: the span's name and the service are in the body.
  const body = Buffer.concat(otlp.protobuf).toString("latin1");
  expect(body).toContain("protobuf-encoded span");
  expect(body).toContain("countersign-protobuf-probe");
  expect(body).toContain("countersign.probe");
});
