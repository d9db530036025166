// The in-memory authorization check: the ONE implementation of seeds/004 "Authz semantics".
// The SQL list filter follows the same semantics and runs the same table of cases
// (test/domain/authz-cases.ts).

import {
  ANY,
  FAMILIES,
  isOwnerOnly,
  RESOURCE_TYPES,
  type ConcreteAction,
  type ConcreteResourceType,
  type Permission,
} from "./matrix.js";
import { likeMatcher, likeMatches, literalOf, type LikeMatcher } from "./pattern.js";

/** What a check asks about: (target_resource, target_action, target_match_value, target_groups). */
export interface Target {
  readonly resourceType: ConcreteResourceType;
  readonly action: ConcreteAction;
  /** The resource's user-facing identifier (FAMILIES[rt].matchValue); null = "anywhere?". */
  readonly matchValue: string | null;
  /** The stack's authz groups for families that accept groups; null otherwise. */
  readonly groups: readonly string[] | null;
}

const GROUP_FAMILIES: ReadonlySet<string> = new Set(RESOURCE_TYPES.filter((rt) => FAMILIES[rt].supportsAuthzGroup));

/**
 * Seed: "target_groups is the stack's authz_groups … and NULL outside the stack family"
 * (here: outside the families that accept a group). Groups passed for any other family are
 * dropped, so a stray group can never widen a check there.
 */
function effectiveGroups(target: Target): readonly string[] | null {
  return GROUP_FAMILIES.has(target.resourceType) ? target.groups : null;
}

/** The target as the seed's check sees it: groups NULL outside the group families. */
export function normalizeTarget(target: Target): Target {
  const groups = effectiveGroups(target);
  return groups === target.groups ? target : { ...target, groups };
}

/**
 * Condition 3: "(perm_pattern = '' AND perm_group = '') OR (perm_pattern <> '' AND
 * target_match_value is non-NULL AND target_match_value LIKE perm_pattern ESCAPE '\') OR
 * (perm_group <> '' AND perm_group = ANY(target_groups))". A targeted grant does NOT satisfy
 * a NULL match value: "can I do X anywhere?" needs an untargeted grant.
 */
function targetingMatches(grant: Permission, matchValue: string | null, groups: readonly string[] | null): boolean {
  if (grant.resourcePattern === "" && grant.authzGroup === "") return true;
  if (grant.resourcePattern !== "" && matchValue !== null && likeMatches(matchValue, grant.resourcePattern)) {
    return true;
  }
  // `= ANY(NULL)` is NULL, i.e. not satisfied.
  return grant.authzGroup !== "" && groups !== null && groups.includes(grant.authzGroup);
}

/** Whether one grant satisfies the target: the seed's three conditions, exactly. */
export function grantSatisfies(grant: Permission, target: Target): boolean {
  if (isOwnerOnly(target.resourceType, target.action)) return false; // no grant reaches it
  return (
    (grant.resourceType === target.resourceType || grant.resourceType === ANY) &&
    (grant.action === target.action || grant.action === ANY) &&
    targetingMatches(grant, target.matchValue, effectiveGroups(target))
  );
}

// ── Pre-indexed grants (the hot path) ────────────────────────────────────────────────

export interface ListScope {
  readonly unrestricted: boolean;
  /** Canonical LIKE patterns; a row matches when its match value is LIKE any. */
  readonly patterns: readonly string[];
  /** Exact group names; a row matches when its groups contain any. */
  readonly groups: readonly string[];
}

const NOTHING: ListScope = Object.freeze({ unrestricted: false, patterns: [], groups: [] });
const EVERYTHING: ListScope = Object.freeze({ unrestricted: true, patterns: [], groups: [] });

/** Everything one concrete (resource_type, action) pair can be satisfied by. */
interface PairIndex {
  readonly untargeted: Permission | undefined;
  /** Patterns without wildcards, by the one value they match. */
  readonly literals: ReadonlyMap<string, Permission>;
  readonly patterns: readonly { readonly permission: Permission; readonly matches: LikeMatcher }[];
  /** Empty for families that accept no group (their target groups are NULL). */
  readonly groups: ReadonlyMap<string, Permission>;
  readonly acceptsGroups: boolean;
}

