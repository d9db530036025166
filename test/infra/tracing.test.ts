// OpenTelemetry traces (docs/operations.md, Traces) exported to a real OTLP/HTTP receiver
// (http/json): an approval's operation span holds its database spans under one trace id; a held
// call executed after the approval reaches a real SDK upstream MCP server with a traceparent of
// an exported span; a webhook receiver gets one too; Redis spans name the command only; no
// span carries a GraphQL variable or a token.

import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import http, { type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTracing, stopTracing, tracingSettings, type ActiveTracing } from "../../src/infra/tracing.js";
import { RESUME_PATH } from "../../src/gateway/gateway.js";
import { createWorld, heldAndFiled, SERVICE_TOKEN, vote, type World } from "../approvals/world.js";
import { descendsFrom, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../helpers/otlp-receiver.js";

const VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

/** W3C traceparent: version-traceid-parentid-flags. */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/;

let otlp: OtlpReceiver;
let tracing: ActiveTracing;
let w: World;
const upstreamRequests: Array<{ headers: IncomingHttpHeaders; body: any }> = [];
const hookRequests: IncomingHttpHeaders[] = [];
let hookServer: http.Server;
let hookUrl: string;

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  // Started before the database, Redis and the app are opened, as main.ts does.
  tracing = (await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }))!;
  hookServer = http.createServer((req, res) => {
    hookRequests.push(req.headers);
    req.resume();
    req.on("end", () => res.writeHead(204).end());
  });
  await new Promise<void>((resolve) => hookServer.listen(0, "127.0.0.1", resolve));
  hookUrl = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}/hook`;
  w = await createWorld({
    env: { COUNTERSIGN_WEBHOOK_ALLOW_PRIVATE: "1", COUNTERSIGN_WEBHOOK_SECRET_KEY: randomBytes(32).toString("hex") },
    onUpstreamRequest: (headers, body) => upstreamRequests.push({ headers, body }),
  });
}, 60_000);

afterAll(async () => {
  await w?.close();
  await stopTracing();
  await new Promise<void>((resolve) => hookServer?.close(() => resolve()));
  await otlp?.close();
});

/** Everything exported so far (the batch processor flushed). */
async function exported(): Promise<ReceivedSpan[]> {
  await tracing.flush();
  return otlp.spans;
}

const CREATE_WEBHOOK = `mutation CreateHook($input: CreateWebhookInput!) {
  createWebhook(input: $input) { __typename ... on MutationCreateWebhookSuccess { data { webhook { id } } } ... on Error { code message } }
}`;

describe("traces, exported to a real OTLP/HTTP receiver", () => {
  let requestId: string;
  let webhookId: string;
  /** The vote that approved the request: the root of the approval's trace. */
  let approving: ReceivedSpan;

  it("an approval's operation span and its Prisma and SQL spans share one trace id and nest under it; no variable, token or document is recorded", async () => {
    const hook = await w.t.gql(CREATE_WEBHOOK, { input: { url: hookUrl, events: ["APPROVAL_REQUEST_DECIDED"], format: "JSON" } }, w.org.adminToken);
    expect(hook.data.createWebhook.__typename).toBe("MutationCreateWebhookSuccess");
    webhookId = hook.data.createWebhook.data.webhook.id;
    requestId = await heldAndFiled(w, { repo: "acme/traced" });
    await vote(w, w.reviewers[0]!, requestId);
    const decided = await vote(w, w.reviewers[1]!, requestId);
    expect(decided.data.request.status).toBe("APPROVED");

    const spans = await exported();
    const operations = spans.filter((s) => s.name === "mutation.Vote");
    expect(operations).toHaveLength(2);
    const operation = operations[1]!;
    approving = operation;
    expect(operation.attributes["graphql.execute.operationName"]).toBe("Vote");
    expect(operation.resource["service.name"]).toBe("countersign");
    expect(operation.resource["service.version"]).toBe(VERSION);

    const inTrace = spans.filter((s) => s.traceId === operation.traceId && s !== operation);
    const prisma = inTrace.filter((s) => s.name.startsWith("prisma:"));
    const sql = inTrace.filter((s) => s.name.startsWith("sql ") || s.name === "prisma:client:db_query" || s.name === "prisma:engine:db_query");
    expect(prisma.length).toBeGreaterThan(0);
    expect(sql.length).toBeGreaterThan(0);
    for (const span of inTrace) expect(descendsFrom(spans, span, operation), span.name).toBe(true);
    // SQL text carries placeholders, never the values bound to them.
    for (const span of inTrace.filter((s) => typeof s.attributes["db.query.text"] === "string")) {
      expect(String(span.attributes["db.query.text"])).not.toContain(requestId);
    }

    // Variables hold secrets: never on any span, nor the document, nor a bearer token.
    const everything = JSON.stringify(spans);
    expect(everything).not.toContain(requestId);
    for (const r of w.reviewers) expect(everything).not.toContain(r.token);
    expect(everything).not.toContain(w.org.adminToken);
    expect(everything).not.toContain(hookUrl);
    expect(operation.attributes["graphql.execute.variables"]).toBeUndefined();
    expect(operation.attributes["graphql.execute.document"]).toBeUndefined();
  });

  it("Redis spans inside an operation name the command only: no key, channel or value", async () => {
    const spans = await exported();
    const redis = spans.filter((s) => s.attributes["db.system.name"] === "redis");
    // The vote publishes its events on the bus (Redis pub/sub) inside the operation.
    expect(redis.length).toBeGreaterThan(0);
    for (const span of redis) {
      expect(span.attributes["db.query.text"]).toBe(span.name);
      // Every channel and stream key of this file is prefixed by its schema name.
      expect(JSON.stringify(span.attributes)).not.toContain(w.t.schemaName);
    }
  });

  it("a held call executed after the approval reaches the upstream MCP server with a traceparent of the approval's own trace", async () => {
    await w.delivery.tick();
    expect(w.executions.find((e) => e.approvalId === requestId)).toBeDefined();
    const call = upstreamRequests.find((r) => r.body?.method === "tools/call" && r.body?.params?.arguments?.repo === "acme/traced");
    expect(call).toBeDefined();
    const match = TRACEPARENT.exec(String(call!.headers.traceparent));
    expect(match).not.toBeNull();
    const spans = await exported();
    const upstreamSpan = spans.find((s) => s.traceId === match![1] && s.spanId === match![2]);
    expect(upstreamSpan?.name).toBe("mcp upstream POST");
    expect(upstreamSpan?.attributes["http.response.status_code"]).toBe(200);
    // One trace from the vote to the upstream: the vote queued the delivery with its traceparent;
    // the worker's attempt continued it and sent its own to the gateway's resume over HTTP.
    expect(match![1]).toBe(approving.traceId);
    expect(descendsFrom(spans, upstreamSpan!, approving)).toBe(true);
    const delivery = spans.find((s) => s.name === "approval delivery" && s.traceId === approving.traceId);
    const resume = spans.find((s) => s.name === "gateway resume" && s.traceId === approving.traceId);
    expect(delivery?.parentSpanId).toBe(approving.spanId);
    expect(delivery?.attributes["countersign.delivery.outcome"]).toBe("delivered");
    expect(resume?.parentSpanId).toBe(delivery!.spanId);
    expect(resume?.attributes["http.response.status_code"]).toBe(200);
    expect(descendsFrom(spans, upstreamSpan!, resume!)).toBe(true);
    // The claim's SQL is recorded under the attempt (a worker's poll outside it is not).
    expect(spans.some((s) => s.name.startsWith("sql ") && s.parentSpanId === delivery!.spanId)).toBe(true);
    // The connection's URL path (which may hold a credential) is not recorded, only its host.
    expect(JSON.stringify(upstreamSpan)).not.toContain("/mcp");
  });

  it("a webhook receiver gets a traceparent; the delivery attempt's span carries the event type, the webhook id and the status code", async () => {
    for (let i = 0; i < 50 && hookRequests.length === 0; i++) {
      await w.t.app.services.webhooks.tick();
      if (hookRequests.length === 0) await new Promise((r) => setTimeout(r, 20));
    }
    expect(hookRequests.length).toBeGreaterThan(0);
    const match = TRACEPARENT.exec(String(hookRequests[0]!.traceparent));
    expect(match).not.toBeNull();
    const spans = await exported();
    const attempt = spans.find((s) => s.traceId === match![1] && s.spanId === match![2]);
    expect(attempt?.name).toBe("webhook delivery");
    // The event was queued by the approving vote: its attempt continues that trace.
    expect(attempt?.parentSpanId).toBe(approving.spanId);
    expect(attempt?.attributes).toMatchObject({
      "countersign.webhook.id": webhookId,
      "countersign.event.type": "approval_request.decided",
      "http.response.status_code": 204,
    });
  });

  it("a delivery whose stored traceparent cannot be read still runs, in a trace of its own", async () => {
    const second = await heldAndFiled(w, { repo: "acme/untraced" });
    await vote(w, w.reviewers[0]!, second);
    await vote(w, w.reviewers[1]!, second);
    const [job] = await w.db.sql.query<{ id: string }>(`UPDATE delivery_jobs SET traceparent = 'not-a-traceparent' WHERE "requestId" = $1 RETURNING id`, [second]);
    await w.delivery.tick();
    expect(w.executions.find((e) => e.approvalId === second)).toBeDefined();
    const spans = await exported();
    const delivery = spans.find((s) => s.name === "approval delivery" && s.attributes["countersign.delivery.id"] === job!.id);
    expect(delivery?.parentSpanId).toBeNull();
    expect(delivery?.attributes["countersign.delivery.outcome"]).toBe("delivered");
    expect(spans.filter((s) => s.name === "mutation.Vote").map((s) => s.traceId)).not.toContain(delivery!.traceId);
  });

  it("the gateway's resume takes a caller's traceparent only with the service token", async () => {
    const sent = (traceId: string) => `00-${traceId}-${"1".repeat(16)}-01`;
    const refused = randomBytes(16).toString("hex");
    const denied = await fetch(new URL(RESUME_PATH, w.gatewayUrl), {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer not-the-service-token", traceparent: sent(refused) },
      body: JSON.stringify({}),
    });
    expect(denied.status).toBe(401);
    const taken = randomBytes(16).toString("hex");
    const answered = await fetch(new URL(RESUME_PATH, w.gatewayUrl), {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${SERVICE_TOKEN}`, traceparent: sent(taken) },
      body: JSON.stringify({}),
    });
    expect(answered.status).toBe(400);
    const spans = await exported();
    expect(spans.filter((s) => s.traceId === refused)).toEqual([]);
    const resume = spans.find((s) => s.traceId === taken);
    expect(resume?.name).toBe("gateway resume");
    expect(resume?.parentSpanId).toBe("1".repeat(16));
    expect(resume?.attributes["http.response.status_code"]).toBe(400);
  });

  it("an agent's request to the gateway is a server span of its own, the upstream call under it; the agent's traceparent is not taken", async () => {
    const sentTrace = randomBytes(16).toString("hex");
    const agent = { authorization: `Bearer ${w.keyPlaintext}`, traceparent: `00-${sentTrace}-${"2".repeat(16)}-01` };
    const call = await fetch(new URL("/v1/mcp", w.gatewayUrl), {
      method: "POST",
      headers: { ...agent, "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "github.list_repos", arguments: {} } }),
    });
    expect(call.status).toBe(200);
    expect(((await call.json()) as { result?: unknown }).result).toBeDefined();
    const status = await fetch(new URL(`/v1/approvals/${requestId}`, w.gatewayUrl), { headers: agent });
    expect(status.status).toBe(200);

    const spans = await exported();
    expect(spans.filter((s) => s.traceId === sentTrace)).toEqual([]);
    const tools = spans.filter((s) => s.name === "gateway tools").at(-1);
    expect(tools?.parentSpanId).toBeNull();
    expect(tools?.attributes["http.response.status_code"]).toBe(200);
    const upstreamCall = spans.find((s) => s.name === "mcp upstream POST" && s.traceId === tools!.traceId);
    expect(upstreamCall && descendsFrom(spans, upstreamCall, tools!)).toBe(true);
    const read = spans.filter((s) => s.name === "gateway approval status").at(-1);
    expect(read?.parentSpanId).toBeNull();
    expect(read?.attributes["http.response.status_code"]).toBe(200);
    // Only the status: no key, approval id or body on either.
    expect(JSON.stringify([tools, read])).not.toContain(requestId);
    expect(JSON.stringify([tools, read])).not.toContain(w.keyPlaintext);
  });

  it("a query outside any traced work (a worker's poll, start-up) starts no trace: every Prisma span has a parent", async () => {
    await w.db.prisma.organization.count();
    const spans = await exported();
    expect(spans.filter((s) => s.name.startsWith("prisma:") && s.parentSpanId === null).map((s) => s.name)).toEqual([]);
  });

  it("every export was a POST of JSON to /v1/traces", () => {
    expect(otlp.rejected).toBe(0);
    expect(otlp.protobuf).toEqual([]);
  });
});

describe("the OTLP settings follow the OpenTelemetry environment variables", () => {
  it("off without an endpoint; http/protobuf by default; the traces endpoint is taken as given; grpc is refused by name", () => {
    expect(tracingSettings({})).toBeNull();
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" })).toEqual({ url: "http://collector:4318/v1/traces", protocol: "http/protobuf", serviceName: "countersign" });
    expect(
      tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://b:4318/traces", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_SERVICE_NAME: "cs-eu" }),
    ).toEqual({ url: "http://b:4318/traces", protocol: "http/json", serviceName: "cs-eu" });
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf" })?.protocol).toBe("http/protobuf");
    expect(() => tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4317", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(/grpc.*http\/protobuf or http\/json/);
    expect(() => tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toThrow(/not an http\(s\) URL/);
  });
});
