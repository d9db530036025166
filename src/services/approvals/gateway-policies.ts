import { z } from "zod";
import type { Authz, SignedInAuthz } from "../../authz/authz.js";
import { loadPrincipals, roleMembers } from "../../authz/principal.js";
import { workspaceFamilyTarget } from "../../authz/targets.js";
import { argumentHash, CanonicalJsonError } from "../../domain/canonical.js";
import { checkPermission } from "../../domain/catalog/check.js";
import { matchRequest, reviewerEligibility, type MatchedRule } from "../../domain/approvals/policy.js";
import { ConflictError, InvalidStateError, NotFoundError, ValidationError } from "../../errors.js";
import {
  CedarEvaluationError,
  checkGatePolicies,
  createCedarGate,
  DEFAULT_GATEWAY_POLICIES,
  NEEDS_APPROVAL_SUFFIX,
  type CedarGate,
  type GateDecision,
  type GatePolicyCheck,
  type GateRequest,
} from "../../gateway/cedar-gate.js";
import { classifyTool, createUpstreamPool, UpstreamError, type UpstreamPool } from "../../gateway/upstream.js";
import type { Config } from "../../infra/config.js";
import { createPostgresGatewayStore } from "../../gateway/postgres-store.js";
import type { Database } from "../../infra/db.js";
import { LOCKING_TX_OPTIONS } from "../../infra/db.js";
import type { EventBus } from "../../infra/events.js";
import { TEXT_MAX } from "../input-rules.js";
import { parseInput } from "../parse.js";
import { uniqueViolation } from "../prisma-errors.js";
import { enqueueGatewayPolicyEvent } from "../webhooks.js";
import { recordHoldAuthorityChange } from "../hold-authority.js";
import { resolvedSnapshots } from "./quorum.js";
import { lockWorkspace, workspaceInViewerOrg, type ScopedWorkspace } from "./workspaces.js";
import { toDomainPolicy } from "./policies.js";

/**
 * A workspace's Cedar policy set for the gateway's gate (docs/held-tool-calls.md, "Policy sets
 * per workspace"): read under (gateway_policy, read), saved under (gateway_policy, manage), which
 * is owner-only (docs/permissions.md). Every save is a new immutable version naming its author;
 * the newest version is in force on the gateway's next call (src/gateway/workspace-gates.ts). A
 * workspace with no version runs DEFAULT_GATEWAY_POLICIES.
 *
 * Saving does not invalidate held requests: the gateway re-applies the CURRENT set to every
 * execution (resume and the agent's re-issue re-run Cedar with approved = true), so no held call
 * runs under a set it no longer passes, and a review under unchanged approval policies stays a
 * valid review.
 */

export type { GatePolicy, GatePolicyIssue } from "../../gateway/cedar-gate.js";

/** The seed's naming convention, shown with every set. */
export const NAMING_CONVENTION =
  `A forbid whose @id ends in ${NEEDS_APPROVAL_SUFFIX} makes tickets: the gateway holds a call it denies for approval when the ` +
  `call is destructive, the workspace is production, the call is not yet approved and every policy that denied it ends in ` +
  `${NEEDS_APPROVAL_SUFFIX}. Any other forbid denies outright. A permit allows. A call no permit matches is denied. ` +
  `The gate sets context.destructive, context.environment (the workspace's environment name), context.production (its tier) ` +
  `and context.approved (a verified approval) itself.`;

/** Longest policy text a save accepts (characters). */
export const POLICY_TEXT_MAX = 100_000;

type Deps = { db: Database; authz: SignedInAuthz; events: EventBus };

export type PolicySetView = {
  orgId: string;
  workspaceId: string;
  /** 0 for the built-in default set (no version saved). */
  version: number;
  isDefault: boolean;
  policies: string;
  author: { id: string; name: string } | null;
  createdAt: Date | null;
  note: string | null;
  /** The text as the gate reads it now: classified policies, or why it does not parse. */
  check: GatePolicyCheck;
};

