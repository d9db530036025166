// Validation at every persistence boundary (role creation, role-permission upsert, stack
// groups, role names). Seed: seeds/004 "RolePermission.Validate() runs at every persistence
// boundary … so junk pairs never reach the database".
//
// Every function here returns issues instead of throwing: the GraphQL layer turns them into
// a ValidationError naming the field.

import {
  ANY,
  familyOf,
  isAction,
  isOwnerOnly,
  isResourceType,
  isValidPermission,
  permissionKey,
  type Permission,
} from "./matrix.js";
import { compileResourcePattern } from "./pattern.js";
import { SYSTEM_ROLE_KEYS } from "./system-roles.js";
import { isStorableText } from "../text.js";

export type { Permission } from "./matrix.js";

// ── Limits (seed: domain.Max…) ───────────────────────────────────────────────────────

export const MAX_AUTHZ_GROUPS_PER_STACK = 20;
export const MAX_CUSTOM_ROLE_PERMISSIONS = 50;
export const MAX_ROLES_PER_BINDING = 5;
/** Longest user glob, in characters. Resource names are short; this bounds matcher cost. */
export const MAX_RESOURCE_PATTERN_LENGTH = 256;
export const MAX_AUTHZ_GROUP_NAME_LENGTH = 63;
export const MAX_ROLE_NAME_LENGTH = 100;

// ── Issues ───────────────────────────────────────────────────────────────────────────

export type PermissionField = "resourceType" | "action" | "resourcePattern" | "authzGroup";

export type PermissionIssueCode =
  | "unknown_resource_type"
  | "unknown_action"
  | "invalid_pair"
  | "invalid_pattern"
  | "pattern_too_long"
  | "pattern_on_wildcard_type"
  | "pattern_not_supported"
  | "invalid_group_name"
  | "group_not_supported"
  | "group_with_pattern"
  | "group_on_create"
  | "owner_only";

export interface PermissionIssue {
  readonly field: PermissionField;
  readonly code: PermissionIssueCode;
  readonly message: string;
}

export interface PermissionInput {
  readonly resourceType: string;
  readonly action: string;
  /** The USER glob (`*`, `?`); compiled here. Null, '' and '*' all mean any resource. */
  readonly resourcePattern?: string | null;
  readonly authzGroup?: string | null;
}

export type PermissionResult =
  | { readonly ok: true; readonly permission: Permission }
  | { readonly ok: false; readonly issues: readonly PermissionIssue[] };

// Names and patterns are identifiers: no control characters, no NUL, no lone surrogate
// (the one rule, src/domain/text.ts); rejected here rather than at the INSERT.
const unstorable = (s: string) => !isStorableText(s, "identifier");

