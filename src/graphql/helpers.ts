// Shared resolver code (as squiggle keeps it in graphql/helpers/): the gate, plan, reservation,
// resource-policy and workspace schema files all use these.
import DataLoader from "dataloader";
import { RequestCache } from "@pothos/plugin-scope-auth";
import { InvalidStateError, NotFoundError } from "../errors.js";
import type { User } from "../generated/prisma/client.js";
import type { Context } from "./context.js";
import { perRequest } from "./request-loaders.js";
import { usersByIds } from "../services/users.js";
import { COMMON_ERRORS } from "./schema/errors.js";

/**
 * A root field for a signed-in caller: `t.withAuth(SIGNED_IN).field({...})`. A caller with no
 * token is answered UNAUTHENTICATED before the resolver runs (builder.ts, unauthorizedError);
 * the resolver's context is a SignedInContext, its viewer there in the type. Whether the caller
 * is an active member, and may do what the field does, is the service's decision (authz).
 */
export const SIGNED_IN = { authenticated: true } as const;

/** (member, read) in the caller's organization, as an authScopes value: what another member's data takes (seed 004). */
export const READ_MEMBERS = { permission: { resourceType: "member", action: "read", matchValue: null, groups: null } } as const;

/**
 * A person's email, member data wherever the person is reached (User.email, GatePerson.email):
 * the caller's own, or anyone's with (member, read); null otherwise, and for a person without one.
 */
export function memberEmail(ctx: Context, person: { id: string; email: string }): string | null | Promise<string | null> {
  const { email } = person;
  if (!email) return null;
  if (ctx.viewer !== null && ctx.viewer.userId === person.id) return email;
  const may = ctx.authz.check(READ_MEMBERS.permission);
  return typeof may === "boolean" ? (may ? email : null) : may.then((yes) => (yes ? email : null));
}

export const ERRORS = { types: [...COMMON_ERRORS, InvalidStateError] };
/** A service's dependencies; from a signed-in field's context, its authz has the viewer in the type. */
export const deps = <C extends Context>(ctx: C) => ({ db: ctx.db, authz: ctx.authz as C["authz"], events: ctx.events, config: ctx.config });

/**
 * Forgets the scopes scope-auth decided for this context (its cache per context), once a
 * subscription is set up: the context lives as long as the subscription, and nothing decided
 * while subscribing is read again (an event's execution that checks a scope decides it anew).
 */
export function forgetDecidedScopes(ctx: Context): void {
  RequestCache.clearForContext(ctx);
}

/** A single-object query answers null for what the caller may not see (never leaking why). */
export function notFoundAsNull(error: unknown): null {
  if (error instanceof NotFoundError) return null;
  throw error;
}

/**
 * A text column that holds one of a closed set of values (an enum kept as text), as that set's
 * type. Any other value is a corrupt row: the field fails, as GraphQL's enum would refuse it.
 */
export function oneOf<const T extends string>(values: readonly T[], value: string, column: string): T {
  const found = values.find((v) => v === value);
  if (found === undefined) throw new Error(`${column} holds ${JSON.stringify(value)}, which is none of its values`);
  return found;
}

// ── Users by id, batched per request ─────────────────────────────────────────────────

const users = perRequest((ctx: Context) => {
  /** The users this request has read already: userNamed answers these at once. */
  const atHand = new Map<string, User | null>();
  const loader = new DataLoader<string, User | null>(async (ids) => {
    const byId = await usersByIds(ctx.db, ids);
    return ids.map((id) => {
      const user = byId.get(id) ?? null;
      atHand.set(id, user);
      return user;
    });
  });
  return { loader, atHand };
});

/** A user by id, batched per request (reservations and plans name users without a relation). */
export function loadUser(ctx: Context, id: string): Promise<User | null> {
  return users.of(ctx).loader.load(id);
}

/**
 * Reads the people rows name, in one batch, before their fields ask (a list that knows whom its
 * rows name): each field naming one of them then answers at once instead of waiting its turn.
 */
export async function preloadUsers(ctx: Context, ids: Iterable<string | null>): Promise<void> {
  const wanted = new Set<string>();
  for (const id of ids) if (id !== null) wanted.add(id);
  if (wanted.size > 0) await users.of(ctx).loader.loadMany([...wanted]);
}

/**
 * The user a row names, through the request's batch (loadUser): a list naming people in several
 * places (who holds, placed and released a reservation; who submitted a plan, approved it and
 * withdrew) reads them together, where a relation per field is a statement per field. Null for
 * no id; a required reference to a user that is gone fails the field. At once for a user this
 * request has read already.
 */
export function userNamed(ctx: Context, id: string): User | Promise<User>;
export function userNamed(ctx: Context, id: string | null): User | null | Promise<User | null>;
export function userNamed(ctx: Context, id: string | null): User | null | Promise<User | null> {
  if (id === null) return null;
  const known = users.of(ctx).atHand.get(id);
  if (known) return known;
  return loadUser(ctx, id).then((user) => {
    if (!user) throw new Error(`user ${id} named by a row is gone`);
    return user;
  });
}
