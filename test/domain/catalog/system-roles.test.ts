// Seed: seeds/004 "Built-in roles", the notes on read_data, run_command, local_deploy,
// preview and state operations, and "Notes" on (role, read).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  grantSatisfies,
  permissionKey,
  reconcileSystemRole,
  SYSTEM_ROLES,
  systemRole,
  validatePermission,
  type ConcreteAction,
  type Permission,
} from "../../../src/domain/catalog/index.js";

const holders = (action: ConcreteAction, resourceType: "stack" | "label" | "role" = "stack") =>
  SYSTEM_ROLES.filter((r) =>
    r.permissions.some((p) => grantSatisfies(p, { resourceType, action, matchValue: "any-stack", groups: [] })),
  ).map((r) => r.key);

const perms = (key: string) => systemRole(key)?.permissions.map((p) => `${p.resourceType}.${p.action}`) ?? [];

describe("built-in roles", () => {
  it("every system role permission is drawn from the validity matrix", () => {
    for (const role of SYSTEM_ROLES) {
      for (const p of role.permissions) {
        const result = validatePermission({ ...p });
        expect(result, `${role.key} ${permissionKey(p)}`).toEqual({ ok: true, permission: p });
      }
    }
  });

  it("system roles ship untargeted: they carry no pattern and no group", () => {
    for (const role of SYSTEM_ROLES) {
      for (const p of role.permissions) {
        expect(p.resourcePattern).toBe("");
        expect(p.authzGroup).toBe("");
      }
    }
  });

  it("keys are unique slugs", () => {
    const keys = SYSTEM_ROLES.map((r) => r.key);
    expect(new Set(keys).size).toBe(keys.length);
    for (const key of keys) expect(key).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
  });

  it("admin is (*, *), full administrator access", () => {
    expect(perms("admin")).toEqual(["*.*"]);
  });

  it("stack-admin holds (stack, *) and additionally (label, read)", () => {
    expect(perms("stack-admin")).toEqual(["stack.*", "label.read", "role.read"]);
  });

  it("(role, read) is bundled into every non-wildcard system role", () => {
    for (const role of SYSTEM_ROLES) {
      if (role.key === "admin") continue;
      expect(perms(role.key), role.key).toContain("role.read");
    }
  });

  it("read_data is in no system role but wildcards: only admin and stack-admin hold it", () => {
    for (const role of SYSTEM_ROLES) expect(role.permissions.some((p) => p.action === "read_data")).toBe(false);
    expect(holders("read_data")).toEqual(["admin", "stack-admin"]);
  });

  it("stack-reader sees the masked outputs via read, not read_data", () => {
    expect(perms("stack-reader")).toEqual(["stack.read", "stack.read_logs", "role.read"]);
  });

  it("stack-triggerer triggers and watches deployments, without preview", () => {
    expect(perms("stack-triggerer")).toEqual(["stack.read", "stack.read_logs", "stack.deploy", "stack.cancel", "role.read"]);
  });

  it("preview is carried by stack-approver, not stack-triggerer", () => {
    expect(holders("preview")).toEqual(["admin", "stack-admin", "stack-approver"]);
    expect(perms("stack-approver")).toEqual(["stack.read", "stack.read_logs", "stack.confirm", "stack.preview", "role.read"]);
  });

  it("run_command must be granted explicitly: stack-command-runner, or admin and stack-admin by wildcard", () => {
    expect(holders("run_command")).toEqual(["admin", "stack-admin", "stack-command-runner"]);
  });

  it("local_deploy is granted via stack-local-deployer, or admin and stack-admin by wildcard", () => {
    expect(holders("local_deploy")).toEqual(["admin", "stack-admin", "stack-local-deployer"]);
  });

  it("each state operation has its own role, and admin and stack-admin hold all three", () => {
    expect(holders("unlock_state")).toEqual(["admin", "stack-admin", "state-lock-manager"]);
    expect(holders("overwrite_state")).toEqual(["admin", "stack-admin", "state-overwriter"]);
    expect(holders("restore_state")).toEqual(["admin", "stack-admin", "state-restorer"]);
  });

  it("only admin holds (stack_authz_group, assign) and (label, update)", () => {
    const assign = SYSTEM_ROLES.filter((r) =>
      r.permissions.some((p) =>
        grantSatisfies(p, { resourceType: "stack_authz_group", action: "assign", matchValue: "env-prod", groups: null }),
      ),
    );
    expect(assign.map((r) => r.key)).toEqual(["admin"]);
    expect(holders("update", "label")).toEqual(["admin"]);
  });

  it("Countersign's focused roles: approver approves, runner plans, reviewer decides", () => {
    expect(perms("workspace-approver")).toEqual(["workspace.read", "workspace.approve", "role.read"]);
    expect(perms("workspace-runner")).toEqual(["workspace.read", "workspace.plan", "role.read"]);
    expect(perms("approval-reviewer")).toEqual(["approval_request.read", "approval_request.decide", "role.read"]);
    expect(perms("approval-policy-manager")).toEqual(["approval_policy.read", "role.read"]);
  });

  it("no system role but admin may freeze a workspace's delivery", () => {
    const freezers = SYSTEM_ROLES.filter((r) =>
      r.permissions.some((p) =>
        grantSatisfies(p, { resourceType: "workspace", action: "freeze", matchValue: "w", groups: [] }),
      ),
    );
    expect(freezers.map((r) => r.key)).toEqual(["admin"]);
  });

  it("only admin uses the resource-type wildcard", () => {
    expect(SYSTEM_ROLES.filter((r) => r.permissions.some((p) => p.resourceType === "*")).map((r) => r.key)).toEqual([
      "admin",
    ]);
  });
});

