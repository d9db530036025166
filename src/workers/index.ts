import type { Infra } from "../infra/index.js";
import { createWebhookWorker, type WebhookWorker } from "./webhook-delivery.js";
import { createApprovalsRuntime, type ApprovalsRuntime } from "./runtime.js";

/**
 * The background workers: approval-stream ingest, delivery and expiry (with the embedded gateway
 * when config.gatewayEmbedded), and outbound webhook delivery. app.ts starts them when
 * COUNTERSIGN_WORKERS=all; otherwise worker.ts (`npm run worker`) does.
 */
export interface Workers {
  approvals: ApprovalsRuntime;
  /** Outbound webhook delivery (docs/webhooks.md). */
  webhooks: WebhookWorker;
  start(): void;
  close(): Promise<void>;
}

export function createWorkers(infra: Infra): Workers {
  const approvals = createApprovalsRuntime(infra);
  const webhooks = createWebhookWorker(infra);
  return {
    approvals,
    webhooks,
    start() {
      approvals.startWorkers();
      webhooks.start();
    },
    async close() {
      await Promise.all([approvals.close(), webhooks.stop()]);
    },
  };
}
