// Shared resolver code (as squiggle keeps it in graphql/helpers/): the gate, plan, reservation,
// resource-policy and workspace schema files all use these.
import DataLoader from "dataloader";
import { InvalidStateError, NotFoundError } from "../errors.js";
import type { User } from "../generated/prisma/client.js";
import type { Context } from "./context.js";
import { COMMON_ERRORS } from "./schema/errors.js";

/**
 * A root field for a signed-in caller: `t.withAuth(SIGNED_IN).field({...})`. A caller with no
 * token is answered UNAUTHENTICATED before the resolver runs (builder.ts, unauthorizedError);
 * the resolver's context is a SignedInContext, its viewer there in the type. Whether the caller
 * is an active member, and may do what the field does, is the service's decision (authz).
 */
export const SIGNED_IN = { authenticated: true } as const;

export const ERRORS = { types: [...COMMON_ERRORS, InvalidStateError] };
/** A service's dependencies; from a signed-in field's context, its authz has the viewer in the type. */
export const deps = <C extends Context>(ctx: C) => ({ db: ctx.db, authz: ctx.authz as C["authz"], events: ctx.events });

/** A single-object query answers null for what the caller may not see (never leaking why). */
export function notFoundAsNull(error: unknown): null {
  if (error instanceof NotFoundError) return null;
  throw error;
}

// ── Users by id, batched per request ─────────────────────────────────────────────────

const userLoaders = new WeakMap<object, DataLoader<string, User | null>>();

/** A user by id, batched per request (reservations and plans name users without a relation). */
export function loadUser(ctx: Context, id: string): Promise<User | null> {
  let loader = userLoaders.get(ctx);
  if (!loader) {
    loader = new DataLoader<string, User | null>(async (ids) => {
      const rows = await ctx.db.prisma.user.findMany({ where: { id: { in: [...ids] } } });
      const byId = new Map(rows.map((u) => [u.id, u]));
      return ids.map((id) => byId.get(id) ?? null);
    });
    userLoaders.set(ctx, loader);
  }
  return loader.load(id);
}
