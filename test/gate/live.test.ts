// Live gate status over graphql-ws: planGate and workspaceGates push the recomputed evaluation on
// every change that can move a gate; the first message is the current status; versions only
// grow; subscribers are authorized on every event; one evaluation per plan and event is shared
// by every subscriber on a process; and two server processes on one PostgreSQL and one Redis
// see each other's changes.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "graphql-ws";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { gateHub } from "../../src/services/gate-live.js";
import { PLAN, READ, allActions, memberOf, ops, person, role, seedStack, seedWorkspace, type Person } from "./helpers.js";
import { subscribe, wsClient } from "./ws.js";
import WebSocket from "ws";
import { socketSink } from "../../src/app.js";

const PLAN_GATE = `subscription($planId: ID!) { planGate(planId: $planId) {
  planId planStatus version source passed
  evaluation { approvalsCounted reservations { answered currentMembers { id } } baseline { required counted } reasons { code } requirements { policyName count } }
} }`;
const WORKSPACE_GATES = `subscription($w: ID!) { workspaceGates(workspaceId: $w) { workspaceId version plans { planId passed planStatus } } }`;

type Msg = { planId: string; planStatus: string; version: number; source: string; passed: boolean; evaluation: any };

let t: TestApp;
let base: string;
let org: OrgFixture;
let o: ReturnType<typeof ops>;
let runner: Person;
let stackId: string;
const clients: Client[] = [];

beforeAll(async () => {
  t = await startTestApp();
  base = await t.listen();
  org = await createOrg(t.db);
  o = ops(t);
  runner = await person(t, org.orgId, "runner", [READ, PLAN]);
  stackId = (await seedStack(t, org.orgId)).id;
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await t.close();
});

const client = (token: string, url = base) => {
  const c = wsClient(url, token);
  clients.push(c);
  return c;
};
const watch = (token: string, planId: string, url = base) => subscribe<Msg>(client(token, url), PLAN_GATE, { planId }, (d) => d.planGate);

