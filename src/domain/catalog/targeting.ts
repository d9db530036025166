// Which targeting modes each (resource_type, action) accepts, and why the others are refused —
// read off validatePermission itself, so the catalog can never say something the validator does
// not enforce (seed 004: the catalog carries "the targeting modes Validate accepts ... so the
// role-editor UI can disable invalid cells without duplicating the matrix").

import { ACTIONS, ANY, FAMILIES, isOwnerOnly, RESOURCE_TYPES } from "./matrix.js";
import { validatePermission, type PermissionInput, type PermissionIssueCode } from "./validate.js";

/** A permission uses exactly one of these (seed 004, "Targeting"). */
export type TargetingMode = "ANY_RESOURCE" | "NAME_PATTERN" | "AUTHZ_GROUP";
export const TARGETING_MODES: readonly TargetingMode[] = ["ANY_RESOURCE", "NAME_PATTERN", "AUTHZ_GROUP"];

/** A representative tuple of each mode: a glob that compiles to a real pattern, a valid group name. */
const SAMPLE: Record<TargetingMode, Pick<PermissionInput, "resourcePattern" | "authzGroup">> = {
  ANY_RESOURCE: {},
  NAME_PATTERN: { resourcePattern: "team-a-*" },
  AUTHZ_GROUP: { authzGroup: "env-prod" },
};

export interface TargetingRefusal {
  readonly code: PermissionIssueCode;
  readonly message: string;
}

export interface ModeSupport {
  readonly mode: TargetingMode;
  readonly accepted: boolean;
  /** Why the validator refuses this mode here (empty when accepted). */
  readonly refusals: readonly TargetingRefusal[];
}

export interface PairTargeting {
  readonly resourceType: string;
  readonly action: string;
  /** No grant reaches it, whatever its targeting: only the organization's owner. */
  readonly ownerOnly: boolean;
  readonly modes: readonly ModeSupport[];
}

/** The targeting modes of one pair of the matrix (wildcards included), as validatePermission judges them. */
export function targetingOf(resourceType: string, action: string): PairTargeting {
  return {
    resourceType,
    action,
    ownerOnly: isOwnerOnly(resourceType, action),
    modes: TARGETING_MODES.map((mode) => {
      const result = validatePermission({ resourceType, action, ...SAMPLE[mode] });
      return result.ok
        ? { mode, accepted: true, refusals: [] }
        : { mode, accepted: false, refusals: result.issues.map(({ code, message }) => ({ code, message })) };
    }),
  };
}

/**
 * Every pair a role may name: (*, *), (*, action) for every action, and for each family
 * (family, *) then its actions in catalog order.
 */
export const PERMISSION_TARGETING: readonly PairTargeting[] = Object.freeze([
  targetingOf(ANY, ANY),
  ...ACTIONS.map((a) => targetingOf(ANY, a)),
  ...RESOURCE_TYPES.flatMap((rt) => [targetingOf(rt, ANY), ...FAMILIES[rt].actions.map((a) => targetingOf(rt, a))]),
]);
