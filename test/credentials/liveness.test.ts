// A credential is only as alive as everything it stands for. Every credential kind is a row of
// CREDENTIAL_KINDS (how to mint it, how to use it, what "refused" looks like), each event one of
// EVENTS (the organization deleted, the workspace archived, the issuer removed); the test runs
// every kind under every event that applies to it, each in a fresh organization: the credential
// works before the event and is refused after it.

import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { validateApprovalRules } from "../../src/domain/approvals/policy.js";
import type { Prisma } from "../../src/generated/prisma/client.js";
import { sealWebhookSecret } from "../../src/services/webhooks.js";
import { createWebhookWorker } from "../../src/workers/webhook-delivery.js";
import { createDeliveryWorker } from "../../src/workers/delivery.js";
import { addMember, createOrg, type MemberFixture } from "../helpers/fixtures.js";
import { trackedClient, within } from "../operator/ws.js";
import { APPROVAL_SECRET, SERVICE_TOKEN, TWO_REVIEWERS, createWorld, vote, type World } from "../approvals/world.js";

let world: World;
let baseUrl: string;
let counter = 0;

beforeAll(async () => {
  world = await createWorld();
  baseUrl = await world.t.listen();
});
afterAll(() => world.close());

/** One organization with everything a credential can stand for: a prod workspace, its connection, reviewers, a policy. */
async function tenant() {
  const { db } = world;
  const org = await createOrg(db);
  const n = ++counter;
  const stack = await db.prisma.stack.create({ data: { orgId: org.orgId, name: `payments-${n}`, authzGroups: ["team-payments"] } });
  const workspace = await db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: `payments-prod-${n}`, environment: "prod", production: true } });
  await db.prisma.connection.create({ data: { orgId: org.orgId, workspaceId: workspace.id, name: "github", provider: "github", url: world.upstream.url } });
  const reviewers: MemberFixture[] = [];
  for (let i = 0; i < 2; i++) reviewers.push(await addMember(db, org.orgId, { role: "approval-reviewer" }));
  const valid = validateApprovalRules(TWO_REVIEWERS);
  if (!valid.ok) throw new Error("rules");
  await db.prisma.approvalPolicy.create({ data: { orgId: org.orgId, workspaceId: workspace.id, name: `p-${n}`, rules: valid.rules as unknown as Prisma.InputJsonValue } });
  // The issuer: the member who mints the credential (and whose removal is one of the events).
  const issuer = await addMember(db, org.orgId, { role: "admin" });
  return { org, workspace, reviewers, issuer };
}
type Tenant = Awaited<ReturnType<typeof tenant>>;

async function mintKey(tn: Tenant) {
  const plaintext = generateVirtualKey();
  await world.db.prisma.virtualKey.create({
    data: { orgId: tn.org.orgId, workspaceId: tn.workspace.id, name: "agent", keyHash: hashVirtualKey(plaintext), prefix: virtualKeyPrefix(plaintext), createdById: tn.issuer.userId },
  });
  return plaintext;
}

const call = (key: string, args: Record<string, unknown>) =>
  world.gateway.handleToolCall({
    authorization: `Bearer ${key}`,
    body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: args } },
  });

/** Holds a call with a fresh key and files it; `approve` also brings it to quorum. */
async function heldCall(tn: Tenant, approve: boolean) {
  const key = await mintKey(tn);
  const held = await call(key, { repo: `acme/${++counter}` });
  if (held.outcome.kind !== "approval_required") throw new Error(`expected a hold, got ${JSON.stringify(held.body)}`);
  await world.ingest.tick();
  const approvalId = held.outcome.approvalId;
  if (approve) for (const r of tn.reviewers) await vote(world, r, approvalId);
  return { key, approvalId };
}

type Verdict = { ok: boolean; detail: unknown };

interface CredentialKind {
  name: string;
  /** The events this kind depends on. */
  events: readonly EventName[];
  /** Mints the credential (and whatever using it needs) in the tenant. */
  mint(tn: Tenant): Promise<unknown>;
  /** Uses it: ok means it worked (before the event it must; after, it must not). */
  use(tn: Tenant, minted: any): Promise<Verdict>;
}

const ALL = ["organization deleted", "workspace archived", "issuer removed"] as const;
type EventName = (typeof ALL)[number];
const NO_WORKSPACE = ["organization deleted", "issuer removed"] as const;

