// Look up first, in the caller's organization; authorize second (README: "anything of another
// organization is NotFound"). Checking the permission first answers a foreign id with
// PermissionDeniedError, which tells an outsider the id is real and names what guards it; it
// also makes the answer depend on the caller's grants rather than on the object. Every mutation
// that takes an id goes through here: the caller must be an active member of a live org, the
// object is read scoped to that org (NotFoundError when absent or foreign), and only then is the
// permission on that object checked. test/foreign-ids.test.ts calls every mutation with an ID
// argument as a member of another organization and expects NotFoundError from each.
//
// The permission is decided by Authz.authorize, i.e. decideAction (src/domain/catalog/decide.ts):
// an object its family finds under read (findRule) is NotFound to a principal holding the action
// but not read on it — the same decision the check API answers with (READ_MISSING).

import type { Authz, SignedInAuthz } from "../authz/authz.js";
import type { Target } from "../domain/catalog/check.js";
import { NotFoundError } from "../errors.js";

export async function findThenAuthorize<T>(
  authz: SignedInAuthz,
  find: (orgId: string) => Promise<T>,
  permission: Target | ((found: T) => Target) | null,
  /** The error for an object the viewer cannot find (its family finds it under read); by default NotFound of its type, naming nothing of the object. */
  notFound?: (found: T) => Error,
): Promise<T> {
  await authz.requireMember();
  const found = await find(authz.viewer.orgId);
  if (permission) {
    const target = typeof permission === "function" ? permission(found) : permission;
    await authz.authorize(target, () => notFound?.(found) ?? new NotFoundError(target.resourceType, "requested"));
  }
  return found;
}
