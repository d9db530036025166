// The check API: may principal P perform (resource_type, action) on resource R?
// Answered by the decision the operations make (src/domain/catalog/decide.ts, decideAction: find
// the object — under read where its family requires it — then check the action) over the
// principal loaded the way every request's own principal is loaded (src/authz/principal.ts), with
// the reason: the grant that matched and every role carrying it, held by direct assignment or
// through an SSO group binding, or the tuple that is missing. Spec: seeds/004 "Authz semantics";
// decisions: docs/permissions.md, "The check API".

import { EpochSlot, type Authz, type SignedInAuthz } from "../authz/authz.js";
import { principalKey, type LoadedPrincipal } from "../authz/principal.js";
import {
  ANY,
  checkPermission,
  CREATE_PARENT,
  decideAction,
  familyOf,
  isConcreteResourceType,
  isValidPermission,
  permissionKey,
  validateStackAuthzGroups,
  type ConcreteAction,
  type ConcreteResourceType,
  type Permission,
  type Target,
} from "../domain/catalog/index.js";
import { PermissionDeniedError, ValidationError, type FieldIssue } from "../errors.js";
import type { Database } from "../infra/db.js";

/** At most this many checks in one request: a page of buttons, not a crawl of the org. */
export const MAX_PERMISSION_CHECKS = 100;
/** The longest hypothetical match value, in characters (it is matched against LIKE patterns). */
export const MAX_CHECK_MATCH_VALUE_LENGTH = 1024;

/** The permission a caller needs to check anyone but themselves. */
export const CHECK_PERMISSION: Target = { resourceType: "member", action: "check", matchValue: null, groups: null };

export interface PermissionCheckInput {
  /** The user checked; the caller when omitted (checking yourself needs no (member, check)). */
  readonly principalId?: string | null;
  readonly resourceType: string;
  readonly action: string;
  /** The resource, by id (its name and groups are read from it). */
  readonly resourceId?: string | null;
  /** Or a hypothetical target: the match value (a name to create, a label key, a runner group name). */
  readonly matchValue?: string | null;
  /** With matchValue: the target's authz groups (a create passes the request's). */
  readonly groups?: readonly string[] | null;
}

export type CheckDecision = "GRANTED" | "SUPER_ADMIN" | "OWNER" | "NO_GRANT" | "READ_MISSING" | "NOT_A_MEMBER" | "RESOURCE_NOT_FOUND";

export interface GrantSource {
  readonly kind: "DIRECT" | "SSO_BINDING" | "OWNER";
  readonly roleId: string | null;
  readonly roleKey: string | null;
  readonly roleName: string | null;
  readonly bindingId: string | null;
  readonly identitySourceId: string | null;
  readonly identitySourceName: string | null;
  readonly groupKey: string | null;
}

export interface PermissionCheckAnswer {
  readonly principalId: string;
  readonly resourceType: ConcreteResourceType;
  readonly action: ConcreteAction;
  readonly resourceId: string | null;
  readonly allowed: boolean;
  readonly decision: CheckDecision;
  /** The tuple that satisfied the check (null unless GRANTED or OWNER). */
  readonly grant: Permission | null;
  /** Every way the principal holds a role carrying `grant`. */
  readonly sources: readonly GrantSource[];
  /** What was asked and not held (null when allowed). */
  readonly missing: { resourceType: ConcreteResourceType; action: ConcreteAction; matchValue: string | null; groups: readonly string[] | null } | null;
}

interface ParsedCheck {
  readonly principalId: string;
  readonly resourceType: ConcreteResourceType;
  readonly action: ConcreteAction;
  readonly resourceId: string | null;
  /** Null until the resource is resolved (by id), or the hypothetical target. */
  target: Target | null;
  /** A create in a parent (CREATE_PARENT) named by resourceId: the parent's target, once resolved. */
  parent: Target | null;
  /** The caller could not read the resource, or it does not exist in the caller's org. */
  notFound: boolean;
  /** A create in a parent named by resourceId: the name to create (null: "any name?"). */
  readonly createName?: string | null;
}

