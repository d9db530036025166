// Reading a plan's resource changes from `terraform show -json` or a plain list.
import { describe, expect, it } from "vitest";
import { MAX_PLAN_CHANGES, mapTerraformActions, parsePlanChanges } from "../../../src/domain/gate/index.js";

const resource = (address: string, actions: string[], extra: Record<string, unknown> = {}) => {
  const [, type = "", name = ""] = /(?:^|\.)([a-z0-9_]+)\.([a-z0-9_]+)(?:\[[^\]]*\])?$/.exec(address) ?? [];
  return {
    address,
    mode: address.startsWith("data.") ? "data" : "managed",
    type,
    name,
    provider_name: "registry.terraform.io/hashicorp/aws",
    change: {
      actions,
      before: actions[0] === "create" ? null : { id: "before" },
      after: actions.includes("delete") && actions.length === 1 ? null : { id: "after" },
      after_unknown: {},
      before_sensitive: false,
      after_sensitive: {},
    },
    ...extra,
  };
};

// Shaped like Terraform 1.9's `terraform show -json tfplan`, trimmed.
const showJson = {
  format_version: "1.2",
  terraform_version: "1.9.5",
  variables: { env: { value: "prod" } },
  planned_values: { root_module: { resources: [], child_modules: [] } },
  resource_drift: [resource("aws_iam_role.ci", ["update"])],
  resource_changes: [
    resource("aws_instance.web[0]", ["create"]),
    resource("aws_security_group.web", ["update"]),
    resource("aws_s3_bucket.old_logs", ["delete"], { action_reason: "delete_because_no_resource_config" }),
    resource("aws_db_instance.primary", ["delete", "create"], { action_reason: "replace_because_cannot_update" }),
    resource('module.cdn["eu"].aws_cloudfront_distribution.main', ["create", "delete"], { module_address: 'module.cdn["eu"]' }),
    resource("aws_iam_role.ci", ["no-op"]),
    resource("data.aws_ami.ubuntu", ["read"], { action_reason: "read_because_config_unknown" }),
  ],
  output_changes: { url: { actions: ["update"], before: "a", after: "b" } },
  prior_state: { format_version: "1.0", values: { root_module: {} } },
  configuration: { root_module: {} },
  relevant_attributes: [{ resource: "aws_instance.web[0]", attribute: ["id"] }],
  checks: [],
  timestamp: "2025-01-06T09:00:00Z",
  applyable: true,
  complete: true,
  errored: false,
};

