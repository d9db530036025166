// The permission validity matrix, as data. This is the ONE place that says which
// (resource_type, action) pairs exist and which targeting modes each family accepts.
// Seed: seeds/004 "Validity matrix" — "Adding a new action to a resource only requires
// updating the matrix"; existing wildcard grants pick it up automatically.
//
// Everything else (validation, the in-memory check, the catalog query, the SQL CHECKs)
// derives from FAMILIES; nothing else may list actions or families by hand.

/** What one resource family accepts. */
export interface FamilySpec {
  /** Legal concrete actions, in the order the role editor shows them. */
  readonly actions: readonly string[];
  /** Whether a grant may target resources of this family by a name pattern. */
  readonly supportsPattern: boolean;
  /** Whether a grant may target resources of this family by an exact stack authz group. */
  readonly supportsAuthzGroup: boolean;
  /** One line for the role editor and docs. */
  readonly description: string;
  /**
   * What the target match value is for this family: the user-facing identifier a pattern
   * is matched against. `null` for org-level families with no per-resource identity.
   */
  readonly matchValue: string | null;
  /** Where a family's groups come from, when it accepts groups. */
  readonly groupsFrom: string | null;
  /**
   * Owner-only actions: no grant reaches them — not (*, *), not (family, *), not an explicit
   * tuple. Only the organization's owner passes (a super admin member, or a personal
   * organization's owner). See isOwnerOnly.
   */
  readonly ownerOnly?: readonly string[];
}