describe("the system-role convergence sweep", () => {
  const g = (resourceType: Permission["resourceType"], action: Permission["action"], resourcePattern = "", authzGroup = ""): Permission => ({
    resourceType,
    action,
    resourcePattern,
    authzGroup,
  });
  const reader = systemRole("stack-reader")?.permissions ?? [];

  it("leaves a converged role alone", () => {
    expect(reconcileSystemRole(reader, reader)).toEqual({ add: [], remove: [] });
  });

  it("re-adds a removed row", () => {
    const current = reader.filter((p) => p.action !== "read_logs");
    expect(reconcileSystemRole(current, reader)).toEqual({ add: [g("stack", "read_logs")], remove: [] });
  });

  it("removes a row that drifted in", () => {
    const diff = reconcileSystemRole([...reader, g("stack", "read_data")], reader);
    expect(diff).toEqual({ add: [], remove: [g("stack", "read_data")] });
  });

  it("removes a group if one ever appears on a system role, since groups are per-org names", () => {
    const current = reader.map((p) => (p.action === "read" && p.resourceType === "stack" ? g("stack", "read", "", "env-prod") : p));
    expect(reconcileSystemRole(current, reader)).toEqual({
      add: [g("stack", "read")],
      remove: [g("stack", "read", "", "env-prod")],
    });
  });

  it("never converges a group in, even if the desired list had one", () => {
    const diff = reconcileSystemRole([], [g("stack", "deploy", "", "env-prod"), g("role", "read")]);
    expect(diff).toEqual({ add: [g("role", "read")], remove: [] });
  });

  it("treats a drifted pattern as a different row", () => {
    const current = [g("stack", "read", "team-a-%"), g("stack", "read_logs"), g("role", "read")];
    expect(reconcileSystemRole(current, reader)).toEqual({ add: [g("stack", "read")], remove: [g("stack", "read", "team-a-%")] });
  });

  it("property: applying the diff converges any current rows to the desired rows", () => {
    const tuple = fc.record({
      resourceType: fc.constantFrom("stack", "role", "*", "label"),
      action: fc.constantFrom("read", "deploy", "*"),
      resourcePattern: fc.constantFrom("", "a%"),
      authzGroup: fc.constantFrom("", "env-prod"),
    }) as fc.Arbitrary<Permission>;
    const distinctTuples = fc.uniqueArray(tuple, { selector: permissionKey, maxLength: 8 });
    fc.assert(
      fc.property(distinctTuples, fc.constantFrom(...SYSTEM_ROLES), (current, role) => {
        const { add, remove } = reconcileSystemRole(current, role.permissions);
        const removed = new Set(remove.map(permissionKey));
        const after = [...current.filter((p) => !removed.has(permissionKey(p))), ...add];
        expect(new Set(after.map(permissionKey))).toEqual(new Set(role.permissions.map(permissionKey)));
        expect(after.length).toBe(role.permissions.length);
      }),
    );
  });
});
