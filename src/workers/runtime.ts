import { Redis } from "ioredis";
import { createGateway, type Gateway } from "../gateway/gateway.js";
import { createGatewayHttpHandler, type GatewayHttpHandler } from "../gateway/http.js";
import { createPostgresGatewayStore } from "../gateway/postgres-store.js";
import { createPostgresTaskStore } from "../gateway/postgres-tasks.js";
import { reviewProgress } from "../services/approvals/review-progress.js";
import { withdrawApprovalRequest } from "../services/approvals/withdraw.js";
import { answerRelay } from "./answer-relay.js";
import { approvalWake } from "./approval-wake.js";
import { createUpstreamFetch, createUpstreamPool, type UpstreamPool } from "../gateway/upstream.js";
import { createDemoUpstream } from "../gateway/demo-upstream.js";
import { redisApprovalStream, type ApprovalStream } from "../infra/approval-stream.js";
import { createMemoryApprovalStream } from "../infra/memory-stream.js";
import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import { watchConnection, type EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import { approvalAuthority } from "../services/approvals/authority.js";
import { createDeliveryWorker, type DeliveryWorker } from "./delivery.js";
import { createIngestWorker, type IngestWorker } from "./ingest.js";

/**
 * Held tool calls in a Countersign process: the ingest and delivery workers, and — with
 * COUNTERSIGN_GATEWAY_EMBEDDED=on, the default without DATABASE_URL — the gateway itself mounted
 * beside /graphql (`POST /gateway/v1/mcp` for tools/call, `GET /gateway/v1/approvals/{id}` for the
 * agent's status read, `POST /internal/v1/approvals/resume`). `/gateway/v1/mcp` is the MCP
 * Streamable HTTP transport for MCP clients and the plain JSON-RPC POST beside it. Each
 * connection's tools run on its upstream MCP server (its `url`); the demo upstream
 * (src/gateway/demo-upstream.ts) lives in this process at DEMO_UPSTREAM_URL, which the demo
 * workspace's `github` connection points at. A gateway elsewhere embeds src/gateway/ and points
 * COUNTERSIGN_GATEWAY_URL at itself.
 *
 * The approval stream is Redis's with REDIS_URL, otherwise an in-process one with the same
 * semantics (src/infra/memory-stream.ts): one process then holds, files, delivers and executes.
 * An in-process stream is empty after a restart; ingest puts back what it lost from the held
 * records (COUNTERSIGN_HELD_REPUBLISH_AFTER_MS). With the gateway in this process and no
 * COUNTERSIGN_GATEWAY_URL, delivery calls its resume directly, not over the network.
 */
export type ApprovalsRuntime = {
  http: GatewayHttpHandler | null;
  gateway: Gateway | null;
  /**
   * The embedded gateway's upstream clients (null when it is not mounted): what
   * `listConnectionTools` (src/gateway/tools.ts) reads a connection's tools with.
   */
  upstreams: UpstreamPool | null;
  ingest: IngestWorker | null;
  delivery: DeliveryWorker | null;
  startWorkers(): void;
  close(): Promise<void>;
};

export const EMBEDDED_TOOLS_PATH = "/gateway/v1/mcp";
export const EMBEDDED_APPROVALS_PATH = "/gateway/v1/approvals";

export function createApprovalsRuntime(deps: { config: Config; db: Database; events: EventBus; logger: Logger }): ApprovalsRuntime {
  const { config, db, events } = deps;
  const logger = deps.logger.child({ module: "approvals" });
  let redis: Redis | null = null;
  let stream: ApprovalStream | null = null;
  const streamClient = (): ApprovalStream => {
    if (stream) return stream;
    if (!config.redisUrl) return (stream = createMemoryApprovalStream());
    redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 3 });
    // Errors are logged, never left to the process; once the stream is back, ingest runs at once
    // (recreating the consumer group if Redis lost it).
    watchConnection(redis, "approval-stream", logger, () => ingest?.wake());
    return (stream = redisApprovalStream(redis));
  };

  let gateway: Gateway | null = null;
  let http: GatewayHttpHandler | null = null;
  let upstreams: UpstreamPool | null = null;
  const wake = approvalWake(events, logger);
  // Several API processes on Redis: an agent's answer to a relayed request may reach any of them.
  const answers = events.kind === "redis" ? answerRelay(events, logger) : null;
  if (config.gatewayEmbedded) {
    if (!config.approvalSecret || !config.gatewayServiceToken) {
      logger.warn("COUNTERSIGN_GATEWAY_EMBEDDED=on needs COUNTERSIGN_APPROVAL_SECRET and COUNTERSIGN_GATEWAY_SERVICE_TOKEN; the gateway is not mounted");
    } else {
      const demoUpstream = createDemoUpstream();
      // The demo upstream is answered in process (it is no address); every other URL goes
      // through the policy's fetch.
      upstreams = createUpstreamPool({ approvalSecret: config.approvalSecret, fetch: demoUpstream.fetch(createUpstreamFetch(config.upstreams)) });
      gateway = createGateway({
        store: createPostgresGatewayStore(db.prisma, { ticketSecret: config.approvalSecret, authority: (id) => approvalAuthority(db.sql, id), sql: db.sql }),
        stream: streamClient(),
        streamKey: config.approvalStream,
        // No fixed gate: each workspace's newest saved policy set (or the default), per call.
        approvalSecret: config.approvalSecret,
        tokenIssuer: config.approvalTokenIssuer,
        tokenAudience: config.approvalTokenAudience,
        inboxUrl: config.inboxUrl,
        serviceToken: config.gatewayServiceToken,
        logger: logger.child({ component: "gateway" }),
        upstreams,
        // Held calls as MCP tasks: their state is the held record and the approval request.
        tasks: { store: createPostgresTaskStore(db.sql), reviewProgress: (id) => reviewProgress(db.sql, id), withdraw: (id) => withdrawApprovalRequest(db, events, id), wake },
        answers,
      });
      http = createGatewayHttpHandler(gateway, { toolsPath: EMBEDDED_TOOLS_PATH, approvalsPath: EMBEDDED_APPROVALS_PATH });
    }
  }

  // Always: without Redis it drains the in-process stream, and puts back (from the held records
  // in the database) tickets a gateway in another process held on a stream of its own.
  const ingest: IngestWorker | null = createIngestWorker({
    db,
    stream: streamClient(),
    events,
    logger,
    streamKey: config.approvalStream,
    intervalMs: config.ingestIntervalMs,
    claimIdleMs: config.ingestClaimIdleMs,
    republishAfterMs: config.heldRepublishAfterMs,
    ticketSecret: config.approvalSecret,
  });

  // Delivery targets the process itself when the gateway is here and no other is named.
  const inProcess = !config.gatewayUrl && gateway ? gateway : null;
  const gatewayUrl = config.gatewayUrl ?? (inProcess ? IN_PROCESS_GATEWAY_URL : undefined);
  const delivery =
    config.approvalSecret && config.gatewayServiceToken && gatewayUrl
      ? createDeliveryWorker({
          db,
          events,
          logger,
          approvalSecret: config.approvalSecret,
          tokenIssuer: config.approvalTokenIssuer,
          tokenAudience: config.approvalTokenAudience,
          gatewayUrl,
          serviceToken: config.gatewayServiceToken,
          intervalMs: config.deliveryIntervalMs,
          ...(inProcess ? { fetch: inProcessResume(inProcess) } : {}),
        })
      : null;

  let started = false;
  return {
    http,
    gateway,
    upstreams,
    ingest,
    delivery,
    startWorkers() {
      if (started) return;
      started = true;
      if (!config.redisUrl) logger.info("no REDIS_URL: held tool calls travel on an in-process approval stream");
      if (!delivery) logger.info("approved tool calls are not delivered: set COUNTERSIGN_APPROVAL_SECRET, COUNTERSIGN_GATEWAY_SERVICE_TOKEN and COUNTERSIGN_GATEWAY_URL");
      ingest?.start();
      delivery?.start();
    },
    async close() {
      await Promise.all([ingest?.stop(), delivery?.stop(), upstreams?.close(), wake.close(), answers?.close()]);
      redis?.disconnect();
    },
  };
}

const IN_PROCESS_GATEWAY_URL = "http://gateway.in-process";

/** Delivery's `fetch`, answered by this process's gateway: the same resume, without a socket. */
function inProcessResume(gateway: Gateway): typeof fetch {
  return async (_input, init) => {
    const headers = new Headers(init?.headers);
    let body: unknown;
    try {
      body = JSON.parse(typeof init?.body === "string" ? init.body : "null");
    } catch {
      body = null;
    }
    const answer = await gateway.resume({ authorization: headers.get("authorization"), body });
    return new Response(JSON.stringify(answer.body), { status: answer.status, headers: { "content-type": "application/json", ...answer.headers } });
  };
}