async function freshPlan(baseline: number) {
  const w = await seedWorkspace(t, org.orgId, stackId, baseline);
  const plan = await o.submit(runner.token, w.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
  return { w, plan };
}

describe("planGate", () => {
  it("the first message is the current status; an approval pushes the recomputed evaluation with a higher version", async () => {
    const { plan } = await freshPlan(1);
    const s = watch(org.adminToken, plan.id);
    const first = await s.next();
    expect(first).toMatchObject({ planId: plan.id, planStatus: "PLANNED", source: "LIVE", passed: false });
    const approver = await person(t, org.orgId, "approver");
    await o.approve(approver.token, plan.id);
    const second = await s.next((m) => m.passed);
    expect(second.version).toBeGreaterThan(first.version);
    expect(second.evaluation.approvalsCounted).toBe(1);
    s.dispose();
  });

  it("pushes on a reservation placed and released, a baseline edit, a policy edit, a role membership change, and the plan's state", async () => {
    const { w, plan } = await freshPlan(0);
    const devops = await role(t, org.orgId, "DevOps");
    const stayer = await role(t, org.orgId, "Stayer");
    const amy = await memberOf(t, org.orgId, devops.id, "amy");
    const s = watch(org.adminToken, plan.id);
    expect((await s.next()).passed).toBe(true);

    const reserved = (await o.reserve(amy.token, w.id, devops.id)).data;
    expect((await s.next((m) => m.evaluation.reservations.length === 1)).passed).toBe(false);
    await o.approve(amy.token, plan.id);
    expect((await s.next((m) => m.passed)).evaluation.reservations[0].answered).toBe(true);

    // A role membership change (authz:changed): amy leaves the role, the reservation is missing again.
    await t.gql(`mutation($r: ID!, $u: ID!) { assignRole(roleId: $r, userId: $u) { __typename } }`, { r: stayer.id, u: amy.userId }, org.adminToken);
    const missing = await s.next((m) => !m.passed);
    expect(missing.evaluation.reservations[0]).toEqual({ answered: false, currentMembers: [] });

    await o.release(org.adminToken, reserved.id);
    expect((await s.next((m) => m.evaluation.reservations.length === 0)).passed).toBe(true);

    await t.gql(`mutation($input: UpdateWorkspaceInput!) { updateWorkspace(input: $input) { __typename } }`, { input: { id: w.id, requiredApprovals: 3 } }, org.adminToken);
    expect((await s.next((m) => m.evaluation.baseline.required === 3)).passed).toBe(false);

    await o.policy(org.adminToken, { workspaceIds: [w.id], addressPatterns: ["aws_s3_bucket.*"], requirements: allActions(1) });
    const governed = await s.next((m) => m.evaluation.requirements.length === 1);
    expect(governed.evaluation.requirements[0].count).toBe(1);
    expect(governed.passed).toBe(true);

    expect((await o.apply(org.adminToken, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
    expect(await s.next((m) => m.planStatus === "APPLYING")).toMatchObject({ source: "STORED", passed: true });
    await t.gql(`mutation($input: ReportPlanResultInput!) { reportPlanResult(input: $input) { __typename } }`, { input: { planId: plan.id, outcome: "APPLIED" } }, runner.token);
    expect((await s.next((m) => m.planStatus === "APPLIED")).source).toBe("STORED");
    await s.completed;
    const versions = s.messages.map((m) => m.version);
    expect([...versions].sort((a, b) => a - b)).toEqual(versions);
  });

  it("subscribers are authorized on subscribe and on every event: a member removed from the organization stops receiving", async () => {
    const { plan } = await freshPlan(1);
    const outsider = await createOrg(t.db);
    const denied = watch(outsider.adminToken, plan.id);
    await denied.completed;
    expect(denied.messages).toEqual([]);
    expect(JSON.stringify(denied.errors)).toContain("NOT_FOUND");

    const viewer = await person(t, org.orgId, "viewer", [READ]);
    const s = watch(viewer.token, plan.id);
    await s.next();
    await t.gql(`mutation($u: ID!) { deactivateMember(userId: $u) { __typename } }`, { u: viewer.userId }, org.adminToken);
    await o.approve(org.adminToken, plan.id);
    await s.completed;
    expect(s.messages.every((m) => !m.passed)).toBe(true);
  });

  it("principals are kept from event to event while no authz change commits; one committed with no event at all still ends a subscriber at the next delivery", async () => {
    const { plan } = await freshPlan(5);
    const hub = gateHub(t.db, t.events);
    const [amy, ben, first, second, third] = await Promise.all(
      ["amy", "ben", "first", "second", "third"].map((name, i) => person(t, org.orgId, name, i < 2 ? [READ] : undefined)),
    );
    const amys = watch(amy!.token, plan.id);
    const bens = watch(ben!.token, plan.id);
    await Promise.all([amys.next(), bens.next()]);
    const roundOf = async (approver: Person, counted: number) => {
      await o.approve(approver.token, plan.id);
      const message = await amys.next((m) => m.evaluation.approvalsCounted === counted);
      return hub.recentRounds.find((r) => r.version === message.version)!;
    };

    // Both viewers and the approver load; next time only the new approver does.
    expect((await roundOf(first!, 1)).principalsLoaded).toBe(3);
    expect((await bens.next((m) => m.evaluation.approvalsCounted === 1)).planId).toBe(plan.id);
    expect((await roundOf(second!, 2)).principalsLoaded).toBe(1);

    // Ben loses his role behind the API's back: no event says so, the epoch does.
    await t.db.sql.query(`DELETE FROM role_assignments WHERE "orgId" = $1 AND "userId" = $2`, [org.orgId, ben!.userId]);
    expect((await roundOf(third!, 3)).principalsLoaded).toBe(5);
    await bens.completed;
    expect(bens.messages.map((m) => m.evaluation.approvalsCounted)).not.toContain(3);
    amys.dispose();
  });

  it("the names an evaluation mentions are kept from event to event too, and a rename committed with no event shows at the next delivery", async () => {
    const { plan } = await freshPlan(5);
    const hub = gateHub(t.db, t.events);
    const [first, second, third] = await Promise.all(["first", "second", "third"].map((name) => person(t, org.orgId, name)));
    const NAMES = `subscription($planId: ID!) { planGate(planId: $planId) { version evaluation { approvalsCounted countedApprovers { id name } } } }`;
    const s = subscribe<{ version: number; evaluation: { approvalsCounted: number; countedApprovers: { id: string; name: string }[] } }>(
      client(org.adminToken),
      NAMES,
      { planId: plan.id },
      (d) => d.planGate,
    );
    await s.next();
    const roundOf = async (approver: Person, counted: number) => {
      await o.approve(approver.token, plan.id);
      const message = await s.next((m) => m.evaluation.approvalsCounted === counted);
      return { message, round: hub.recentRounds.find((r) => r.version === message.version)! };
    };

    expect((await roundOf(first!, 1)).round.peopleLoaded).toBe(1);
    expect((await roundOf(second!, 2)).round.peopleLoaded).toBe(1); // only the new approver's row

    await t.db.sql.query(`UPDATE users SET name = 'First, renamed' WHERE id = $1`, [first!.userId]);
    const { message, round } = await roundOf(third!, 3);
    expect(round.peopleLoaded).toBe(3);
    expect(message.evaluation.countedApprovers.find((u) => u.id === first!.userId)?.name).toBe("First, renamed");
    s.dispose();
  });

  it("1,000 subscribers is one evaluation per event on this process, shared by all of them", async () => {
    const { plan } = await freshPlan(1);
    const hub = gateHub(t.db, t.events);
    const shared = client(org.adminToken);
    const streams = Array.from({ length: 1000 }, () => subscribe<Msg>(shared, PLAN_GATE, { planId: plan.id }, (d) => d.planGate));
    await Promise.all(streams.map((s) => s.next(undefined, 45_000)));
    const approver = await person(t, org.orgId, "approver");
    await o.approve(approver.token, plan.id);
    await Promise.all(streams.map((s) => s.next((m) => m.passed, 30_000)));
    const versions = new Set(streams.map((s) => s.messages.at(-1)!.version));
    expect(versions.size).toBe(1);
    // The round that produced that version evaluated the plan once and delivered it 1,000 times.
    const round = hub.recentRounds.find((r) => r.version === [...versions][0]);
    expect(round).toMatchObject({ evaluations: 1, deliveries: 1000 });
    // On one socket, some may have found bytes still waiting and gone the ordinary way.
    expect(round!.direct).toBeGreaterThan(0);
    for (const s of streams) s.dispose();
  }, 120_000);
});

describe("direct delivery of shared results", () => {
  /** A bare graphql-transport-ws connection that keeps every frame as the server wrote it. */
  async function rawConnection(token: string) {
    const socket = new WebSocket(`${base.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws");
    const frames: string[] = [];
    let changed = () => {};
    socket.on("message", (data) => {
      frames.push(String(data));
      changed();
    });
    await new Promise((resolve) => socket.once("open", resolve));
    socket.send(JSON.stringify({ type: "connection_init", payload: { authorization: `Bearer ${token}` } }));
    const until = (predicate: () => boolean) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out; frames: ${frames.join("\n")}`)), 10_000);
        changed = () => predicate() && (clearTimeout(timer), resolve());
        changed();
      });
    await until(() => frames.some((f) => JSON.parse(f).type === "connection_ack"));
    const next = (id: string) => frames.map((f) => ({ f, m: JSON.parse(f) })).filter(({ m }) => m.type === "next" && m.id === id);
    return { socket, frames, until, next };
  }

  it("the direct writer refuses a socket that is not open or still has bytes waiting, so a slow client's statuses take the ordinary, coalescing path", () => {
    const written: string[] = [];
    const socket = { readyState: 1, OPEN: 1 as const, bufferedAmount: 0, send: (data: string) => void written.push(data) };
    const sink = socketSink(socket as never, "sub-1");
    expect(sink.id).toBe("sub-1");
    expect(sink.send("a")).toBe(true);
    socket.bufferedAmount = 120;
    expect(sink.send("b")).toBe(false);
    socket.bufferedAmount = 0;
    socket.readyState = 2; // CLOSING
    expect(sink.send("c")).toBe(false);
    expect(written).toEqual(["a"]);
  });

  it("a shared result is written straight to the socket as exactly the `next` message graphql-ws writes, in order; an unshared selection takes the ordinary path", async () => {
    const { plan } = await freshPlan(3);
    const hub = gateHub(t.db, t.events);
    const c = await rawConnection(org.adminToken);
    const shared = `subscription($p: ID!) { planGate(planId: $p) { planId version passed evaluation { approvalsCounted } } }`;
    const unshared = `subscription($p: ID!) { planGate(planId: $p) { version evaluation { approvalsCounted } plan { id status } } }`;
    c.socket.send(JSON.stringify({ id: "s", type: "subscribe", payload: { query: shared, variables: { p: plan.id } } }));
    c.socket.send(JSON.stringify({ id: "u", type: "subscribe", payload: { query: unshared, variables: { p: plan.id } } }));
    await c.until(() => c.next("s").length === 1 && c.next("u").length === 1);

    const approvers = await Promise.all([1, 2].map((i) => person(t, org.orgId, `approver${i}`)));
    for (const [i, approver] of approvers.entries()) {
      await o.approve(approver!.token, plan.id);
      await c.until(() => c.next("s").length === i + 2 && c.next("u").length === i + 2);
    }
    const sharedFrames = c.next("s");
    // The first message went the ordinary way, the later ones direct: all in graphql-ws's own form
    // (its stringify of { id, type, payload } with a plain execution result).
    for (const { f, m } of sharedFrames) {
      expect(Object.keys(m)).toEqual(["id", "type", "payload"]);
      expect(JSON.stringify(m)).toBe(f);
      expect(Object.keys(m.payload)).toEqual(["data"]);
    }
    expect(sharedFrames.map(({ m }) => m.payload.data.planGate.evaluation.approvalsCounted)).toEqual([0, 1, 2]);
    const versions = sharedFrames.map(({ m }) => m.payload.data.planGate.version);
    expect([...versions].sort((a, b) => a - b)).toEqual(versions);
    // After their first (each subscription's own) message, both saw the same versions; only the shared one went direct.
    expect(c.next("u").map(({ m }) => m.payload.data.planGate.version).slice(1)).toEqual(versions.slice(1));
    expect(c.next("u").at(-1)!.m.payload.data.planGate.plan).toEqual({ id: plan.id, status: "PLANNED" });
    const last = hub.recentRounds.find((r) => r.version === versions.at(-1));
    expect(last).toMatchObject({ deliveries: 2, direct: 1 });

    // A client's `complete` stops direct writes too.
    c.socket.send(JSON.stringify({ id: "s", type: "complete" }));
    c.socket.send(JSON.stringify({ id: "u", type: "complete" }));
    await new Promise((r) => setTimeout(r, 100));
    const before = c.frames.length;
    await o.approve(org.adminToken, plan.id);
    await new Promise((r) => setTimeout(r, 300));
    expect(c.frames.slice(before)).toEqual([]);
    c.socket.close();
  });
});

