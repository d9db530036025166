// A type is authorized as itself: every permissioned object type carries ONE read rule on the type
// (`authScopes: (object, ctx) => boolean`, run by scope-auth on every object of that type, however
// it was reached). This plugin makes a denied object disappear quietly from the edges that can say
// "nothing here": a nullable edge answers null and a list leaves the object out, so a member who
// may read a workspace but not its stack gets `stack: null`, not an error. A non-null edge is left
// to the type's own check, which answers NOT_FOUND (builder.ts): it fails closed either way.
import SchemaBuilder, {
  BasePlugin,
  isThenable,
  type PothosOutputFieldConfig,
  type PothosOutputFieldType,
  type SchemaTypes,
} from "@pothos/core";
import type { GraphQLFieldResolver } from "graphql";
import { perRequest, RequestLoaders } from "./request-loaders.js";

/** The objects this request's mutation wrote and returned. */
const written = perRequest((_ctx: { loaders: RequestLoaders }) => new WeakSet<object>());

/** The plugin is generic over the context: this one carries the request's loaders (app.ts). */
const hasLoaders = (ctx: unknown): ctx is { loaders: RequestLoaders } =>
  typeof ctx === "object" && ctx !== null && "loaders" in ctx && ctx.loaders instanceof RequestLoaders;

/**
 * Whether this request's mutation wrote and returned `object` (or carries it in its payload): a
 * writer who may create or update a row without reading it still gets back the row they wrote.
 */
export function wroteIt(ctx: object, object: unknown): boolean {
  return typeof object === "object" && object !== null && hasLoaders(ctx) && written.of(ctx).has(object);
}

function markWritten(ctx: object, value: unknown): void {
  if (typeof value !== "object" || value === null || value instanceof Error || !hasLoaders(ctx)) return;
  const set = written.of(ctx);
  set.add(value);
  // A payload ({ policy, invalidatedRequestIds }, { virtualKey, plaintextKey }): the rows it carries.
  for (const inner of Object.values(value)) if (typeof inner === "object" && inner !== null && !Array.isArray(inner)) set.add(inner);
}

type Rule = (value: unknown, ctx: unknown) => boolean | Promise<boolean> | object;

export class DeniedEdgesPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  override wrapResolve(
    resolver: GraphQLFieldResolver<unknown, Types["Context"], object>,
    fieldConfig: PothosOutputFieldConfig<Types>,
  ): GraphQLFieldResolver<unknown, Types["Context"], object> {
    if (this.buildCache.getTypeConfig(fieldConfig.parentType).kind === "Mutation") {
      return (parent, args, ctx, info) => {
        const result = resolver(parent, args, ctx, info);
        if (!isThenable(result)) return (markWritten(ctx, result), result);
        return Promise.resolve(result).then((value) => (markWritten(ctx, value), value));
      };
    }
    const type: PothosOutputFieldType<Types> = fieldConfig.type;
    const list = type.kind === "List";
    const item = type.kind === "List" ? type.type : type;
    if (item.kind !== "Object") return resolver;
    if (!list && !type.nullable) return resolver;
    const rule = this.buildCache.getTypeConfig(item.ref, "Object").pothosOptions.authScopes as Rule | undefined;
    if (typeof rule !== "function") return resolver;

    // Rules here answer a boolean; a scope map is left to scope-auth (it runs on the type anyway).
    const asVerdict = (verdict: unknown): boolean => (typeof verdict === "boolean" ? verdict : true);
    // A rule that decides at once (the request's principal and the object's workspace at hand)
    // is taken at once: a list of such objects is filtered without waiting a turn per object.
    const allowed = (value: unknown, ctx: unknown): boolean | Promise<boolean> => {
      if (value === null || value === undefined) return true;
      const verdict = rule(value, ctx);
      return isThenable(verdict) ? Promise.resolve(verdict).then(asVerdict) : asVerdict(verdict);
    };
    const filter = (value: unknown, ctx: unknown): unknown => {
      if (!list) {
        const verdict = allowed(value, ctx);
        return isThenable(verdict) ? Promise.resolve(verdict).then((ok) => (ok ? value : null)) : verdict ? value : null;
      }
      if (!Array.isArray(value)) return value;
      const verdicts = value.map((v) => allowed(v, ctx));
      if (verdicts.some(isThenable)) return Promise.all(verdicts).then((all) => value.filter((_v, i) => all[i]));
      return value.filter((_v, i) => verdicts[i]);
    };
    return (parent, args, ctx, info) => {
      const result = resolver(parent, args, ctx, info);
      return isThenable(result) ? Promise.resolve(result).then((value) => filter(value, ctx)) : filter(result, ctx);
    };
  }
}

declare global {
  export namespace PothosSchemaTypes {
    interface Plugins<Types extends SchemaTypes> {
      deniedEdges: DeniedEdgesPlugin<Types>;
    }
  }
}

SchemaBuilder.registerPlugin("deniedEdges", DeniedEdgesPlugin);
