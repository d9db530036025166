import type { Viewer } from "../auth/authenticate.js";
import type { Authz } from "../authz/authz.js";
import type { Database } from "../infra/db.js";
import type { EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import type { Services } from "../services/index.js";

/** One per HTTP request and one per subscription operation, built by one factory (app.ts). */
export interface Context {
  requestId: string;
  logger: Logger;
  db: Database;
  events: EventBus;
  viewer: Viewer | null;
  authz: Authz;
  services: Services;
}

/** The viewer, for fields that the `authenticated` scope already guards. */
export function viewerOf(ctx: Context): Viewer {
  if (!ctx.viewer) throw new Error("viewerOf called on an unauthenticated context");
  return ctx.viewer;
}
