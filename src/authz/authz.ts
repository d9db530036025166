import type { Viewer } from "../auth/authenticate.js";
import { checkPermission, listScope, type ListScope, type Target } from "../domain/catalog/check.js";
import { decideAction, type Decision } from "../domain/catalog/decide.js";
import type { ConcreteAction, ConcreteResourceType } from "../domain/catalog/matrix.js";
import { NotFoundError, PermissionDeniedError, UnauthenticatedError } from "../errors.js";
import type { SqlRunner } from "../infra/db.js";
import { EpochCache, loadPrincipal, loadPrincipals, principalKey, type LoadedPrincipal, type PrincipalCache } from "./principal.js";

/** A principal kept across requests: the process's cache and the epoch this request read with its token. */
export interface KeptPrincipals {
  cache: PrincipalCache;
  /** The authz epoch read in the same statement as the request's token (auth/authenticate.ts). */
  epoch: number;
}

/**
 * Rows of another kind kept beside the process's principals, under the same authz epoch: one
 * EpochCache per PrincipalCache (per app), made on first use. Only for rows built from what the
 * epoch covers (the tables its triggers watch: see EpochCache).
 */
export class EpochSlot<V> {
  readonly #byCache = new WeakMap<PrincipalCache, EpochCache<V>>();

  of(cache: PrincipalCache): EpochCache<V> {
    let kept = this.#byCache.get(cache);
    if (!kept) this.#byCache.set(cache, (kept = new EpochCache<V>()));
    return kept;
  }
}

/**
 * An Authz whose viewer is there, in the type: a signed-in caller's (a GraphQL field the
 * `authenticated` scope guards, graphql/context.ts SignedInContext) or one built for a known user.
 * A service that acts as the caller takes this, and reads `authz.viewer` without asserting it.
 */
export type SignedInAuthz = Authz<Viewer>;

/**
 * The request's authorization: the viewer's principal is loaded once per request (or per
 * subscription event) and every check after that is in memory (src/domain/catalog/check.ts).
 * Given `kept`, the principal comes from the process's cache while the authz epoch the request
 * read with its token is the one it was kept under (no change to what it is built from has
 * committed since, in any process); otherwise it is loaded, then kept.
 */
export class Authz<V extends Viewer | null = Viewer | null> {
  private principalPromise: Promise<LoadedPrincipal> | null = null;
  /** The principal principalPromise resolved to, once it has: checks after that answer at once (check). */
  private loaded: LoadedPrincipal | null = null;

  constructor(
    private readonly sql: SqlRunner,
    readonly viewer: V,
    private kept: KeptPrincipals | null = null,
  ) {}

  /**
   * Forget the cached principal: the next check reads grants and membership anew (a
   * subscription re-authorizing on an event). The request's epoch is stale by then, so the
   * process's cache is not consulted again.
   */
  refresh(): void {
    this.principalPromise = null;
    this.loaded = null;
    this.kept = null;
  }

  principal(): Promise<LoadedPrincipal> {
    if (!this.viewer) return Promise.reject(new UnauthenticatedError());
    if (!this.principalPromise) {
      const loading = this.loadOrKeep(this.viewer);
      this.principalPromise = loading;
      // Remembered only while it is still this request's principal (a refresh may have come first).
      loading.then(
        (p) => {
          if (this.principalPromise === loading) this.loaded = p;
        },
        () => {},
      );
    }
    return this.principalPromise;
  }

  private loadOrKeep(viewer: Viewer): Promise<LoadedPrincipal> {
    const kept = this.kept;
    if (!kept) return loadPrincipal(this.sql, viewer.orgId, viewer.userId);
    // Loaded after the epoch was read, so it reflects every change up to it (EpochCache); a load
    // already under way at this epoch is shared.
    return kept.cache.loadAt(kept.epoch, principalKey(viewer.orgId, viewer.userId), () => loadPrincipal(this.sql, viewer.orgId, viewer.userId));
  }

  /**
   * Other users' principals in the viewer's organization (the check API asks about them): kept in
   * the process's cache under the request's epoch like the viewer's own, the rest loaded in one
   * round trip (loadPrincipals, the same union and owner rule as loadPrincipal). Only active
   * members are kept, so ids of nobody fill no cache.
   */
  async principalsOf(userIds: readonly string[]): Promise<Map<string, LoadedPrincipal>> {
    if (!this.viewer) throw new UnauthenticatedError();
    const { orgId } = this.viewer;
    const out = new Map<string, LoadedPrincipal>();
    const kept = this.kept;
    const hits = kept ? kept.cache.at(kept.epoch) : null;
    const missing: string[] = [];
    for (const id of new Set(userIds)) {
      const hit = hits?.get(principalKey(orgId, id));
      if (hit) out.set(id, hit);
      else missing.push(id);
    }
    if (missing.length === 0) return out;
    const loaded = await loadPrincipals(this.sql, orgId, missing);
    for (const [id, p] of loaded) out.set(id, p);
    // Loaded after the epoch was read, so they reflect every change up to it (EpochCache).
    if (kept) kept.cache.keep(kept.epoch, [...loaded].filter(([, p]) => p.membershipActive).map(([id, p]) => [principalKey(orgId, id), p] as const));
    return out;
  }

