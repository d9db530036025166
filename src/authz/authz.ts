import type { Viewer } from "../auth/authenticate.js";
import { checkPermission, listScope, type CompiledPrincipal, type ListScope, type Target } from "../domain/catalog/check.js";
import type { ConcreteAction, ConcreteResourceType } from "../domain/catalog/matrix.js";
import { NotFoundError, PermissionDeniedError, UnauthenticatedError } from "../errors.js";
import type { SqlRunner } from "../infra/db.js";
import { loadPrincipal } from "./principal.js";

type LoadedPrincipal = CompiledPrincipal & { roleIds: string[] };

/**
 * The request's authorization: the viewer's principal is loaded once per request (or per
 * subscription event) and every check after that is in memory (src/domain/catalog/check.ts).
 */
export class Authz {
  private principalPromise: Promise<LoadedPrincipal> | null = null;

  constructor(private readonly sql: SqlRunner, readonly viewer: Viewer | null) {}

  /** Forget the cached principal: the next check reads grants and membership anew. */
  refresh(): void {
    this.principalPromise = null;
  }

  principal(): Promise<LoadedPrincipal> {
    if (!this.viewer) return Promise.reject(new UnauthenticatedError());
    this.principalPromise ??= loadPrincipal(this.sql, this.viewer.orgId, this.viewer.userId);
    return this.principalPromise;
  }

  async can(target: Target): Promise<boolean> {
    if (!this.viewer) return false;
    return checkPermission(await this.principal(), target).allowed;
  }

  /**
   * Throws PermissionDeniedError naming the missing tuple. A deleted or unknown org, or an
   * inactive membership, reads as "not found": nothing of the org is visible any more.
   */
  async require(target: Target): Promise<void> {
    if (!this.viewer) throw new UnauthenticatedError();
    const result = checkPermission(await this.principal(), target);
    if (result.allowed) return;
    if (result.reason !== "no_grant") throw new NotFoundError("Organization", this.viewer.orgId);
    throw new PermissionDeniedError(result.missing);
  }

  /** The viewer must be an active member of a live org (any signed-in operation). */
  async requireMember(): Promise<LoadedPrincipal> {
    if (!this.viewer) throw new UnauthenticatedError();
    const p = await this.principal();
    if (!p.orgExists || p.orgDeleted || !p.membershipActive) throw new NotFoundError("Organization", this.viewer.orgId);
    return p;
  }

  async isSuperAdmin(): Promise<boolean> {
    const p = await this.requireMember();
    return p.isSuperAdmin;
  }

  /** Which rows of a family a list may return: see GrantIndex.scope and src/authz/list-filter.ts. */
  async scope(resourceType: ConcreteResourceType, action: ConcreteAction): Promise<ListScope> {
    const p = await this.requireMember();
    if (p.isSuperAdmin) return { unrestricted: true, patterns: [], groups: [] };
    return listScope(p, resourceType, action);
  }
}
