import { roleMembers } from "../../authz/principal.js";
import { closeUnresolvableDenies, quorum, type QuorumResult, type RuleSnapshot, type Vote } from "../../domain/approvals/policy.js";
import type { SqlRunner } from "../../infra/db.js";

/**
 * Quorum with CURRENT memberships (seed 003, "Preflight": "quorum still satisfied by current
 * memberships"). Each voter's roles are the snapshot's roles they hold now (direct assignment
 * or SSO binding, via roleMembers); a voter whose membership is gone or deactivated counts for
 * nothing, even where a rule names them by user id.
 */

type StoredVote = { userId: string; decision: string };
export type QuorumInput = { snapshot: RuleSnapshot; votes: readonly StoredVote[] };

/** The ids among `roleIds` that name a live role usable in the org now (its own, or built-in). */
export async function liveRoleIds(sql: SqlRunner, orgId: string, roleIds: readonly string[]): Promise<Set<string>> {
  if (roleIds.length === 0) return new Set();
  const rows = await sql.query<{ id: string }>(
    `SELECT id FROM roles WHERE id = ANY($2::text[]) AND "deletedAt" IS NULL AND ("orgId" = $1 OR "orgId" IS NULL)`,
    [orgId, [...new Set(roleIds)]],
  );
  return new Set(rows.map((r) => r.id));
}

/** Snapshots as a decision must read them now: a deny rule whose role is gone excludes everyone. */
export async function resolvedSnapshots(sql: SqlRunner, orgId: string, snapshots: readonly RuleSnapshot[]): Promise<RuleSnapshot[]> {
  const denyRoles = [...new Set(snapshots.flatMap((s) => s.filter((rule) => rule.effect === "deny").flatMap((rule) => rule.roles)))];
  if (denyRoles.length === 0) return [...snapshots];
  const live = await liveRoleIds(sql, orgId, denyRoles);
  return snapshots.map((snapshot) => closeUnresolvableDenies(snapshot, live));
}

/** Many requests of one org at once: three queries at most whatever their number (reviewer views, inbox). */
export async function currentQuorums(sql: SqlRunner, orgId: string, raw: readonly QuorumInput[]): Promise<QuorumResult[]> {
  const snapshots = await resolvedSnapshots(sql, orgId, raw.map((item) => item.snapshot));
  const items = raw.map((item, i) => ({ ...item, snapshot: snapshots[i]! }));
  const roleIds = [...new Set(items.flatMap((item) => item.snapshot.flatMap((rule) => rule.roles)))];
  const voters = [...new Set(items.flatMap((item) => item.votes.map((v) => v.userId)))];
  if (voters.length === 0) return items.map((item) => quorum(item.snapshot, []));
  // One after the other: `sql` may be a transaction's single connection.
  const members = await roleMembers(sql, orgId, roleIds);
  const active = new Set(
    (
      await sql.query<{ userId: string }>(
        `SELECT "userId" FROM memberships WHERE "orgId" = $1 AND "userId" = ANY($2::text[]) AND "deactivatedAt" IS NULL`,
        [orgId, voters],
      )
    ).map((r) => r.userId),
  );
  return items.map((item) => {
    const votes: Vote[] = item.votes
      .filter((vote) => active.has(vote.userId))
      .map((vote) => ({
        userId: vote.userId,
        decision: vote.decision === "deny" ? "deny" : "approve",
        roleIds: roleIds.filter((role) => members.get(role)?.includes(vote.userId)),
      }));
    return quorum(item.snapshot, votes);
  });
}

export async function currentQuorum(sql: SqlRunner, orgId: string, snapshot: RuleSnapshot, votes: readonly StoredVote[]): Promise<QuorumResult> {
  const [result] = await currentQuorums(sql, orgId, [{ snapshot, votes }]);
  return result!;
}