export type PolicyVersionRow = {
  id: string;
  orgId: string;
  workspaceId: string;
  version: number;
  policies: string;
  note: string | null;
  createdAt: Date;
  author: { id: string; name: string };
};

/** The workspace, when the viewer may read its gate policy set. Another org's (or none): NotFound. */
async function policyWorkspace(db: Database, authz: SignedInAuthz, workspaceId: string, action: "read" | "manage"): Promise<ScopedWorkspace> {
  const workspace = await workspaceInViewerOrg(db, authz, workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "gateway_policy", action));
  return workspace;
}

/** Whether the viewer may read the workspace's gate policy set (for Workspace.gatewayPolicySet). */
export async function canReadPolicySet(authz: Authz, workspace: { name: string; stack: { authzGroups: string[] } }): Promise<boolean> {
  return authz.can(workspaceFamilyTarget(workspace, "gateway_policy", "read"));
}

const versionSelect = {
  id: true,
  orgId: true,
  workspaceId: true,
  version: true,
  policies: true,
  note: true,
  createdAt: true,
  author: { select: { id: true, name: true } },
} as const;

function defaultView(orgId: string, workspaceId: string): PolicySetView {
  return {
    orgId,
    workspaceId,
    version: 0,
    isDefault: true,
    policies: DEFAULT_GATEWAY_POLICIES,
    author: null,
    createdAt: null,
    note: null,
    check: checkGatePolicies(DEFAULT_GATEWAY_POLICIES),
  };
}

const toView = (row: PolicyVersionRow): PolicySetView => ({
  orgId: row.orgId,
  workspaceId: row.workspaceId,
  version: row.version,
  isDefault: false,
  policies: row.policies,
  author: row.author,
  createdAt: row.createdAt,
  note: row.note,
  check: checkGatePolicies(row.policies),
});

/** The set in force (the newest version, or the default). The caller has authorized the read. */
export async function policySetInForce(db: Database, workspace: { id: string; orgId: string }): Promise<PolicySetView> {
  const row = await db.prisma.gatewayPolicyVersion.findFirst({ where: { workspaceId: workspace.id }, orderBy: { version: "desc" }, select: versionSelect });
  return row ? toView(row) : defaultView(workspace.orgId, workspace.id);
}

/**
 * The sets in force of many workspaces in one statement (a workspace list selecting
 * gatewayPolicySet costs one query, not one per workspace). The caller has authorized each read.
 */
export async function policySetsInForce(db: Database, workspaces: readonly { id: string; orgId: string }[]): Promise<Map<string, PolicySetView>> {
  const ids = [...new Set(workspaces.map((w) => w.id))];
  const rows =
    ids.length === 0
      ? []
      : await db.sql.query<Omit<PolicyVersionRow, "author"> & { authorId: string; authorName: string }>(
          `SELECT DISTINCT ON (v."workspaceId") v.id, v."orgId", v."workspaceId", v.version, v.policies, v.note, v."createdAt",
                  u.id AS "authorId", u.name AS "authorName"
             FROM gateway_policy_versions v JOIN users u ON u.id = v."authorId"
            WHERE v."workspaceId" = ANY($1::text[])
            ORDER BY v."workspaceId", v.version DESC`,
          [ids],
        );
  const byId = new Map(rows.map(({ authorId, authorName, ...row }) => [row.workspaceId, toView({ ...row, createdAt: new Date(row.createdAt), author: { id: authorId, name: authorName } })]));
  return new Map(workspaces.map((w) => [w.id, byId.get(w.id) ?? defaultView(w.orgId, w.id)]));
}

export async function getGatewayPolicySet({ db, authz }: Omit<Deps, "events">, workspaceId: string): Promise<PolicySetView> {
  const workspace = await policyWorkspace(db, authz, workspaceId, "read");
  return policySetInForce(db, workspace);
}

/** Saved versions, newest first; `before`: only versions older than it. */
export async function listGatewayPolicyVersions(
  { db, authz }: Omit<Deps, "events">,
  workspaceId: string,
  options: { first: number; before?: number | null },
): Promise<PolicyVersionRow[]> {
  const workspace = await policyWorkspace(db, authz, workspaceId, "read");
  return policyVersionsOf(db, workspace.id, options);
}