// What most pairs hold for most principals: nothing. Shared, never written (the index is built
// once and only read), so a principal costs its grants, not two maps per pair of the matrix
// (a principal is kept per user for as long as the user has live subscriptions).
const NO_GRANTS: ReadonlyMap<string, Permission> = new Map();
const NO_PATTERNS: PairIndex["patterns"] = Object.freeze([]);
const EMPTY_PAIRS = new Map<boolean, PairIndex>([false, true].map((acceptsGroups) => [acceptsGroups, Object.freeze({ untargeted: undefined, literals: NO_GRANTS, patterns: NO_PATTERNS, groups: NO_GRANTS, acceptsGroups })]));

/**
 * A principal's grants indexed by every valid concrete (resource_type, action) pair, with
 * the '*' grants folded into each pair they reach. A check is then two map lookups, a
 * literal lookup, the pair's wildcard patterns and a group lookup — about a microsecond.
 */
export class GrantIndex {
  readonly #pairs = new Map<string, Map<string, PairIndex>>();

  constructor(grants: readonly Permission[]) {
    for (const rt of RESOURCE_TYPES) {
      const byAction = new Map<string, PairIndex>();
      const acceptsGroups = GROUP_FAMILIES.has(rt);
      const family = grants.filter((g) => g.resourceType === rt || g.resourceType === ANY);
      for (const action of FAMILIES[rt].actions) {
        // Owner-only pairs index no grant at all: checkPermission decides them by ownership.
        const reachable = !isOwnerOnly(rt, action);
        let untargeted: Permission | undefined;
        const literals = new Map<string, Permission>();
        const patterns = new Map<string, { permission: Permission; matches: LikeMatcher }>();
        const groups = new Map<string, Permission>();
        for (const g of reachable ? family : []) {
          if (g.action !== action && g.action !== ANY) continue;
          if (g.resourcePattern === "" && g.authzGroup === "") {
            untargeted ??= g;
            continue;
          }
          // A grant carrying both (never valid, but possible by drift) is reachable by
          // either arm, as condition 3's OR says.
          if (g.resourcePattern !== "") {
            const literal = literalOf(g.resourcePattern);
            if (literal !== null) {
              if (!literals.has(literal)) literals.set(literal, g);
            } else if (!patterns.has(g.resourcePattern)) {
              patterns.set(g.resourcePattern, { permission: g, matches: likeMatcher(g.resourcePattern) });
            }
          }
          if (g.authzGroup !== "" && acceptsGroups && !groups.has(g.authzGroup)) groups.set(g.authzGroup, g);
        }
        byAction.set(
          action,
          untargeted === undefined && literals.size === 0 && patterns.size === 0 && groups.size === 0
            ? EMPTY_PAIRS.get(acceptsGroups)!
            : {
                untargeted,
                literals: literals.size > 0 ? literals : NO_GRANTS,
                patterns: patterns.size > 0 ? [...patterns.values()] : NO_PATTERNS,
                groups: groups.size > 0 ? groups : NO_GRANTS,
                acceptsGroups,
              },
        );
      }
      this.#pairs.set(rt, byAction);
    }
  }

  #pair(resourceType: string, action: string): PairIndex {
    const pair = this.#pairs.get(resourceType)?.get(action);
    if (pair === undefined) {
      // A programming error in the caller (the pair is not in the matrix): fail loudly.
      throw new TypeError(`No permission (${resourceType}, ${action}) exists to check.`);
    }
    return pair;
  }

  /** The first grant satisfying the target, if any. */
  find(target: Target): Permission | undefined {
    const pair = this.#pair(target.resourceType, target.action);
    if (pair.untargeted !== undefined) return pair.untargeted;
    const value = target.matchValue;
    if (value !== null) {
      const literal = pair.literals.get(value);
      if (literal !== undefined) return literal;
      for (const p of pair.patterns) if (p.matches(value)) return p.permission;
    }
    if (pair.acceptsGroups && target.groups !== null && pair.groups.size > 0) {
      for (const group of target.groups) {
        const hit = pair.groups.get(group);
        if (hit !== undefined) return hit;
      }
    }
    return undefined;
  }

  /**
   * What a list endpoint may show for (resource_type, action): everything, or the rows
   * whose match value is LIKE one of `patterns` or that carry one of `groups` — the same
   * semantics, for the repository-side filter.
   */
  scope(resourceType: ConcreteResourceType, action: ConcreteAction): ListScope {
    const pair = this.#pair(resourceType, action);
    if (pair.untargeted !== undefined) return EVERYTHING;
    const literalPatterns = [...pair.literals.values()].map((p) => p.resourcePattern);
    return {
      unrestricted: false,
      patterns: [...literalPatterns, ...pair.patterns.map((p) => p.permission.resourcePattern)],
      groups: [...pair.groups.keys()],
    };
  }
}