export const FAMILIES = {
  // ── From the seed ────────────────────────────────────────────────────────────────
  stack: {
    actions: [
      "create",
      "read",
      "update",
      "delete",
      "deploy",
      "confirm",
      "cancel",
      "prioritize",
      "read_logs",
      "read_data",
      "run_command",
      "local_deploy",
      "preview",
      "unlock_state",
      "overwrite_state",
      "restore_state",
    ],
    supportsPattern: true,
    supportsAuthzGroup: true,
    description: "Stacks and their whole deployment workflow (runs are reached through their stack).",
    matchValue: "stack name",
    groupsFrom: "the stack's authz groups (a create passes the request's groups)",
  },
  cloud_integration: {
    actions: ["create", "read", "update", "delete"],
    supportsPattern: true,
    supportsAuthzGroup: true,
    description: "Cloud credentials integrations attached to stacks.",
    matchValue: "cloud integration name",
    groupsFrom: "its stack's authz groups",
  },
  runner_group: {
    actions: ["create", "read", "update", "delete"],
    supportsPattern: true,
    supportsAuthzGroup: false,
    description: "Runner groups of every type (self-hosted and github-actions share one permission space).",
    matchValue: "runner group name",
    groupsFrom: null,
  },
  runner: {
    actions: ["delete"],
    supportsPattern: true,
    supportsAuthzGroup: false,
    description: "Force-removing a stuck or lost runner; everything else goes through its runner group.",
    matchValue: "runner name",
    groupsFrom: null,
  },
  label: {
    actions: ["read", "create", "update"],
    supportsPattern: true,
    supportsAuthzGroup: false,
    description: "Protected stack-label keys: view the set (read), replace it (create), set a key (update).",
    matchValue: "label KEY",
    groupsFrom: null,
  },
  stack_authz_group: {
    actions: ["assign"],
    supportsPattern: true,
    supportsAuthzGroup: false,
    description: "Adding a stack to, or removing it from, an authz group (also creates the group).",
    matchValue: "authz group NAME",
    groupsFrom: null,
  },
  member: {
    // check: ask what another member may do (the check API, docs/permissions.md); Countersign's.
    actions: ["create", "read", "update", "delete", "check"],
    supportsPattern: false,
    supportsAuthzGroup: false,
    description: "Organization memberships; check = ask the check API what another member may do.",
    matchValue: null,
    groupsFrom: null,
  },
  role: {
    actions: ["create", "read", "update", "delete", "assign"],
    supportsPattern: false,
    supportsAuthzGroup: false,
    description: "Roles, custom-role CRUD, and assigning roles to users and SSO groups.",
    matchValue: null,
    groupsFrom: null,
  },
  identity_source: {
    actions: ["create", "read", "update", "delete", "sync"],
    supportsPattern: false,
    supportsAuthzGroup: false,
    description: "SSO identity sources and their group bindings.",
    matchValue: null,
    groupsFrom: null,
  },

  // ── Added for Countersign ────────────────────────────────────────────────────────
  // The workspace-scoped families below are matched by the WORKSPACE name and receive
  // their workspace's stack's authz groups, the way a cloud integration receives its
  // stack's (DESIGN.md, "Permissions are the one authorization model").
  workspace: {
    actions: ["create", "read", "update", "archive", "approve", "plan", "freeze"],
    supportsPattern: true,
    supportsAuthzGroup: true,
    description:
      "Workspaces: plan = submit plans and report apply results (runner/CI); approve = approve plans, " +
      "start an apply once the gate passes, reserve; freeze = freeze/unfreeze held-tool-call delivery.",
    matchValue: "workspace name",
    groupsFrom: "the workspace's stack's authz groups",
  },
  resource_policy: {
    actions: ["create", "read", "update", "delete"],
    supportsPattern: true,
    supportsAuthzGroup: false,
    description: "Org-level resource policies applied to many workspaces.",
    matchValue: "resource policy name",
    groupsFrom: null,
  },
  approval_policy: {
    actions: ["read", "manage"],
    supportsPattern: true,
    supportsAuthzGroup: true,
    description: "Tool-call review rules (manage covers create, edit and delete; owner-only).",
    matchValue: "workspace name",
    groupsFrom: "the workspace's stack's authz groups",
    // Seed 003: "Managing approval policies is the owner-only operator action
    // approval.policy.manage". A grant that reached it could be self-assigned by any admin
    // holding (role, assign), so no grant does (docs/permissions.md, "Owner-only actions").
    ownerOnly: ["manage"],
  },
  gateway_policy: {
    actions: ["read", "manage"],
    supportsPattern: true,
    supportsAuthzGroup: true,
    description: "The gateway gate's Cedar policy set of a workspace: read it and simulate calls (read), save a new version (manage; owner-only).",
    matchValue: "workspace name",
    groupsFrom: "the workspace's stack's authz groups",
    // The set decides which agent tool calls run, are denied or are held: execution authorization,
    // at least as sensitive as who reviews (approval_policy, manage). Owner-only for the same
    // reason: any admin holding (role, assign) could otherwise grant it to themselves.
    ownerOnly: ["manage"],
  },
  hold_authority: {
    actions: ["read", "change"],
    supportsPattern: true,
    supportsAuthzGroup: true,
    description:
      "What can let a held tool call through without approval (src/domain/hold-authority.ts): the record of such changes (read), " +
      "and making one (change; owner-only): the production tier off, a tool declared not destructive, a connection re-routed.",
    matchValue: "workspace name",
    groupsFrom: "the workspace's stack's authz groups",
    // A hold is lifted only by the authority that placed it: the owner, as for gateway_policy
    // manage. Without this, the owner-only policy set is bypassed sideways (an admin turns the
    // tier off, a connection editor declares the tool not destructive).
    ownerOnly: ["change"],
  },
  approval_request: {
    actions: ["read", "decide"],
    supportsPattern: true,
    supportsAuthzGroup: true,
    description: "Held tool calls: see them (read) and vote on them (decide).",
    matchValue: "workspace name",
    groupsFrom: "the workspace's stack's authz groups",
  },
  virtual_key: {
    actions: ["create", "read", "revoke"],
    supportsPattern: true,
    supportsAuthzGroup: true,
    description: "The agent gateway's virtual keys for a workspace.",
    matchValue: "workspace name",
    groupsFrom: "the workspace's stack's authz groups",
  },
  connection: {
    actions: ["create", "read", "update", "delete"],
    supportsPattern: true,
    supportsAuthzGroup: true,
    description: "The agent gateway's upstream connections for a workspace.",
    matchValue: "workspace name",
    groupsFrom: "the workspace's stack's authz groups",
  },
  webhook: {
    actions: ["read", "create", "update", "delete"],
    supportsPattern: false,
    supportsAuthzGroup: false,
    description: "Outbound webhooks: their configuration and delivery log (read), create, update, delete and redeliver (update).",
    matchValue: null,
    groupsFrom: null,
  },
} as const satisfies Record<string, FamilySpec>;

export type ConcreteResourceType = keyof typeof FAMILIES;
export type ConcreteAction = (typeof FAMILIES)[ConcreteResourceType]["actions"][number];
/** The actions legal on one family. */
export type ActionOf<R extends ConcreteResourceType> = (typeof FAMILIES)[R]["actions"][number];

