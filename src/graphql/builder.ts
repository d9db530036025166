import SchemaBuilder from "@pothos/core";
import ErrorsPlugin from "@pothos/plugin-errors";
import PrismaPlugin from "@pothos/plugin-prisma";
import RelayPlugin from "@pothos/plugin-relay";
import ScopeAuthPlugin from "@pothos/plugin-scope-auth";
import { GraphQLError, valueFromASTUntyped } from "graphql";
import StorableTextPlugin from "./plugins/storable-text.js";
import { jsonTextProblem } from "../domain/text.js";
import type PrismaTypes from "../generated/pothos-types.js";
import { getDatamodel } from "../generated/pothos-types.js";
import type { Context, SignedInContext } from "./context.js";
import type { Target } from "../domain/catalog/index.js";
import { wroteIt } from "./denied-edges.js";

export const builder = new SchemaBuilder<{
  Context: Context;
  PrismaTypes: PrismaTypes;
  AuthScopes: {
    authenticated: boolean;
    /** The caller holds this permission tuple (field-level checks on an object's parent). */
    permission: Target;
  };
  /** `t.withAuth(SIGNED_IN)` (helpers.ts): the resolver's context has its viewer, in the type. */
  AuthContexts: { authenticated: SignedInContext };
  DefaultFieldNullability: false;
  Scalars: {
    DateTime: { Input: Date; Output: Date | string };
    JSON: { Input: unknown; Output: unknown };
  };
}>({
  // StorableTextPlugin after ErrorsPlugin: its ValidationError becomes a mutation's typed result.
  // deniedEdges last: it wraps the field's own resolver, so it sees what the edge resolved to.
  plugins: [ScopeAuthPlugin, ErrorsPlugin, StorableTextPlugin, PrismaPlugin, RelayPlugin, "deniedEdges"],
  defaultFieldNullability: false,
  scopeAuth: {
    // Built once per request: methods, not arrows in properties, which tsx (keepNames) would
    // name with an Object.defineProperty each on every request.
    authScopes: (ctx) => ({
      authenticated: ctx.viewer !== null,
      permission(target) {
        return ctx.authz.check(target);
      },
    }),
    // Only a caller with no viewer is unauthenticated. A signed-in caller who fails a type's or a
    // field's rule is told nothing: the object is not found (a nullable edge answers null).
    unauthorizedError: (_parent, ctx) =>
      ctx.viewer === null
        ? new GraphQLError("Send a valid token as `Authorization: Bearer <token>`", { extensions: { code: "UNAUTHENTICATED" } })
        : new GraphQLError("Not found", { extensions: { code: "NOT_FOUND" } }),
  },
  prisma: {
    client: (ctx) => ctx.db.prisma,
    dmmf: getDatamodel(),
    filterConnectionTotalCount: true,
    maxConnectionSize: 100,
    defaultConnectionSize: 50,
    // Mutations return rows they already loaded; relations then resolve through the
    // plugin's batched fallback loaders, so an unused query is not an N+1.
    onUnusedQuery: null,
  },
  relay: {
    clientMutationId: "omit",
    cursorType: "String",
  },
  errors: { defaultTypes: [] },
});

/** The object belongs to the caller's organization (system rows, orgId null, belong to every one). */
export const inViewerOrg = (orgId: string | null, ctx: Context): boolean =>
  ctx.viewer !== null && (orgId === null || orgId === ctx.viewer.orgId);

/**
 * A type's read rule: the object is of the caller's organization and the caller holds the tuple
 * (an active member, when `target` is null); or the object is the very row this request's
 * mutation wrote and returned (the writer sees what they wrote; what it links to is still
 * authorized as itself). Put on the type (`authScopes: (o, ctx) =>
 * readable(ctx, o.orgId, ...)`, `runScopesOnType: true`), it is checked on every object of the
 * type however it was reached; denied-edges.ts turns a denial into null or absence.
 */
export function readable(ctx: Context, object: object, orgId: string | null, target: Target | null): boolean | Promise<boolean> {
  if (wroteIt(ctx, object)) return true;
  if (!inViewerOrg(orgId, ctx)) return false;
  return target === null ? ctx.authz.requireMember().then(() => true, () => false) : ctx.authz.check(target);
}

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});

builder.scalarType("DateTime", {
  description: "An ISO-8601 timestamp in UTC.",
  serialize: (value) => (value instanceof Date ? value.toISOString() : String(value)),
  parseValue: (value) => {
    const date = new Date(String(value));
    if (typeof value !== "string" || Number.isNaN(date.getTime())) {
      throw new GraphQLError("DateTime must be an ISO-8601 string");
    }
    return date;
  },
});

/**
 * A JSON input is checked like every other input (src/domain/text.ts): object keys are
 * identifiers, string values cannot carry NUL or an unpaired surrogate (jsonb cannot store
 * them). As a variable or as an inline literal alike. (A JSON request body cannot carry NaN,
 * Infinity or undefined, so the value is otherwise plain JSON already.)
 */
function parseJson(value: unknown): unknown {
  const found = jsonTextProblem(value);
  if (found) {
    const where = found.path.length ? ` at ${found.path.join(".")}` : "";
    throw new GraphQLError(`JSON value${where}: ${found.problem.message}`, { extensions: { code: "BAD_USER_INPUT" } });
  }
  return value;
}

builder.scalarType("JSON", {
  description: "Arbitrary JSON.",
  serialize: (value) => value,
  parseValue: parseJson,
  parseLiteral: (node, variables) => parseJson(valueFromASTUntyped(node, variables ?? undefined)),
});
