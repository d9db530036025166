import type { IncomingMessage, ServerResponse } from "node:http";

/** An extra HTTP route served beside /graphql (the gateway's resume endpoint, the dashboard). */
export type HttpHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean> | boolean;
