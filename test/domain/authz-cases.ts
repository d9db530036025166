// ONE table of authorization check cases (seeds/004 "Authz semantics"), data only.
// The in-memory check (grantSatisfies) and the SQL list filter both run it, so the two
// implementations cannot drift apart.
//
// Every grant here is one validatePermission accepts, with its pattern already in canonical
// LIKE form (test/domain/catalog/authz-cases.test.ts proves it), so it can be inserted
// into role_permissions under the table's CHECKs. Target groups are NULL outside the
// families that accept groups, as the seed requires of callers.
//
// Reading the TypeScript strings: "prod\\_backend" is the LIKE pattern prod\_backend.

import type { Permission, Target } from "../../src/domain/catalog/index.js";

export interface AuthzCase {
  readonly name: string;
  readonly grant: Permission;
  readonly target: Target;
  readonly expected: boolean;
}

export const AUTHZ_CASES: readonly AuthzCase[] = [
  // ── Axes 1 and 2: resource type and action, with wildcards ──
  {
    name: "an untargeted grant matches its exact pair on a named stack",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "" },
    target: { resourceType: "stack", action: "deploy", matchValue: "payments-prod", groups: [] },
    expected: true,
  },
  {
    name: "an untargeted grant satisfies a NULL match value (can I deploy anywhere?)",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "" },
    target: { resourceType: "stack", action: "deploy", matchValue: null, groups: null },
    expected: true,
  },
  {
    name: "(stack, *) reaches read_data",
    grant: { resourceType: "stack", action: "*", resourcePattern: "", authzGroup: "" },
    target: { resourceType: "stack", action: "read_data", matchValue: "producer", groups: [] },
    expected: true,
  },
  {
    name: "(*, deploy) reaches stack deploy",
    grant: { resourceType: "*", action: "deploy", resourcePattern: "", authzGroup: "" },
    target: { resourceType: "stack", action: "deploy", matchValue: "api", groups: ["env-prod"] },
    expected: true,
  },
  {
    name: "(*, *) reaches identity_source sync with a NULL match value",
    grant: { resourceType: "*", action: "*", resourcePattern: "", authzGroup: "" },
    target: { resourceType: "identity_source", action: "sync", matchValue: null, groups: null },
    expected: true,
  },
  {
    name: "(*, read) does not reach stack deploy",
    grant: { resourceType: "*", action: "read", resourcePattern: "", authzGroup: "" },
    target: { resourceType: "stack", action: "deploy", matchValue: "api", groups: [] },
    expected: false,
  },
  {
    name: "(stack, deploy) does not reach stack read",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "api", groups: [] },
    expected: false,
  },
  {
    name: "(stack, read) does not reach cloud_integration read",
    grant: { resourceType: "stack", action: "read", resourcePattern: "", authzGroup: "" },
    target: { resourceType: "cloud_integration", action: "read", matchValue: "aws-prod", groups: [] },
    expected: false,
  },
  {
    name: "(stack, *) does not reach workspace read",
    grant: { resourceType: "stack", action: "*", resourcePattern: "", authzGroup: "" },
    target: { resourceType: "workspace", action: "read", matchValue: "payments", groups: [] },
    expected: false,
  },
  {
    name: "(stack, *, team-a-%) reaches run_command on team-a-api",
    grant: { resourceType: "stack", action: "*", resourcePattern: "team-a-%", authzGroup: "" },
    target: { resourceType: "stack", action: "run_command", matchValue: "team-a-api", groups: [] },
    expected: true,
  },

  // ── Axis 3: name patterns ──
  {
    name: "team-a-% matches team-a-api",
    grant: { resourceType: "stack", action: "update", resourcePattern: "team-a-%", authzGroup: "" },
    target: { resourceType: "stack", action: "update", matchValue: "team-a-api", groups: [] },
    expected: true,
  },
  {
    name: "% matches an empty run: team-a-% matches team-a-",
    grant: { resourceType: "stack", action: "update", resourcePattern: "team-a-%", authzGroup: "" },
    target: { resourceType: "stack", action: "update", matchValue: "team-a-", groups: [] },
    expected: true,
  },
  {
    name: "team-a-% does not match team-b-api",
    grant: { resourceType: "stack", action: "update", resourcePattern: "team-a-%", authzGroup: "" },
    target: { resourceType: "stack", action: "update", matchValue: "team-b-api", groups: [] },
    expected: false,
  },
  {
    name: "a targeted grant does not satisfy a NULL match value",
    grant: { resourceType: "stack", action: "read", resourcePattern: "team-a-%", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: null, groups: null },
    expected: false,
  },
  {
    name: "a stack named prod_backend matches the pattern prod_backend exactly",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "prod\\_backend", authzGroup: "" },
    target: { resourceType: "stack", action: "deploy", matchValue: "prod_backend", groups: [] },
    expected: true,
  },
  {
    name: "the escaped underscore in prod_backend does not match prodXbackend",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "prod\\_backend", authzGroup: "" },
    target: { resourceType: "stack", action: "deploy", matchValue: "prodXbackend", groups: [] },
    expected: false,
  },
  {
    name: "the glob prod?backend (LIKE prod_backend) does match prodXbackend",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "prod_backend", authzGroup: "" },
    target: { resourceType: "stack", action: "deploy", matchValue: "prodXbackend", groups: [] },
    expected: true,
  },
  {
    name: "patterns are case-sensitive: prod_backend does not match Prod_backend",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "prod\\_backend", authzGroup: "" },
    target: { resourceType: "stack", action: "deploy", matchValue: "Prod_backend", groups: [] },
    expected: false,
  },
  {
    name: "patterns are case-sensitive: prod does not match PROD",
    grant: { resourceType: "stack", action: "read", resourcePattern: "prod", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "PROD", groups: [] },
    expected: false,
  },
  {
    name: "patterns match the whole name: prod does not match prod-1",
    grant: { resourceType: "stack", action: "read", resourcePattern: "prod", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "prod-1", groups: [] },
    expected: false,
  },
  {
    name: "? (LIKE _) matches exactly one character: api-_ matches api-1",
    grant: { resourceType: "stack", action: "read", resourcePattern: "api-_", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "api-1", groups: [] },
    expected: true,
  },
  {
    name: "? (LIKE _) matches exactly one character: api-_ does not match api-12",
    grant: { resourceType: "stack", action: "read", resourcePattern: "api-_", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "api-12", groups: [] },
    expected: false,
  },
  {
    name: "? (LIKE _) matches exactly one character: api-_ does not match api-",
    grant: { resourceType: "stack", action: "read", resourcePattern: "api-_", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "api-", groups: [] },
    expected: false,
  },
  {
    name: "? counts characters, not bytes: _ matches one emoji",
    grant: { resourceType: "stack", action: "read", resourcePattern: "x-_", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "x-😀", groups: [] },
    expected: true,
  },
  {
    name: "literal accents match themselves: café-_ matches café-1",
    grant: { resourceType: "stack", action: "read", resourcePattern: "café-_", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "café-1", groups: [] },
    expected: true,
  },
  {
    name: "an escaped percent is literal: 100\\% matches 100%",
    grant: { resourceType: "stack", action: "read", resourcePattern: "100\\%", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "100%", groups: [] },
    expected: true,
  },
  {
    name: "an escaped percent is literal: 100\\% does not match 1000",
    grant: { resourceType: "stack", action: "read", resourcePattern: "100\\%", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "1000", groups: [] },
    expected: false,
  },
  {
    name: "an escaped backslash is literal: a\\\\b matches a\\b",
    grant: { resourceType: "stack", action: "read", resourcePattern: "a\\\\b", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "a\\b", groups: [] },
    expected: true,
  },
  {
    name: "an escaped backslash is literal: a\\\\b does not match ab",
    grant: { resourceType: "stack", action: "read", resourcePattern: "a\\\\b", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "ab", groups: [] },
    expected: false,
  },
  {
    name: "a suffix pattern: %-prod matches payments-prod",
    grant: { resourceType: "stack", action: "read", resourcePattern: "%-prod", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "payments-prod", groups: [] },
    expected: true,
  },
  {
    name: "a suffix pattern: %-prod does not match payments-prod-2",
    grant: { resourceType: "stack", action: "read", resourcePattern: "%-prod", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "payments-prod-2", groups: [] },
    expected: false,
  },
  {
    name: "an infix pattern: %pay% matches team-payments",
    grant: { resourceType: "stack", action: "read", resourcePattern: "%pay%", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "team-payments", groups: [] },
    expected: true,
  },
  {
    name: "segments cannot overlap: team-%-prod does not match team-prod",
    grant: { resourceType: "stack", action: "read", resourcePattern: "team-%-prod", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "team-prod", groups: [] },
    expected: false,
  },
  {
    name: "a middle %: team-%-prod matches team--prod",
    grant: { resourceType: "stack", action: "read", resourcePattern: "team-%-prod", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "team--prod", groups: [] },
    expected: true,
  },
  {
    name: "?* (LIKE _%) needs at least one character and matches x",
    grant: { resourceType: "stack", action: "read", resourcePattern: "_%", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "x", groups: [] },
    expected: true,
  },
  {
    name: "% spans a newline: a%b matches a\\nb",
    grant: { resourceType: "stack", action: "read", resourcePattern: "a%b", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "a\nb", groups: [] },
    expected: true,
  },
  {
    name: "pattern matching applies at create: (stack, create, team-a-%) allows creating team-a-new",
    grant: { resourceType: "stack", action: "create", resourcePattern: "team-a-%", authzGroup: "" },
    target: { resourceType: "stack", action: "create", matchValue: "team-a-new", groups: [] },
    expected: true,
  },
  {
    name: "pattern matching applies at create: (stack, create, team-a-%) refuses team-b-new",
    grant: { resourceType: "stack", action: "create", resourcePattern: "team-a-%", authzGroup: "" },
    target: { resourceType: "stack", action: "create", matchValue: "team-b-new", groups: [] },
    expected: false,
  },
  {
    name: "label is scoped by the label KEY: (label, update, env) matches the key env",
    grant: { resourceType: "label", action: "update", resourcePattern: "env", authzGroup: "" },
    target: { resourceType: "label", action: "update", matchValue: "env", groups: null },
    expected: true,
  },
  {
    name: "label is scoped by the label KEY: (label, update, env) does not match environment",
    grant: { resourceType: "label", action: "update", resourcePattern: "env", authzGroup: "" },
    target: { resourceType: "label", action: "update", matchValue: "environment", groups: null },
    expected: false,
  },
  {
    name: "stack_authz_group is scoped by the group NAME: env-% matches env-prod",
    grant: { resourceType: "stack_authz_group", action: "assign", resourcePattern: "env-%", authzGroup: "" },
    target: { resourceType: "stack_authz_group", action: "assign", matchValue: "env-prod", groups: null },
    expected: true,
  },
  {
    name: "a workspace is matched by its name: payments-% matches payments-prod",
    grant: { resourceType: "workspace", action: "approve", resourcePattern: "payments-%", authzGroup: "" },
    target: { resourceType: "workspace", action: "approve", matchValue: "payments-prod", groups: ["env-prod"] },
    expected: true,
  },
  {
    name: "a name pattern does not match a group of the same text",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "env-prod", authzGroup: "" },
    target: { resourceType: "stack", action: "deploy", matchValue: "api", groups: ["env-prod"] },
    expected: false,
  },

  // ── Axis 3: authz groups ──
  {
    name: "(stack, deploy, authz_group = env-prod) matches a stack carrying env-prod",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "stack", action: "deploy", matchValue: "api", groups: ["env-prod"] },
    expected: true,
  },
  {
    name: "a group matches a stack carrying several groups",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" },
    target: {
      resourceType: "stack",
      action: "deploy",
      matchValue: "api",
      groups: ["team-payments", "env-prod", "tier-1"],
    },
    expected: true,
  },
  {
    name: "a group does not match a stack not carrying it",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "stack", action: "deploy", matchValue: "api", groups: ["team-payments", "tier-1"] },
    expected: false,
  },
  {
    name: "a group does not match a stack with no groups",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "stack", action: "deploy", matchValue: "api", groups: [] },
    expected: false,
  },
  {
    name: "a group does not satisfy NULL target groups (can I deploy anywhere?)",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "stack", action: "deploy", matchValue: null, groups: null },
    expected: false,
  },
  {
    name: "groups are exact: env-prod does not match Env-Prod",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "stack", action: "deploy", matchValue: "api", groups: ["Env-Prod"] },
    expected: false,
  },
  {
    name: "groups are exact: env-prod does not match env-prod-eu",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "stack", action: "deploy", matchValue: "api", groups: ["env-prod-eu"] },
    expected: false,
  },
  {
    name: "a group grant is not matched by a stack NAME equal to the group",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "stack", action: "deploy", matchValue: "env-prod", groups: [] },
    expected: false,
  },
  {
    name: "the group arm needs no match value: a NULL name with the group present matches",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "stack", action: "deploy", matchValue: null, groups: ["env-prod"] },
    expected: true,
  },
  {
    name: "a group grant for deploy does not reach read on the same stack",
    grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "stack", action: "read", matchValue: "api", groups: ["env-prod"] },
    expected: false,
  },
  {
    name: "(cloud_integration, update, authz_group = env-prod) matches an integration whose stack carries env-prod",
    grant: { resourceType: "cloud_integration", action: "update", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "cloud_integration", action: "update", matchValue: "aws-prod", groups: ["env-prod"] },
    expected: true,
  },
  {
    name: "(cloud_integration, update, authz_group = env-prod) does not match an integration whose stack carries only env-dev",
    grant: { resourceType: "cloud_integration", action: "update", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "cloud_integration", action: "update", matchValue: "aws-dev", groups: ["env-dev"] },
    expected: false,
  },
  {
    name: "(cloud_integration, read, aws-*) matches an integration by its name, whatever its stack's groups",
    grant: { resourceType: "cloud_integration", action: "read", resourcePattern: "aws-%", authzGroup: "" },
    target: { resourceType: "cloud_integration", action: "read", matchValue: "aws-prod", groups: ["env-prod"] },
    expected: true,
  },
  {
    name: "(stack, read, authz_group = env-prod) does not reach the cloud integrations of an env-prod stack",
    grant: { resourceType: "stack", action: "read", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "cloud_integration", action: "read", matchValue: "aws-prod", groups: ["env-prod"] },
    expected: false,
  },
  {
    name: "(workspace, approve, authz_group = env-prod) matches a workspace whose stack carries env-prod",
    grant: { resourceType: "workspace", action: "approve", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "workspace", action: "approve", matchValue: "payments", groups: ["tier-1", "env-prod"] },
    expected: true,
  },
  {
    name: "(approval_request, decide, authz_group = env-prod) matches a request in such a workspace",
    grant: { resourceType: "approval_request", action: "decide", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "approval_request", action: "decide", matchValue: "payments", groups: ["env-prod"] },
    expected: true,
  },
  {
    name: "(virtual_key, revoke, authz_group = env-prod) does not match a workspace of another stack",
    grant: { resourceType: "virtual_key", action: "revoke", resourcePattern: "", authzGroup: "env-prod" },
    target: { resourceType: "virtual_key", action: "revoke", matchValue: "payments", groups: ["env-dev"] },
    expected: false,
  },
  {
    name: "an untargeted grant matches whatever groups the stack carries",
    grant: { resourceType: "stack", action: "read", resourcePattern: "", authzGroup: "" },
    target: { resourceType: "stack", action: "read", matchValue: "api", groups: ["env-prod", "tier-1"] },
    expected: true,
  },
];
