// Seed: seeds/004 "RolePermission.Validate()", "Authz groups", "Custom roles",
// "Multi-role SSO bindings".
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ACTIONS,
  compileResourcePattern,
  FAMILIES,
  isOwnerOnly,
  isValidPermission,
  MAX_AUTHZ_GROUPS_PER_STACK,
  MAX_CUSTOM_ROLE_PERMISSIONS,
  MAX_RESOURCE_PATTERN_LENGTH,
  MAX_ROLES_PER_BINDING,
  RESOURCE_TYPES,
  roleKeyFromName,
  validateAuthzGroupName,
  validateCustomRolePermissions,
  validatePermission,
  validateStackAuthzGroups,
  type PermissionInput,
} from "../../../src/domain/catalog/index.js";

const codes = (input: PermissionInput) => {
  const result = validatePermission(input);
  return result.ok ? [] : result.issues.map((i) => `${i.field}:${i.code}`);
};

describe("Validate", () => {
  it("accepts an untargeted tuple and canonicalises it", () => {
    expect(validatePermission({ resourceType: "stack", action: "deploy" })).toEqual({
      ok: true,
      permission: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "" },
    });
  });

  it("compiles the user glob: team-a-* is stored as team-a-%, prod_backend as prod\\_backend", () => {
    const a = validatePermission({ resourceType: "stack", action: "update", resourcePattern: "team-a-*" });
    const b = validatePermission({ resourceType: "stack", action: "deploy", resourcePattern: "prod_backend" });
    expect(a.ok && a.permission.resourcePattern).toBe("team-a-%");
    expect(b.ok && b.permission.resourcePattern).toBe("prod\\_backend");
  });

  it("empty input, null and the literal * all mean any resource", () => {
    for (const resourcePattern of ["", null, undefined, "*", "**"]) {
      const r = validatePermission({ resourceType: "stack", action: "read", resourcePattern });
      expect(r.ok && r.permission.resourcePattern).toBe("");
    }
  });

  it("rejects unknown resource types and actions", () => {
    expect(codes({ resourceType: "run", action: "read" })).toEqual(["resourceType:unknown_resource_type"]);
    expect(codes({ resourceType: "stack", action: "launch" })).toEqual(["action:unknown_action"]);
    expect(codes({ resourceType: "", action: "" })).toEqual([
      "resourceType:unknown_resource_type",
      "action:unknown_action",
    ]);
  });

  it("rejects a pair outside the matrix", () => {
    expect(codes({ resourceType: "runner", action: "read" })).toEqual(["action:invalid_pair"]);
    expect(codes({ resourceType: "label", action: "delete" })).toEqual(["action:invalid_pair"]);
  });

  it("accepts wildcards on either axis", () => {
    expect(codes({ resourceType: "*", action: "sync" })).toEqual([]);
    expect(codes({ resourceType: "runner", action: "*" })).toEqual([]);
    expect(codes({ resourceType: "*", action: "*" })).toEqual([]);
  });

  it("rejects a non-empty pattern when resource_type = '*'", () => {
    expect(codes({ resourceType: "*", action: "read", resourcePattern: "prod-*" })).toEqual([
      "resourcePattern:pattern_on_wildcard_type",
    ]);
  });

  it("rejects a pattern on member, role and identity_source, which have no per-resource identity", () => {
    for (const resourceType of ["member", "role", "identity_source"]) {
      expect(codes({ resourceType, action: "read", resourcePattern: "x" })).toEqual([
        "resourcePattern:pattern_not_supported",
      ]);
    }
  });

  it("accepts the any-resource glob * on member, role and identity_source (it is no pattern at all)", () => {
    expect(codes({ resourceType: "role", action: "read", resourcePattern: "*" })).toEqual([]);
  });

  it("accepts a pattern on every other family, and on action '*'", () => {
    for (const rt of RESOURCE_TYPES.filter((r) => FAMILIES[r].supportsPattern)) {
      expect(codes({ resourceType: rt, action: "*", resourcePattern: "team-*" })).toEqual([]);
    }
  });

  it("accepts an authz_group on stack, cloud_integration and the workspace-scoped families", () => {
    expect(codes({ resourceType: "stack", action: "deploy", authzGroup: "env-prod" })).toEqual([]);
    expect(codes({ resourceType: "cloud_integration", action: "update", authzGroup: "env-prod" })).toEqual([]);
    expect(codes({ resourceType: "workspace", action: "approve", authzGroup: "env-prod" })).toEqual([]);
    expect(codes({ resourceType: "approval_request", action: "decide", authzGroup: "env-prod" })).toEqual([]);
    expect(codes({ resourceType: "approval_policy", action: "read", authzGroup: "env-prod" })).toEqual([]);
    expect(codes({ resourceType: "approval_policy", action: "manage", authzGroup: "env-prod" })).toEqual(["action:owner_only"]);
    expect(codes({ resourceType: "virtual_key", action: "revoke", authzGroup: "env-prod" })).toEqual([]);
    expect(codes({ resourceType: "connection", action: "update", authzGroup: "env-prod" })).toEqual([]);
  });

  it("rejects an authz_group outside the families that accept one: no other family accepts a group", () => {
    for (const rt of [...RESOURCE_TYPES.filter((r) => !FAMILIES[r].supportsAuthzGroup), "*"]) {
      const action = rt === "*" ? "read" : (FAMILIES[rt as keyof typeof FAMILIES].actions.find((a) => a !== "create") as string);
      expect(codes({ resourceType: rt, action, authzGroup: "env-prod" }), rt).toEqual(["authzGroup:group_not_supported"]);
    }
  });

  it("rejects an authz_group alongside a pattern: a permission uses at most one targeting mode", () => {
    expect(codes({ resourceType: "stack", action: "deploy", resourcePattern: "team-*", authzGroup: "env-prod" })).toEqual([
      "authzGroup:group_with_pattern",
    ]);
  });

  it("Validate rejects an authz_group on create", () => {
    expect(codes({ resourceType: "stack", action: "create", authzGroup: "env-prod" })).toEqual(["authzGroup:group_on_create"]);
    expect(codes({ resourceType: "workspace", action: "create", authzGroup: "env-prod" })).toEqual([
      "authzGroup:group_on_create",
    ]);
  });

  it("rejects an authz_group with action '*', which includes create", () => {
    expect(codes({ resourceType: "stack", action: "*", authzGroup: "env-prod" })).toEqual(["authzGroup:group_on_create"]);
  });

  it("rejects a malformed group name", () => {
    expect(codes({ resourceType: "stack", action: "deploy", authzGroup: "env prod" })).toEqual([
      "authzGroup:invalid_group_name",
    ]);
    expect(codes({ resourceType: "stack", action: "deploy", authzGroup: "env-*" })).toEqual([
      "authzGroup:invalid_group_name",
    ]);
  });

  it("rejects a pattern longer than the limit, and one with control characters", () => {
    const long = "a".repeat(MAX_RESOURCE_PATTERN_LENGTH + 1);
    expect(codes({ resourceType: "stack", action: "read", resourcePattern: long })).toEqual([
      "resourcePattern:pattern_too_long",
    ]);
    expect(codes({ resourceType: "stack", action: "read", resourcePattern: "a".repeat(MAX_RESOURCE_PATTERN_LENGTH) })).toEqual([]);
    expect(codes({ resourceType: "stack", action: "read", resourcePattern: "a\u0000b" })).toEqual([
      "resourcePattern:invalid_pattern",
    ]);
    expect(codes({ resourceType: "stack", action: "read", resourcePattern: "a\uD800" })).toEqual([
      "resourcePattern:invalid_pattern",
    ]);
  });

  it("reports every problem at once", () => {
    expect(codes({ resourceType: "*", action: "create", resourcePattern: "x", authzGroup: "-bad" })).toEqual([
      "resourcePattern:pattern_on_wildcard_type",
      "authzGroup:invalid_group_name",
      "authzGroup:group_not_supported",
      "authzGroup:group_with_pattern",
      "authzGroup:group_on_create",
    ]);
  });

  // An oracle written from the seed's sentences, independently of validate.ts.
  function expectedValid(i: { resourceType: string; action: string; resourcePattern: string | null; authzGroup: string | null }): boolean {
    const glob = i.resourcePattern ?? "";
    const group = i.authzGroup ?? "";
    if (!isValidPermission(i.resourceType, i.action)) return false;
    if (isOwnerOnly(i.resourceType, i.action)) return false; // no role can grant it
    if (/[\u0000-\u001f\u007f-\u009f]/.test(glob) || Array.from(glob).length > MAX_RESOURCE_PATTERN_LENGTH) return false;
    const targeted = !/^\**$/.test(glob);
    const family = RESOURCE_TYPES.find((r) => r === i.resourceType);
    if (targeted && (family === undefined || !FAMILIES[family].supportsPattern)) return false;
    if (group !== "") {
      if (!/^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$/.test(group)) return false;
      if (family === undefined || !FAMILIES[family].supportsAuthzGroup) return false;
      if (targeted || i.action === "create" || i.action === "*") return false;
    }
    return true;
  }

  const tuple = fc.record({
    resourceType: fc.oneof(fc.constantFrom(...RESOURCE_TYPES, "*"), fc.string({ maxLength: 6 })),
    action: fc.oneof(fc.constantFrom(...ACTIONS, "*"), fc.string({ maxLength: 6 })),
    resourcePattern: fc.option(
      fc.oneof(fc.constantFrom("", "*", "**", "team-*", "prod_?"), fc.string({ unit: "binary", maxLength: 8 })),
      { nil: null },
    ),
    authzGroup: fc.option(fc.oneof(fc.constantFrom("", "env-prod", "-x", "a/b"), fc.string({ maxLength: 6 })), {
      nil: null,
    }),
  });

  it("property: random tuples never throw, and are accepted exactly when the seed's rules allow", () => {
    fc.assert(
      fc.property(tuple, (input) => {
        const result = validatePermission(input);
        expect(result.ok).toBe(expectedValid(input));
        if (result.ok) {
          expect(result.permission.resourcePattern).toBe(compileResourcePattern(input.resourcePattern ?? ""));
          expect(result.permission.authzGroup).toBe(input.authzGroup ?? "");
        } else {
          expect(result.issues.length).toBeGreaterThan(0);
          for (const issue of result.issues) {
            expect(["resourceType", "action", "resourcePattern", "authzGroup"]).toContain(issue.field);
            expect(issue.code).toMatch(/^[a-z_]+$/);
            expect(issue.message.length).toBeGreaterThan(0);
          }
        }
      }),
      { numRuns: 5000 },
    );
  });

  it("property: a stored (canonical) pattern never ends in a lone escape and never exceeds twice the glob", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 40 }), (glob) => {
        const like = compileResourcePattern(glob);
        expect(like.length).toBeLessThanOrEqual(glob.length * 2);
        expect(/(^|[^\\])(\\\\)*\\$/.test(like)).toBe(false);
      }),
    );
  });
});