/** Families whose resources the check takes by id, and where their match value comes from. */
const BY_ID: ReadonlySet<string> = new Set([
  "stack",
  "workspace",
  "resource_policy",
  "approval_policy",
  "gateway_policy",
  "hold_authority",
  "approval_request",
  "virtual_key",
  "connection",
  "webhook",
  "cloud_integration",
]);
// gateway_policy and hold_authority have no object of their own: their resourceId is always the workspace's id.
const WORKSPACE_SCOPED: ReadonlySet<string> = new Set(["approval_policy", "gateway_policy", "hold_authority", "approval_request", "virtual_key", "connection"]);

/** An issue of check `i`'s `field`. Module level: parseChecks makes no closure per check. */
function issueAt(issues: FieldIssue[], i: number, field: string, code: string, message: string): void {
  issues.push({ field: `checks.${i}.${field}`, code, message });
}

/** Validates the whole batch; every issue names `checks.<i>.<field>`. Nothing is answered on a bad input. */
function parseChecks(viewerId: string, checks: readonly PermissionCheckInput[]): ParsedCheck[] {
  const issues: FieldIssue[] = [];
  if (checks.length === 0) issues.push({ field: "checks", code: "too_few_checks", message: "Send at least one check." });
  if (checks.length > MAX_PERMISSION_CHECKS) {
    issues.push({
      field: "checks",
      code: "too_many_checks",
      message: `At most ${MAX_PERMISSION_CHECKS} checks per request (got ${checks.length}).`,
    });
  }
  const parsed: ParsedCheck[] = [];
  checks.forEach((c, i) => {
    const rt = c.resourceType;
    const action = c.action;
    if (rt === ANY || action === ANY) {
      issueAt(issues, i, rt === ANY ? "resourceType" : "action", "wildcard_target", "A check names a concrete resource type and action: '*' is for grants, not targets.");
      return;
    }
    if (!isConcreteResourceType(rt)) return void issueAt(issues, i, "resourceType", "unknown_resource_type", `Unknown resource type ${JSON.stringify(rt)}.`);
    if (!isValidPermission(rt, action)) {
      return void issueAt(issues, i, "action", "invalid_pair", `Action ${JSON.stringify(action)} does not exist on resource type ${JSON.stringify(rt)}.`);
    }
    const family = familyOf(rt)!;
    const resourceId = c.resourceId ?? null;
    const matchValue = c.matchValue ?? null;
    const groups = c.groups ?? null;
    let target: Target | null = null;
    const inParent = action === "create" && CREATE_PARENT[rt] !== undefined;
    if (resourceId !== null && inParent) {
      // A create in a stack: resourceId names the stack (found under read, like the create
      // operation finds it), matchValue the name to create; the groups are the stack's.
      if (groups !== null) return void issueAt(issues, i, "groups", "one_target", "With a parent's resourceId the groups are the parent's: omit groups.");
      if (matchValue !== null && [...matchValue].length > MAX_CHECK_MATCH_VALUE_LENGTH) {
        return void issueAt(issues, i, "matchValue", "match_value_too_long", `A match value is at most ${MAX_CHECK_MATCH_VALUE_LENGTH} characters.`);
      }
    } else if (resourceId !== null) {
      if (matchValue !== null || groups !== null) {
        return void issueAt(issues, i, "resourceId", "one_target", "Name the resource by resourceId, or describe it by matchValue and groups, not both.");
      }
      if (!BY_ID.has(rt)) {
        return void issueAt(
          issues,
          i,
          "resourceId",
          "resource_id_not_supported",
          family.matchValue === null
            ? `Resource type ${JSON.stringify(rt)} has no per-resource identity: check it without a resource.`
            : `Resource type ${JSON.stringify(rt)} is checked by its ${family.matchValue}: pass matchValue.`,
        );
      }
    } else {
      if (matchValue !== null) {
        if (family.matchValue === null) {
          return void issueAt(issues, i, "matchValue", "pattern_not_supported", `Resource type ${JSON.stringify(rt)} has no per-resource names.`);
        }
        if ([...matchValue].length > MAX_CHECK_MATCH_VALUE_LENGTH) {
          return void issueAt(issues, i, "matchValue", "match_value_too_long", `A match value is at most ${MAX_CHECK_MATCH_VALUE_LENGTH} characters.`);
        }
      }
      if (groups !== null) {
        if (!family.supportsAuthzGroup) {
          return void issueAt(issues, i, "groups", "group_not_supported", `Resource type ${JSON.stringify(rt)} carries no authz groups.`);
        }
        const checked = validateStackAuthzGroups(groups);
        if (!checked.ok) {
          for (const issue of checked.issues) issueAt(issues, i, issue.index === null ? "groups" : `groups.${issue.index}`, issue.code, issue.message);
          return;
        }
      }
      target = { resourceType: rt, action: action as ConcreteAction, matchValue, groups: groups === null ? null : [...groups] };
    }
    parsed.push({
      principalId: c.principalId ?? viewerId,
      resourceType: rt,
      action: action as ConcreteAction,
      resourceId,
      target,
      parent: null,
      notFound: false,
      ...(inParent && resourceId !== null ? { createName: matchValue } : {}),
    });
  });
  if (issues.length > 0) throw new ValidationError(issues);
  return parsed;
}

