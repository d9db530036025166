import { permissionKey, type Permission } from "../domain/catalog/index.js";
import { compileGrants, compilePrincipal, type CompiledPrincipal } from "../domain/catalog/check.js";
import type { SqlRunner } from "../infra/db.js";

/** A user's compiled principal in one org, with the roles they hold there. */
export type LoadedPrincipal = CompiledPrincipal & { roleIds: string[] };

const ADMIN_GRANT: Permission = { resourceType: "*", action: "*", resourcePattern: "", authzGroup: "" };

/**
 * The roles a user holds in an org right now: the single direct assignment plus every role
 * attached to a binding whose (identity source, group key) the user's synced groups match.
 * The same union decides role membership for the gate (roleMembersSql below).
 */
const HELD_ROLE_IDS_SQL = `
  SELECT a."roleId" FROM role_assignments a WHERE a."orgId" = $1 AND a."userId" = $2
  UNION
  SELECT br."roleId"
    FROM user_identity_groups g
    JOIN identity_group_bindings b ON b."identitySourceId" = g."identitySourceId" AND b."groupKey" = g."groupKey"
    JOIN identity_group_binding_roles br ON br."bindingId" = b.id
   WHERE b."orgId" = $1 AND g."userId" = $2`;

interface PrincipalRow {
  orgExists: boolean;
  orgDeleted: boolean;
  isOwner: boolean;
  membershipActive: boolean;
  isSuperAdmin: boolean;
  roleIds: string[] | null;
  grants: Permission[] | null;
}

/** Everything a permission check needs about one user in one org, in one round trip. */
export async function loadPrincipal(sql: SqlRunner, orgId: string, userId: string): Promise<LoadedPrincipal> {
  const [row] = await sql.query<PrincipalRow>(
    `WITH held AS (${HELD_ROLE_IDS_SQL})
     SELECT o.id IS NOT NULL AS "orgExists",
            o."deletedAt" IS NOT NULL AS "orgDeleted",
            COALESCE(o."ownerUserId" = $2, false) AS "isOwner",
            (m.id IS NOT NULL AND m."deactivatedAt" IS NULL) AS "membershipActive",
            COALESCE(m."isSuperAdmin", false) AS "isSuperAdmin",
            (SELECT array_agg("roleId") FROM held) AS "roleIds",
            (SELECT json_agg(DISTINCT jsonb_build_object(
                      'resourceType', p."resourceType", 'action', p.action,
                      'resourcePattern', p."resourcePattern", 'authzGroup', p."authzGroup"))
               FROM role_permissions p WHERE p."roleId" IN (SELECT "roleId" FROM held)) AS grants
       FROM (SELECT 1) AS one
       LEFT JOIN organizations o ON o.id = $1
       LEFT JOIN memberships m ON m."orgId" = $1 AND m."userId" = $2`,
    [orgId, userId],
  );
  const r = row!;
  const grants = r.grants ?? [];
  // Seed 004, Notes: a personal organization's owner is admin implicitly.
  if (r.isOwner) grants.push(ADMIN_GRANT);
  return {
    ...compilePrincipal({
      orgExists: r.orgExists,
      orgDeleted: r.orgDeleted,
      membershipActive: r.membershipActive,
      isSuperAdmin: r.isSuperAdmin,
      isOwner: r.isOwner,
      grants,
    }),
    roleIds: withOwnerRole(r.roleIds ?? [], r.isOwner),
  };
}

/** A personal organization's owner holds admin (OWNER_ROLE_ID) implicitly: their role list says so too. */
const withOwnerRole = (roleIds: string[], isOwner: boolean): string[] =>
  isOwner && !roleIds.includes(OWNER_ROLE_ID) ? [...roleIds, OWNER_ROLE_ID].sort() : roleIds;

/**
 * The system role a personal organization's owner holds implicitly (seed 004, Notes: "the owner
 * gets the admin role implicitly"); the id is services/system-roles.ts's systemRoleId("admin").
 */
