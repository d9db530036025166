// The shared table of check cases (test/domain/authz-cases.ts) through the in-memory check.
// The SQL list filter runs the same table elsewhere.
import { describe, expect, it } from "vitest";
import {
  checkPermission,
  compilePrincipal,
  grantSatisfies,
  validatePermission,
} from "../../../src/domain/catalog/index.js";
import { AUTHZ_CASES } from "../authz-cases.js";

/** The user glob a canonical LIKE pattern was compiled from. */
function globOf(likePattern: string): string {
  let glob = "";
  const p = Array.from(likePattern);
  for (let i = 0; i < p.length; i++) {
    const c = p[i] as string;
    if (c === "\\") glob += p[++i] ?? "";
    else glob += c === "%" ? "*" : c === "_" ? "?" : c;
  }
  return glob;
}

const member = { isSuperAdmin: false, orgExists: true, orgDeleted: false, membershipActive: true };

describe("the shared authz case table", () => {
  it("has at least 40 cases with unique names, both outcomes well represented", () => {
    expect(AUTHZ_CASES.length).toBeGreaterThanOrEqual(40);
    expect(new Set(AUTHZ_CASES.map((c) => c.name)).size).toBe(AUTHZ_CASES.length);
    expect(AUTHZ_CASES.filter((c) => c.expected).length).toBeGreaterThanOrEqual(15);
    expect(AUTHZ_CASES.filter((c) => !c.expected).length).toBeGreaterThanOrEqual(15);
  });

  it("holds only grants Validate accepts, with canonical patterns (so SQL can store them)", () => {
    for (const c of AUTHZ_CASES) {
      const result = validatePermission({ ...c.grant, resourcePattern: globOf(c.grant.resourcePattern) });
      expect(result, c.name).toEqual({ ok: true, permission: c.grant });
    }
  });

  it("passes target groups only for families that accept groups", () => {
    for (const c of AUTHZ_CASES) {
      if (["label", "stack_authz_group", "runner", "runner_group", "member", "role", "identity_source", "resource_policy"].includes(c.target.resourceType)) {
        expect(c.target.groups, c.name).toBeNull();
      }
    }
  });

  describe.each(AUTHZ_CASES)("$name", (c) => {
    it(`grantSatisfies → ${c.expected}`, () => {
      expect(grantSatisfies(c.grant, c.target)).toBe(c.expected);
    });
    it(`checkPermission, compiled and not → ${c.expected}`, () => {
      const plain = { ...member, grants: [c.grant] };
      expect(checkPermission(plain, c.target).allowed).toBe(c.expected);
      expect(checkPermission(compilePrincipal(plain), c.target).allowed).toBe(c.expected);
    });
  });
});