describe("authz group names (label-key charset)", () => {
  it.each(["env-prod", "team-payments", "tier-1", "a", "A1", "team/payments", "k8s.io_x", "x".repeat(63)])(
    "accepts %s",
    (name) => expect(validateAuthzGroupName(name).ok).toBe(true),
  );
  it.each(["", "-env", "env-", "env prod", "env*", "é", "x".repeat(64), "_x", "x/", "env\n"])("rejects %j", (name) =>
    expect(validateAuthzGroupName(name).ok).toBe(false),
  );
});

describe("a stack's authz groups", () => {
  const groups = (n: number) => Array.from({ length: n }, (_, i) => `g-${i}`);

  it(`a stack carries up to MaxAuthzGroupsPerStack (${MAX_AUTHZ_GROUPS_PER_STACK}) groups`, () => {
    expect(MAX_AUTHZ_GROUPS_PER_STACK).toBe(20);
    expect(validateStackAuthzGroups(groups(20))).toEqual({ ok: true, groups: groups(20) });
    expect(validateStackAuthzGroups([])).toEqual({ ok: true, groups: [] });
  });

  it("21 groups are one too many", () => {
    const r = validateStackAuthzGroups(groups(21));
    expect(r.ok ? [] : r.issues.map((i) => i.code)).toEqual(["too_many_groups"]);
  });

  it("rejects a duplicate and an invalid name, naming the entry", () => {
    const r = validateStackAuthzGroups(["env-prod", "bad name", "env-prod"]);
    expect(r.ok ? [] : r.issues.map((i) => [i.index, i.code])).toEqual([
      [1, "invalid_group_name"],
      [2, "duplicate_group"],
    ]);
  });
});

