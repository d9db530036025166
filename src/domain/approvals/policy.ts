import { z } from "zod";
// The one canonical JSON the gateway hashes arguments with; pure, no gateway state.
import { canonicalJson, sha256Hex } from "../canonical.js";

/**
 * Approval policies: which humans may review which tools in which environments (seed 003,
 * "Approval policies"). They never authorize execution — Cedar and the gateway do that — they
 * only decide who may vote and when the votes add up to an approval.
 */

export type ApprovalRule = {
  /** Unique across the workspace's policies, so a snapshot, a vote tally or an audit line can name a rule alone. */
  id: string;
  effect: "allow" | "deny";
  /** Tool-name globs; `*` (any run of characters, including none) is the only wildcard. */
  tools: string[];
  /** Exact environment names, or `"*"` for every environment. */
  environments: string[];
  /** Role ids whose members the rule selects. */
  roles: string[];
  /** User ids the rule names. */
  userIds: string[];
  /** Allow rules only: distinct eligible approvals needed, 1..10, default 1. */
  count?: number;
};

export type ApprovalPolicy = { id: string; revision: number; enabled: boolean; rules: ApprovalRule[] };

export type ValidationIssue = { path: (string | number)[]; message: string };

/** A rule as it matched one request, frozen with the policy id and revision it came from. */
export type MatchedRule = Readonly<
  {
    policyId: string;
    policyRevision: number;
    ruleId: string;
    tools: readonly string[];
    environments: readonly string[];
    roles: readonly string[];
    userIds: readonly string[];
  } & ({ effect: "allow"; count: number } | { effect: "deny"; excludesEveryone?: true })
>;

export type RuleSnapshot = readonly MatchedRule[];

export type Principal = { userId: string; roleIds: readonly string[] };

export type Vote = { userId: string; roleIds: readonly string[]; decision: "approve" | "deny" };

export const MAX_RULES_PER_POLICY = 100;
export const MAX_APPROVAL_COUNT = 10;

export class ApprovalPolicyError extends Error {
  override readonly name = "ApprovalPolicyError";
}

// ─── validation ───────────────────────────────────────────────────────────────────────────────

const ruleId = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "expected 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit");
const toolGlob = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[^\s?[\]{}!]+$/, "expected a tool name or glob: no whitespace, and * is the only wildcard");
const environmentName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^\S+$/, "expected an environment name without whitespace")
  .refine((name) => name === "*" || !name.includes("*"), 'environments are exact names; use "*" alone for every environment');
const principalRef = z.string().min(1).max(128);

const ruleSchema = z
  .strictObject({
    id: ruleId,
    effect: z.enum(["allow", "deny"]),
    tools: z.array(toolGlob).min(1).max(100),
    environments: z.array(environmentName).min(1).max(50),
    roles: z.array(principalRef).max(100).default([]),
    userIds: z.array(principalRef).max(100).default([]),
    count: z.int().min(1).max(MAX_APPROVAL_COUNT).optional(),
  })
  .superRefine((rule, ctx) => {
    if (rule.effect === "deny" && rule.count !== undefined) {
      ctx.addIssue({ code: "custom", path: ["count"], message: "count applies to allow rules only" });
    }
    if (rule.roles.length === 0 && rule.userIds.length === 0) {
      ctx.addIssue({ code: "custom", path: ["roles"], message: "a rule must select at least one role or name at least one user" });
    }
  })
  .transform((rule): ApprovalRule => (rule.effect === "allow" ? { ...rule, count: rule.count ?? 1 } : rule));

const rulesSchema = z
  .array(ruleSchema)
  .max(MAX_RULES_PER_POLICY)
  .superRefine((rules, ctx) => {
    const seen = new Set<string>();
    rules.forEach((rule, index) => {
      if (seen.has(rule.id)) ctx.addIssue({ code: "custom", path: [index, "id"], message: `duplicate rule id ${rule.id}` });
      seen.add(rule.id);
    });
  });

/** Validates one policy's rules. Paths start at the rule's index: `[2, "tools", 0]`. Allow counts come back defaulted. */
export function validateApprovalRules(rules: unknown): { ok: true; rules: ApprovalRule[] } | { ok: false; issues: ValidationIssue[] } {
  const parsed = rulesSchema.safeParse(rules);
  if (parsed.success) return { ok: true, rules: parsed.data };
  return {
    ok: false,
    issues: parsed.error.issues.map((issue) => ({
      path: issue.path.map((segment) => (typeof segment === "number" ? segment : String(segment))),
      message: issue.message,
    })),
  };
}

/**
 * Rule ids are unique across all of a workspace's policies (enabled or not — a disabled policy
 * may be enabled later). Paths start at the policy's index: `[1, "rules", 0, "id"]`.
 */
