// A webhook carries only what its owner (its creator) may read at delivery time, by the read rules
// of the GraphQL types (docs/webhooks.md, "What a delivery carries"). Generated from the product's
// event-type table: for EVERY type in WEBHOOK_EVENTS a real event is produced in a workspace the
// owner may read and in one they may not; a real HTTP receiver on 127.0.0.1 records what arrives.
// Nothing of the hidden workspace (its id, name, plans, addresses, reservations, held calls, the
// people acting there) may reach the receiver or the owner's `deliveries.payload`.

import { randomBytes, randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg, type MemberFixture, type OrgFixture } from "../helpers/fixtures.js";
import { ERROR_FIELDS, ops, seedStack, seedWorkspace, uniq } from "../gate/helpers.js";
import { WEBHOOK_EVENTS, WEBHOOK_EVENT_READ_RULES, enqueueApprovalRequestEvent, enqueueApprovalRequestsFiled, type WebhookEventType } from "../../src/services/webhooks.js";

const ENV = {
  COUNTERSIGN_WEBHOOK_ALLOW_PRIVATE: "1",
  COUNTERSIGN_WEBHOOK_SECRET_KEY: randomBytes(32).toString("hex"),
  COUNTERSIGN_WEBHOOK_RETRY_BASE_MS: "40",
  COUNTERSIGN_WEBHOOK_MAX_ATTEMPTS: "3",
  COUNTERSIGN_WEBHOOK_TIMEOUT_MS: "3000",
};