/** The wildcard on either axis: "any". */
export const ANY = "*";
export type ResourceType = ConcreteResourceType | typeof ANY;
export type Action = ConcreteAction | typeof ANY;

/** Concrete resource types, in catalog order. */
export const RESOURCE_TYPES: readonly ConcreteResourceType[] = Object.freeze(
  Object.keys(FAMILIES) as ConcreteResourceType[],
);

/** Concrete actions: the union across families, first-seen order. */
export const ACTIONS: readonly ConcreteAction[] = Object.freeze([
  ...new Set(RESOURCE_TYPES.flatMap((rt) => FAMILIES[rt].actions as readonly ConcreteAction[])),
]);

const RESOURCE_TYPE_SET: ReadonlySet<string> = new Set(RESOURCE_TYPES);
const ACTION_SET: ReadonlySet<string> = new Set(ACTIONS);
const PAIRS: ReadonlyMap<string, ReadonlySet<string>> = new Map(
  RESOURCE_TYPES.map((rt) => [rt, new Set<string>(FAMILIES[rt].actions)]),
);

const OWNER_ONLY: ReadonlyMap<string, ReadonlySet<string>> = new Map(
  RESOURCE_TYPES.map((rt) => [rt, new Set<string>((FAMILIES[rt] as FamilySpec).ownerOnly ?? [])]),
);

/** Whether (resource_type, action) is owner-only: reached by no grant, only by the owner. */
export function isOwnerOnly(resourceType: string, action: string): boolean {
  return OWNER_ONLY.get(resourceType)?.has(action) === true;
}

export function isConcreteResourceType(value: string): value is ConcreteResourceType {
  return RESOURCE_TYPE_SET.has(value);
}

export function isConcreteAction(value: string): value is ConcreteAction {
  return ACTION_SET.has(value);
}

export function isResourceType(value: string): value is ResourceType {
  return value === ANY || RESOURCE_TYPE_SET.has(value);
}

export function isAction(value: string): value is Action {
  return value === ANY || ACTION_SET.has(value);
}

/**
 * Seed: "IsValidPermission(rt, action) checks the validity matrix. Wildcards on either
 * axis always pass; concrete pairs must be in the matrix." Unknown values never pass.
 */
export function isValidPermission(resourceType: string, action: string): boolean {
  if (!isResourceType(resourceType) || !isAction(action)) return false;
  if (resourceType === ANY || action === ANY) return true;
  return PAIRS.get(resourceType)?.has(action) === true;
}

/** The family spec, or undefined for '*' and unknown values. */
export function familyOf(resourceType: string): FamilySpec | undefined {
  return isConcreteResourceType(resourceType) ? FAMILIES[resourceType] : undefined;
}

/** One row of the catalog query the role editor reads (seed: GET /permissions/catalog). */
export interface CatalogEntry {
  readonly resourceType: ConcreteResourceType;
  readonly actions: readonly ConcreteAction[];
  readonly supportsPattern: boolean;
  readonly supportsAuthzGroup: boolean;
  readonly description: string;
  readonly matchValue: string | null;
  readonly groupsFrom: string | null;
}

/** The whole matrix in catalog order, ready to serve as a query. */
export const PERMISSION_CATALOG: readonly CatalogEntry[] = Object.freeze(
  RESOURCE_TYPES.map((rt) => {
    const f: FamilySpec = FAMILIES[rt];
    return Object.freeze({
      resourceType: rt,
      actions: f.actions as readonly ConcreteAction[],
      supportsPattern: f.supportsPattern,
      supportsAuthzGroup: f.supportsAuthzGroup,
      description: f.description,
      matchValue: f.matchValue,
      groupsFrom: f.groupsFrom,
    });
  }),
);

// ── The tuple ────────────────────────────────────────────────────────────────────────

/**
 * A permission tuple as stored in role_permissions (seed: "Permissions are tuples of
 * (resource_type, action, resource_pattern, authz_group)"). resourcePattern is the
 * canonical LIKE pattern ('' = any resource); authzGroup is an exact group name ('' = none).
 */
export interface Permission {
  readonly resourceType: ResourceType;
  readonly action: Action;
  readonly resourcePattern: string;
  readonly authzGroup: string;
}

/** Identity of a tuple, for de-duplication and diffs (the table's unique key). */
export function permissionKey(p: Permission): string {
  return JSON.stringify([p.resourceType, p.action, p.resourcePattern, p.authzGroup]);
}
