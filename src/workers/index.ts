import type { Infra } from "../infra/index.js";
import { createGithubWorker, type GithubWorker } from "./github-delivery.js";
import { createWebhookWorker, type WebhookWorker } from "./webhook-delivery.js";
import { createHcpRunTaskWorker, type HcpRunTaskWorker } from "./hcp-run-task.js";
import { createApprovalsRuntime, type ApprovalsRuntime } from "./runtime.js";

/**
 * The background workers: approval-stream ingest, delivery and expiry (with the embedded gateway
 * when config.gatewayEmbedded), outbound webhook delivery, and GitHub deployment protection answers. app.ts starts them when
 * COUNTERSIGN_WORKERS=all; otherwise worker.ts (`npm run worker`) does.
 */
export interface Workers {
  approvals: ApprovalsRuntime;
  /** Outbound webhook delivery (docs/webhooks.md). */
  webhooks: WebhookWorker;
  /** HCP Terraform run tasks: plan submission and task-results callbacks (docs/integrations.md). */
  hcpRunTasks: HcpRunTaskWorker;
  /** GitHub deployment protection rule answers (docs/integrations.md). */
  github: GithubWorker;
  start(): void;
  close(): Promise<void>;
}

export function createWorkers(infra: Infra): Workers {
  const approvals = createApprovalsRuntime(infra);
  const webhooks = createWebhookWorker(infra);
  const hcpRunTasks = createHcpRunTaskWorker(infra);
  const github = createGithubWorker(infra);
  return {
    approvals,
    webhooks,
    hcpRunTasks,
    github,
    start() {
      approvals.startWorkers();
      webhooks.start();
      hcpRunTasks.start();
      github.start();
    },
    async close() {
      await Promise.all([approvals.close(), webhooks.stop(), hcpRunTasks.stop(), github.stop()]);
    },
  };
}
