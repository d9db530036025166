// A WebSocket acts as the token it authenticated with: when that token stops being valid
// (revoked on any process, expired, its member deactivated), its sockets close at once with
// 4401, and nothing more reaches them; other tokens' subscriptions carry on.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "graphql-ws";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { issueToken } from "../../src/services/accounts.js";
import { ops, person, PLAN, READ, seedStack, seedWorkspace, type Person } from "../gate/helpers.js";
import { subscribe } from "../gate/ws.js";
import { rawSocket, trackedClient, within } from "./ws.js";

const PLAN_GATE = `subscription($planId: ID!) { planGate(planId: $planId) { planId version passed evaluation { approvalsCounted } } }`;
type Msg = { planId: string; version: number; passed: boolean; evaluation: { approvalsCounted: number } };

let a: TestApp;
let b: TestApp;
let baseA: string;
let baseB: string;
let org: OrgFixture;
let runner: Person;
let stackId: string;
const clients: Client[] = [];

beforeAll(async () => {
  a = await startTestApp({ env: { COUNTERSIGN_WS_INIT_TIMEOUT_MS: "500" } });
  // A second process on the same database and bus (the harness prefixes channels by schema).
  b = await startTestApp({ schemaName: a.schemaName });
  baseA = await a.listen();
  baseB = await b.listen();
  org = await createOrg(a.db);
  runner = await person(a, org.orgId, "runner", [READ, PLAN]);
  stackId = (await seedStack(a, org.orgId)).id;
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await b.app.close();
  await a.close();
});

