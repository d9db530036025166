// Seed: seeds/004 "Authz semantics": the three conditions, plus super admin bypass, org
// existence, org not-deleted, active membership.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  checkPermission,
  compileGrants,
  compilePrincipal,
  compileResourcePattern,
  FAMILIES,
  grantSatisfies,
  listScope,
  normalizeTarget,
  RESOURCE_TYPES,
  SYSTEM_ROLES,
  type ConcreteAction,
  type ConcreteResourceType,
  type Permission,
  type PrincipalGrants,
  type Target,
} from "../../../src/domain/catalog/index.js";

const g = (
  resourceType: Permission["resourceType"],
  action: Permission["action"],
  resourcePattern = "",
  authzGroup = "",
): Permission => ({ resourceType, action, resourcePattern, authzGroup });

const principal = (grants: Permission[], over: Partial<PrincipalGrants> = {}): PrincipalGrants => ({
  isSuperAdmin: false,
  orgExists: true,
  orgDeleted: false,
  membershipActive: true,
  grants,
  ...over,
});

const deployApi: Target = { resourceType: "stack", action: "deploy", matchValue: "api", groups: ["env-prod"] };

describe("checkPermission", () => {
  it("succeeds iff some grant satisfies the target, and says which", () => {
    const grant = g("stack", "deploy", "", "env-prod");
    expect(checkPermission(principal([g("stack", "read"), grant]), deployApi)).toEqual({ allowed: true, via: grant });
    expect(checkPermission(principal([g("stack", "read")]), deployApi)).toEqual({
      allowed: false,
      reason: "no_grant",
      missing: { resourceType: "stack", action: "deploy", matchValue: "api" },
    });
  });

  it("grants are the union: any one grant from any role suffices", () => {
    const grants = [g("stack", "read"), g("stack", "deploy", "team-b-%"), g("stack", "deploy", "ap_")];
    expect(checkPermission(principal(grants), deployApi).allowed).toBe(true);
  });

  it("an unknown org is denied before anything else, super admins included", () => {
    const p = principal([g("*", "*")], { orgExists: false, orgDeleted: true, isSuperAdmin: true, membershipActive: false });
    expect(checkPermission(p, deployApi)).toMatchObject({ allowed: false, reason: "org_not_found" });
  });

  it("a deleted org is denied, super admins included", () => {
    const p = principal([g("*", "*")], { orgDeleted: true, isSuperAdmin: true });
    expect(checkPermission(p, deployApi)).toMatchObject({ allowed: false, reason: "org_deleted" });
  });

  it("an inactive membership is denied, whatever its grants", () => {
    const p = principal([g("*", "*")], { membershipActive: false });
    expect(checkPermission(p, deployApi)).toMatchObject({ allowed: false, reason: "inactive_membership" });
  });

  it("an inactive super admin is denied: super admin is a flag on the membership", () => {
    const p = principal([], { membershipActive: false, isSuperAdmin: true });
    expect(checkPermission(p, deployApi)).toMatchObject({ allowed: false, reason: "inactive_membership" });
  });

  it("super admin bypasses grants", () => {
    expect(checkPermission(principal([], { isSuperAdmin: true }), deployApi)).toEqual({ allowed: true, via: "super_admin" });
    expect(checkPermission(compilePrincipal(principal([], { isSuperAdmin: true })), deployApi).allowed).toBe(true);
  });

  it("refuses to check a pair that is not in the matrix (a caller bug, not a denial)", () => {
    const bad = { resourceType: "runner", action: "read", matchValue: null, groups: null } as unknown as Target;
    expect(() => checkPermission(principal([g("*", "*")]), bad)).toThrow(TypeError);
    expect(() => checkPermission(compilePrincipal(principal([g("*", "*")])), bad)).toThrow(TypeError);
  });

  it("a list endpoint's NULL-value check is satisfied only by an untargeted grant", () => {
    const listStacks: Target = { resourceType: "stack", action: "read", matchValue: null, groups: null };
    expect(checkPermission(principal([g("stack", "read", "team-a-%"), g("stack", "read", "", "env-prod")]), listStacks).allowed).toBe(false);
    expect(checkPermission(principal([g("stack", "read")]), listStacks).allowed).toBe(true);
  });
});

describe("target groups", () => {
  it("are NULL outside the families that accept groups: groups passed there are dropped", () => {
    const target = { resourceType: "runner_group", action: "read", matchValue: "pool", groups: ["env-prod"] } as const;
    expect(normalizeTarget(target).groups).toBeNull();
    // Such a grant is never valid, but if one drifted in it must not match through stray groups.
    const drifted = g("runner_group", "read", "", "env-prod");
    expect(grantSatisfies(drifted, target)).toBe(false);
    expect(checkPermission(compilePrincipal(principal([drifted])), target).allowed).toBe(false);
  });

  it("are kept for every family that accepts them", () => {
    for (const rt of RESOURCE_TYPES.filter((r) => FAMILIES[r].supportsAuthzGroup)) {
      const target = { resourceType: rt, action: "read", matchValue: "w", groups: ["env-prod"] } as Target;
      expect(normalizeTarget(target)).toBe(target);
    }
  });

  it("a grant carrying both a pattern and a group (drift) matches by either arm, as the seed's OR says", () => {
    const both = g("stack", "deploy", "api", "env-dev");
    const byGroup: Target = { resourceType: "stack", action: "deploy", matchValue: "web", groups: ["env-dev"] };
    expect(grantSatisfies(both, deployApi)).toBe(true);
    expect(grantSatisfies(both, byGroup)).toBe(true);
    expect(checkPermission(compilePrincipal(principal([both])), byGroup).allowed).toBe(true);
  });
});