function codePointLength(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/**
 * Validate one tuple and canonicalise it. Rejects, per the seed: unknown values, pairs
 * outside the matrix, a pattern when resource_type = '*' or on member/role/identity_source
 * ("such a grant could never match anything"), and an authz group outside the families that
 * accept one, alongside a pattern, or on create.
 *
 * Decisions where the seed is silent (docs/permissions.md):
 * - Patterns are judged after compiling: the glob `*` is the any-resource sentinel, so
 *   `(member, read, *)` is accepted as the untargeted grant it means.
 * - A group with action '*' is rejected like a group on create: the wildcard includes
 *   create, so it would authorize creating a stack of any name through a group.
 */
export function validatePermission(input: PermissionInput): PermissionResult {
  const issues: PermissionIssue[] = [];
  const resourceType = typeof input.resourceType === "string" ? input.resourceType : "";
  const action = typeof input.action === "string" ? input.action : "";
  const glob = typeof input.resourcePattern === "string" ? input.resourcePattern : "";
  const authzGroup = typeof input.authzGroup === "string" ? input.authzGroup : "";

  const typeKnown = isResourceType(resourceType);
  const actionKnown = isAction(action);
  if (!typeKnown) {
    issues.push({
      field: "resourceType",
      code: "unknown_resource_type",
      message: `Unknown resource type ${JSON.stringify(resourceType)}.`,
    });
  }
  if (!actionKnown) {
    issues.push({ field: "action", code: "unknown_action", message: `Unknown action ${JSON.stringify(action)}.` });
  }
  if (typeKnown && actionKnown && !isValidPermission(resourceType, action)) {
    issues.push({
      field: "action",
      code: "invalid_pair",
      message: `Action ${JSON.stringify(action)} does not exist on resource type ${JSON.stringify(resourceType)}.`,
    });
  }
  // No grant reaches an owner-only action (check.ts), so a tuple naming it could never match.
  if (isOwnerOnly(resourceType, action)) {
    issues.push({
      field: "action",
      code: "owner_only",
      message: `(${resourceType}, ${action}) is owner-only: no role can grant it.`,
    });
  }

  // ── Name pattern ──
  let resourcePattern = "";
  if (unstorable(glob)) {
    issues.push({
      field: "resourcePattern",
      code: "invalid_pattern",
      message: "The pattern contains a control character or an invalid character.",
    });
  } else if (codePointLength(glob) > MAX_RESOURCE_PATTERN_LENGTH) {
    issues.push({
      field: "resourcePattern",
      code: "pattern_too_long",
      message: `The pattern is longer than ${MAX_RESOURCE_PATTERN_LENGTH} characters.`,
    });
  } else {
    resourcePattern = compileResourcePattern(glob);
  }
  const family = familyOf(resourceType);
  if (resourcePattern !== "") {
    if (resourceType === ANY) {
      issues.push({
        field: "resourcePattern",
        code: "pattern_on_wildcard_type",
        message: "A name pattern needs a concrete resource type: names of different types are unrelated.",
      });
    } else if (family !== undefined && !family.supportsPattern) {
      issues.push({
        field: "resourcePattern",
        code: "pattern_not_supported",
        message: `Resource type ${JSON.stringify(resourceType)} has no per-resource names, so a pattern could never match.`,
      });
    }
  }

  // ── Authz group ── seed: "Authz groups" (exact match only, never on create).
  if (authzGroup !== "") {
    const name = validateAuthzGroupName(authzGroup);
    if (!name.ok) {
      issues.push({ field: "authzGroup", code: "invalid_group_name", message: name.message });
    }
    if (typeKnown && (family === undefined || !family.supportsAuthzGroup)) {
      issues.push({
        field: "authzGroup",
        code: "group_not_supported",
        message: `Resource type ${JSON.stringify(resourceType)} cannot be targeted by an authz group.`,
      });
    }
    if (resourcePattern !== "") {
      issues.push({
        field: "authzGroup",
        code: "group_with_pattern",
        message: "A permission uses at most one targeting mode: a name pattern or an authz group, not both.",
      });
    }
    if (action === "create" || action === ANY) {
      issues.push({
        field: "authzGroup",
        code: "group_on_create",
        message:
          action === "create"
            ? "A group cannot target create: the name of a new resource is chosen under name-axis authority."
            : "A group cannot target action '*': the wildcard includes create, which a group would authorize for any name.",
      });
    }
  }

  if (issues.length > 0) return { ok: false, issues };
  return {
    ok: true,
    permission: {
      // Narrowed by the checks above: both are known values here.
      resourceType: resourceType as Permission["resourceType"],
      action: action as Permission["action"],
      resourcePattern,
      authzGroup,
    },
  };
}

// ── Authz group names ────────────────────────────────────────────────────────────────

/**
 * The label-key charset (seed: "free-form group names (label-key charset)"): ASCII letters,
 * digits, `-`, `_`, `.`, `/`; 1..63 characters; starting and ending with a letter or digit
 * (as Kubernetes label keys, so `env-prod` and `team/payments` are fine and `-x`, `x/` are
 * not). Case is kept and compared exactly: `Env-Prod` and `env-prod` are different groups.
 */
const AUTHZ_GROUP_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$/;

export type NameCheck = { readonly ok: true } | { readonly ok: false; readonly message: string };

export function validateAuthzGroupName(name: string): NameCheck {
  if (typeof name !== "string" || name.length === 0) return { ok: false, message: "An authz group name is required." };
  if (name.length > MAX_AUTHZ_GROUP_NAME_LENGTH) {
    return { ok: false, message: `An authz group name is at most ${MAX_AUTHZ_GROUP_NAME_LENGTH} characters.` };
  }
  if (!AUTHZ_GROUP_NAME.test(name)) {
    return {
      ok: false,
      message:
        "An authz group name uses letters, digits, '-', '_', '.', '/' and starts and ends with a letter or digit.",
    };
  }
  return { ok: true };
}

export interface GroupListIssue {
  readonly field: "authzGroups";
  /** The offending entry, or null for the list as a whole. */
  readonly index: number | null;
  readonly code: "too_many_groups" | "duplicate_group" | "invalid_group_name";
  readonly message: string;
}

export type GroupListResult =
  | { readonly ok: true; readonly groups: readonly string[] }
  | { readonly ok: false; readonly issues: readonly GroupListIssue[] };

/**
 * A stack's authz groups: at most MAX_AUTHZ_GROUPS_PER_STACK, each a valid name, no
 * duplicates. Duplicates are rejected, not collapsed: the list is small and user-typed,
 * and a repeated group is more likely a typo of another than a request for the same one.
 */
export function validateStackAuthzGroups(groups: readonly string[]): GroupListResult {
  const issues: GroupListIssue[] = [];
  if (groups.length > MAX_AUTHZ_GROUPS_PER_STACK) {
    issues.push({
      field: "authzGroups",
      index: null,
      code: "too_many_groups",
      message: `A stack carries at most ${MAX_AUTHZ_GROUPS_PER_STACK} authz groups.`,
    });
  }
  const seen = new Set<string>();
  groups.forEach((group, index) => {
    const check = validateAuthzGroupName(group);
    if (!check.ok) {
      issues.push({ field: "authzGroups", index, code: "invalid_group_name", message: check.message });
    } else if (seen.has(group)) {
      issues.push({
        field: "authzGroups",
        index,
        code: "duplicate_group",
        message: `Authz group ${JSON.stringify(group)} is listed twice.`,
      });
    }
    seen.add(group);
  });
  return issues.length > 0 ? { ok: false, issues } : { ok: true, groups: [...groups] };
}

// ── Custom roles ─────────────────────────────────────────────────────────────────────

export interface RolePermissionsIssue {
  /** The offending entry, or null for the list as a whole. */
  readonly index: number | null;
  readonly field: PermissionField | "permissions";
  readonly code: PermissionIssueCode | "too_few_permissions" | "too_many_permissions";
  readonly message: string;
}

export type RolePermissionsResult =
  | { readonly ok: true; readonly permissions: readonly Permission[] }
  | { readonly ok: false; readonly issues: readonly RolePermissionsIssue[] };

/**
 * Seed: "Each custom role bundles between 1 and MaxCustomRolePermissions (50) tuples, all
 * drawn from the same validity matrix". Duplicates are collapsed after canonicalisation
 * (`team-*` and `team-**` are one grant) and the limit counts distinct tuples — what the
 * role actually bundles; the table's unique key would collapse them anyway. First
 * occurrence order is kept.
 */
export function validateCustomRolePermissions(list: readonly PermissionInput[]): RolePermissionsResult {
  const issues: RolePermissionsIssue[] = [];
  const distinct = new Map<string, Permission>();
  list.forEach((input, index) => {
    const result = validatePermission(input);
    if (!result.ok) {
      for (const issue of result.issues) issues.push({ index, ...issue });
      return;
    }
    const key = permissionKey(result.permission);
    if (!distinct.has(key)) distinct.set(key, result.permission);
  });
  if (list.length === 0) {
    issues.push({
      index: null,
      field: "permissions",
      code: "too_few_permissions",
      message: "A custom role bundles at least one permission.",
    });
  }
  if (distinct.size > MAX_CUSTOM_ROLE_PERMISSIONS) {
    issues.push({
      index: null,
      field: "permissions",
      code: "too_many_permissions",
      message: `A custom role bundles at most ${MAX_CUSTOM_ROLE_PERMISSIONS} distinct permissions (got ${distinct.size}).`,
    });
  }
  return issues.length > 0 ? { ok: false, issues } : { ok: true, permissions: [...distinct.values()] };
}

export interface RoleNameIssue {
  readonly field: "name";
  readonly code: "name_required" | "name_too_long" | "invalid_name" | "name_yields_empty_key" | "reserved_key";
  readonly message: string;
}

export type RoleKeyResult =
  | { readonly ok: true; readonly key: string; readonly name: string }
  | { readonly ok: false; readonly issues: readonly RoleNameIssue[] };

/** Latin letters NFKD does not decompose into a base letter plus marks. */
const LATIN_FOLDS: Readonly<Record<string, string>> = {
  ß: "ss",
  æ: "ae",
  œ: "oe",
  ø: "o",
  đ: "d",
  ð: "d",
  ł: "l",
  þ: "th",
  ı: "i",
};

/**
 * The seed's GenerateID: a custom role's immutable key, derived from its name. The name is
 * trimmed and must be 1..100 characters without control characters. The key is ASCII only:
 * accents are folded (`Équipe Paie` → `equipe-paie`), every other run of non-alphanumerics
 * becomes one `-`, and leading/trailing `-` are dropped. ASCII because keys are read in logs
 * and policies, where a Cyrillic `а` in `аdmin` must not pass for `admin`. A name that
 * yields an empty key (`!!!`, `Команда`) is rejected, and so is a key a system role owns.
 */
export function roleKeyFromName(rawName: string): RoleKeyResult {
  const name = typeof rawName === "string" ? rawName.trim() : "";
  const fail = (code: RoleNameIssue["code"], message: string): RoleKeyResult => ({
    ok: false,
    issues: [{ field: "name", code, message }],
  });
  if (name.length === 0) return fail("name_required", "A role name is required.");
  if (codePointLength(name) > MAX_ROLE_NAME_LENGTH) {
    return fail("name_too_long", `A role name is at most ${MAX_ROLE_NAME_LENGTH} characters.`);
  }
  if (unstorable(name)) return fail("invalid_name", "A role name cannot contain control characters.");

  const folded = name
    .normalize("NFKD")
    .replace(/\p{M}+/gu, "")
    .toLowerCase()
    .replace(/[ßæœøđðłþı]/g, (c) => LATIN_FOLDS[c] ?? c);
  const key = folded
    .replace(/[^a-z0-9]+/g, "-")
    .slice(0, MAX_ROLE_NAME_LENGTH) // NFKD can lengthen a name; the key stays bounded
    .replace(/^-+|-+$/g, "");
  if (key.length === 0) {
    return fail("name_yields_empty_key", "A role name needs at least one Latin letter or digit to derive its key.");
  }
  if (SYSTEM_ROLE_KEYS.has(key)) {
    return fail("reserved_key", `The key ${JSON.stringify(key)} belongs to a built-in role; choose another name.`);
  }
  return { ok: true, key, name };
}