export function policyVersionsOf(db: Database, workspaceId: string, options: { first: number; before?: number | null }): Promise<PolicyVersionRow[]> {
  return db.prisma.gatewayPolicyVersion.findMany({
    where: { workspaceId, ...(options.before != null ? { version: { lt: options.before } } : {}) },
    orderBy: { version: "desc" },
    take: Math.min(Math.max(options.first, 1), 100),
    select: versionSelect,
  });
}

/** policyVersionsOf for many workspaces in one statement (a list selecting each one's history). */
export async function policyVersionsOfMany(
  db: Database,
  workspaceIds: readonly string[],
  options: { first: number; before?: number | null },
): Promise<Map<string, PolicyVersionRow[]>> {
  const ids = [...new Set(workspaceIds)];
  const out = new Map<string, PolicyVersionRow[]>(ids.map((id) => [id, []]));
  if (ids.length === 0) return out;
  const rows = await db.sql.query<Omit<PolicyVersionRow, "author"> & { authorId: string; authorName: string }>(
    `SELECT id, "orgId", "workspaceId", version, policies, note, "createdAt", "authorId", "authorName" FROM (
       SELECT v.id, v."orgId", v."workspaceId", v.version, v.policies, v.note, v."createdAt", u.id AS "authorId", u.name AS "authorName",
              row_number() OVER (PARTITION BY v."workspaceId" ORDER BY v.version DESC) AS n
         FROM gateway_policy_versions v JOIN users u ON u.id = v."authorId"
        WHERE v."workspaceId" = ANY($1::text[]) AND ($2::int IS NULL OR v.version < $2::int)) x
      WHERE n <= $3
      ORDER BY "workspaceId", version DESC`,
    [ids, options.before ?? null, Math.min(Math.max(options.first, 1), 100)],
  );
  for (const { authorId, authorName, ...row } of rows) out.get(row.workspaceId)!.push({ ...row, createdAt: new Date(row.createdAt), author: { id: authorId, name: authorName } });
  return out;
}

const PolicyText = z.string().max(POLICY_TEXT_MAX, `A policy set is at most ${POLICY_TEXT_MAX} characters.`);

const SaveInput = z.object({
  workspaceId: z.string().min(1),
  policies: PolicyText,
  expectedVersion: z.int().min(0).optional(),
  note: z.string().max(TEXT_MAX, `A note is at most ${TEXT_MAX} characters.`).optional(),
});

/** The Cedar parse errors and the gate's own checks, each on `input.policies`, naming the policy. */
function policiesOrThrow(text: string, field = "input.policies") {
  const checked = checkGatePolicies(text);
  if (checked.ok) return checked.policies;
  throw new ValidationError(checked.issues.map((issue) => ({ field, code: issue.code, message: issue.message })));
}

/**
 * Saves a new version (owner-only: (gateway_policy, manage)). `expectedVersion` is the version
 * the author read (0, or omitted: the default set, nothing saved yet); a stale one is a
 * ConflictError carrying the current version. The text must parse and name every policy.
 */