export const OWNER_ROLE_ID = "system:admin";

/** One way an active member holds a role: a direct assignment, an SSO binding, or ownership. */
export interface RoleHolding {
  roleId: string;
  userId: string;
  kind: "DIRECT" | "SSO_BINDING" | "OWNER";
  bindingId: string | null;
  identitySourceId: string | null;
  identitySourceName: string | null;
  groupKey: string | null;
}

/**
 * Who holds each role in an org and how — the one answer every view of a role's people reads
 * (Role.effectiveMembers, a role reservation's current members, a gate's eligible approvers,
 * approval-request reviewers and quorum), and the same union loadPrincipal grants from: direct
 * assignment, SSO binding, and the personal organization's owner for admin. Active members of a
 * live organization only. Seed 000: membership is read when the gate is evaluated.
 */
const ROLE_HOLDINGS_SQL = `
  SELECT x.* FROM (
    SELECT a."roleId", a."userId", 'DIRECT' AS kind, NULL::text AS "bindingId", NULL::text AS "identitySourceId",
           NULL::text AS "identitySourceName", NULL::text AS "groupKey"
      FROM role_assignments a WHERE a."orgId" = $1 AND a."roleId" = ANY($2::text[])
    UNION ALL
    SELECT br."roleId", g."userId", 'SSO_BINDING', b.id, s.id, s.name, b."groupKey"
      FROM identity_group_binding_roles br
      JOIN identity_group_bindings b ON b.id = br."bindingId" AND b."orgId" = $1
      JOIN identity_sources s ON s.id = b."identitySourceId"
      JOIN user_identity_groups g ON g."identitySourceId" = b."identitySourceId" AND g."groupKey" = b."groupKey"
     WHERE br."roleId" = ANY($2::text[])
    UNION ALL
    SELECT '${OWNER_ROLE_ID}', o."ownerUserId", 'OWNER', NULL, NULL, NULL, NULL
      FROM organizations o
     WHERE o.id = $1 AND o."ownerUserId" IS NOT NULL AND '${OWNER_ROLE_ID}' = ANY($2::text[])
  ) x
  JOIN organizations live_o ON live_o.id = $1 AND live_o."deletedAt" IS NULL
  JOIN memberships m ON m."orgId" = $1 AND m."userId" = x."userId" AND m."deactivatedAt" IS NULL
  ORDER BY x."roleId", x."userId", x.kind, x."identitySourceName", x."groupKey"`;

/** Every holding of these roles in the org (see ROLE_HOLDINGS_SQL). */
export async function roleHoldings(sql: SqlRunner, orgId: string, roleIds: readonly string[]): Promise<RoleHolding[]> {
  if (roleIds.length === 0) return [];
  return sql.query<RoleHolding>(ROLE_HOLDINGS_SQL, [orgId, [...roleIds]], { prepare: true });
}

/**
 * Current, active members of each role in an org (direct assignment, SSO binding, or the personal
 * organization's owner for admin): roleHoldings, one user once per role.
 */
export async function roleMembers(sql: SqlRunner, orgId: string, roleIds: readonly string[]): Promise<Map<string, string[]>> {
  const members = new Map<string, string[]>(roleIds.map((id) => [id, []]));
  for (const { roleId, userId } of await roleHoldings(sql, orgId, roleIds)) {
    const list = members.get(roleId);
    if (list && list[list.length - 1] !== userId) list.push(userId);
  }
  return members;
}

interface BatchRow {
  org: { exists: boolean; deleted: boolean; ownerUserId: string | null };
  users: { userId: string; membershipActive: boolean; isSuperAdmin: boolean; roleIds: string[] | null }[];
  roleGrants: Record<string, Permission[]> | null;
}

