import type { IncomingMessage, ServerResponse } from "node:http";
import type { AppDeps } from "../app.js";
import { createApprovalsRuntime, type ApprovalsRuntime } from "../workers/runtime.js";
import { createDashboardHttp } from "../dashboard/http.js";
import { createWebhookWorker, type WebhookWorker } from "./webhook-delivery.js";

/** An extra HTTP route served beside /graphql (the gateway's resume endpoint, the dashboard). */
export type HttpHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean> | boolean;

export interface Services {
  config: AppDeps["config"];
  /** Extra HTTP routes, tried in order before GraphQL. */
  http: HttpHandler | null;
  /** Held tool calls: the ingest and delivery workers, and the embedded gateway when mounted. */
  approvals: ApprovalsRuntime;
  /** Outbound webhook delivery (docs/webhooks.md). */
  webhooks: WebhookWorker;
  close(): Promise<void>;
}

export function createServices(deps: AppDeps): Services {
  const handlers: HttpHandler[] = [];
  const approvals = createApprovalsRuntime(deps);
  if (approvals.http) handlers.push(approvals.http);
  // The live gate dashboard at / and the explorer's assets (src/dashboard/).
  handlers.push(createDashboardHttp());
  // Background work runs in the API process unless COUNTERSIGN_WORKERS=none (then `npm run worker`).
  const webhooks = createWebhookWorker(deps);
  if (deps.config.workers === "all") {
    approvals.startWorkers();
    webhooks.start();
  }
  return {
    config: deps.config,
    approvals,
    webhooks,
    http: async (req, res, url) => {
      for (const handler of handlers) if (await handler(req, res, url)) return true;
      return false;
    },
    async close() {
      await Promise.all([approvals.close(), webhooks.stop()]);
    },
  };
}