export async function saveGatewayPolicySet({ db, authz }: Deps, raw: unknown): Promise<{ policySet: PolicySetView }> {
  const input = parseInput(SaveInput, raw);
  const workspace = await policyWorkspace(db, authz, input.workspaceId, "manage");
  if (workspace.archivedAt) throw new InvalidStateError("Workspace", "archived", `Workspace ${workspace.name} is archived: unarchive it first.`);
  const policies = policiesOrThrow(input.policies);
  const expected = input.expectedVersion ?? 0;
  const authorId = authz.viewer.userId;
  try {
    const row = await db.prisma.$transaction(async (tx) => {
      await lockWorkspace(tx, workspace.id);
      const newest = await tx.gatewayPolicyVersion.findFirst({ where: { workspaceId: workspace.id }, orderBy: { version: "desc" }, select: { version: true } });
      const current = newest?.version ?? 0;
      if (current !== expected) {
        throw new ConflictError(`The workspace's gateway policy set is at version ${current}, not ${expected}: reload it and save again.`, current);
      }
      const created = await tx.gatewayPolicyVersion.create({
        data: { orgId: workspace.orgId, workspaceId: workspace.id, version: current + 1, policies: input.policies, authorId, note: input.note ?? null },
        select: versionSelect,
      });
      await enqueueGatewayPolicyEvent(tx, {
        orgId: workspace.orgId,
        workspaceId: workspace.id,
        workspaceName: workspace.name,
        version: created.version,
        authorId,
        note: created.note,
        policyIds: policies.map((p) => p.id),
      });
      // A new set can drop the needs-approval forbid: a hold-lifting change, owner-only as above.
      await recordHoldAuthorityChange(tx, {
        orgId: workspace.orgId,
        workspace,
        kind: "gateway_policy.saved",
        subject: workspace.name,
        before: { version: current },
        after: { version: created.version, policyIds: policies.map((p) => p.id) },
        actorUserId: authorId,
      });
      return created;
    }, LOCKING_TX_OPTIONS);
    return { policySet: toView(row) };
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError("Another version was saved at the same time: reload it and save again.");
    throw error;
  }
}

// ── Simulation ───────────────────────────────────────────────────────────────────────────

const SimulateInput = z.object({
  workspaceId: z.string().min(1),
  tool: z.string().min(1).max(256).regex(/^\S+$/, "A tool name has no whitespace."),
  arguments: z.record(z.string(), z.unknown()).optional(),
  virtualKeyId: z.string().min(1).optional(),
  destructive: z.boolean().optional(),
  production: z.boolean().optional(),
  environment: z.string().min(1).max(50).optional(),
  approved: z.boolean().optional(),
  policies: PolicyText.optional(),
});

export type SimulatedRule = MatchedRule & {
  policyName: string;
  /** The roles the rule selects, by name; null unless the caller holds (role, read). */
  roleNames: { id: string; name: string }[] | null;
  /** The users the rule names; null unless the caller holds (member, read). */
  userNames: { id: string; name: string }[] | null;
};

export type Simulation = {
  orgId: string;
  workspaceId: string;
  decision: "allow" | "deny" | "approval_required";
  /** Why a deny: forbidden, no_policy_matched, policy_set_invalid, connection_inactive, key_unavailable, workspace_unavailable, or the upstream's (upstream_not_configured, upstream_unavailable, upstream_timeout, upstream_error, unknown_tool). */
  reason: string | null;
  policyIds: string[];
  evaluationErrors: { policyId: string; message: string }[];
  /** Which set decided: SAVED (its version), DEFAULT, or DRAFT (the text passed in). */
  policySource: "saved" | "default" | "draft";
  policyVersion: number | null;
  tool: string;
  logicalTool: string;
  connectionId: string;
  destructive: boolean;
  destructiveSource: "input" | "override" | "annotation" | "fallback";
  environment: string;
  production: boolean;
  argumentHash: string;
  /** For approval_required: what the inbox would match at ingest. */
  approval: {
    defaultDeny: boolean;
    rules: SimulatedRule[];
    /** Members who could review it now; null unless the caller holds (member, read). */
    eligibleReviewers: { id: string; name: string }[] | null;
  } | null;
};

/**
 * What the gateway's gate would do now with one call (docs/held-tool-calls.md, "Simulating a
 * call"): the same route, the same Cedar request and the same decision as handleToolCall, on the
 * saved set (or a draft), and for a call that would be held, the approval-policy rules that
 * would match it at ingest and who could review it. Needs (gateway_policy, read).
 */