export function validateApprovalPolicySet(policies: readonly ApprovalPolicy[]): ValidationIssue[] {
  const owner = new Map<string, string>();
  const issues: ValidationIssue[] = [];
  policies.forEach((policy, p) =>
    policy.rules.forEach((rule, r) => {
      const other = owner.get(rule.id);
      if (other !== undefined && other !== policy.id) {
        issues.push({ path: [p, "rules", r, "id"], message: `rule id ${rule.id} is already used by policy ${other}` });
      }
      owner.set(rule.id, policy.id);
    }),
  );
  return issues;
}

// ─── matching at ingest ───────────────────────────────────────────────────────────────────────

/** `*` matches any run of characters, including none; everything else matches itself, case-sensitively. */
export function toolGlobMatches(glob: string, tool: string): boolean {
  const parts = glob.split("*");
  const first = parts[0] ?? "";
  if (parts.length === 1) return glob === tool;
  const last = parts[parts.length - 1] ?? "";
  if (tool.length < first.length + last.length || !tool.startsWith(first) || !tool.endsWith(last)) return false;
  let at = first.length;
  const end = tool.length - last.length;
  for (const middle of parts.slice(1, -1)) {
    const found = tool.indexOf(middle, at);
    if (found === -1 || found + middle.length > end) return false;
    at = found + middle.length;
  }
  return true;
}

export function ruleMatchesRequest(rule: ApprovalRule, request: { tool: string; environment: string }): boolean {
  return (
    rule.tools.some((glob) => toolGlobMatches(glob, request.tool)) &&
    rule.environments.some((env) => env === "*" || env === request.environment)
  );
}

/**
 * Matches a held call against the workspace's ENABLED policies and freezes what matched. Both
 * allow and deny rules go into the snapshot — the deny rules are what exclude reviewers later.
 * `defaultDeny` is true when no allow rule covers the tool and environment: the request closes
 * at once with default_deny.
 */
export function matchRequest(
  policies: readonly ApprovalPolicy[],
  request: { tool: string; environment: string },
): { matchedRules: RuleSnapshot; defaultDeny: boolean; policyRevisions: Readonly<Record<string, number>> } {
  const active = activePolicies(policies);
  assertUniqueRuleIds(active);
  const matchedRules: MatchedRule[] = [];
  for (const policy of active) {
    for (const rule of policy.rules) {
      if (ruleMatchesRequest(rule, request)) matchedRules.push(snapshotRule(policy, rule));
    }
  }
  return {
    matchedRules: Object.freeze(matchedRules),
    defaultDeny: !matchedRules.some((rule) => rule.effect === "allow"),
    policyRevisions: Object.freeze(Object.fromEntries(active.map((policy) => [policy.id, policy.revision]))),
  };
}

/**
 * sha256 of the canonical JSON of the complete active policy set — every enabled policy's id,
 * revision and rules. Disabled policies are left out, so editing one changes nothing; enabling,
 * disabling or editing an active one changes the hash and invalidates pending requests
 * ("Voting": coarse and fail-closed). Order-independent: policies, rules and each rule's lists
 * are sorted, and an allow rule's default count is written out.
 */
export function policySetHash(policies: readonly ApprovalPolicy[]): string {
  // Each entry is serialized once and the strings sorted: the canonical JSON of the sorted
  // array is exactly "[" + those strings joined by "," + "]".
  const entries = activePolicies(policies).map((policy) =>
    canonicalJson({
      id: policy.id,
      revision: policy.revision,
      rules: policy.rules.map(normalizeRule).sort((a, b) => compare(a.id, b.id) || compare(canonicalJson(a), canonicalJson(b))),
    }),
  );
  entries.sort(compare);
  return sha256Hex(`[${entries.join(",")}]`);
}

// ─── reviewers and votes ──────────────────────────────────────────────────────────────────────

/** A principal matches a rule when one of their roles is selected or their user id is named. */
export function principalMatchesRule(rule: Pick<MatchedRule, "roles" | "userIds"> & { excludesEveryone?: true }, principal: Principal): boolean {
  if (rule.excludesEveryone === true) return true;
  return rule.userIds.includes(principal.userId) || rule.roles.some((role) => principal.roleIds.includes(role));
}

/**
 * Fail closed on an exclusion that can no longer be read: a deny rule naming a role that does
 * not exist any more (deleted, or never of this org) excludes EVERY reviewer until the policy
 * is edited. Without this, deleting the role that a deny rule names would silently let its
 * former members review (their other roles still select them), with no policy revision to show
 * for it. An allow rule naming such a role needs nothing: it selects nobody, which already
 * fails closed. `liveRoleIds` are the snapshot's role ids that name live roles now.
 */
export function closeUnresolvableDenies(snapshot: RuleSnapshot, liveRoleIds: ReadonlySet<string>): RuleSnapshot {
  if (!snapshot.some((rule) => rule.effect === "deny" && rule.roles.some((role) => !liveRoleIds.has(role)))) return snapshot;
  return snapshot.map((rule) =>
    rule.effect === "deny" && rule.roles.some((role) => !liveRoleIds.has(role)) ? Object.freeze({ ...rule, excludesEveryone: true as const }) : rule,
  );
}

