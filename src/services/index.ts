import type { IncomingMessage, ServerResponse } from "node:http";
import type { AppDeps } from "../app.js";

/** An extra HTTP route served beside /graphql (the gateway's resume endpoint, the dashboard). */
export type HttpHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean> | boolean;

export interface Services {
  config: AppDeps["config"];
  /** Extra HTTP routes, tried in order before GraphQL. */
  http: HttpHandler | null;
  close(): Promise<void>;
}

export function createServices(deps: AppDeps): Services {
  const handlers: HttpHandler[] = [];
  return {
    config: deps.config,
    http: async (req, res, url) => {
      for (const handler of handlers) if (await handler(req, res, url)) return true;
      return false;
    },
    async close() {},
  };
}