async function receiver() {
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      bodies.push(Buffer.concat(chunks).toString("utf8"));
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    bodies,
    json: () => bodies.map((b) => JSON.parse(b)),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const CREATE = `mutation($input: CreateWebhookInput!) {
  createWebhook(input: $input) { __typename ... on MutationCreateWebhookSuccess { data { webhook { id } } } ${ERROR_FIELDS} }
}`;
const DELIVERIES = `query($id: ID!) { webhook(id: $id) { deliveries(first: 200) { id eventId event status lastError payload } } }`;
const enumOf = (type: string) => type.replace(".", "_").toUpperCase();

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

interface Place {
  workspace: { id: string; name: string };
  actor: MemberFixture;
  /** Strings that identify this place's objects (ids, names, addresses, tools). */
  marks: string[];
}

const must = (res: { data: any; errors?: unknown[] }, field: string) => {
  if (res.errors) throw new Error(JSON.stringify(res.errors));
  const v = res.data[field];
  if (v.__typename && !v.__typename.endsWith("Success")) throw new Error(`${field}: ${JSON.stringify(v)}`);
  return v.data;
};

/** A plan on the place's workspace (baseline 1), submitted by its actor; its id and address become marks. */
async function plan(p: Place) {
  const address = `aws_db_instance.${uniq("addr").replace(/-/g, "_")}`;
  const submitted = await o.submit(p.actor.token, p.workspace.id, [{ address, action: "UPDATE" }]);
  p.marks.push(submitted.id, address);
  return submitted.id;
}
const approve = async (p: Place, planId: string) => expect((await o.approve(p.actor.token, planId)).__typename).toBe("MutationApprovePlanSuccess");

/** A held call's request on the place's workspace, filed through the enqueue the ingest runs. */
async function heldRequest(p: Place) {
  const id = randomUUID();
  const tool = `${uniq("conn")}.delete_${uniq("thing").replace(/-/g, "_")}`;
  p.marks.push(id, tool);
  const expiresAt = new Date(Date.now() + 3_600_000);
  await t.db.prisma.approvalRequest.create({
    data: {
      id, orgId: org.orgId, workspaceId: p.workspace.id, virtualKeyId: randomUUID(), connectionId: randomUUID(), tool, environment: "prod",
      invocationId: randomUUID(), idempotencyKey: randomUUID(), argumentHash: "h", payloadHash: "h", requestSnapshot: {}, policyRevisions: {},
      matchedRules: [], policySetHash: "h", expiresAt,
    },
  });
  await enqueueApprovalRequestsFiled(t.db.sql, [
    { id, orgId: org.orgId, workspaceId: p.workspace.id, workspaceName: p.workspace.name, tool, environment: "prod", status: "pending", revision: 1, closeReason: null, expiresAt },
  ]);
  return id;
}

/**
 * One producer per event type: a real event of that type in the place's workspace. A type added
 * to WEBHOOK_EVENTS without a producer here fails the first test.
 */
const PRODUCERS: Record<WebhookEventType, (p: Place) => Promise<void>> = {
  "plan.needs_approvals": async (p) => void (await plan(p)),
  "plan.approval_added": async (p) => approve(p, await plan(p)),
  "plan.gate_passed": async (p) => approve(p, await plan(p)),
  "plan.approval_withdrawn": async (p) => {
    const id = await plan(p);
    await approve(p, id);
    must(await t.gql(`mutation($planId: ID!) { withdrawApproval(planId: $planId) { __typename ${ERROR_FIELDS} } }`, { planId: id }, p.actor.token), "withdrawApproval");
  },
  // One apply at a time per workspace: the runner reports, so the next producer can apply.
  "plan.apply_started": async (p) => PRODUCERS["plan.apply_finished"](p),
  "plan.apply_finished": async (p) => {
    const id = await plan(p);
    await approve(p, id);
    expect((await o.apply(p.actor.token, id)).__typename).toBe("MutationApplyPlanSuccess");
    must(await t.gql(`mutation($input: ReportPlanResultInput!) { reportPlanResult(input: $input) { __typename ${ERROR_FIELDS} } }`, { input: { planId: id, outcome: "APPLIED" } }, p.actor.token), "reportPlanResult");
  },
  "reservation.placed": async (p) => {
    const placed = await o.reserve(p.actor.token, p.workspace.id);
    p.marks.push(placed.data.id);
    await o.release(p.actor.token, placed.data.id);
  },
  "reservation.released": async (p) => PRODUCERS["reservation.placed"](p),
  "approval_request.filed": async (p) => void (await heldRequest(p)),
  "approval_request.decided": async (p) => {
    const id = await heldRequest(p);
    await t.db.prisma.approvalRequest.update({ where: { id }, data: { status: "approved", decidedAt: new Date() } });
    await enqueueApprovalRequestEvent(t.db.sql, id, "approval_request.decided");
  },
  "workspace.tier_changed": async (p) => {
    const current = await t.db.prisma.workspace.findUniqueOrThrow({ where: { id: p.workspace.id } });
    must(await t.gql(`mutation($input: UpdateWorkspaceInput!) { updateWorkspace(input: $input) { __typename ${ERROR_FIELDS} } }`, { input: { id: p.workspace.id, production: !current.production } }, p.actor.token), "updateWorkspace");
  },
  // Turning the tier off lets destructive calls through: the owner's change, recorded and sent.
  "hold_authority.changed": async (p) => {
    for (const production of [true, false]) {
      must(await t.gql(`mutation($input: UpdateWorkspaceInput!) { updateWorkspace(input: $input) { __typename ${ERROR_FIELDS} } }`, { input: { id: p.workspace.id, production } }, p.actor.token), "updateWorkspace");
    }
  },
  "gateway_policy.saved": async (p) => {
    const rule = uniq("rule");
    p.marks.push(rule);
    const current = await t.db.prisma.gatewayPolicyVersion.findFirst({ where: { workspaceId: p.workspace.id }, orderBy: { version: "desc" } });
    must(
      await t.gql(`mutation($input: SaveGatewayPolicySetInput!) { saveGatewayPolicySet(input: $input) { __typename ${ERROR_FIELDS} } }`, {
        input: { workspaceId: p.workspace.id, expectedVersion: current?.version ?? 0, note: `note ${rule}`, policies: `@id("${rule}") permit (principal, action, resource);` },
      }, p.actor.token),
      "saveGatewayPolicySet",
    );
  },
};

async function place(prefix: string, actor: MemberFixture): Promise<Place> {
  const ws = await seedWorkspace(t, org.orgId, stackId, 1, uniq(prefix));
  return { workspace: { id: ws.id, name: ws.name }, actor, marks: [ws.id, ws.name, actor.userId] };
}

/** Ticks the worker until no delivery of the webhook is queued or in flight. */
async function drain(webhookId: string) {
  const until = Date.now() + 30_000;
  for (;;) {
    const open = await t.db.prisma.webhookDelivery.count({ where: { webhookId, status: { in: ["queued", "delivering"] } } });
    if (open === 0) return;
    if (Date.now() > until) throw new Error("deliveries did not settle in time");
    await t.app.services.webhooks.tick();
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function ownerWithHook(url: string, grants: NonNullable<Parameters<typeof addMember>[2]>["grants"] & object) {
  await t.db.prisma.webhook.updateMany({ where: { orgId: org.orgId }, data: { active: false } });
  const owner = await addMember(t.db, org.orgId, { name: uniq("owner"), grants: [{ resourceType: "webhook", action: "create" }, { resourceType: "webhook", action: "read" }, ...grants] });
  const created = must(await t.gql(CREATE, { input: { url, events: WEBHOOK_EVENTS.map(enumOf), format: "JSON" } }, owner.token), "createWebhook");
  return { owner, webhookId: created.webhook.id as string };
}

describe("webhook payloads carry only what the owner may read", () => {
  it("every event type has a producer here and a read rule in the product", () => {
    expect(Object.keys(PRODUCERS).sort()).toEqual([...WEBHOOK_EVENTS].sort());
    expect(Object.keys(WEBHOOK_EVENT_READ_RULES).sort()).toEqual([...WEBHOOK_EVENTS].sort());
  });

  for (const format of ["JSON", "SLACK"] as const) {
    it(`${format}: for every event type, the readable workspace's event arrives and nothing of the unreadable one reaches the receiver or deliveries.payload`, async () => {
      const hook = await receiver();
      try {
        const { owner, webhookId } = await ownerWithHook(hook.url, [
          { resourceType: "workspace", action: "read", resourcePattern: "seen-%" },
          { resourceType: "approval_request", action: "read", resourcePattern: "seen-%" },
          { resourceType: "gateway_policy", action: "read", resourcePattern: "seen-%" },
          { resourceType: "hold_authority", action: "read", resourcePattern: "seen-%" },
        ]);
        if (format === "SLACK") await t.gql(`mutation($input: UpdateWebhookInput!) { updateWebhook(input: $input) { __typename } }`, { input: { id: webhookId, format: "SLACK" } }, owner.token);
        const seenActor = await addMember(t.db, org.orgId, { name: uniq("seen-actor"), superAdmin: true });
        const hiddenActor = await addMember(t.db, org.orgId, { name: uniq("hidden-actor"), superAdmin: true });
        const seen = await place("seen", seenActor);
        const hidden = await place("hidden", hiddenActor);
        for (const type of WEBHOOK_EVENTS) {
          await PRODUCERS[type](seen);
          await PRODUCERS[type](hidden);
        }
        await drain(webhookId);

        // Nothing of the hidden workspace reached the receiver.
        const wire = hook.bodies.join("\n");
        for (const mark of hidden.marks) expect(wire, `receiver got ${mark}`).not.toContain(mark);
        // Everything of the readable one did, type by type.
        if (format === "JSON") {
          const arrived = new Set(hook.json().map((b) => b.type));
          for (const type of WEBHOOK_EVENTS) expect(arrived.has(type), `${type} of the readable workspace`).toBe(true);
          for (const b of hook.json()) expect(JSON.stringify(b)).toContain(seen.workspace.id);
        } else {
          expect(hook.bodies.length).toBeGreaterThanOrEqual(WEBHOOK_EVENTS.length);
          expect(wire).toContain(seen.workspace.name);
        }

        // The delivery log as the owner reads it: the hidden events were skipped, their payload is null.
        const log = await t.gql(DELIVERIES, { id: webhookId }, owner.token);
        expect(log.errors).toBeUndefined();
        const rows = log.data.webhook.deliveries as { event: string; status: string; lastError: string | null; payload: unknown }[];
        const logText = JSON.stringify(log.data);
        for (const mark of hidden.marks) expect(logText, `delivery log shows ${mark}`).not.toContain(mark);
        const skipped = rows.filter((r) => r.payload === null);
        for (const type of WEBHOOK_EVENTS) {
          expect(skipped.some((r) => r.event === enumOf(type)), `${type} of the hidden workspace is recorded skipped`).toBe(true);
        }
        for (const r of skipped) expect(r).toMatchObject({ status: "SKIPPED", lastError: expect.stringMatching(/^the webhook's owner may not read this event: it needs \(/) });
        for (const r of rows.filter((r) => r.payload !== null)) expect(r.status).toBe("DELIVERED");
      } finally {
        await hook.close();
      }
    });
  }

  it("a grant revoked after the event was queued counts: the owner's rights at delivery time decide", async () => {
    const hook = await receiver();
    try {
      const { owner, webhookId } = await ownerWithHook(hook.url, [{ resourceType: "workspace", action: "read" }]);
      const actor = await addMember(t.db, org.orgId, { name: uniq("actor"), superAdmin: true });
      const p = await place("late", actor);
      await PRODUCERS["plan.needs_approvals"](p);
      // The owner loses (workspace, read) before the worker runs.
      const ownerRole = await t.db.prisma.roleAssignment.findFirstOrThrow({ where: { orgId: org.orgId, userId: owner.userId } });
      await t.db.prisma.rolePermission.deleteMany({ where: { roleId: ownerRole.roleId, resourceType: "workspace" } });
      await drain(webhookId);
      expect(hook.bodies).toEqual([]);
      const rows = await t.db.prisma.webhookDelivery.findMany({ where: { webhookId } });
      expect(rows.length).toBeGreaterThan(0);
      for (const r of rows) expect(r).toMatchObject({ status: "skipped", lastError: expect.stringContaining("the webhook's owner may not read this event") });
    } finally {
      await hook.close();
    }
  });

  it("an unknown event type, and a webhook with no owner recorded, deliver nothing (fail closed)", async () => {
    const hook = await receiver();
    try {
      const { webhookId } = await ownerWithHook(hook.url, [{ resourceType: "workspace", action: "read" }]);
      const p = await place("unknown", await addMember(t.db, org.orgId, { superAdmin: true }));
      await t.db.sql.query(
        `INSERT INTO webhook_deliveries (id, "orgId", "webhookId", "eventId", "eventType", payload, status, "nextRunAt", "updatedAt")
         VALUES (gen_random_uuid()::text, $1, $2, gen_random_uuid()::text, 'workspace.secret_event', $3::jsonb, 'queued', now(), now())`,
        [org.orgId, webhookId, JSON.stringify({ id: "e", type: "workspace.secret_event", organizationId: org.orgId, summary: p.workspace.name, data: { workspace: { id: p.workspace.id, name: p.workspace.name } } })],
      );
      await drain(webhookId);
      expect(hook.bodies).toEqual([]);
      const [unknown] = await t.db.prisma.webhookDelivery.findMany({ where: { webhookId } });
      expect(unknown).toMatchObject({ status: "skipped", lastError: expect.stringContaining("has no read rule") });

      // No creator: the webhook speaks for nobody.
      await t.db.prisma.webhook.update({ where: { id: webhookId }, data: { createdById: null } });
      await PRODUCERS["workspace.tier_changed"](p);
      await drain(webhookId);
      expect(hook.bodies).toEqual([]);
      const rows = await t.db.prisma.webhookDelivery.findMany({ where: { webhookId, eventType: "workspace.tier_changed" } });
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ status: "skipped", lastError: expect.stringContaining("no owner recorded") });
    } finally {
      await hook.close();
    }
  });

  it("a subject readable without its workspace: gateway_policy.saved arrives with the workspace name removed", async () => {
    const hook = await receiver();
    try {
      const { webhookId } = await ownerWithHook(hook.url, [{ resourceType: "gateway_policy", action: "read" }]);
      const p = await place("named", await addMember(t.db, org.orgId, { superAdmin: true }));
      await PRODUCERS["gateway_policy.saved"](p);
      await PRODUCERS["workspace.tier_changed"](p);
      await drain(webhookId);
      const bodies = hook.json();
      expect(bodies.map((b) => b.type)).toEqual(["gateway_policy.saved"]);
      expect(bodies[0].data.workspace).toEqual({ id: p.workspace.id, name: null });
      expect(hook.bodies.join("\n")).not.toContain(p.workspace.name);
    } finally {
      await hook.close();
    }
  });
});
