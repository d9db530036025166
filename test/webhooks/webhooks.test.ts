// Outbound webhooks (docs/webhooks.md) against a real HTTP receiver on 127.0.0.1: signed
// deliveries, the events of a plan's life naming who can still approve, retries with backoff,
// bounded attempts and redelivery, one delivery per row across two workers, nothing lost across
// a restart, the private-address refusal, the Slack format, and the (webhook, …) permissions.

import { createHmac, randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { APPROVE, ERROR_FIELDS, READ, allActions, ops, person, seedStack, seedWorkspace } from "../gate/helpers.js";
import { createWebhookWorker } from "../../src/workers/webhook-delivery.js";
import { addressAllowed } from "../../src/domain/address-policy.js";
import { createLogger } from "../../src/infra/logger.js";

const ENV = {
  COUNTERSIGN_WEBHOOK_ALLOW_PRIVATE: "1",
  COUNTERSIGN_WEBHOOK_SECRET_KEY: randomBytes(32).toString("hex"),
  COUNTERSIGN_WEBHOOK_RETRY_BASE_MS: "40",
  COUNTERSIGN_WEBHOOK_MAX_ATTEMPTS: "4",
  COUNTERSIGN_WEBHOOK_TIMEOUT_MS: "3000",
};

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A real HTTP receiver; `respond` picks each answer's status. */
async function receiver(respond: (n: number) => number = () => 200) {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      res.statusCode = respond(received.length);
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    json: () => received.map((r) => JSON.parse(r.body)),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const CREATE = `mutation($input: CreateWebhookInput!) {
  createWebhook(input: $input) { __typename ... on MutationCreateWebhookSuccess { data { secret webhook { id url events format active } } } ${ERROR_FIELDS} }
}`;
const DELIVERIES = `query($id: ID!) { webhook(id: $id) { id deliveries { id eventId event status attempts responseCode lastError } } }`;
const REDELIVER = `mutation($id: ID!) { redeliverWebhook(deliveryId: $id) { __typename ... on MutationRedeliverWebhookSuccess { data { id status attempts } } ... on Error { code message } } }`;
const REPORT = `mutation($input: ReportPlanResultInput!) { reportPlanResult(input: $input) { __typename ${ERROR_FIELDS} } }`;

const verify = (secret: string, r: Received) =>
  r.headers["x-countersign-signature"] === `sha256=${createHmac("sha256", secret).update(r.body).digest("hex")}`;

let t: TestApp;
let org: OrgFixture;
let o: ReturnType<typeof ops>;
let stackId: string;

beforeAll(async () => {
  t = await startTestApp({ env: ENV });
  org = await createOrg(t.db);
  o = ops(t);
  stackId = (await seedStack(t, org.orgId)).id;
});
afterAll(() => t.close());

async function createHook(token: string, input: Record<string, unknown>) {
  const res = await t.gql(CREATE, { input }, token);
  if (res.errors) throw new Error(JSON.stringify(res.errors));
  return res.data.createWebhook;
}

/** Ticks the app's worker until `done` holds (the backoff is tens of milliseconds here). */
async function deliverUntil(done: () => boolean | Promise<boolean>, tick: () => Promise<unknown> = () => t.app.services.webhooks.tick(), ms = 10_000) {
  const until = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > until) throw new Error("deliveries did not complete in time");
    await tick();
    await new Promise((r) => setTimeout(r, 30));
  }
}

/** Every event of this run goes through its own webhook; older webhooks are switched off. */
async function onlyHook(url: string, events: string[], format = "JSON", orgId = org.orgId, token = org.adminToken) {
  await t.db.prisma.webhook.updateMany({ where: { orgId }, data: { active: false } });
  const created = await createHook(token, { url, events, format });
  expect(created.__typename).toBe("MutationCreateWebhookSuccess");
  return created.data as { secret: string; webhook: { id: string } };
}