interface Resolved {
  readonly matchValue: string | null;
  readonly groups: readonly string[] | null;
}

/**
 * Every family's rows by id, in the caller's organization, in one statement: the match value and
 * the groups each is checked with. A workspace-scoped family's object is checked by its workspace
 * (name, stack's groups); a cloud integration by its own name and its stack's groups (seed 004).
 * Parameters: $1 the organization, then one id array per family in RESOLVED_FAMILIES' order.
 */
const RESOLVE_SQL = `
  SELECT 'stack' AS family, s.id, s.name AS "matchValue", s."authzGroups" AS groups
    FROM stacks s WHERE s."orgId" = $1 AND s.id = ANY($2::text[])
  UNION ALL
  SELECT 'workspace', w.id, w.name, st."authzGroups"
    FROM workspaces w JOIN stacks st ON st.id = w."stackId" WHERE w."orgId" = $1 AND w.id = ANY($3::text[])
  UNION ALL
  SELECT 'resource_policy', p.id, p.name, NULL FROM resource_policies p WHERE p."orgId" = $1 AND p.id = ANY($4::text[])
  UNION ALL
  SELECT 'webhook', h.id, NULL, NULL FROM webhooks h WHERE h."orgId" = $1 AND h.id = ANY($5::text[])
  UNION ALL
  SELECT 'approval_policy', x.id, w.name, st."authzGroups"
    FROM approval_policies x JOIN workspaces w ON w.id = x."workspaceId" JOIN stacks st ON st.id = w."stackId"
   WHERE x."orgId" = $1 AND x.id = ANY($6::text[])
  UNION ALL
  SELECT 'approval_request', x.id, w.name, st."authzGroups"
    FROM approval_requests x JOIN workspaces w ON w.id = x."workspaceId" JOIN stacks st ON st.id = w."stackId"
   WHERE x."orgId" = $1 AND x.id = ANY($7::text[])
  UNION ALL
  SELECT 'virtual_key', x.id, w.name, st."authzGroups"
    FROM virtual_keys x JOIN workspaces w ON w.id = x."workspaceId" JOIN stacks st ON st.id = w."stackId"
   WHERE x."orgId" = $1 AND x.id = ANY($8::text[])
  UNION ALL
  SELECT 'connection', x.id, w.name, st."authzGroups"
    FROM connections x JOIN workspaces w ON w.id = x."workspaceId" JOIN stacks st ON st.id = w."stackId"
   WHERE x."orgId" = $1 AND x.id = ANY($9::text[])
  UNION ALL
  SELECT 'cloud_integration', c.id, c.name, st."authzGroups"
    FROM cloud_integrations c JOIN stacks st ON st.id = c."stackId" WHERE c."orgId" = $1 AND c.id = ANY($10::text[])`;

