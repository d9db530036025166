import { roleMembers } from "../../authz/principal.js";
import { reviewerEligibility, type RuleSnapshot } from "../../domain/approvals/policy.js";
import type { SqlRunner } from "../../infra/db.js";
import { currentQuorum, resolvedSnapshots } from "./quorum.js";

/** At most this many reviewers are named; the rest are counted. */
const NAMED_REVIEWERS = 10;

/**
 * A pending request's review in words, for the agent whose call waits (its MCP task's
 * statusMessage): the quorum as it stands with current memberships, who approved so far, and who
 * may review — the active members the allow rules select (by role now, or by name) and no deny
 * rule excludes. Null when the request is not pending. Names only: never a rule's policy text.
 *
 *   "1 of 2 approvals (rule prod-github-two); approved by reviewer-1; reviewers: reviewer-1, reviewer-2, reviewer-3"
 */
export async function reviewProgress(sql: SqlRunner, approvalId: string): Promise<string | null> {
  const [request] = await sql.query<{ orgId: string; matchedRules: unknown; status: string }>(`SELECT "orgId", "matchedRules", status::text AS status FROM approval_requests WHERE id = $1`, [approvalId]);
  if (!request || request.status !== "pending") return null;
  const [snapshot] = await resolvedSnapshots(sql, request.orgId, [request.matchedRules as RuleSnapshot]);
  const votes = await sql.query<{ userId: string; decision: string }>(`SELECT "userId", decision FROM votes WHERE "requestId" = $1 ORDER BY "createdAt"`, [approvalId]);
  const tally = await currentQuorum(sql, request.orgId, snapshot!, votes);

  const allow = snapshot!.filter((rule) => rule.effect === "allow");
  const roleIds = [...new Set(snapshot!.flatMap((rule) => rule.roles))];
  const members = await roleMembers(sql, request.orgId, roleIds);
  const candidates = [...new Set([...allow.flatMap((rule) => rule.roles.flatMap((role) => members.get(role) ?? [])), ...allow.flatMap((rule) => rule.userIds)])];
  const people = candidates.length
    ? await sql.query<{ id: string; name: string }>(
        `SELECT u.id, u.name FROM users u JOIN memberships m ON m."userId" = u.id AND m."orgId" = $1 AND m."deactivatedAt" IS NULL WHERE u.id = ANY($2::text[]) ORDER BY u.name, u.id`,
        [request.orgId, candidates],
      )
    : [];
  const rolesOf = (userId: string) => roleIds.filter((role) => members.get(role)?.includes(userId));
  const reviewers = people.filter((p) => reviewerEligibility(snapshot!, { userId: p.id, roleIds: rolesOf(p.id) }).eligible);
  const nameOf = new Map(people.map((p) => [p.id, p.name]));
  const approvedBy = votes.filter((v) => v.decision !== "deny" && nameOf.has(v.userId)).map((v) => nameOf.get(v.userId)!);

  const quorum = tally.perRule.length
    ? tally.perRule.map((rule) => `${rule.approvals} of ${rule.count} approval${rule.count === 1 ? "" : "s"} (rule ${rule.ruleId})`).join(" or ")
    : "no allow rule";
  const named = reviewers.slice(0, NAMED_REVIEWERS).map((p) => p.name);
  const more = reviewers.length > NAMED_REVIEWERS ? ` and ${reviewers.length - NAMED_REVIEWERS} more` : "";
  return [quorum, approvedBy.length ? `approved by ${approvedBy.join(", ")}` : null, `reviewers: ${named.length ? named.join(", ") + more : "none now"}`].filter(Boolean).join("; ");
}