// ── The check ────────────────────────────────────────────────────────────────────────

export interface PrincipalGrants {
  readonly isSuperAdmin: boolean;
  readonly orgExists: boolean;
  readonly orgDeleted: boolean;
  readonly membershipActive: boolean;
  /** The personal organization's owner: passes owner-only checks like a super admin. */
  readonly isOwner?: boolean;
  /** The union from direct role assignment and SSO group bindings, collected by the caller. */
  readonly grants: readonly Permission[];
}

/** A principal with its grants pre-indexed; build once per cached principal. */
export interface CompiledPrincipal extends PrincipalGrants {
  readonly index: GrantIndex;
}

export type DenyReason = "org_not_found" | "org_deleted" | "inactive_membership" | "no_grant";

export type CheckResult =
  | { readonly allowed: true; readonly via: "super_admin" | Permission }
  | {
      readonly allowed: false;
      readonly reason: DenyReason;
      readonly missing: {
        readonly resourceType: ConcreteResourceType;
        readonly action: ConcreteAction;
        readonly matchValue: string | null;
      };
    };

export function compileGrants(grants: readonly Permission[]): GrantIndex {
  return new GrantIndex(grants);
}

export function compilePrincipal(principal: PrincipalGrants): CompiledPrincipal {
  return { ...principal, index: new GrantIndex(principal.grants) };
}

function isCompiled(principal: PrincipalGrants): principal is CompiledPrincipal {
  return (principal as Partial<CompiledPrincipal>).index instanceof GrantIndex;
}

const VALID_PAIRS: ReadonlyMap<string, ReadonlySet<string>> = new Map(
  RESOURCE_TYPES.map((rt) => [rt, new Set<string>(FAMILIES[rt].actions)]),
);

/**
 * Seed: "Plus: super admin bypass, org existence, org not-deleted, active membership".
 * Order: the org must exist and not be deleted (nobody acts in a deleted org, super admins
 * included); then the membership must be active; then the super admin bypass; then a grant.
 *
 * Why membership before the bypass: in Countersign super admin is a flag on the org
 * membership, not a platform-wide identity, so a suspended membership suspends the flag
 * with it — an inactive super admin is denied with `inactive_membership`.
 */
// Module level, not a closure per call: this is the hot path (see docs/benchmarks.md).
function deny(reason: DenyReason, target: Target): CheckResult {
  return {
    allowed: false,
    reason,
    missing: { resourceType: target.resourceType, action: target.action, matchValue: target.matchValue },
  };
}

export function checkPermission(principal: PrincipalGrants, target: Target): CheckResult {
  if (!principal.orgExists) return deny("org_not_found", target);
  if (principal.orgDeleted) return deny("org_deleted", target);
  if (!principal.membershipActive) return deny("inactive_membership", target);
  if (principal.isSuperAdmin) return { allowed: true, via: "super_admin" };
  if (isOwnerOnly(target.resourceType, target.action)) {
    // The personal organization's owner passes here as a super admin would.
    return principal.isOwner === true ? { allowed: true, via: "super_admin" } : deny("no_grant", target);
  }

  let via: Permission | undefined;
  if (isCompiled(principal)) {
    via = principal.index.find(target);
  } else {
    if (VALID_PAIRS.get(target.resourceType)?.has(target.action) !== true) {
      throw new TypeError(`No permission (${target.resourceType}, ${target.action}) exists to check.`);
    }
    via = principal.grants.find((g) => grantSatisfies(g, target));
  }
  return via === undefined ? deny("no_grant", target) : { allowed: true, via };
}

/**
 * The list filter for (resource_type, action), under the same gates as checkPermission:
 * nothing for a missing/deleted org or an inactive membership, everything for a super
 * admin, else the grants' patterns and groups (see GrantIndex.scope).
 */
export function listScope(
  principal: PrincipalGrants,
  resourceType: ConcreteResourceType,
  action: ConcreteAction,
): ListScope {
  if (!principal.orgExists || principal.orgDeleted || !principal.membershipActive) return NOTHING;
  if (principal.isSuperAdmin) return EVERYTHING;
  if (isOwnerOnly(resourceType, action)) return principal.isOwner === true ? EVERYTHING : NOTHING;
  return (isCompiled(principal) ? principal.index : new GrantIndex(principal.grants)).scope(resourceType, action);
}