const RESOLVED_FAMILIES = [
  "stack",
  "workspace",
  "resource_policy",
  "webhook",
  "approval_policy",
  "approval_request",
  "virtual_key",
  "connection",
  "cloud_integration",
] as const;

/**
 * Every resource named by id, in the caller's organization (RESOLVE_SQL: one round trip). A
 * workspace-scoped family takes its object's id or, for a create or "in this workspace", a
 * workspace's id; a create in a stack names the stack.
 */
async function resolveResources(db: Database, orgId: string, checks: readonly ParsedCheck[]): Promise<Map<string, Resolved>> {
  const out = new Map<string, Resolved>(); // key: `${family}\u0000${id}`, the family the row was read as
  const ids = new Map<(typeof RESOLVED_FAMILIES)[number], Set<string>>(RESOLVED_FAMILIES.map((f) => [f, new Set<string>()]));
  for (const c of checks) {
    if (c.resourceId === null) continue;
    // A create names its stack; "in this workspace" (and a workspace create's own family) names a workspace.
    const family = c.createName !== undefined ? "stack" : WORKSPACE_SCOPED.has(c.resourceType) ? "workspace" : c.resourceType;
    ids.get(family as (typeof RESOLVED_FAMILIES)[number])?.add(c.resourceId);
    // A workspace-scoped family's own object by its id.
    if (c.createName === undefined && WORKSPACE_SCOPED.has(c.resourceType)) ids.get(c.resourceType as (typeof RESOLVED_FAMILIES)[number])?.add(c.resourceId);
  }
  if ([...ids.values()].every((set) => set.size === 0)) return out;
  const rows = await db.sql.query<{ family: string; id: string; matchValue: string | null; groups: string[] | null }>(
    RESOLVE_SQL,
    [orgId, ...RESOLVED_FAMILIES.map((f) => [...ids.get(f)!])],
    { prepare: true },
  );
  // One entry per row: a workspace-scoped family named by a workspace's id finds it under "workspace" (findForCaller).
  for (const r of rows) out.set(`${r.family}\u0000${r.id}`, { matchValue: r.matchValue, groups: r.groups });
  return out;
}

interface SourceRow {
  userId: string;
  roleId: string;
  roleKey: string;
  roleName: string;
  kind: "DIRECT" | "SSO_BINDING";
  bindingId: string | null;
  identitySourceId: string | null;
  identitySourceName: string | null;
  groupKey: string | null;
  grants: Permission[];
}

/**
 * How each principal holds each of its roles (the same union as loadPrincipal: the direct
 * assignment, and every binding whose group the user's synced groups match), with the role's
 * tuples, so a granted check can name every role carrying the tuple that matched.
 */
