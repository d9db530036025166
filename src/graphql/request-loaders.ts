// Per-request loaders (DataLoaders and the like): one registry per context, built with it (app.ts).
// A loader is declared once, next to the fields that use it, with `perRequest`; `of(ctx)` makes it
// the first time a request asks and hands back the same one after that. A subscription's context
// lives across events: it clears the registry on each event so the next one reads anew (events
// carry ids, subscribers reload).

/** A per-request loader: how to make it from the context, and where to find this request's one. */
export interface PerRequest<Ctx, T> {
  /** This request's instance, made on first use. */
  of(ctx: Ctx): T;
}

/** What a context carries for `perRequest` (Context.loaders). */
export class RequestLoaders {
  /** Made on the first loader: most subscriptions' contexts never ask for one, and live as long as they do. */
  #made: Map<object, unknown> | null = null;

  /** The instance stored under `key`, made by `make` on first use. */
  get<T>(key: PerRequest<never, T>, make: () => T): T {
    const made = (this.#made ??= new Map());
    if (made.has(key)) {
      // Only `get` stores under a key, and always the T its own `make` returned.
      return made.get(key) as T;
    }
    const value = make();
    made.set(key, value);
    return value;
  }

  /** Forgets every instance: the next read makes new ones (a subscription, on each event). */
  clear(): void {
    this.#made = null;
  }
}

/** Declares a loader made once per request from its context. */
export function perRequest<Ctx extends { loaders: RequestLoaders }, T>(make: (ctx: Ctx) => T): PerRequest<Ctx, T> {
  const definition: PerRequest<Ctx, T> = { of: (ctx) => ctx.loaders.get(definition, () => make(ctx)) };
  return definition;
}
