// What the live gate keeps between rounds, per organization with subscribers: principals, and
// the user and role rows evaluations name. Each is kept only while the authz epoch read with the
// round's version stays the same (EpochCache: no authz change has committed since); user and
// role rows bump the authz epoch too, so a rename shows at the next round.

import { EpochCache, type LoadedPrincipal } from "../../authz/principal.js";
import type { Database } from "../../infra/db.js";
import { loadPeople, type People, type PeopleSource, type RoleRow, type UserRow } from "../gate.js";

export interface OrgCaches {
  principals: EpochCache<LoadedPrincipal>;
  users: EpochCache<UserRow>;
  roles: EpochCache<RoleRow>;
}

export class OrgCachesStore {
  private readonly caches = new Map<string, OrgCaches>();

  of(orgId: string): OrgCaches {
    let caches = this.caches.get(orgId);
    if (!caches) this.caches.set(orgId, (caches = { principals: new EpochCache(), users: new EpochCache(), roles: new EpochCache() }));
    return caches;
  }

  /** Forgets an organization nobody on this process watches any more. */
  drop(orgId: string): void {
    this.caches.delete(orgId);
  }
}

/**
 * The names an evaluation mentions, from the round's caches where they are current at `epoch`,
 * loading only the rest, in one read.
 */
export function cachedPeople(sql: Database["sql"], caches: OrgCaches, epoch: number, loaded: (count: number) => void): PeopleSource {
  return async (userIds, roleIds) => {
    const users = caches.users.at(epoch);
    const roles = caches.roles.at(epoch);
    const missingUsers = [...userIds].filter((id) => !users.has(id));
    const missingRoles = [...roleIds].filter((id) => !roles.has(id));
    if (missingUsers.length === 0 && missingRoles.length === 0) return mergePeople(users, roles, null, userIds, roleIds);
    const fresh = await loadPeople(sql, missingUsers, missingRoles);
    loaded(fresh.users.size + fresh.roles.size);
    caches.users.keep(epoch, fresh.users);
    caches.roles.keep(epoch, fresh.roles);
    // From what was read first: a full cache keeps nothing more.
    return mergePeople(users, roles, fresh, userIds, roleIds);
  };
}

/** Exactly the requested users and roles that exist, from the cache and a fresh read. */
function mergePeople(
  users: ReadonlyMap<string, UserRow>,
  roles: ReadonlyMap<string, RoleRow>,
  fresh: People | null,
  userIds: ReadonlySet<string>,
  roleIds: ReadonlySet<string>,
): People {
  const pick = <V>(ids: ReadonlySet<string>, cached: ReadonlyMap<string, V>, read: ReadonlyMap<string, V> | undefined) => {
    const out = new Map<string, V>();
    for (const id of ids) {
      const row = read?.get(id) ?? cached.get(id);
      if (row !== undefined) out.set(id, row);
    }
    return out;
  };
  return { users: pick(userIds, users, fresh?.users), roles: pick(roleIds, roles, fresh?.roles) };
}