describe("workspaceGates", () => {
  it("the first message lists every open plan; a new plan and an approval push the workspace's gates", async () => {
    const { w, plan } = await freshPlan(1);
    const s = subscribe<any>(client(org.adminToken), WORKSPACE_GATES, { w: w.id }, (d) => d.workspaceGates);
    const first = await s.next();
    expect(first.plans).toEqual([{ planId: plan.id, passed: false, planStatus: "PLANNED" }]);
    const newer = await o.submit(runner.token, w.id, [{ address: "aws_s3_bucket.logs", action: "DELETE" }]);
    const superseded = await s.next((m) => m.plans.some((p: any) => p.planId === newer.id));
    expect(superseded.plans.map((p: any) => p.planId)).toEqual([newer.id]);
    await o.approve(org.adminToken, newer.id);
    expect((await s.next((m) => m.plans[0]?.passed)).version).toBeGreaterThan(superseded.version);
    s.dispose();
  });
});

describe("two server processes on one PostgreSQL and one Redis", () => {
  it("an approval on one process reaches a planGate subscriber on the other", async () => {
    const second = await startTestApp({ schemaName: t.schemaName });
    try {
      const secondUrl = await second.listen();
      const { plan } = await freshPlan(1);
      const s = watch(org.adminToken, plan.id, secondUrl);
      expect((await s.next()).passed).toBe(false);
      const approver = await person(t, org.orgId, "approver");
      // Approve through the FIRST process; the subscriber is connected to the second.
      expect((await o.approve(approver.token, plan.id)).__typename).toBe("MutationApprovePlanSuccess");
      expect((await s.next((m) => m.passed)).evaluation.approvalsCounted).toBe(1);
      s.dispose();
    } finally {
      // Keep the shared schema for this file's app: close the second app without dropping it.
      await second.app.close();
      await second.events.close();
      await second.db.close();
    }
  });
});