describe("custom roles", () => {
  const p = (i: number): PermissionInput => ({ resourceType: "stack", action: "read", resourcePattern: `team-${i}-*` });

  it(`bundle between 1 and MaxCustomRolePermissions (${MAX_CUSTOM_ROLE_PERMISSIONS}) tuples`, () => {
    expect(MAX_CUSTOM_ROLE_PERMISSIONS).toBe(50);
    const fifty = validateCustomRolePermissions(Array.from({ length: 50 }, (_, i) => p(i)));
    expect(fifty.ok && fifty.permissions.length).toBe(50);
  });

  it("reject an empty role", () => {
    const r = validateCustomRolePermissions([]);
    expect(r.ok ? [] : r.issues.map((i) => [i.field, i.code])).toEqual([["permissions", "too_few_permissions"]]);
  });

  it("reject 51 distinct tuples", () => {
    const r = validateCustomRolePermissions(Array.from({ length: 51 }, (_, i) => p(i)));
    expect(r.ok ? [] : r.issues.map((i) => i.code)).toEqual(["too_many_permissions"]);
  });

  it("collapse duplicates after canonicalisation (team-* and team-** are one grant)", () => {
    const r = validateCustomRolePermissions([
      { resourceType: "stack", action: "read", resourcePattern: "team-*" },
      { resourceType: "stack", action: "read", resourcePattern: "team-**" },
      { resourceType: "role", action: "read", resourcePattern: "*" },
      { resourceType: "role", action: "read" },
    ]);
    expect(r).toEqual({
      ok: true,
      permissions: [
        { resourceType: "stack", action: "read", resourcePattern: "team-%", authzGroup: "" },
        { resourceType: "role", action: "read", resourcePattern: "", authzGroup: "" },
      ],
    });
  });

  it("count distinct tuples against the limit: 51 entries with one duplicate are fine", () => {
    const list = [...Array.from({ length: 50 }, (_, i) => p(i)), p(0)];
    expect(validateCustomRolePermissions(list).ok).toBe(true);
  });

  it("do not auto-bundle (role, read)", () => {
    const r = validateCustomRolePermissions([{ resourceType: "stack", action: "deploy" }]);
    expect(r.ok && r.permissions).toEqual([{ resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "" }]);
  });

  it("name the offending entry's index and field", () => {
    const r = validateCustomRolePermissions([p(0), { resourceType: "stack", action: "create", authzGroup: "env-prod" }]);
    expect(r.ok ? [] : r.issues).toEqual([
      expect.objectContaining({ index: 1, field: "authzGroup", code: "group_on_create" }),
    ]);
  });

  it("an SSO binding attaches between 1 and MaxRolesPerBinding (5) roles", () => {
    expect(MAX_ROLES_PER_BINDING).toBe(5);
  });
});