  /**
   * Rows of `slot` kept under the request's epoch (null without a process cache: load, do not
   * keep), for a reader that loads the missing ones after this request's epoch was read.
   */
  keptIn<V>(slot: EpochSlot<V>): { rows: ReadonlyMap<string, V>; keep(loaded: Iterable<readonly [string, V]>): void } | null {
    const kept = this.kept;
    if (!kept) return null;
    const cache = slot.of(kept.cache);
    return { rows: cache.at(kept.epoch), keep: (loaded) => cache.keep(kept.epoch, loaded) };
  }

  async can(target: Target): Promise<boolean> {
    if (!this.viewer) return false;
    return checkPermission(await this.principal(), target).allowed;
  }

  /**
   * `use` of the request's principal: at once when it is loaded already, else once it is (a rule
   * run on every object of a list then answers with a value, not a promise per object).
   */
  withPrincipal<T>(use: (p: LoadedPrincipal) => T): T | Promise<T> {
    return this.loaded ? use(this.loaded) : this.principal().then(use);
  }

  /**
   * requireMember() at once when the principal is loaded: the principal when the viewer is an
   * active member of a live org, null when not; a promise of the same before it is loaded.
   */
  memberOrNull(): LoadedPrincipal | null | Promise<LoadedPrincipal | null> {
    if (!this.viewer) return null;
    const p = this.loaded;
    if (!p) return this.requireMember().then((member) => member, () => null);
    return p.orgExists && !p.orgDeleted && p.membershipActive ? p : null;
  }

  /**
   * can(), answered at once when the principal is loaded already: a type's read rule runs on
   * every object of a list, and a decision that is a value, not a promise, lets GraphQL complete
   * the object without waiting a turn (the same check either way).
   */
  check(target: Target): boolean | Promise<boolean> {
    if (!this.viewer) return false;
    return this.withPrincipal((p) => checkPermission(p, target).allowed);
  }

  /**
   * Throws PermissionDeniedError naming the missing tuple. A deleted or unknown org, or an
   * inactive membership, reads as "not found": nothing of the org is visible any more.
   */
  async require(target: Target): Promise<void> {
    if (!this.viewer) throw new UnauthenticatedError();
    const result = checkPermission(await this.principal(), target);
    if (result.allowed) return;
    if (result.reason !== "no_grant") throw new NotFoundError("Organization", this.viewer.orgId);
    throw new PermissionDeniedError(result.missing);
  }

  /**
   * The operations' decision on a found object (decideAction: find, then act): throws
   * `notFound()` when the viewer cannot find it (src/domain/catalog/decide.ts, findRule),
   * PermissionDeniedError naming the action's tuple when it can but may not act. The check API
   * answers with the same decideAction.
   */
  async authorize(target: Target, notFound: () => Error, parent: Target | null = null): Promise<void> {
    if (!this.viewer) throw new UnauthenticatedError();
    const decision = await this.decide(target, parent);
    if (decision.allowed) return;
    if (decision.reason === "cannot_find") throw notFound();
    if (decision.reason !== "no_grant") throw new NotFoundError("Organization", this.viewer.orgId);
    throw new PermissionDeniedError(decision.missing);
  }

  /**
   * The same decision as authorize (decideAction: find, then act), as a yes or no: for a
   * reader that leaves out what it may not see instead of failing (a webhook event's view).
   */
  async allows(target: Target, parent: Target | null = null): Promise<boolean> {
    if (!this.viewer) return false;
    return (await this.decide(target, parent)).allowed;
  }

  private async decide(target: Target, parent: Target | null): Promise<Decision> {
    return decideAction(await this.principal(), target, parent);
  }

  /** The viewer must be an active member of a live org (any signed-in operation). */
  async requireMember(): Promise<LoadedPrincipal> {
    if (!this.viewer) throw new UnauthenticatedError();
    const p = await this.principal();
    if (!p.orgExists || p.orgDeleted || !p.membershipActive) throw new NotFoundError("Organization", this.viewer.orgId);
    return p;
  }

  async isSuperAdmin(): Promise<boolean> {
    const p = await this.requireMember();
    return p.isSuperAdmin;
  }

  /** Which rows of a family a list may return: see GrantIndex.scope and src/authz/list-filter.ts. */
  async scope(resourceType: ConcreteResourceType, action: ConcreteAction): Promise<ListScope> {
    const p = await this.requireMember();
    if (p.isSuperAdmin) return { unrestricted: true, patterns: [], groups: [] };
    return listScope(p, resourceType, action);
  }
}
