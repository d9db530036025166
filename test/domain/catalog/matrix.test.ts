// Seed: seeds/004 "Validity matrix", plus Countersign's families (DESIGN.md).
import { describe, expect, it } from "vitest";
import {
  ACTIONS,
  FAMILIES,
  isValidPermission,
  PERMISSION_CATALOG,
  RESOURCE_TYPES,
} from "../../../src/domain/catalog/index.js";

const EXPECTED: Record<string, readonly string[]> = {
  stack: [
    "create", "read", "update", "delete", "deploy", "confirm", "cancel", "prioritize", "read_logs",
    "read_data", "run_command", "local_deploy", "preview", "unlock_state", "overwrite_state", "restore_state",
  ],
  cloud_integration: ["create", "read", "update", "delete"],
  runner_group: ["create", "read", "update", "delete"],
  runner: ["delete"],
  label: ["read", "create", "update"],
  stack_authz_group: ["assign"],
  member: ["create", "read", "update", "delete", "check"],
  role: ["create", "read", "update", "delete", "assign"],
  identity_source: ["create", "read", "update", "delete", "sync"],
  workspace: ["create", "read", "update", "archive", "approve", "plan", "freeze"],
  resource_policy: ["create", "read", "update", "delete"],
  approval_policy: ["read", "manage"],
  gateway_policy: ["read", "manage"],
  hold_authority: ["read", "change"],
  approval_request: ["read", "decide"],
  virtual_key: ["create", "read", "revoke"],
  connection: ["create", "read", "update", "delete"],
  webhook: ["read", "create", "update", "delete"],
};

describe("the validity matrix", () => {
  it("lists exactly the seed's families and Countersign's, with their actions", () => {
    expect(Object.fromEntries(RESOURCE_TYPES.map((rt) => [rt, [...FAMILIES[rt].actions]]))).toEqual(EXPECTED);
  });

  it("ACTIONS is the union of every family's actions, without duplicates", () => {
    const union = new Set(Object.values(EXPECTED).flat());
    expect(new Set(ACTIONS)).toEqual(union);
    expect(ACTIONS.length).toBe(union.size);
  });

  it("(*, *) and (*, X) and (X, *): wildcards on either axis always pass", () => {
    expect(isValidPermission("*", "*")).toBe(true);
    for (const action of ACTIONS) expect(isValidPermission("*", action)).toBe(true);
    for (const rt of RESOURCE_TYPES) expect(isValidPermission(rt, "*")).toBe(true);
  });

  it("concrete pairs must be in the matrix", () => {
    for (const rt of RESOURCE_TYPES) {
      for (const action of ACTIONS) {
        expect(isValidPermission(rt, action), `${rt}.${action}`).toBe(EXPECTED[rt]?.includes(action));
      }
    }
  });

  it("the only direct user action on the runner family is delete", () => {
    expect(isValidPermission("runner", "delete")).toBe(true);
    expect(isValidPermission("runner", "read")).toBe(false);
    expect(isValidPermission("runner", "create")).toBe(false);
  });

  it("there is no run resource type", () => {
    expect(isValidPermission("run", "read")).toBe(false);
    expect(isValidPermission("run", "*")).toBe(false);
  });

  it("unknown values never pass, even against a wildcard", () => {
    expect(isValidPermission("*", "launch")).toBe(false);
    expect(isValidPermission("rocket", "*")).toBe(false);
    expect(isValidPermission("", "")).toBe(false);
    expect(isValidPermission("Stack", "read")).toBe(false);
  });

  it("patterns are supported on every family except the org-level member, role, identity_source and webhook", () => {
    const without = RESOURCE_TYPES.filter((rt) => !FAMILIES[rt].supportsPattern);
    expect(without).toEqual(["member", "role", "identity_source", "webhook"]);
  });

  it("authz groups are accepted by stack, cloud_integration and the workspace-scoped families only", () => {
    const withGroups = RESOURCE_TYPES.filter((rt) => FAMILIES[rt].supportsAuthzGroup);
    expect(withGroups).toEqual([
      "stack", "cloud_integration", "workspace", "approval_policy", "gateway_policy", "hold_authority", "approval_request", "virtual_key", "connection",
    ]);
  });

  it("the workspace-scoped families are matched by the WORKSPACE name", () => {
    for (const rt of ["workspace", "approval_policy", "gateway_policy", "hold_authority", "approval_request", "virtual_key", "connection"] as const) {
      expect(FAMILIES[rt].matchValue).toBe("workspace name");
    }
    expect(FAMILIES.label.matchValue).toBe("label KEY");
    expect(FAMILIES.stack_authz_group.matchValue).toBe("authz group NAME");
  });

  it("a family has a match value exactly when it supports a pattern", () => {
    for (const rt of RESOURCE_TYPES) expect(FAMILIES[rt].matchValue !== null).toBe(FAMILIES[rt].supportsPattern);
    for (const rt of RESOURCE_TYPES) expect(FAMILIES[rt].groupsFrom !== null).toBe(FAMILIES[rt].supportsAuthzGroup);
  });

  it("the catalog query mirrors the matrix, carrying supportsPattern / supportsAuthzGroup", () => {
    expect(PERMISSION_CATALOG.map((e) => e.resourceType)).toEqual([...RESOURCE_TYPES]);
    for (const entry of PERMISSION_CATALOG) {
      const family = FAMILIES[entry.resourceType];
      expect(entry.actions).toEqual(family.actions);
      expect(entry.supportsPattern).toBe(family.supportsPattern);
      expect(entry.supportsAuthzGroup).toBe(family.supportsAuthzGroup);
      expect(entry.description.length).toBeGreaterThan(0);
    }
  });
});