describe("listScope", () => {
  it("is unrestricted with an untargeted grant, including through wildcards", () => {
    expect(listScope(principal([g("*", "read")]), "workspace", "read")).toEqual({ unrestricted: true, patterns: [], groups: [] });
  });

  it("collects the patterns and groups of the grants reaching the pair", () => {
    const p = compilePrincipal(
      principal([g("stack", "read", "team-a-%"), g("stack", "*", "prod\\_backend"), g("stack", "read", "", "env-prod"), g("stack", "deploy", "x")]),
    );
    const scope = listScope(p, "stack", "read");
    expect(scope.unrestricted).toBe(false);
    expect([...scope.patterns].sort()).toEqual(["prod\\_backend", "team-a-%"]);
    expect(scope.groups).toEqual(["env-prod"]);
  });

  it("is empty for an inactive membership and everything for a super admin", () => {
    expect(listScope(principal([g("*", "*")], { membershipActive: false }), "stack", "read")).toEqual({
      unrestricted: false,
      patterns: [],
      groups: [],
    });
    expect(listScope(principal([], { isSuperAdmin: true }), "stack", "read").unrestricted).toBe(true);
  });
});

// ── The compiled index agrees with the seed's formula ──

const PAIRS = RESOURCE_TYPES.flatMap((rt) => FAMILIES[rt].actions.map((a) => [rt, a] as [ConcreteResourceType, ConcreteAction]));
const names = ["api", "team-a-api", "prod_backend", "prodXbackend", "a%b", "Api", "x\\y", "é😀"];
const groupNames = ["env-prod", "env-dev", "tier-1"];

const grantArb: fc.Arbitrary<Permission> = fc
  .record({
    resourceType: fc.constantFrom<Permission["resourceType"]>("*", "*", ...RESOURCE_TYPES),
    action: fc.constantFrom<Permission["action"]>("*", "*", "read", "deploy", "create", "update", "approve", "decide"),
    glob: fc.constantFrom("", "", "*", "api", "team-*", "prod_backend", "prod?backend", "a%b", "*i", "?pi", "x\\y", "é*", "*-*"),
    authzGroup: fc.constantFrom("", "", "", ...groupNames),
  })
  .map(({ resourceType, action, glob, authzGroup }) => g(resourceType, action, compileResourcePattern(glob), authzGroup));

const targetArb: fc.Arbitrary<Target> = fc.record({
  pair: fc.constantFrom(...PAIRS),
  matchValue: fc.option(fc.constantFrom(...names), { nil: null, freq: 4 }),
  groups: fc.option(fc.subarray(groupNames), { nil: null, freq: 4 }),
}).map(({ pair: [resourceType, action], matchValue, groups }) => ({ resourceType, action, matchValue, groups }));

describe("compilePrincipal", () => {
  it("property: the compiled index allows exactly what some grant satisfies (the seed's formula)", () => {
    fc.assert(
      fc.property(fc.array(grantArb, { maxLength: 12 }), fc.array(targetArb, { minLength: 1, maxLength: 8 }), (grants, targets) => {
        const compiled = compilePrincipal(principal(grants));
        for (const target of targets) {
          const expected = grants.some((grant) => grantSatisfies(grant, target));
          const result = checkPermission(compiled, target);
          expect(result.allowed).toBe(expected);
          expect(checkPermission(principal(grants), target).allowed).toBe(expected);
          if (result.allowed && result.via !== "super_admin") expect(grantSatisfies(result.via, target)).toBe(true);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it("property: listScope describes exactly the names and groups a check would allow", () => {
    fc.assert(
      fc.property(fc.array(grantArb, { maxLength: 10 }), targetArb, (grants, target) => {
        fc.pre(target.matchValue !== null);
        const index = compileGrants(grants);
        const scope = index.scope(target.resourceType, target.action);
        const groups = normalizeTarget(target).groups ?? [];
        const viaScope =
          scope.unrestricted ||
          scope.groups.some((grp) => groups.includes(grp)) ||
          grants.some((grant) => scope.patterns.includes(grant.resourcePattern) && grantSatisfies({ ...grant, authzGroup: "" }, target));
        expect(viaScope).toBe(index.find(target) !== undefined);
      }),
      { numRuns: 2000 },
    );
  });

  // Its speed (< 50 µs for a cached principal) is measured in `npm run bench`, not here.
  it("a compiled principal with ~90 grants decides a mixed stream of checks correctly", () => {
    const grants = [
      // Every focused system role except those with an untargeted (stack, deploy).
      ...SYSTEM_ROLES.filter((r) => !["admin", "stack-admin", "stack-triggerer"].includes(r.key)).flatMap((r) => r.permissions),
      ...Array.from({ length: 40 }, (_, i) => g("stack", "deploy", compileResourcePattern(`team-${i}-*-svc`))),
      ...Array.from({ length: 10 }, (_, i) => g("workspace", "approve", "", `env-${i}`)),
    ];
    const compiled = compilePrincipal(principal(grants));
    const targets: Target[] = [
      { resourceType: "stack", action: "deploy", matchValue: "team-39-payments-svc", groups: ["tier-1"] },
      { resourceType: "stack", action: "deploy", matchValue: "nobody-matches-this", groups: ["tier-1", "env-prod"] },
      { resourceType: "workspace", action: "approve", matchValue: "payments", groups: ["a", "b", "env-9"] },
      { resourceType: "stack", action: "read", matchValue: null, groups: null },
    ];
    const n = 2_000;
    let allowed = 0;
    for (let i = 0; i < n; i++) if (checkPermission(compiled, targets[i % targets.length] as Target).allowed) allowed++;
    expect(allowed).toBe(n * 0.75); // all but "nobody-matches-this"
  });
});
