// Races: approvals, releases and membership changes fired in
// parallel with applyPlan; no apply starts on a gate that was not passed at that moment.
//
// How "at that moment" is proven: a gate-closing change and an apply are serialized by row locks
// (src/services/gate.ts, lockGateAuthzRows / lockWorkspaces), so exactly one of them happens
// first, and each side can observe the other. The membership change below reads the plan's
// status right after its DELETE took effect and before it commits: if it saw `planned`, its
// change came first and the apply must have seen it (GATE_NOT_PASSED); if the apply started, the
// change must have seen `applying`. Without the locks the apply reads the committed state under
// an uncommitted removal and both sides "win" — the invariant below catches exactly that.

import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { TEST_DATABASE_URL } from "../helpers/env.js";
import { memberOf, ops, person, PLAN, READ, role, seedStack, seedWorkspace, type Person } from "./helpers.js";

let t: TestApp;
let org: OrgFixture;
let o: ReturnType<typeof ops>;
let runner: Person;
let stackId: string;
const raw: pg.Client[] = [];

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  o = ops(t);
  runner = await person(t, org.orgId, "runner", [READ, PLAN]);
  stackId = (await seedStack(t, org.orgId)).id;
});
afterAll(async () => {
  for (const c of raw) await c.end().catch(() => {});
  await t.close();
});

/** A separate connection, as another server process (or another engineer's code) would hold. */
async function connection(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: TEST_DATABASE_URL, options: `-c search_path=${t.schemaName}` });
  await c.connect();
  raw.push(c);
  return c;
}

const settled = async <T>(p: Promise<T>, ms: number) =>
  Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

/**
 * A passing gate that depends on one membership: the workspace is reserved for role DevOps, and
 * its only member `holder` approved.
 */
async function gateHeldByOneMember(baseline = 0) {
  const w = await seedWorkspace(t, org.orgId, stackId, baseline);
  const devops = await role(t, org.orgId, "DevOps");
  const holder = await memberOf(t, org.orgId, devops.id, "holder");
  await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: w.id, holderRoleId: devops.id, placedById: org.adminId } });
  const plan = await o.submit(runner.token, w.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
  expect((await o.approve(holder.token, plan.id)).__typename).toBe("MutationApprovePlanSuccess");
  expect((await o.gate(org.adminToken, plan.id)).passed).toBe(true);
  return { w, devops, holder, plan };
}