/**
 * loadPrincipal for many users in one round trip, with the same semantics (the same held-role
 * union, the same owner rule; test/gate/principals.test.ts checks them against each other).
 * The gate needs it: an evaluation checks every approver, and a live-status event re-authorizes
 * every subscriber, so one query per user would grow with the audience. Grants are read once
 * per role, and users holding the same roles share one compiled grant index.
 */
export async function loadPrincipals(
  sql: SqlRunner,
  orgId: string,
  userIds: readonly string[],
  /** Also load whoever approved these plans (the live gate reads them with its viewers, in one trip). */
  approversOf: readonly string[] = [],
  /** Users not to load (principals the caller already holds, e.g. in an EpochCache). */
  except: readonly string[] = [],
): Promise<Map<string, LoadedPrincipal>> {
  const unique = [...new Set(userIds)];
  const out = new Map<string, LoadedPrincipal>();
  if (unique.length === 0 && approversOf.length === 0) return out;
  const [row] = await sql.query<BatchRow>(
    `WITH ids AS (
            (SELECT unnest($2::text[]) AS "userId"
             UNION
             SELECT ap."userId" FROM approvals ap WHERE ap."planId" = ANY($3::text[]) AND ap."withdrawnAt" IS NULL)
            EXCEPT SELECT unnest($4::text[])),
          held AS (
            SELECT a."userId", a."roleId" FROM role_assignments a WHERE a."orgId" = $1 AND a."userId" IN (SELECT "userId" FROM ids)
            UNION
            SELECT g."userId", br."roleId"
              FROM user_identity_groups g
              JOIN identity_group_bindings b ON b."identitySourceId" = g."identitySourceId" AND b."groupKey" = g."groupKey"
              JOIN identity_group_binding_roles br ON br."bindingId" = b.id
             WHERE b."orgId" = $1 AND g."userId" IN (SELECT "userId" FROM ids)),
          per_role AS (
            SELECT p."roleId", json_agg(DISTINCT jsonb_build_object(
                     'resourceType', p."resourceType", 'action', p.action,
                     'resourcePattern', p."resourcePattern", 'authzGroup', p."authzGroup")) AS grants
              FROM role_permissions p WHERE p."roleId" IN (SELECT "roleId" FROM held) GROUP BY p."roleId"),
          -- Grouped once, joined below: a per-user subquery over held would be users × rows.
          held_by_user AS (
            SELECT "userId", json_agg("roleId" ORDER BY "roleId") AS "roleIds" FROM held GROUP BY "userId")
     SELECT json_build_object('exists', o.id IS NOT NULL, 'deleted', o."deletedAt" IS NOT NULL, 'ownerUserId', o."ownerUserId") AS org,
            (SELECT json_agg(json_build_object(
                      'userId', w."userId",
                      'membershipActive', (m.id IS NOT NULL AND m."deactivatedAt" IS NULL),
                      'isSuperAdmin', COALESCE(m."isSuperAdmin", false),
                      'roleIds', hu."roleIds"))
               FROM ids w
               LEFT JOIN memberships m ON m."orgId" = $1 AND m."userId" = w."userId"
               LEFT JOIN held_by_user hu ON hu."userId" = w."userId") AS users,
            (SELECT json_object_agg("roleId", grants) FROM per_role) AS "roleGrants"
       FROM (SELECT 1) AS one LEFT JOIN organizations o ON o.id = $1`,
    [orgId, unique, approversOf, except],
    { prepare: true },
  );
  const r = row!;
  const roleGrants = r.roleGrants ?? {};
  // Users holding the same roles (and owner flag) share grants and one compiled index.
  const compiled = new Map<string, { grants: Permission[]; index: CompiledPrincipal["index"] }>();
  for (const u of r.users ?? []) {
    const isOwner = r.org.ownerUserId === u.userId;
    const roleIds = withOwnerRole(u.roleIds ?? [], isOwner);
    const key = `${isOwner ? 1 : 0}\u0000${roleIds.join("\u0000")}`;
    let shared = compiled.get(key);
    if (!shared) {
      const seen = new Set<string>();
      const grants: Permission[] = [];
      for (const id of roleIds) {
        for (const g of roleGrants[id] ?? []) {
          const k = permissionKey(g);
          if (!seen.has(k)) (seen.add(k), grants.push(g));
        }
      }
      // Seed 004, Notes: a personal organization's owner is admin implicitly.
      if (isOwner) grants.push(ADMIN_GRANT);
      shared = { grants, index: compileGrants(grants) };
      compiled.set(key, shared);
    }
    out.set(u.userId, {
      orgExists: r.org.exists,
      orgDeleted: r.org.deleted,
      membershipActive: u.membershipActive,
      isSuperAdmin: u.isSuperAdmin,
      isOwner,
      grants: shared.grants,
      index: shared.index,
      roleIds,
    });
  }
  return out;
}