/**
 * Whether a principal may review a request. An explicit matching deny defeats every allow: it
 * excludes the person from reviewing (it is not a vote to reject).
 */
export function reviewerEligibility(
  snapshot: RuleSnapshot,
  principal: Principal,
): { eligible: boolean; allowRuleIds: string[]; deniedBy?: string } {
  const deny = snapshot.find((rule) => rule.effect === "deny" && principalMatchesRule(rule, principal));
  if (deny) return { eligible: false, allowRuleIds: [], deniedBy: deny.ruleId };
  const allowRuleIds = snapshot
    .filter((rule) => rule.effect === "allow" && principalMatchesRule(rule, principal))
    .map((rule) => rule.ruleId);
  return { eligible: allowRuleIds.length > 0, allowRuleIds };
}

export type QuorumRuleTally = { policyId: string; ruleId: string; count: number; approvals: number };

export type QuorumResult = {
  state: "pending" | "approved" | "rejected";
  satisfiedRuleId?: string;
  /** The first eligible reviewer whose deny vote closed the request. */
  rejectedBy?: string;
  perRule: QuorumRuleTally[];
};

/**
 * Tallies votes against the snapshot with each voter's roles as they are NOW, which is how the
 * delivery preflight rechecks that quorum still holds under current memberships.
 *
 * - A vote counts only while its voter is eligible (an allow rule matches, no deny rule does).
 * - An eligible reviewer's deny vote closes the request: rejected wins over any approvals.
 * - Quorum is met when any one allow rule reaches its own count from the distinct eligible
 *   approvers it selects. Votes are not pooled across rules.
 */
export function quorum(snapshot: RuleSnapshot, votes: readonly Vote[]): QuorumResult {
  const approversByRule = new Map<string, Set<string>>();
  let rejectedBy: string | undefined;
  for (const vote of votes) {
    const eligibility = reviewerEligibility(snapshot, vote);
    if (!eligibility.eligible) continue;
    if (vote.decision === "deny") {
      rejectedBy ??= vote.userId;
      continue;
    }
    for (const id of eligibility.allowRuleIds) {
      const approvers = approversByRule.get(id) ?? new Set<string>();
      approvers.add(vote.userId);
      approversByRule.set(id, approvers);
    }
  }
  const perRule: QuorumRuleTally[] = [];
  for (const rule of snapshot) {
    if (rule.effect !== "allow") continue;
    perRule.push({ policyId: rule.policyId, ruleId: rule.ruleId, count: rule.count, approvals: approversByRule.get(rule.ruleId)?.size ?? 0 });
  }
  if (rejectedBy !== undefined) return { state: "rejected", rejectedBy, perRule };
  const satisfied = perRule.find((tally) => tally.approvals >= tally.count);
  return satisfied ? { state: "approved", satisfiedRuleId: satisfied.ruleId, perRule } : { state: "pending", perRule };
}

// ─── helpers ──────────────────────────────────────────────────────────────────────────────────

function activePolicies(policies: readonly ApprovalPolicy[]): ApprovalPolicy[] {
  return policies.filter((policy) => policy.enabled).sort((a, b) => compare(a.id, b.id) || a.revision - b.revision);
}

/** Eligibility and tallies name rules by id alone, so two active rules sharing an id would be ambiguous: refuse. */
function assertUniqueRuleIds(active: readonly ApprovalPolicy[]): void {
  const owner = new Map<string, string>();
  for (const policy of active) {
    for (const rule of policy.rules) {
      const other = owner.get(rule.id);
      if (other !== undefined) {
        throw new ApprovalPolicyError(`rule id ${rule.id} appears in policies ${other} and ${policy.id}; rule ids must be unique`);
      }
      owner.set(rule.id, policy.id);
    }
  }
}

function snapshotRule(policy: ApprovalPolicy, rule: ApprovalRule): MatchedRule {
  const common = {
    policyId: policy.id,
    policyRevision: policy.revision,
    ruleId: rule.id,
    tools: Object.freeze([...rule.tools]),
    environments: Object.freeze([...rule.environments]),
    roles: Object.freeze([...rule.roles]),
    userIds: Object.freeze([...rule.userIds]),
  };
  return Object.freeze(rule.effect === "allow" ? { ...common, effect: "allow", count: rule.count ?? 1 } : { ...common, effect: "deny" });
}

function normalizeRule(rule: ApprovalRule) {
  const set = (values: readonly string[]) => [...new Set(values)].sort(compare);
  return {
    id: rule.id,
    effect: rule.effect,
    tools: set(rule.tools),
    environments: set(rule.environments),
    roles: set(rule.roles),
    userIds: set(rule.userIds),
    ...(rule.effect === "allow" ? { count: rule.count ?? 1 } : {}),
  };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