describe("signed delivery of a plan's life", () => {
  it("each delivery carries sha256=<HMAC-SHA256 of the body> under the secret shown once, the event id and a timestamp", async () => {
    const hook = await receiver();
    const { secret, webhook } = await onlyHook(hook.url, ["PLAN_NEEDS_APPROVALS"]);
    expect(secret).toMatch(/^whsec_/);
    // The secret is not readable back: not in the row, not on the type.
    const row = await t.db.prisma.webhook.findUniqueOrThrow({ where: { id: webhook.id } });
    expect(JSON.stringify(row)).not.toContain(secret);
    const typeFields = await t.gql(`{ __type(name: "Webhook") { fields { name } } }`);
    expect(typeFields.data.__type.fields.map((f: any) => f.name)).not.toContain("secret");

    const w = await seedWorkspace(t, org.orgId, stackId, 1);
    const plan = await o.submit(org.adminToken, w.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    await deliverUntil(() => hook.received.length >= 1);
    const [r] = hook.received;
    expect(verify(secret, r!)).toBe(true);
    expect(verify("whsec_wrong", r!)).toBe(false);
    const body = JSON.parse(r!.body);
    expect(r!.headers["x-countersign-event-id"]).toBe(body.id);
    expect(Math.abs(Number(r!.headers["x-countersign-timestamp"]) - Date.now() / 1000)).toBeLessThan(60);
    expect(body).toMatchObject({ type: "plan.needs_approvals", organizationId: org.orgId, data: { plan: { id: plan.id, workspace: { name: w.name } } } });
    expect(body.data.gate.passed).toBe(false);
    expect(body.data.gate.reasons.map((x: any) => x.code)).toContain("baseline_not_met");
    await hook.close();
  });

  it("needs approvals names the missing approvers and the unanswered reservations; approvals, the gate passing, apply start and finish follow", async () => {
    const hook = await receiver();
    const { secret } = await onlyHook(hook.url, [
      "PLAN_NEEDS_APPROVALS", "PLAN_APPROVAL_ADDED", "PLAN_GATE_PASSED", "PLAN_APPLY_STARTED", "PLAN_APPLY_FINISHED", "RESERVATION_PLACED",
    ]);
    const w = await seedWorkspace(t, org.orgId, stackId, 0);
    const named = await person(t, org.orgId, "Named", [READ]);
    const holder = await person(t, org.orgId, "Holder", [READ, APPROVE]);
    await o.policy(org.adminToken, { workspaceIds: [w.id], addressPatterns: ["*"], requirements: allActions(1, { approverUserIds: [named.userId] }) });
    expect((await o.reserve(holder.token, w.id)).__typename).toBe("MutationReserveWorkspaceSuccess");
    const plan = await o.submit(org.adminToken, w.id, [{ address: "aws_s3_bucket.a", action: "UPDATE" }]);
    await deliverUntil(() => hook.received.length >= 2);
    const needs = hook.json().find((b) => b.type === "plan.needs_approvals");
    expect(needs.data.gate.missingApprovers[0].users).toEqual([{ id: named.userId, name: expect.stringMatching(/^Named-/) }]);
    expect(needs.data.gate.unansweredReservations).toEqual([
      expect.objectContaining({ holder: expect.objectContaining({ kind: "user", id: holder.userId }) }),
    ]);
    expect(hook.json().some((b) => b.type === "reservation.placed" && b.data.reservation.holder.id === holder.userId)).toBe(true);

    expect((await o.approve(named.token, plan.id)).__typename).toBe("MutationApprovePlanSuccess");
    expect((await o.approve(holder.token, plan.id)).__typename).toBe("MutationApprovePlanSuccess");
    expect((await o.apply(org.adminToken, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
    expect((await t.gql(REPORT, { input: { planId: plan.id, outcome: "APPLIED" } }, org.adminToken)).data.reportPlanResult.__typename).toBe(
      "MutationReportPlanResultSuccess",
    );
    await deliverUntil(() => hook.json().some((b) => b.type === "plan.apply_finished"));
    const types = hook.json().filter((b) => b.data.plan?.id === plan.id).map((b) => b.type);
    // After the named approver: still waiting for the reservation; after the holder: passed.
    expect(types).toEqual(expect.arrayContaining(["plan.needs_approvals", "plan.approval_added", "plan.gate_passed", "plan.apply_started", "plan.apply_finished"]));
    expect(types.filter((x) => x === "plan.approval_added")).toHaveLength(2);
    expect(types.filter((x) => x === "plan.gate_passed")).toHaveLength(1);
    const afterFirst = hook.json().filter((b) => b.type === "plan.needs_approvals" && b.data.plan.id === plan.id).at(-1);
    expect(afterFirst.data.gate.missingApprovers).toEqual([]);
    expect(afterFirst.data.gate.unansweredReservations).toHaveLength(1);
    expect(hook.json().find((b) => b.type === "plan.apply_finished").data.outcome).toBe("applied");
    for (const r of hook.received) expect(verify(secret, r)).toBe(true);
    await hook.close();
  });

  it("an event is queued in the change's transaction: a refused change queues nothing", async () => {
    const hook = await receiver();
    await onlyHook(hook.url, ["PLAN_APPROVAL_ADDED"]);
    const w = await seedWorkspace(t, org.orgId, stackId, 1);
    const plan = await o.submit(org.adminToken, w.id, [{ address: "a.b", action: "CREATE" }]);
    await t.db.prisma.plan.update({ where: { id: plan.id }, data: { status: "discarded" } });
    const before = await t.db.prisma.webhookDelivery.count({ where: { orgId: org.orgId } });
    expect((await o.approve(org.adminToken, plan.id)).__typename).toBe("InvalidStateError");
    expect(await t.db.prisma.webhookDelivery.count({ where: { orgId: org.orgId } })).toBe(before);
    await hook.close();
  });
});

describe("retries, the delivery log and redelivery", () => {
  it("a receiver answering 500 twice gets the same signed event a third time, and the log says delivered after 3 attempts", async () => {
    const hook = await receiver((n) => (n <= 2 ? 500 : 204));
    const { secret, webhook } = await onlyHook(hook.url, ["PLAN_NEEDS_APPROVALS"]);
    const w = await seedWorkspace(t, org.orgId, stackId, 1);
    await o.submit(org.adminToken, w.id, [{ address: "a.b", action: "CREATE" }]);
    await deliverUntil(() => hook.received.length >= 3);
    const ids = new Set(hook.received.map((r) => r.headers["x-countersign-event-id"]));
    expect(ids.size).toBe(1);
    for (const r of hook.received) expect(verify(secret, r)).toBe(true);
    await deliverUntil(async () => (await t.gql(DELIVERIES, { id: webhook.id }, org.adminToken)).data.webhook.deliveries[0]?.status === "DELIVERED");
    const log = (await t.gql(DELIVERIES, { id: webhook.id }, org.adminToken)).data.webhook.deliveries;
    expect(log).toEqual([expect.objectContaining({ event: "PLAN_NEEDS_APPROVALS", status: "DELIVERED", attempts: 3, responseCode: 204, lastError: null })]);
    await hook.close();
  });

  it("attempts are bounded: after the last 500 the delivery is failed; redeliverWebhook sends it again", async () => {
    let healthy = false;
    const hook = await receiver(() => (healthy ? 200 : 500));
    const { webhook } = await onlyHook(hook.url, ["PLAN_NEEDS_APPROVALS"]);
    const w = await seedWorkspace(t, org.orgId, stackId, 1);
    await o.submit(org.adminToken, w.id, [{ address: "a.b", action: "CREATE" }]);
    const log = async () => (await t.gql(DELIVERIES, { id: webhook.id }, org.adminToken)).data.webhook.deliveries[0];
    await deliverUntil(async () => (await log())?.status === "FAILED");
    expect(await log()).toMatchObject({ attempts: 4, responseCode: 500, lastError: "HTTP 500" });
    expect(hook.received).toHaveLength(4);
    await t.app.services.webhooks.tick();
    expect(hook.received).toHaveLength(4);

    healthy = true;
    const again = await t.gql(REDELIVER, { id: (await log()).id }, org.adminToken);
    if (again.errors) throw new Error(JSON.stringify(again.errors));
    expect(again.data.redeliverWebhook).toMatchObject({ data: { status: "QUEUED", attempts: 0 } });
    await deliverUntil(async () => (await log()).status === "DELIVERED");
    expect(hook.received).toHaveLength(5);
    expect(new Set(hook.received.map((r) => r.headers["x-countersign-event-id"])).size).toBe(1);
    await hook.close();
  });

  it("two workers ticking at once deliver each queued row exactly once (the lease)", async () => {
    const hook = await receiver();
    await onlyHook(hook.url, ["PLAN_NEEDS_APPROVALS"]);
    const w = await seedWorkspace(t, org.orgId, stackId, 1);
    for (let i = 0; i < 6; i++) await o.submit(org.adminToken, w.id, [{ address: `a.b${i}`, action: "CREATE" }]);
    const logger = createLogger("silent");
    const a = createWebhookWorker({ db: t.db, config: t.config, logger, batchSize: 3 });
    const b = createWebhookWorker({ db: t.db, config: t.config, logger, batchSize: 3 });
    await deliverUntil(() => hook.received.length >= 6, async () => void (await Promise.all([a.tick(), b.tick()])));
    await Promise.all([a.tick(), b.tick()]);
    const ids = hook.received.map((r) => r.headers["x-countersign-event-id"]);
    expect(ids).toHaveLength(6);
    expect(new Set(ids).size).toBe(6);
    await hook.close();
  });
});

describe("what a tick reads", () => {
  it("a burst of events is decided on one read of each workspace and each webhook per tick, and the next tick reads them again", async () => {
    const hook = await receiver();
    const { webhook } = await onlyHook(hook.url, ["PLAN_NEEDS_APPROVALS"]);
    const [w1, w2] = [await seedWorkspace(t, org.orgId, stackId, 1), await seedWorkspace(t, org.orgId, stackId, 1)];
    for (const w of [w1!, w2!]) for (let i = 0; i < 4; i++) await o.submit(org.adminToken, w.id, [{ address: `a.b${i}`, action: "CREATE" }]);
    // The real database, every statement the worker sends through its runner written down.
    const sent: string[] = [];
    const sql = { ...t.db.sql, query: ((text: string, ...rest: never[]) => (sent.push(text), t.db.sql.query(text, ...rest))) as typeof t.db.sql.query };
    let webhookReads = 0;
    const prisma = t.db.prisma.$extends({ query: { webhook: { findUnique: ({ args, query }) => (webhookReads++, query(args)) } } });
    const worker = createWebhookWorker({ db: { ...t.db, sql, prisma: prisma as unknown as typeof t.db.prisma }, config: t.config, logger: createLogger("silent"), batchSize: 200 });
    const workspaceReads = () => sent.filter((text) => /FROM workspaces w JOIN stacks s/.test(text)).length;

    expect(await worker.tick()).toBe(8);
    expect(hook.received).toHaveLength(8);
    expect(workspaceReads()).toBe(2);
    expect(webhookReads).toBe(1);

    // Redelivered on a later tick: read again, as things stand then.
    await t.db.sql.query(`UPDATE webhook_deliveries SET status = 'queued', "nextRunAt" = now() WHERE "webhookId" = $1`, [webhook.id]);
    expect(await worker.tick()).toBe(8);
    expect(workspaceReads()).toBe(4);
    expect(webhookReads).toBe(2);
    await hook.close();
  });
});

describe("durability", () => {
  it("nothing is lost across a restart: rows queued by a stopped server are delivered by the next one's workers", async () => {
    const hook = await receiver();
    const first = await startTestApp({ env: ENV });
    const schemaName = first.schemaName;
    const o1 = await createOrg(first.db);
    const created = (await first.gql(CREATE, { input: { url: hook.url, events: ["RESERVATION_PLACED", "RESERVATION_RELEASED"] } }, o1.adminToken)).data.createWebhook.data;
    const st = (await seedStack(first, o1.orgId)).id;
    const ws = await seedWorkspace(first, o1.orgId, st, 0);
    const approver = await person(first, o1.orgId, "approver");
    const reserved = await ops(first).reserve(approver.token, ws.id);
    await ops(first).release(approver.token, reserved.data.id);
    expect(await first.db.prisma.webhookDelivery.count({ where: { status: "queued" } })).toBe(2);
    // Stop the first server without touching its schema.
    await first.app.services.close();
    await first.events.close();
    await first.db.close();

    const second = await startTestApp({
      schemaName,
      env: { ...ENV, COUNTERSIGN_WORKERS: "all", COUNTERSIGN_WEBHOOK_INTERVAL_MS: "50", COUNTERSIGN_APPROVAL_STREAM: `stream:${schemaName}` },
    });
    try {
      const until = Date.now() + 10_000;
      while (hook.received.length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      expect(hook.json().map((b) => b.type).sort()).toEqual(["reservation.placed", "reservation.released"]);
      for (const r of hook.received) expect(verify(created.secret, r)).toBe(true);
      const until2 = Date.now() + 5_000;
      while ((await second.db.prisma.webhookDelivery.count({ where: { status: "delivered" } })) < 2 && Date.now() < until2) await new Promise((r) => setTimeout(r, 50));
      expect(await second.db.prisma.webhookDelivery.count({ where: { status: "delivered" } })).toBe(2);
    } finally {
      await second.close();
      await hook.close();
    }
  });
});

describe("the private-address rule", () => {
  it("without COUNTERSIGN_WEBHOOK_ALLOW_PRIVATE a loopback URL, or a name resolving to one, is refused and never contacted", async () => {
    const hook = await receiver();
    const literal = await onlyHook(hook.url, ["PLAN_NEEDS_APPROVALS"]);
    const named = (await createHook(org.adminToken, { url: `http://localhost:${hook.port}/x`, events: ["PLAN_NEEDS_APPROVALS"] })).data;
    const strict = createWebhookWorker({
      db: t.db,
      config: { ...t.config, webhooks: { ...t.config.webhooks, allowPrivate: false } },
      logger: createLogger("silent"),
    });
    const w = await seedWorkspace(t, org.orgId, stackId, 1);
    await o.submit(org.adminToken, w.id, [{ address: "a.b", action: "CREATE" }]);
    await strict.tick();
    const rows = await t.db.prisma.webhookDelivery.findMany({ where: { webhookId: { in: [literal.webhook.id, named.webhook.id] } } });
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      expect(row.status).toBe("failed");
      // What failed, never the address the name resolved to.
      expect(row.lastError).toBe("refused: the receiver's host does not resolve to an allowed address");
    }
    expect(hook.received).toHaveLength(0);

    // With the operator's allowance, the same name is resolved, checked and delivered to.
    const byName = rows.find((r) => r.webhookId === named.webhook.id)!;
    expect((await t.gql(REDELIVER, { id: byName.id }, org.adminToken)).data.redeliverWebhook.data.status).toBe("QUEUED");
    await deliverUntil(() => hook.received.length >= 1);
    expect(hook.received[0]!.headers["x-countersign-event-id"]).toBe(byName.eventId);
    await hook.close();
  });

  it("private, loopback, link-local and other non-public addresses are recognized", () => {
    for (const a of ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "0.0.0.0", "100.64.0.1", "::1", "::", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "::ffff:7f00:1", "224.0.0.1"]) {
      expect(addressAllowed(a, { allowPrivate: false }), a).toBe(false);
    }
    for (const a of ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "172.32.0.1"]) expect(addressAllowed(a, { allowPrivate: false }), a).toBe(true);
  });
});

describe("the slack format", () => {
  it("posts { text, blocks } a Slack incoming webhook takes as is, signed like any other", async () => {
    const hook = await receiver();
    const { secret } = await onlyHook(hook.url, ["PLAN_NEEDS_APPROVALS"], "SLACK");
    const w = await seedWorkspace(t, org.orgId, stackId, 1);
    const named = await person(t, org.orgId, "Slacker", [READ]);
    await o.policy(org.adminToken, { workspaceIds: [w.id], addressPatterns: ["*"], requirements: allActions(1, { approverUserIds: [named.userId] }) });
    await o.submit(org.adminToken, w.id, [{ address: "a.b", action: "CREATE" }]);
    await deliverUntil(() => hook.received.length >= 1);
    const body = hook.json()[0];
    expect(Object.keys(body).sort()).toEqual(["blocks", "text"]);
    expect(body.text).toContain(w.name);
    expect(body.blocks[0]).toMatchObject({ type: "section", text: { type: "mrkdwn" } });
    expect(JSON.stringify(body.blocks)).toContain("Who can approve");
    for (const block of body.blocks) expect(["section", "context"]).toContain(block.type);
    expect(verify(secret, hook.received[0]!)).toBe(true);
    await hook.close();
  });
});

describe("permissions and validation", () => {
  const LIST = `{ webhooks { id url } }`;
  const ONE = `query($id: ID!) { webhook(id: $id) { id } }`;

  it("a member without the webhook permission is denied: list PERMISSION_DENIED, one null, create PermissionDeniedError", async () => {
    const { webhook } = await onlyHook("https://hooks.example.com/a", ["PLAN_GATE_PASSED"]);
    const member = await addMember(t.db, org.orgId, { grants: [READ] });
    const list = await t.gql(LIST, {}, member.token);
    expect(list.errors?.[0]?.extensions?.code).toBe("PERMISSION_DENIED");
    expect((await t.gql(ONE, { id: webhook.id }, member.token)).data.webhook).toBeNull();
    const create = await t.gql(CREATE, { input: { url: "https://hooks.example.com/b", events: ["PLAN_GATE_PASSED"] } }, member.token);
    expect(create.data.createWebhook).toMatchObject({ __typename: "PermissionDeniedError", missing: { resourceType: "webhook", action: "create" } });
  });

  it("(webhook, read) reads the webhooks and their log but creates nothing; another organization sees nothing", async () => {
    const { webhook } = await onlyHook("https://hooks.example.com/c", ["PLAN_GATE_PASSED"]);
    const reader = await addMember(t.db, org.orgId, { grants: [{ resourceType: "webhook", action: "read" }] });
    expect((await t.gql(LIST, {}, reader.token)).data.webhooks.map((h: any) => h.id)).toContain(webhook.id);
    expect((await t.gql(ONE, { id: webhook.id }, reader.token)).data.webhook).toEqual({ id: webhook.id });
    const create = await t.gql(CREATE, { input: { url: "https://hooks.example.com/d", events: ["PLAN_GATE_PASSED"] } }, reader.token);
    expect(create.data.createWebhook.__typename).toBe("PermissionDeniedError");

    const other = await createOrg(t.db);
    expect((await t.gql(ONE, { id: webhook.id }, other.adminToken)).data.webhook).toBeNull();
    expect((await t.gql(LIST, {}, other.adminToken)).data.webhooks.map((h: any) => h.id)).not.toContain(webhook.id);
    const del = await t.gql(`mutation($id: ID!) { deleteWebhook(id: $id) { __typename } }`, { id: webhook.id }, other.adminToken);
    expect(del.data.deleteWebhook.__typename).toBe("NotFoundError");
    const delivery = await t.db.prisma.webhookDelivery.findFirst({ where: { orgId: org.orgId } });
    expect((await t.gql(REDELIVER, { id: delivery!.id }, other.adminToken)).data.redeliverWebhook.__typename).toBe("NotFoundError");
  });

  it("a bad URL or an empty event list is a ValidationError naming the field; nothing is written", async () => {
    const before = await t.db.prisma.webhook.count();
    for (const url of ["ftp://example.com/x", "not a url", "https://user:pw@example.com/x", "/relative"]) {
      const res = await t.gql(CREATE, { input: { url, events: ["PLAN_GATE_PASSED"] } }, org.adminToken);
      expect(res.data.createWebhook, url).toMatchObject({ __typename: "ValidationError", issues: [expect.objectContaining({ field: "input.url" })] });
    }
    const empty = await t.gql(CREATE, { input: { url: "https://example.com/x", events: [] } }, org.adminToken);
    expect(empty.data.createWebhook).toMatchObject({ __typename: "ValidationError", issues: [expect.objectContaining({ field: "input.events" })] });
    expect(await t.db.prisma.webhook.count()).toBe(before);
  });
});