const EVENTS: Record<EventName, (tn: Tenant) => Promise<void>> = {
  "organization deleted": async (tn) => {
    const res = await world.t.gql(`mutation { deleteOrganization { __typename } }`, {}, tn.org.adminToken);
    expect(res.data.deleteOrganization.__typename).toBe("MutationDeleteOrganizationSuccess");
  },
  "workspace archived": async (tn) => {
    const res = await world.t.gql(`mutation($id: ID!) { archiveWorkspace(id: $id) { __typename } }`, { id: tn.workspace.id }, tn.org.adminToken);
    expect(res.data.archiveWorkspace.__typename).toBe("MutationArchiveWorkspaceSuccess");
  },
  "issuer removed": async (tn) => {
    const res = await world.t.gql(`mutation($id: ID!) { deactivateMember(userId: $id) { __typename } }`, { id: tn.issuer.userId }, tn.org.adminToken);
    expect(res.data.deactivateMember.__typename).toBe("MutationDeactivateMemberSuccess");
  },
};

/** A real receiver for webhook deliveries. */
const received: string[] = [];
const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    received.push(Buffer.concat(chunks).toString("utf8"));
    res.end("ok");
  });
});
const WEBHOOK_KEY = "liveness-test-webhook-key-0123456789abcdef";

export const CREDENTIAL_KINDS: CredentialKind[] = [
  {
    name: "API token (GraphQL over HTTP)",
    events: NO_WORKSPACE,
    mint: async (tn) => tn.issuer.token,
    use: async (_tn, token: string) => {
      const res = await world.t.gql(`{ viewer { id } }`, {}, token);
      return { ok: Boolean(res.data?.viewer?.id), detail: res };
    },
  },
  {
    name: "API token on an open WebSocket",
    events: NO_WORKSPACE,
    mint: async (tn) => {
      const tracked = trackedClient(baseUrl, tn.issuer.token, { lazy: false });
      // One query answered over the socket: it is authenticated and counted as live.
      await new Promise<void>((resolve, reject) => tracked.client.subscribe({ query: "{ viewer { id } }" }, { next: () => resolve(), error: reject, complete: () => resolve() }));
      return tracked;
    },
    use: async (_tn, tracked: ReturnType<typeof trackedClient>) => {
      // Closed within a few seconds of the event, with 4401 (the sweep alone would take 30 s).
      const closed = await within(tracked.closed, 3_000, "socket close").catch(() => null);
      tracked.client.dispose();
      return { ok: closed === null, detail: closed };
    },
  },
  {
    name: "virtual key: tools/list",
    events: ALL,
    mint: mintKey,
    use: async (_tn, key: string) => {
      const listed = await world.gateway.listTools({ authorization: `Bearer ${key}` });
      return { ok: listed.ok, detail: listed };
    },
  },
  {
    name: "virtual key: tools/call",
    events: ALL,
    mint: mintKey,
    use: async (_tn, key: string) => {
      const before = await world.streamLength();
      const res = await call(key, { repo: `acme/${++counter}` });
      // Refused: 401, and nothing held or filed for it.
      return { ok: res.status !== 401 || (await world.streamLength()) !== before, detail: res.body };
    },
  },
  {
    name: "virtual key: the agent's status read (GET /gateway/v1/approvals/{id})",
    events: ALL,
    mint: (tn) => heldCall(tn, false),
    use: async (_tn, h: { key: string; approvalId: string }) => {
      const res = await world.gateway.approvalStatus({ authorization: `Bearer ${h.key}`, approvalId: h.approvalId });
      return { ok: res.status === 200, detail: res.body };
    },
  },
  {
    name: "held ticket filed by ingest",
    events: ALL,
    mint: async (tn) => {
      const key = await mintKey(tn);
      const held = await call(key, { repo: `acme/${++counter}` });
      if (held.outcome.kind !== "approval_required") throw new Error(JSON.stringify(held.body));
      return held.outcome.approvalId;
    },
    use: async (_tn, approvalId: string) => {
      await world.ingest.tick();
      const request = await world.db.prisma.approvalRequest.findUnique({ where: { id: approvalId } });
      return { ok: request !== null && request.status === "pending", detail: request };
    },
  },
  {
    name: "held call delivered by the delivery worker",
    events: ALL,
    mint: (tn) => heldCall(tn, true),
    use: async (_tn, h: { approvalId: string }) => {
      const ran = world.executions.length;
      await world.delivery.tick();
      const request = await world.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id: h.approvalId }, include: { delivery: true } });
      const executed = world.executions.length > ran;
      // Refused: nothing ran, and the request says why (its execution failed with a code).
      if (!executed) expect(request).toMatchObject({ executionStatus: "failed", delivery: { status: "failed" } });
      return { ok: executed, detail: request.delivery };
    },
  },
  {
    name: "resume (POST /internal/v1/approvals/resume) of a held call",
    events: ALL,
    mint: async (tn) => {
      const h = await heldCall(tn, true);
      // The delivery worker's resume request, captured before it reaches the gateway (the
      // gateway answers 503 so the job waits): the test sends it after the event.
      let body: unknown = null;
      const capture = createDeliveryWorker({
        db: world.db,
        events: world.t.events,
        logger: world.logger,
        approvalSecret: APPROVAL_SECRET,
        gatewayUrl: world.gatewayUrl,
        serviceToken: SERVICE_TOKEN,
        intervalMs: 0,
        fetch: async (_url, init) => {
          // The tick may also retry an earlier case's due job: keep only this held call's request.
          if (String(init?.body).includes(h.approvalId)) body = JSON.parse(String(init?.body));
          return new Response(JSON.stringify({ error: "not_ready" }), { status: 503 });
        },
      });
      await capture.tick();
      if (!body) throw new Error("no resume request was sent");
      return body;
    },
    use: async (_tn, body: unknown) => {
      const ran = world.executions.length;
      const res = await world.gateway.resume({ authorization: `Bearer ${SERVICE_TOKEN}`, body });
      return { ok: world.executions.length > ran || res.status === 200, detail: res.body };
    },
  },
  {
    name: "webhook delivery",
    events: NO_WORKSPACE,
    mint: async (tn) => {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook/${++counter}`;
      const webhook = await world.db.prisma.webhook.create({
        data: { orgId: tn.org.orgId, url, events: ["PLAN_NEEDS_APPROVALS"], format: "json", secretSealed: sealWebhookSecret(WEBHOOK_KEY, "whsec_test"), createdById: tn.issuer.userId },
      });
      return { webhook, url };
    },
    use: async (tn, m: { webhook: { id: string }; url: string }) => {
      const eventId = `evt-${++counter}`;
      // An event of the tenant's workspace, which the webhook's owner (the issuer, an admin) may read.
      const body = { id: eventId, type: "plan.needs_approvals", organizationId: tn.org.orgId, data: { plan: { workspace: { id: tn.workspace.id, name: tn.workspace.name } } } };
      await world.db.prisma.webhookDelivery.create({
        data: { orgId: tn.org.orgId, webhookId: m.webhook.id, eventId, eventType: "plan.needs_approvals", payload: body },
      });
      const worker = createWebhookWorker({
        db: world.db,
        config: { ...world.t.config, webhooks: { ...world.t.config.webhooks, allowPrivate: true, secretKey: WEBHOOK_KEY } },
        logger: world.logger,
      });
      await worker.tick();
      const delivery = await world.db.prisma.webhookDelivery.findFirstOrThrow({ where: { eventId } });
      const sent = received.some((r) => r.includes(eventId));
      if (!sent) expect(delivery).toMatchObject({ status: "failed" });
      return { ok: sent, detail: delivery };
    },
  },
];

beforeAll(() => new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve)));
afterAll(() => new Promise<void>((resolve) => receiver.close(() => resolve())));

describe("a credential is only as alive as everything it stands for", () => {
  for (const kind of CREDENTIAL_KINDS) {
    for (const event of kind.events) {
      it(`${kind.name}: works while live, refused once its ${event}`, async () => {
        // Works in a live tenant (a second credential of the same kind, used before the event).
        const control = await tenant();
        const live = await kind.use(control, await kind.mint(control));
        expect(live.ok, `works while live: ${JSON.stringify(live.detail)}`).toBe(true);

        const tn = await tenant();
        const minted = await kind.mint(tn);
        await EVENTS[event](tn);
        const after = await kind.use(tn, minted);
        expect(after.ok, `refused after "${event}": ${JSON.stringify(after.detail)}`).toBe(false);
      });
    }
  }

  it("deleting the organization stops every kind", () => {
    for (const kind of CREDENTIAL_KINDS) expect(kind.events, kind.name).toContain("organization deleted");
  });
});