describe("applyPlan serializes with every change that can close the gate", () => {
  it("a membership removal in flight makes the apply wait, and then the apply sees the reservation missing again", async () => {
    const { holder, plan } = await gateHeldByOneMember();
    const other = await connection();
    await other.query("BEGIN");
    await other.query(`DELETE FROM role_assignments WHERE "userId" = $1`, [holder.userId]);
    const apply = o.apply(org.adminToken, plan.id);
    expect(await settled(apply, 400)).toBe(false); // waiting on the removal's row lock
    await other.query("COMMIT");
    const res = await apply;
    expect(res.__typename).toBe("GateNotPassedError");
    expect(res.reasons.map((r: { code: string }) => r.code)).toEqual(["RESERVATION_UNANSWERED"]);
  });

  it("a deactivation in flight, the same", async () => {
    const { holder, plan } = await gateHeldByOneMember();
    const other = await connection();
    await other.query("BEGIN");
    await other.query(`UPDATE memberships SET "deactivatedAt" = now() WHERE "orgId" = $1 AND "userId" = $2`, [org.orgId, holder.userId]);
    const apply = o.apply(org.adminToken, plan.id);
    expect(await settled(apply, 400)).toBe(false);
    await other.query("COMMIT");
    expect((await apply).__typename).toBe("GateNotPassedError");
  });

  it("a reservation being placed (holding the workspace row) makes the apply wait and then count it", async () => {
    const w = await seedWorkspace(t, org.orgId, stackId, 0);
    const plan = await o.submit(runner.token, w.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const other = await connection();
    await other.query("BEGIN");
    await other.query(`SELECT id FROM workspaces WHERE id = $1 FOR UPDATE`, [w.id]);
    await other.query(
      `INSERT INTO reservations (id, "orgId", "workspaceId", "holderUserId", "placedById") VALUES (gen_random_uuid()::text, $1, $2, $3, $3)`,
      [org.orgId, w.id, org.adminId],
    );
    const apply = o.apply(org.adminToken, plan.id);
    expect(await settled(apply, 400)).toBe(false);
    await other.query("COMMIT");
    expect((await apply).__typename).toBe("GateNotPassedError");
  });

  it("an approval arriving while an apply holds the plan waits, then finds the plan applying", async () => {
    const w = await seedWorkspace(t, org.orgId, stackId, 0);
    const plan = await o.submit(runner.token, w.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const other = await connection();
    await other.query("BEGIN");
    await other.query(`SELECT id FROM plans WHERE id = $1 FOR UPDATE`, [plan.id]);
    await other.query(`UPDATE plans SET status = 'applying' WHERE id = $1`, [plan.id]);
    const approval = o.approve(org.adminToken, plan.id);
    expect(await settled(approval, 400)).toBe(false);
    await other.query("COMMIT");
    expect(await approval).toMatchObject({ __typename: "InvalidStateError", state: "applying" });
  });
});

describe("fired in parallel", () => {
  it("approvals, releases and membership changes racing applyPlan never let an apply start on a gate that was not passed at that moment", async () => {
    const TRIALS = 10;
    const outcomes = { applied: 0, refused: 0 };
    const extra = await Promise.all([1, 2, 3].map((i) => person(t, org.orgId, `extra${i}`)));
    const bystanders = await role(t, org.orgId, "Bystanders");
    const bystander = await memberOf(t, org.orgId, bystanders.id, "bystander");
    for (let trial = 0; trial < TRIALS; trial++) {
      const { w, holder, plan } = await gateHeldByOneMember(1);
      // The baseline of 1 is met by the holder (a DevOps member holding approve). Also racing:
      // more approvals (gate-opening), a release of a personal reservation answered by one of
      // them (gate-opening), and another member's real unassignRole through GraphQL.
      await t.db.prisma.roleAssignment.upsert({
        where: { orgId_userId: { orgId: org.orgId, userId: bystander.userId } },
        create: { orgId: org.orgId, userId: bystander.userId, roleId: bystanders.id },
        update: {},
      });
      const personal = await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: w.id, holderUserId: extra[0]!.userId, placedById: org.adminId } });
      await o.approve(extra[0]!.token, plan.id);
      const remover = await connection();
      const jitter = () => new Promise((r) => setTimeout(r, Math.random() * 15));

      const removal = (async () => {
        await jitter();
        await remover.query("BEGIN");
        await remover.query(`DELETE FROM role_assignments WHERE "userId" = $1`, [holder.userId]);
        // What the plan looks like once our change has taken effect, before it commits.
        const { rows } = await remover.query<{ status: string }>(`SELECT status::text AS status FROM plans WHERE id = $1`, [plan.id]);
        await remover.query(`SELECT pg_sleep($1)`, [Math.random() * 0.03]);
        await remover.query("COMMIT");
        t.events.publish("authz:changed", { orgId: org.orgId, reason: "role_unassigned" });
        return rows[0]!.status;
      })();
      const apply = (async () => {
        await jitter();
        return o.apply(org.adminToken, plan.id);
      })();
      const others = Promise.all([
        ...extra.slice(1).map(async (p) => (await jitter(), o.approve(p.token, plan.id))),
        (async () => (await jitter(), o.release(org.adminToken, personal.id)))(),
        (async () => (await jitter(), t.gql(`mutation($u: ID!) { unassignRole(userId: $u) { __typename } }`, { u: bystander.userId }, org.adminToken)))(),
      ]);
      const [observed, applied] = await Promise.all([removal, apply, others]);

      const row = await t.db.prisma.plan.findUniqueOrThrow({ where: { id: plan.id } });
      if (applied.__typename === "MutationApplyPlanSuccess") {
        outcomes.applied++;
        // The apply came first: the removal must have taken effect only after it committed.
        expect(observed).toBe("applying");
        const stored = row.applyEvaluation as { evaluation: { passed: boolean; reservations: { answeredByUserId: string | null }[] } };
        expect(stored.evaluation.passed).toBe(true);
        expect(stored.evaluation.reservations.find((r) => r.answeredByUserId === holder.userId)).toBeTruthy();
      } else {
        outcomes.refused++;
        // The removal came first (it saw the plan still planned), and the apply saw it.
        expect(observed).toBe("planned");
        expect(applied.__typename).toBe("GateNotPassedError");
        expect(row.status).toBe("planned");
      }
      expect(await t.db.prisma.plan.count({ where: { workspaceId: w.id, status: "applying" } })).toBeLessThanOrEqual(1);
    }
    expect(outcomes.applied + outcomes.refused).toBe(TRIALS);
  }, 60_000);

  it("two applies racing on one workspace: exactly one starts", async () => {
    const w = await seedWorkspace(t, org.orgId, stackId, 0);
    const first = await o.submit(runner.token, w.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    const results = await Promise.all(Array.from({ length: 5 }, () => o.apply(org.adminToken, first.id)));
    expect(results.filter((r) => r.__typename === "MutationApplyPlanSuccess")).toHaveLength(1);
    expect(results.filter((r) => r.__typename === "InvalidStateError")).toHaveLength(4);
  });
});