async function grantSources(db: Database, orgId: string, userIds: readonly string[]): Promise<SourceRow[]> {
  if (userIds.length === 0) return [];
  return db.sql.query<SourceRow>(
    `WITH held AS (
       SELECT a."userId", a."roleId", 'DIRECT' AS kind, NULL::text AS "bindingId", NULL::text AS "identitySourceId",
              NULL::text AS "identitySourceName", NULL::text AS "groupKey"
         FROM role_assignments a WHERE a."orgId" = $1 AND a."userId" = ANY($2::text[])
       UNION ALL
       SELECT g."userId", br."roleId", 'SSO_BINDING', b.id, s.id, s.name, b."groupKey"
         FROM user_identity_groups g
         JOIN identity_group_bindings b ON b."identitySourceId" = g."identitySourceId" AND b."groupKey" = g."groupKey"
         JOIN identity_sources s ON s.id = b."identitySourceId"
         JOIN identity_group_binding_roles br ON br."bindingId" = b.id
        WHERE b."orgId" = $1 AND g."userId" = ANY($2::text[]))
     SELECT h.*, r.key AS "roleKey", r.name AS "roleName",
            COALESCE((SELECT json_agg(jsonb_build_object(
                        'resourceType', p."resourceType", 'action', p.action,
                        'resourcePattern', p."resourcePattern", 'authzGroup', p."authzGroup"))
                        FROM role_permissions p WHERE p."roleId" = h."roleId"), '[]') AS grants
       FROM held h JOIN roles r ON r.id = h."roleId"
      ORDER BY h."userId", h.kind, r.key, h."groupKey"`,
    [orgId, userIds],
  );
}

/** How each user holds its roles, kept beside the principals under the authz epoch (every table grantSources reads bumps it). */
const KEPT_SOURCES = new EpochSlot<readonly SourceRow[]>();

/** grantSources by user: the kept ones, and the rest in one round trip (kept for users that hold a role). */
async function grantSourcesOf(db: Database, authz: SignedInAuthz, userIds: readonly string[]): Promise<Map<string, readonly SourceRow[]>> {
  const { orgId } = authz.viewer;
  const kept = authz.keptIn(KEPT_SOURCES);
  const out = new Map<string, readonly SourceRow[]>();
  const missing: string[] = [];
  for (const id of userIds) {
    const hit = kept?.rows.get(principalKey(orgId, id));
    if (hit) out.set(id, hit);
    else missing.push(id);
  }
  if (missing.length === 0) return out;
  const loaded = new Map<string, SourceRow[]>();
  for (const s of await grantSources(db, orgId, missing)) {
    let rows = loaded.get(s.userId);
    if (!rows) loaded.set(s.userId, (rows = []));
    rows.push(s);
  }
  for (const [id, rows] of loaded) out.set(id, rows);
  // A user with no role has no rows, and is not kept: ids of nobody fill no cache.
  kept?.keep([...loaded].map(([id, rows]) => [principalKey(orgId, id), rows] as const));
  return out;
}

const OWNER_SOURCE: GrantSource = {
  kind: "OWNER",
  roleId: null,
  roleKey: null,
  roleName: null,
  bindingId: null,
  identitySourceId: null,
  identitySourceName: null,
  groupKey: null,
};

/**
 * Answers a batch of checks. Checking anyone but yourself needs (member, check). A principal
 * that is not an active member of the caller's organization (another organization's user, an
 * unknown id, a deactivated member) is NOT_A_MEMBER; a resource id that is not the caller's
 * organization's, or that the caller may not read, is RESOURCE_NOT_FOUND — the same answer for
 * all of them, so nothing leaks.
 */