async function freshPlan() {
  const w = await seedWorkspace(a, org.orgId, stackId, 2);
  return ops(a).submit(runner.token, w.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
}

function watch(base: string, token: string, planId: string) {
  const tracked = trackedClient(base, token);
  clients.push(tracked.client);
  const stream = subscribe<Msg>(tracked.client, PLAN_GATE, { planId }, (d) => d.planGate);
  return { ...tracked, stream };
}

const REVOKE = `mutation($id: ID!) { revokeApiToken(id: $id) { __typename ... on Error { code message } } }`;
const DEACTIVATE = `mutation($id: ID!) { deactivateMember(userId: $id) { __typename ... on Error { code message } } }`;

describe("token lifecycle on WebSockets", () => {
  it("revoking a token closes its sockets on every process within a second; another token's subscription keeps receiving", async () => {
    const plan = await freshPlan();
    const reader = await person(a, org.orgId, "reader", [READ]);
    const revoked = await issueToken(a.db.prisma, { userId: reader.userId, orgId: org.orgId, name: "to revoke" });
    // The token to revoke watches on process B; the one that stays, on B too.
    const doomed = watch(baseB, revoked.token, plan.id);
    const other = watch(baseB, reader.token, plan.id);
    await doomed.stream.next();
    await other.stream.next();

    const started = Date.now();
    const res = await a.gql(REVOKE, { id: revoked.id }, org.adminToken); // on process A
    expect(res.data.revokeApiToken.__typename).toBe("MutationRevokeApiTokenSuccess");
    const closed = await within(doomed.closed, 1_000, "the revoked token's socket closing");
    expect(closed.code).toBe(4401);
    expect(closed.at - started).toBeLessThan(1_000);
    const seen = doomed.stream.messages.length;

    // A change after the revocation reaches the other token only.
    const approver = await person(a, org.orgId, "approver");
    await ops(a).approve(approver.token, plan.id);
    const next = await other.stream.next((m) => m.evaluation.approvalsCounted === 1);
    expect(next.planId).toBe(plan.id);
    expect(doomed.stream.messages.length).toBe(seen);

    // And the revoked token cannot open a new socket.
    const again = watch(baseA, revoked.token, plan.id);
    expect((await within(again.closed, 2_000, "a revoked token's new socket closing")).code).toBe(4401);
  });

  it("a token's sockets close when its expiresAt passes, and its subscriptions get nothing more", async () => {
    const plan = await freshPlan();
    const reader = await person(a, org.orgId, "reader", [READ]);
    const expiresAt = new Date(Date.now() + 2_000);
    const short = await issueToken(a.db.prisma, { userId: reader.userId, orgId: org.orgId, name: "short", expiresAt });
    const expiring = watch(baseA, short.token, plan.id);
    const other = watch(baseA, reader.token, plan.id);
    await expiring.stream.next();
    await other.stream.next();
    const closed = await within(expiring.closed, 4_000, "the expired token's socket closing");
    expect(closed.code).toBe(4401);
    expect(closed.at).toBeGreaterThanOrEqual(expiresAt.getTime());
    expect(closed.at - expiresAt.getTime()).toBeLessThan(1_000);

    const approver = await person(a, org.orgId, "approver");
    await ops(a).approve(approver.token, plan.id);
    await other.stream.next((m) => m.evaluation.approvalsCounted === 1);
    expect(expiring.stream.messages.length).toBe(1);
  });

  it("deactivating a member closes that member's sockets on every process", async () => {
    const plan = await freshPlan();
    const leaver = await person(a, org.orgId, "leaver", [READ]);
    const onB = watch(baseB, leaver.token, plan.id);
    await onB.stream.next();
    const started = Date.now();
    const res = await a.gql(DEACTIVATE, { id: leaver.userId }, org.adminToken);
    expect(res.data.deactivateMember.__typename).toBe("MutationDeactivateMemberSuccess");
    const closed = await within(onB.closed, 1_500, "the deactivated member's socket closing");
    expect(closed.code).toBe(4401);
    expect(closed.at - started).toBeLessThan(1_500);
  });

  it("a socket without a valid token in connection_init is closed with 4401; one that sends no connection_init, after the init timeout", async () => {
    const bad = trackedClient(baseA, "cs_not-a-token");
    clients.push(bad.client);
    const s = subscribe<Msg>(bad.client, PLAN_GATE, { planId: "x" }, (d) => d.planGate);
    expect((await within(bad.closed, 2_000, "a bad token's socket closing")).code).toBe(4401);
    expect(s.messages).toEqual([]);

    const silent = rawSocket(baseA);
    await silent.opened;
    const { code, afterMs } = await within(silent.closed, 3_000, "a silent socket closing");
    expect(code).toBe(4408);
    expect(afterMs).toBeGreaterThanOrEqual(450);
  });

  it("a revocation whose event never arrived (the bus down) is caught by the periodic re-check", async () => {
    const plan = await freshPlan();
    const reader = await person(a, org.orgId, "reader", [READ]);
    const quiet = await issueToken(a.db.prisma, { userId: reader.userId, orgId: org.orgId, name: "revoked quietly" });
    const w = watch(baseB, quiet.token, plan.id);
    await w.stream.next();
    // Revoked in the database only: no event is published.
    await a.db.sql.query(`UPDATE api_tokens SET "revokedAt" = now() WHERE id = $1`, [quiet.id]);
    await new Promise((r) => setTimeout(r, 300));
    expect(b.app.operator.sockets.size).toBeGreaterThan(0);
    await b.app.operator.sockets.revalidate(null); // what the sweep runs every REVALIDATE_MS
    expect((await within(w.closed, 1_000, "the quietly revoked token's socket closing")).code).toBe(4401);
  });

  it("when the token cannot be checked, connection_init is refused with 1013, which clients retry; once it can, they connect", async () => {
    const plan = await freshPlan();
    // A real failure to read tokens, in this file's own schema.
    await a.db.sql.query(`ALTER TABLE api_tokens RENAME TO api_tokens_away`);
    try {
      const refused = watch(baseA, org.adminToken, plan.id);
      expect((await within(refused.closed, 3_000, "the socket being refused")).code).toBe(1013);
    } finally {
      await a.db.sql.query(`ALTER TABLE api_tokens_away RENAME TO api_tokens`);
    }
    const again = watch(baseA, org.adminToken, plan.id);
    expect((await again.stream.next()).planId).toBe(plan.id);
  });
});