/**
 * Rows kept from one read to the next while the authz epoch stays the same: principals, and the
 * users and roles a gate evaluation names (the live hub, src/services/gate-live.ts).
 *
 * The epoch (table authz_epoch, bumped by deferred triggers in the authz_epoch migration) grows
 * at the commit of every transaction that changes what loadPrincipal reads, or a user or role
 * row, in commit order. A row loaded AFTER epoch E was read reflects every change committed up
 * to E (and maybe more); so whenever a later read still finds E, no such change has committed
 * since, and the row is current. Any change, in any organization, empties the cache at the next
 * read. The caller reads the epoch, calls `at` with it, loads what is missing, then `keep`s it.
 */
export class EpochCache<V> {
  private epoch = Number.NaN;
  private readonly byId = new Map<string, V>();
  /** Loads under way for the current epoch (`loadAt`), by id. */
  private readonly loading = new Map<string, Promise<V>>();

  constructor(private readonly maxEntries = 10_000) {}

  /** The rows that are current at `epoch` (none if it is not the epoch they were kept under). */
  at(epoch: number): ReadonlyMap<string, V> {
    if (epoch !== this.epoch) {
      this.byId.clear();
      this.loading.clear();
      this.epoch = epoch;
    }
    return this.byId;
  }

  /**
   * The row kept for `id` at `epoch`, or the load under way for it at that epoch, or a new load
   * (`load`, started after `epoch` was read), kept once it resolves. A load started for the same
   * epoch is as current as a row kept under it, so callers arriving together share one instead
   * of each loading and holding its own copy (1,000 subscribers of 100 users opened at once
   * loaded ~200 principals of ~25 KiB each: docs/benchmarks.md).
   */
  loadAt(epoch: number, id: string, load: () => Promise<V>): Promise<V> {
    const hit = this.at(epoch).get(id);
    if (hit !== undefined) return Promise.resolve(hit);
    const under = this.loading.get(id);
    if (under) return under;
    const loaded = load().then(
      (value) => {
        if (this.loading.get(id) === loaded) this.loading.delete(id);
        this.keep(epoch, [[id, value]]);
        return value;
      },
      (error: unknown) => {
        if (this.loading.get(id) === loaded) this.loading.delete(id);
        throw error;
      },
    );
    this.loading.set(id, loaded);
    return loaded;
  }

  /** Keeps rows loaded after `epoch` was read; ignored if the cache has moved on since. */
  keep(epoch: number, loaded: Iterable<readonly [string, V]>): void {
    if (epoch !== this.epoch) return;
    for (const [id, value] of loaded) {
      if (this.byId.size >= this.maxEntries && !this.byId.has(id)) return;
      this.byId.set(id, value);
    }
  }
}

/** Principals kept across requests, by organization and user (app.ts holds one per process). */
export type PrincipalCache = EpochCache<LoadedPrincipal>;

export const principalKey = (orgId: string, userId: string) => `${orgId}\u0000${userId}`;

/** The authz epoch now (see EpochCache). */
export const AUTHZ_EPOCH_SQL = `(SELECT "epoch" FROM "authz_epoch" WHERE "id" = 1)::float8`;
