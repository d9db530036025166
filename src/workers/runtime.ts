import { Redis } from "ioredis";
import { createCedarGate, DEFAULT_GATEWAY_POLICIES } from "../gateway/cedar-gate.js";
import { createGateway, type Gateway } from "../gateway/gateway.js";
import { createGatewayHttpHandler, type GatewayHttpHandler } from "../gateway/http.js";
import { createPostgresGatewayStore } from "../gateway/postgres-store.js";
import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import { watchConnection, type EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import { createDeliveryWorker, type DeliveryWorker } from "./delivery.js";
import { createIngestWorker, type IngestWorker } from "./ingest.js";

/**
 * Held tool calls in a Countersign process: the ingest and delivery workers, and — with
 * COUNTERSIGN_GATEWAY_EMBEDDED=on — the gateway itself mounted beside /graphql
 * (`POST /gateway/v1/mcp` for tools/call, `POST /internal/v1/approvals/resume`), with a demo
 * executor that records the call instead of reaching a vendor. A real gateway embeds
 * src/gateway/ with its own executor and points COUNTERSIGN_GATEWAY_URL at itself.
 *
 * The stream needs Redis: without REDIS_URL (the embedded default) there is no ingest and no
 * embedded gateway, and the runtime says so once at start.
 */
export type ApprovalsRuntime = {
  http: GatewayHttpHandler | null;
  gateway: Gateway | null;
  ingest: IngestWorker | null;
  delivery: DeliveryWorker | null;
  startWorkers(): void;
  close(): Promise<void>;
};

export const EMBEDDED_TOOLS_PATH = "/gateway/v1/mcp";

export function createApprovalsRuntime(deps: { config: Config; db: Database; events: EventBus; logger: Logger }): ApprovalsRuntime {
  const { config, db, events } = deps;
  const logger = deps.logger.child({ module: "approvals" });
  let redis: Redis | null = null;
  const streamClient = () => {
    if (!redis) {
      redis = new Redis(config.redisUrl!, { maxRetriesPerRequest: 3 });
      // Errors are logged, never left to the process; once the stream is back, ingest runs at once
      // (recreating the consumer group if Redis lost it).
      watchConnection(redis, "approval-stream", logger, () => ingest?.wake());
    }
    return redis;
  };

  let gateway: Gateway | null = null;
  let http: GatewayHttpHandler | null = null;
  if (config.gatewayEmbedded) {
    if (!config.redisUrl || !config.approvalSecret || !config.gatewayServiceToken) {
      logger.warn("COUNTERSIGN_GATEWAY_EMBEDDED=on needs REDIS_URL, COUNTERSIGN_APPROVAL_SECRET and COUNTERSIGN_GATEWAY_SERVICE_TOKEN; the gateway is not mounted");
    } else {
      gateway = createGateway({
        store: createPostgresGatewayStore(db.prisma, { ticketSecret: config.approvalSecret }),
        stream: streamClient(),
        streamKey: config.approvalStream,
        gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
        approvalSecret: config.approvalSecret,
        tokenIssuer: config.approvalTokenIssuer,
        tokenAudience: config.approvalTokenAudience,
        inboxUrl: config.inboxUrl,
        serviceToken: config.gatewayServiceToken,
        logger: logger.child({ component: "gateway" }),
        // The demo executor: records what would have run. A real gateway calls the provider here.
        executor: async (call) => ({ demo: true, provider: call.provider, tool: call.tool, invocation_id: call.invocationId, executed_at: new Date().toISOString() }),
      });
      http = createGatewayHttpHandler(gateway, { toolsPath: EMBEDDED_TOOLS_PATH });
    }
  }

  const ingest = config.redisUrl
    ? createIngestWorker({
        db,
        redis: streamClient(),
        events,
        logger,
        streamKey: config.approvalStream,
        intervalMs: config.ingestIntervalMs,
        claimIdleMs: config.ingestClaimIdleMs,
        republishAfterMs: config.heldRepublishAfterMs,
        ticketSecret: config.approvalSecret,
      })
    : null;

  const gatewayUrl = config.gatewayUrl ?? (gateway ? `http://127.0.0.1:${config.port}` : undefined);
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
        })
      : null;

  let started = false;
  return {
    http,
    gateway,
    ingest,
    delivery,
    startWorkers() {
      if (started) return;
      started = true;
      if (!ingest) logger.info("no REDIS_URL: held tool calls are not ingested (the approval stream lives in Redis)");
      if (!delivery) logger.info("approved tool calls are not delivered: set COUNTERSIGN_APPROVAL_SECRET, COUNTERSIGN_GATEWAY_SERVICE_TOKEN and COUNTERSIGN_GATEWAY_URL");
      ingest?.start();
      delivery?.start();
    },
    async close() {
      await Promise.all([ingest?.stop(), delivery?.stop()]);
      redis?.disconnect();
    },
  };
}