export async function checkPermissions(
  deps: { db: Database; authz: SignedInAuthz },
  checks: readonly PermissionCheckInput[],
): Promise<PermissionCheckAnswer[]> {
  const { db, authz } = deps;
  const caller = await authz.requireMember();
  const viewer = authz.viewer;
  const parsed = parseChecks(viewer.userId, checks);
  if (parsed.some((c) => c.principalId !== viewer.userId)) {
    const result = checkPermission(caller, CHECK_PERMISSION);
    if (!result.allowed) throw new PermissionDeniedError({ resourceType: "member", action: "check", matchValue: null });
  }

  // Three reads at once, none waiting on another: the resources named by id, the principals asked
  // about and how each holds its roles (both kept across requests under the authz epoch).
  const principalIds = [...new Set(parsed.map((c) => c.principalId))];
  const others = principalIds.filter((id) => id !== viewer.userId);
  const [resolved, loaded, sourcesOf] = await Promise.all([
    resolveResources(db, viewer.orgId, parsed),
    others.length ? authz.principalsOf(others) : Promise.resolve(new Map<string, LoadedPrincipal>()),
    grantSourcesOf(db, authz, principalIds),
  ]);
  if (principalIds.includes(viewer.userId)) loaded.set(viewer.userId, caller);

  // Resources by id: in the caller's org, and readable by the caller (the object is authorized, not the path).
  // The caller finds a resource it may read, or one it could itself act on as asked (the same
  // find the operation would make for the caller: a self-check of (stack, read_data) by id).
  // Decided once per (resource, action) of the batch: a hundred questions name a few dozen.
  const found = new Map<string, Found | null>();
  for (const c of parsed) {
    if (c.resourceId === null) continue;
    const key = `${c.resourceType}\u0000${c.action}\u0000${c.createName === undefined ? "" : "create"}\u0000${c.resourceId}`;
    let f = found.get(key);
    if (f === undefined) found.set(key, (f = findForCaller(caller, resolved, c)));
    if (f === null) c.notFound = true;
    else if (c.createName !== undefined) {
      c.target = { resourceType: c.resourceType, action: c.action, matchValue: c.createName, groups: f.target.groups };
      c.parent = f.parent;
    } else c.target = f.target;
  }

  // How each principal holds the grant that matched, once per (principal, grant) of the batch.
  const carrying = new Map<string, Map<Permission, Carrying>>();
  const carryingOf = (principalId: string, principal: LoadedPrincipal, grant: Permission): Carrying => {
    let byGrant = carrying.get(principalId);
    if (!byGrant) carrying.set(principalId, (byGrant = new Map()));
    let hit = byGrant.get(grant);
    if (!hit) byGrant.set(grant, (hit = carryingSources(sourcesOf.get(principalId) ?? NO_ROWS, principal, grant)));
    return hit;
  };

  return parsed.map((c): PermissionCheckAnswer => {
    if (c.notFound || c.target === null) return deniedAnswer(c, "RESOURCE_NOT_FOUND", null);
    const principal = loaded.get(c.principalId);
    if (!principal || !principal.membershipActive) return deniedAnswer(c, "NOT_A_MEMBER", null);
    // The operations' decision: find (under read where the family requires it), then the action.
    const result = decideAction(principal, c.target, c.parent);
    if (!result.allowed) {
      if (result.reason === "cannot_find") return deniedAnswer(c, "READ_MISSING", result.findTarget);
      // The caller is an active member of a live org, so the org-level reasons cannot occur here.
      return deniedAnswer(c, result.reason === "inactive_membership" ? "NOT_A_MEMBER" : "NO_GRANT", c.target);
    }
    if (result.via === "super_admin") {
      return allowedAnswer(c, principal.isSuperAdmin ? "SUPER_ADMIN" : "OWNER", null, principal.isSuperAdmin ? NO_SOURCES : OWNER_ONLY);
    }
    const held = carryingOf(c.principalId, principal, result.via);
    return allowedAnswer(c, held.decision, result.via, held.sources);
  });
}

/** What the caller finds a resource named by id as: the target to check (and a create's parent); null: not found. */
interface Found {
  readonly target: Target;
  readonly parent: Target | null;
}

function findForCaller(caller: LoadedPrincipal, resolved: ReadonlyMap<string, Resolved>, c: ParsedCheck): Found | null {
  if (c.createName !== undefined) {
    const stack = resolved.get(`stack\u0000${c.resourceId}`);
    if (!stack) return null;
    const parent: Target = { resourceType: "stack", action: "read", matchValue: stack.matchValue, groups: stack.groups };
    // The create itself finds the stack under read: so does the caller. (The name to create is the question's own.)
    if (!checkPermission(caller, parent).allowed) return null;
    return { target: { resourceType: c.resourceType, action: c.action, matchValue: null, groups: stack.groups }, parent };
  }
  // A workspace-scoped family's own object by its id, else the workspace of that id ("in this workspace").
  const r = resolved.get(`${c.resourceType}\u0000${c.resourceId}`) ?? (WORKSPACE_SCOPED.has(c.resourceType) ? resolved.get(`workspace\u0000${c.resourceId}`) : undefined);
  if (!r) return null;
  const target: Target = { resourceType: c.resourceType, action: c.action, matchValue: r.matchValue, groups: r.groups };
  const readTarget: Target = { ...target, action: "read" as ConcreteAction };
  if (!checkPermission(caller, readTarget).allowed && !decideAction(caller, target).allowed) return null;
  return { target, parent: null };
}