export async function simulateGatewayCall(
  { db, authz, config, upstreams }: Omit<Deps, "events"> & { config: Pick<Config, "approvalSecret" | "upstreams">; upstreams: UpstreamPool | null },
  raw: unknown,
): Promise<Simulation> {
  const input = parseInput(SimulateInput, raw);
  const workspace = await policyWorkspace(db, authz, input.workspaceId, "read");
  let hash: string;
  try {
    hash = argumentHash(input.arguments ?? {});
  } catch (error) {
    if (error instanceof CanonicalJsonError) throw new ValidationError([{ field: "input.arguments", code: "invalid_arguments", message: error.message }]);
    throw error;
  }

  let keyId = "(simulated)";
  let keyUsable = true;
  if (input.virtualKeyId !== undefined) {
    const key = await db.prisma.virtualKey.findFirst({ where: { id: input.virtualKeyId, orgId: workspace.orgId, workspaceId: workspace.id } });
    if (!key || !(await authz.can(workspaceFamilyTarget(workspace, "virtual_key", "read")))) throw new NotFoundError("VirtualKey", input.virtualKeyId);
    keyId = key.id;
    keyUsable = key.revokedAt === null;
  }

  const store = createPostgresGatewayStore(db.prisma);
  const route = await store.resolveRoute(workspace.id, input.tool);
  if (!route) {
    throw new ValidationError([{ field: "input.tool", code: "unknown_tool", message: `No connection of this workspace serves ${input.tool} (a tool is <connection>.<operation>).` }]);
  }
  // Destructive as the gateway decides it (resolveTool): the override, else the upstream's own
  // annotations, else destructive. An upstream that cannot be read (or does not serve the tool)
  // stops the call there, as it does in the gateway: nothing is guessed.
  let destructive = true;
  let destructiveSource: Simulation["destructiveSource"] = "fallback";
  let upstreamProblem: string | null = null;
  if (input.destructive !== undefined) {
    destructive = input.destructive;
    destructiveSource = "input";
  } else if (!route.upstream?.url) {
    upstreamProblem = "upstream_not_configured";
  } else {
    const pool = upstreams ?? createUpstreamPool({ approvalSecret: config.approvalSecret, addresses: config.upstreams });
    try {
      const tool = await pool.tool(route.upstream, route.upstreamTool ?? input.tool.slice(input.tool.indexOf(".") + 1));
      if (!tool) upstreamProblem = "unknown_tool";
      else ({ destructive, source: destructiveSource } = classifyTool(tool, route.override ?? null));
    } catch (error) {
      if (!(error instanceof UpstreamError)) throw error;
      upstreamProblem = error.code;
    } finally {
      if (!upstreams) await pool.close();
    }
  }
  const environment = input.environment ?? workspace.environment;
  const production = input.production ?? workspace.production;

  let gate: CedarGate | null = null;
  let policySource: Simulation["policySource"];
  let policyVersion: number | null = null;
  if (input.policies !== undefined) {
    policiesOrThrow(input.policies);
    gate = createCedarGate(input.policies);
    policySource = "draft";
  } else {
    const set = await policySetInForce(db, workspace);
    policySource = set.isDefault ? "default" : "saved";
    policyVersion = set.version;
    // As the gateway: a saved set that does not parse denies every call.
    gate = set.check.ok ? createCedarGate(set.policies) : null;
  }

  const base = {
    orgId: workspace.orgId,
    workspaceId: workspace.id,
    policySource,
    policyVersion,
    tool: route.tool,
    logicalTool: input.tool,
    connectionId: route.connectionId,
    destructive,
    destructiveSource,
    environment,
    production,
    argumentHash: hash,
    evaluationErrors: [] as Simulation["evaluationErrors"],
    approval: null,
  };
  const deny = (reason: string, policyIds: string[] = []): Simulation => ({ ...base, decision: "deny", reason, policyIds });
  if (workspace.archivedAt) return deny("workspace_unavailable");
  if (!keyUsable) return deny("key_unavailable");
  if (!route.active) return deny("connection_inactive");
  if (upstreamProblem) return deny(upstreamProblem);
  if (!gate) return deny("policy_set_invalid");

  // The request handleToolCall builds (src/gateway/gateway.ts, gateRequest).
  const request: GateRequest = {
    principal: { type: "VirtualKey", id: keyId },
    action: { type: "Action", id: "tools/call" },
    resource: { type: "Tool", id: route.tool },
    context: { workspace_id: workspace.id, connection_id: route.connectionId, logical_tool: input.tool },
    destructive,
    environment,
    production,
    alreadyApproved: input.approved ?? false,
  };
  let decision: GateDecision;
  try {
    decision = gate.decide(request);
  } catch (error) {
    if (!(error instanceof CedarEvaluationError)) throw error;
    decision = { decision: "deny", reason: "forbidden", policyIds: [] };
  }
  if (decision.decision === "allow") return { ...base, decision: "allow", reason: null, policyIds: [] };
  if (decision.decision === "deny") return { ...deny(decision.reason, decision.policyIds), evaluationErrors: decision.evaluationErrors ?? [] };
  return { ...base, decision: "approval_required", reason: null, policyIds: decision.policyIds, approval: await reviewOf(db, authz, workspace, route.tool, environment) };
}

