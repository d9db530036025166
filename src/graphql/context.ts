import type { Viewer } from "../auth/authenticate.js";
import type { Authz, SignedInAuthz } from "../authz/authz.js";
import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import type { EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import type { GatewayUpstreams } from "../services/approvals/keys.js";
import type { RequestLoaders } from "./request-loaders.js";

/** One per HTTP request and one per subscription operation, built by one factory (app.ts). */
export interface Context {
  requestId: string;
  logger: Logger;
  db: Database;
  events: EventBus;
  viewer: Viewer | null;
  authz: Authz;
  config: Config;
  /** The mounted gateway's upstream clients (null when the gateway runs elsewhere): `ToolConnection.tools` reads through them. */
  upstreams: GatewayUpstreams | null;
  /** This request's loaders (request-loaders.ts), cleared on each event of a subscription. */
  loaders: RequestLoaders;
  /**
   * Set on a graphql-ws subscription's context (app.ts): its id and a write to its socket, so a
   * shared event result can be sent without the per-subscriber pipeline (shared-events.ts).
   */
  subscriptionSink?: SubscriptionSink;
}

export interface SubscriptionSink {
  /** The graphql-ws subscription id. */
  id: string;
  /** Writes one protocol message to the socket; false if the socket is no longer open. */
  send(data: string): boolean;
}

/**
 * A signed-in caller's context, in the type: what a root field declared with
 * `t.withAuth(SIGNED_IN)` (helpers.ts) resolves with, the `authenticated` scope having passed.
 */
export interface SignedInContext extends Context {
  viewer: Viewer;
  authz: SignedInAuthz;
}

/**
 * The context as a signed-in caller's, for a field of an object type (reached only under a root
 * field the `authenticated` scope guards) that calls a service acting as the caller. Checked, not
 * asserted: a context without a viewer throws.
 */
export function signedIn(ctx: Context): SignedInContext {
  if (!ctx.viewer || !ctx.authz.viewer) throw new Error("signedIn called on an unauthenticated context");
  return ctx as SignedInContext;
}

/** The viewer, for fields that the `authenticated` scope already guards. */
export function viewerOf(ctx: Context): Viewer {
  if (!ctx.viewer) throw new Error("viewerOf called on an unauthenticated context");
  return ctx.viewer;
}