/** Every way a principal holds the grant that matched, and the decision it makes (GRANTED, or OWNER when only ownership carries it). */
interface Carrying {
  readonly sources: readonly GrantSource[];
  readonly decision: "GRANTED" | "OWNER";
}

function carryingSources(rows: readonly SourceRow[], principal: LoadedPrincipal, grant: Permission): Carrying {
  const held = rolesCarrying(rows, grant);
  // A personal organization's owner holds (*, *) implicitly (seed 004, Notes).
  const ownerGrant = principal.isOwner === true && grant.resourceType === ANY && grant.action === ANY && grant.resourcePattern === "" && grant.authzGroup === "";
  const sources = ownerGrant ? [...held, OWNER_SOURCE] : held;
  return { sources, decision: sources.length > 0 && sources.every((s) => s.kind === "OWNER") ? "OWNER" : "GRANTED" };
}

/**
 * The roles carrying each grant, by a user's kept rows (grantSourcesOf) and the grant object its
 * kept principal's check returned: both live while the authz epoch they were read under does, so
 * a runner asking again matches no tuple again. Weak both ways: what an epoch replaced goes.
 */
const CARRYING = new WeakMap<readonly SourceRow[], WeakMap<Permission, readonly GrantSource[]>>();

function rolesCarrying(rows: readonly SourceRow[], grant: Permission): readonly GrantSource[] {
  let byGrant = CARRYING.get(rows);
  if (!byGrant) CARRYING.set(rows, (byGrant = new WeakMap()));
  let held = byGrant.get(grant);
  if (held) return held;
  const key = permissionKey(grant);
  const found: GrantSource[] = [];
  for (const { kind, roleId, roleKey, roleName, bindingId, identitySourceId, identitySourceName, groupKey, grants } of rows) {
    if (grants.some((g) => permissionKey(g) === key)) {
      found.push({ kind, roleId, roleKey, roleName, bindingId, identitySourceId, identitySourceName, groupKey });
    }
  }
  byGrant.set(grant, (held = Object.freeze(found)));
  return held;
}

const NO_SOURCES: readonly GrantSource[] = Object.freeze([]);
const NO_ROWS: readonly SourceRow[] = Object.freeze([]);
const OWNER_ONLY: readonly GrantSource[] = Object.freeze([OWNER_SOURCE]);

// The answers are built by module-level functions, not closures per question: a batch of a
// hundred answers made a hundred closures (and, under tsx, named each with a defineProperty).
function allowedAnswer(c: ParsedCheck, decision: CheckDecision, grant: Permission | null, sources: readonly GrantSource[]): PermissionCheckAnswer {
  return { principalId: c.principalId, resourceType: c.resourceType, action: c.action, resourceId: c.resourceId, allowed: true, decision, grant, sources, missing: null };
}

function deniedAnswer(c: ParsedCheck, decision: CheckDecision, target: Target | null): PermissionCheckAnswer {
  return {
    principalId: c.principalId,
    resourceType: c.resourceType,
    action: c.action,
    resourceId: c.resourceId,
    allowed: false,
    decision,
    grant: null,
    sources: NO_SOURCES,
    missing: {
      resourceType: target?.resourceType ?? c.resourceType,
      action: target?.action ?? c.action,
      matchValue: target?.matchValue ?? null,
      groups: target?.groups ?? null,
    },
  };
}