/** The approval-policy rules a held call would match at ingest (on the environment NAME), and who could review it now. */
async function reviewOf(db: Database, authz: SignedInAuthz, workspace: ScopedWorkspace, tool: string, environment: string): Promise<NonNullable<Simulation["approval"]>> {
  const rows = await db.prisma.approvalPolicy.findMany({ where: { workspaceId: workspace.id }, orderBy: { name: "asc" } });
  const names = new Map(rows.map((r) => [r.id, r.name]));
  const match = matchRequest(rows.map(toDomainPolicy), { tool, environment });
  const readsMembers = await authz.can({ resourceType: "member", action: "read", matchValue: null, groups: null });
  const readsRoles = await authz.can({ resourceType: "role", action: "read", matchValue: null, groups: null });
  const roleIds = [...new Set(match.matchedRules.flatMap((r) => r.roles))];
  const userIds = [...new Set(match.matchedRules.flatMap((r) => r.userIds))];
  const [roleRows, userRows] = await Promise.all([
    readsRoles && roleIds.length > 0
      ? db.prisma.role.findMany({ where: { id: { in: roleIds }, OR: [{ orgId: workspace.orgId }, { orgId: null }] }, select: { id: true, name: true } })
      : [],
    readsMembers && userIds.length > 0
      ? db.prisma.user.findMany({ where: { id: { in: userIds }, memberships: { some: { orgId: workspace.orgId } } }, select: { id: true, name: true } })
      : [],
  ]);
  const roleName = new Map(roleRows.map((r) => [r.id, r]));
  const userName = new Map(userRows.map((u) => [u.id, u]));
  const rules: SimulatedRule[] = match.matchedRules.map((rule) => ({
    ...rule,
    policyName: names.get(rule.policyId) ?? "",
    roleNames: readsRoles ? rule.roles.flatMap((id) => roleName.get(id) ?? []) : null,
    userNames: readsMembers ? rule.userIds.flatMap((id) => userName.get(id) ?? []) : null,
  }));
  if (match.defaultDeny || !readsMembers) {
    return { defaultDeny: match.defaultDeny, rules, eligibleReviewers: match.defaultDeny ? [] : null };
  }
  const [snapshot] = await resolvedSnapshots(db.sql, workspace.orgId, [match.matchedRules]);
  const allow = snapshot!.filter((rule) => rule.effect === "allow");
  const members = await roleMembers(db.sql, workspace.orgId, [...new Set(allow.flatMap((r) => r.roles))]);
  const candidates = [...new Set([...allow.flatMap((r) => r.userIds), ...[...members.values()].flat()])];
  const principals = await loadPrincipals(db.sql, workspace.orgId, candidates);
  const decide = workspaceFamilyTarget(workspace, "approval_request", "decide");
  const eligible = [...principals.entries()]
    .filter(([userId, p]) => p.membershipActive && checkPermission(p, decide).allowed && reviewerEligibility(snapshot!, { userId, roleIds: p.roleIds }).eligible)
    .map(([userId]) => userId);
  const users = eligible.length === 0 ? [] : await db.prisma.user.findMany({ where: { id: { in: eligible } }, select: { id: true, name: true }, orderBy: { name: "asc" } });
  return { defaultDeny: false, rules, eligibleReviewers: users };
}