describe("the role key is auto-derived from name (GenerateID)", () => {
  it.each([
    ["Payments deployers", "payments-deployers"],
    ["  Équipe Paie  ", "equipe-paie"],
    ["SRE / On-call (EU)", "sre-on-call-eu"],
    ["Straße", "strasse"],
    ["v2", "v2"],
    ["--x--", "x"],
  ])("%j → %s", (name, key) => {
    expect(roleKeyFromName(name)).toEqual({ ok: true, key, name: name.trim() });
  });

  it.each([
    ["", "name_required"],
    ["   ", "name_required"],
    ["x".repeat(101), "name_too_long"],
    ["!!!", "name_yields_empty_key"],
    ["Команда", "name_yields_empty_key"],
    ["a\u0000b", "invalid_name"],
    ["Admin", "reserved_key"],
    ["Stack Reader", "reserved_key"],
  ])("%j is rejected with %s", (name, code) => {
    const r = roleKeyFromName(name);
    expect(r.ok ? null : r.issues.map((i) => i.code)).toEqual([code]);
  });

  it("accepts a name of exactly 100 characters", () => {
    expect(roleKeyFromName("x".repeat(100))).toEqual({ ok: true, key: "x".repeat(100), name: "x".repeat(100) });
  });

  it("property: any name yields a stable slug key or a name issue, never a throw", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 120 }), (name) => {
        const r = roleKeyFromName(name);
        if (r.ok) {
          expect(r.key).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
          expect(r.key.length).toBeLessThanOrEqual(100);
          expect(roleKeyFromName(name)).toEqual(r);
        } else {
          expect(r.issues[0]?.field).toBe("name");
        }
      }),
      { numRuns: 2000 },
    );
  });
});