describe("terraform show -json", () => {
  it("reads create, update, delete and both replace orders, and drops no-op and read", () => {
    expect(parsePlanChanges(showJson)).toEqual({
      ok: true,
      source: "terraform-show-json",
      formatVersion: "1.2",
      terraformVersion: "1.9.5",
      complete: true,
      changes: [
        { address: "aws_db_instance.primary", action: "replace" },
        { address: "aws_instance.web[0]", action: "create" },
        { address: "aws_s3_bucket.old_logs", action: "delete" },
        { address: "aws_security_group.web", action: "update" },
        { address: 'module.cdn["eu"].aws_cloudfront_distribution.main', action: "replace" },
      ],
    });
  });

  it("accepts the JSON text as well as the parsed value", () => {
    expect(parsePlanChanges(JSON.stringify(showJson))).toEqual(parsePlanChanges(showJson));
  });

  it("a plan with no changes (resource_changes omitted) has no changes", () => {
    expect(parsePlanChanges({ format_version: "1.2", planned_values: {} })).toMatchObject({ ok: true, changes: [], complete: null });
  });

  it("maps Terraform's action lists", () => {
    expect(mapTerraformActions(["create"])).toBe("create");
    expect(mapTerraformActions(["delete", "create"])).toBe("replace");
    expect(mapTerraformActions(["create", "delete"])).toBe("replace");
    expect(mapTerraformActions(["no-op"])).toBeNull();
    expect(mapTerraformActions(["read"])).toBeNull();
    expect(mapTerraformActions(["forget"])).toBe("delete");
    expect(mapTerraformActions(["update", "delete"])).toBeUndefined();
    expect(mapTerraformActions([])).toBeUndefined();
  });

  it("a deposed object's delete folds into its resource's change", () => {
    const parsed = parsePlanChanges({
      format_version: "1.2",
      resource_changes: [
        resource("aws_instance.a", ["delete"], { deposed: "00000001" }),
        resource("aws_instance.a", ["update"]),
        resource("aws_instance.b", ["delete"], { deposed: "00000002" }),
        resource("aws_instance.c", ["delete"], { deposed: "00000003" }),
        resource("aws_instance.c", ["no-op"]),
      ],
    });
    expect(parsed).toMatchObject({
      ok: true,
      changes: [
        { address: "aws_instance.a", action: "replace" },
        { address: "aws_instance.b", action: "delete" },
        { address: "aws_instance.c", action: "delete" },
      ],
    });
  });

  it("every malformed piece gets an issue naming its JSON path, and nothing is returned", () => {
    const parsed = parsePlanChanges({
      format_version: "1.2",
      resource_changes: [
        resource("aws_instance.ok", ["create"]),
        { address: "aws_instance.a", change: { actions: "create" } },
        { change: { actions: ["create"] } },
        "aws_instance.c",
        resource("aws_instance.d", ["explode"]),
        resource("aws_instance.ok", ["update"]),
        { address: "aws_instance.f" },
        { address: "", change: { actions: [] } },
      ],
    });
    expect(parsed).toEqual({
      ok: false,
      issues: [
        { path: "resource_changes[1].change.actions", message: 'must be a non-empty list of action names (got "create")' },
        { path: "resource_changes[2].address", message: "must be a string" },
        { path: "resource_changes[3]", message: "must be an object" },
        { path: "resource_changes[4].change.actions", message: 'unknown actions ["explode"]' },
        { path: "resource_changes[5].address", message: "duplicates resource_changes[0].address (aws_instance.ok)" },
        { path: "resource_changes[6].change", message: "must be an object with actions" },
        { path: "resource_changes[7].address", message: "must not be empty" },
        { path: "resource_changes[7].change.actions", message: "must be a non-empty list of action names (got [])" },
      ],
    });
    expect("changes" in parsed).toBe(false);
  });

  it("refuses an unsupported format major version, an errored plan, a state, and text that is not JSON", () => {
    expect(parsePlanChanges({ format_version: "2.0", resource_changes: [] })).toEqual({
      ok: false,
      issues: [{ path: "format_version", message: "major version 2 is not supported (0.x and 1.x are)" }],
    });
    expect(parsePlanChanges({ format_version: "1.2", errored: true })).toMatchObject({ ok: false, issues: [{ path: "errored" }] });
    expect(parsePlanChanges({ format_version: "1.0", values: { root_module: {} } })).toMatchObject({
      ok: false,
      issues: [{ path: "$", message: expect.stringMatching(/state, not of a plan/) }],
    });
    expect(parsePlanChanges("{ not json")).toMatchObject({ ok: false, issues: [{ path: "$", message: expect.stringMatching(/^not valid JSON/) }] });
    expect(parsePlanChanges({ hello: "world" })).toMatchObject({ ok: false, issues: [{ path: "$" }] });
    expect(parsePlanChanges(null)).toMatchObject({ ok: false, issues: [{ path: "$" }] });
    expect(parsePlanChanges({ format_version: "1.2", resource_changes: {} })).toEqual({
      ok: false,
      issues: [{ path: "resource_changes", message: "must be a list" }],
    });
  });

  it("limits: addresses of at most 1,024 characters, at most 10,000 changes, at most 100 issues listed", () => {
    const long = `aws_instance.${"x".repeat(1024)}`;
    expect(parsePlanChanges({ resource_changes: [resource(long, ["create"])] })).toEqual({
      ok: false,
      issues: [{ path: "resource_changes[0].address", message: `must be at most 1024 characters (got ${long.length})` }],
    });
    const many = Array.from({ length: MAX_PLAN_CHANGES + 1 }, (_, i) => resource(`aws_instance.i${i}`, ["create"]));
    expect(parsePlanChanges({ resource_changes: many })).toEqual({
      ok: false,
      issues: [{ path: "resource_changes", message: "at most 10000 changes (got 10001, not counting no-op and read)" }],
    });
    const noOps = Array.from({ length: MAX_PLAN_CHANGES + 1 }, (_, i) => resource(`aws_instance.i${i}`, ["no-op"]));
    expect(parsePlanChanges({ resource_changes: noOps })).toMatchObject({ ok: true, changes: [] });
    const broken = Array.from({ length: 150 }, () => 7);
    const parsed = parsePlanChanges({ resource_changes: broken });
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) {
      expect(parsed.issues).toHaveLength(101);
      expect(parsed.issues[100]).toEqual({ path: "$", message: "and 50 more issues" });
    }
  });
});

describe("plain change list", () => {
  it("reads [{ address, action }]", () => {
    expect(
      parsePlanChanges([
        { address: "module.b.x.y", action: "delete" },
        { address: "aws_instance.web", action: "replace" },
      ]),
    ).toEqual({
      ok: true,
      source: "change-list",
      formatVersion: null,
      terraformVersion: null,
      complete: null,
      changes: [
        { address: "aws_instance.web", action: "replace" },
        { address: "module.b.x.y", action: "delete" },
      ],
    });
  });

  it("every malformed entry gets an issue naming its path, and nothing is returned", () => {
    expect(
      parsePlanChanges([
        { address: "aws_instance.a", action: "create" },
        { address: "aws_instance.b", action: "no-op" },
        { address: 5, action: "create" },
        null,
        { address: "aws_instance.a", action: "update" },
        { address: " aws_instance.e", action: "create" },
      ]),
    ).toEqual({
      ok: false,
      issues: [
        { path: "[1].action", message: 'must be one of create, update, delete, replace (got "no-op")' },
        { path: "[2].address", message: "must be a string" },
        { path: "[3]", message: "must be an object { address, action }" },
        { path: "[4].address", message: "duplicates [0].address (aws_instance.a)" },
        { path: "[5].address", message: "must not start or end with whitespace" },
      ],
    });
  });

  it("at most 10,000 changes", () => {
    const list = Array.from({ length: MAX_PLAN_CHANGES + 1 }, (_, i) => ({ address: `a.b${i}`, action: "create" }));
    expect(parsePlanChanges(list)).toEqual({ ok: false, issues: [{ path: "$", message: "at most 10000 changes (got 10001)" }] });
  });
});
