// The outbound address policy as a class (src/domain/address-policy.ts): every range of the
// product's own table (each example), every IPv6 form that carries an IPv4 address (generated
// over loopback, private and metadata IPv4 addresses), the spellings the URL parser folds into
// them, and names resolving to loopback — against every surface that sends a request out:
// webhook create/update and delivery, connection create/update and the connection's tools
// read/call at connect time; with the operator's flag off and on. A refusal is a typed error at
// save and a generic reason at connect, and the real listeners on loopback see NO connection.

import { randomBytes } from "node:crypto";
import dns from "node:dns/promises";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ADDRESS_RANGES, embedIPv4, judgeAddress, type AddressVerdict } from "../../src/domain/address-policy.js";
import { createUpstreamPool } from "../../src/gateway/upstream.js";
import { createLogger } from "../../src/infra/logger.js";
import { createWebhookWorker } from "../../src/workers/webhook-delivery.js";
import { sealWebhookSecret } from "../../src/services/webhooks.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";

// Each case runs every address form through several surfaces (about a hundred operations):
// more than the default 30 s on a loaded machine.
vi.setConfig({ testTimeout: 120_000 });

const SECRET_KEY = randomBytes(32).toString("hex");
const APPROVAL_SECRET = "outbound-test-approval-secret-0123456789";

/** A raw TCP listener on loopback (IPv4 and, when the host has it, IPv6) counting every connection. */
type Listener = { port: number; connections: () => number; close(): Promise<void> };
async function listener(): Promise<Listener> {
  let count = 0;
  const servers: net.Server[] = [];
  const open = (host: string, port: number) =>
    new Promise<net.Server | null>((resolve) => {
      const s = net.createServer((socket) => {
        count++;
        socket.destroy();
      });
      s.once("error", () => resolve(null));
      s.listen(port, host, () => resolve(s));
    });
  const v4 = (await open("127.0.0.1", 0))!;
  servers.push(v4);
  const port = (v4.address() as net.AddressInfo).port;
  const v6 = await open("::1", port);
  if (v6) servers.push(v6);
  return { port, connections: () => count, close: () => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))).then(() => {}) };
}

// ── The forms, generated from the product's table ─────────────────────────────────────────────

type Form = { host: string; verdict: AddressVerdict; why: string };

const bracket = (address: string) => (address.includes(":") ? `[${address}]` : address);
const verdictOfV4 = (v4: string): AddressVerdict => {
  const range = ADDRESS_RANGES.find((r) => r.verdict !== "embedded" && r.examples.includes(v4));
  if (!range) throw new Error(`${v4} is not an example of the table`);
  return range.verdict as AddressVerdict;
};

/** IPv4 addresses each embedding range is written with: loopback, private, metadata. */
const CARRIED = ["127.0.0.1", "10.0.0.1", "192.168.1.1", "169.254.169.254", "0.0.0.0"];

const FORMS: Form[] = [
  ...ADDRESS_RANGES.flatMap((range) =>
    range.verdict === "embedded"
      ? [
          ...range.examples.map((e) => ({ host: bracket(e), verdict: "private" as const, why: `${range.name} example ${e}` })),
          ...CARRIED.map((v4) => ({ host: bracket(embedIPv4(range.cidr, v4)), verdict: verdictOfV4(v4), why: `${v4} inside ${range.name}` })),
        ]
      : range.examples.map((e) => ({ host: bracket(e), verdict: range.verdict as AddressVerdict, why: `${range.name} example ${e}` })),
  ),
  // Spellings the URL parser folds into 127.0.0.1 / the forms above.
  { host: "2130706433", verdict: "private", why: "decimal IPv4" },
  { host: "0x7f.1", verdict: "private", why: "hex, two-part IPv4" },
  { host: "017700000001", verdict: "private", why: "octal IPv4" },
  { host: "0x7f000001", verdict: "private", why: "hex IPv4" },
  { host: "127.1", verdict: "private", why: "short IPv4" },
  { host: "127.0.0.1.", verdict: "private", why: "trailing dot" },
  { host: "0", verdict: "refused", why: "0 as an IPv4 address" },
  { host: "[::127.0.0.1]", verdict: "private", why: "IPv4-compatible, dotted" },
  { host: "[::ffff:0:127.0.0.1]", verdict: "private", why: "SIIT, dotted" },
  { host: "[0:0:0:0:0:ffff:169.254.169.254]", verdict: "refused", why: "mapped metadata, long form" },
  // Names: loopback by definition, and metadata names.
  { host: "localhost", verdict: "private", why: "localhost" },
  { host: "localhost.", verdict: "private", why: "localhost, trailing dot" },
  { host: "LocalHost", verdict: "private", why: "localhost, mixed case" },
  { host: "api.localhost", verdict: "private", why: "a .localhost name" },
  { host: "metadata.google.internal", verdict: "refused", why: "metadata name" },
];

const PUBLIC = ["8.8.8.8", "93.184.216.34", "172.32.0.1", "[2606:4700:4700::1111]", "[::ffff:8.8.8.8]", "[64:ff9b::808:808]", "hooks.example.com"];

const allowed = (verdict: AddressVerdict, allowPrivate: boolean) => verdict === "public" || (verdict === "private" && allowPrivate);

// ── The world: one app with both flags off, one with both on ──────────────────────────────────

type Side = { t: TestApp; org: OrgFixture; workspaceId: string; allowPrivate: boolean };
let strict: Side;
let open: Side;
let hole: Listener;

async function side(allowPrivate: boolean): Promise<Side> {
  const flag = allowPrivate ? "1" : "0";
  const t = await startTestApp({
    env: { COUNTERSIGN_WEBHOOK_ALLOW_PRIVATE: flag, COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE: flag, COUNTERSIGN_WEBHOOK_SECRET_KEY: SECRET_KEY, COUNTERSIGN_APPROVAL_SECRET: APPROVAL_SECRET, COUNTERSIGN_WEBHOOK_TIMEOUT_MS: "2000" },
  });
  const org = await createOrg(t.db);
  const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: `s-${t.schemaName}` } });
  const ws = await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: "outbound-prod", environment: "prod", production: true } });
  return { t, org, workspaceId: ws.id, allowPrivate };
}

beforeAll(async () => {
  hole = await listener();
  [strict, open] = await Promise.all([side(false), side(true)]);
});
afterAll(async () => {
  await Promise.all([strict?.t.close(), open?.t.close()]);
  await hole?.close();
});

const urlOf = (host: string) => `http://${host}:${hole.port}/latest/meta-data/`;
/** Forms the URL parser turns into exactly the listener's address, or `localhost`. */
const reachesListener = (host: string) => ["127.0.0.1", "localhost"].includes(new URL(urlOf(host)).hostname);

const CREATE_HOOK = `mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { __typename
  ... on MutationCreateWebhookSuccess { data { webhook { id url } } } ... on ValidationError { issues { field code message } } ... on Error { code message } } }`;
const UPDATE_HOOK = `mutation($input: UpdateWebhookInput!) { updateWebhook(input: $input) { __typename
  ... on ValidationError { issues { field code message } } ... on Error { code message } } }`;
const CREATE_CONN = `mutation($input: CreateToolConnectionInput!) { createToolConnection(input: $input) { __typename
  ... on MutationCreateToolConnectionSuccess { data { id url } } ... on ValidationError { issues { field code message } } ... on Error { code message } } }`;
const UPDATE_CONN = `mutation($input: UpdateToolConnectionInput!) { updateToolConnection(input: $input) { __typename
  ... on ValidationError { issues { field code message } } ... on Error { code message } } }`;
const TOOLS = `query($w: ID!) { toolConnections(workspaceId: $w) { id tools { __typename
  ... on ToolConnectionToolsSuccess { data { name } } ... on UpstreamUnavailableError { code reason message } } } }`;

let seq = 0;
const next = () => `c${++seq}`;

/**
 * A queued event of the side's workspace, as enqueueWebhookEvent writes it: a delivery is sent
 * only with what its webhook's owner (the org's admin here) may read, so it names a workspace.
 */
const planEvent = (org: OrgFixture) => {
  const side = [strict, open].find((x) => x.org.orgId === org.orgId)!;
  return { type: "plan.needs_approvals", organizationId: org.orgId, data: { plan: { workspace: { id: side.workspaceId, name: "outbound-prod" } } } };
};

for (const flagOn of [false, true]) {
  const s = () => (flagOn ? open : strict);
  describe(`with the operator's flags ${flagOn ? "on" : "off"}`, () => {
    it("webhook create and update: a refused form is a ValidationError on input.url; an allowed one saves", async () => {
      const { t, org } = s();
      const base = await t.gql(CREATE_HOOK, { input: { url: "https://hooks.example.com/base", events: ["PLAN_NEEDS_APPROVALS"] } }, org.adminToken);
      const baseId = base.data.createWebhook.data.webhook.id;
      for (const form of FORMS) {
        const created = (await t.gql(CREATE_HOOK, { input: { url: urlOf(form.host), events: ["PLAN_NEEDS_APPROVALS"] } }, org.adminToken)).data.createWebhook;
        const updated = (await t.gql(UPDATE_HOOK, { input: { id: baseId, url: urlOf(form.host) } }, org.adminToken)).data.updateWebhook;
        for (const answer of [created, updated]) {
          if (allowed(form.verdict, flagOn)) expect(answer.__typename, form.why).toMatch(/Success$/);
          else expect(answer, form.why).toMatchObject({ __typename: "ValidationError", issues: [{ field: "input.url", message: expect.stringMatching(/^The URL points at /) }] });
        }
        await t.db.prisma.webhook.deleteMany({ where: { orgId: org.orgId, id: { not: baseId } } });
      }
      for (const host of PUBLIC) {
        const created = (await t.gql(CREATE_HOOK, { input: { url: urlOf(host), events: ["PLAN_NEEDS_APPROVALS"] } }, org.adminToken)).data.createWebhook;
        expect(created.__typename, host).toBe("MutationCreateWebhookSuccess");
      }
      await t.db.prisma.webhook.deleteMany({ where: { orgId: org.orgId } });
    });

    it("connection create and update: a refused form is a ValidationError on input.url; an allowed one saves", async () => {
      const { t, org, workspaceId } = s();
      const base = await t.gql(CREATE_CONN, { input: { workspaceId, name: next(), provider: "github", url: "https://mcp.example.com/mcp" } }, org.adminToken);
      const baseId = base.data.createToolConnection.data.id;
      for (const form of FORMS) {
        const created = (await t.gql(CREATE_CONN, { input: { workspaceId, name: next(), provider: "github", url: urlOf(form.host) } }, org.adminToken)).data.createToolConnection;
        const updated = (await t.gql(UPDATE_CONN, { input: { id: baseId, url: urlOf(form.host) } }, org.adminToken)).data.updateToolConnection;
        for (const answer of [created, updated]) {
          if (allowed(form.verdict, flagOn)) expect(answer.__typename, form.why).toMatch(/Success$/);
          else expect(answer, form.why).toMatchObject({ __typename: "ValidationError", issues: [{ field: "input.url", message: expect.stringMatching(/^The upstream URL points at /) }] });
        }
      }
      for (const host of PUBLIC) {
        const created = (await t.gql(CREATE_CONN, { input: { workspaceId, name: next(), provider: "github", url: urlOf(host) } }, org.adminToken)).data.createToolConnection;
        expect(created.__typename, host).toBe("MutationCreateToolConnectionSuccess");
      }
      await t.db.prisma.connection.deleteMany({ where: { workspaceId } });
    });

    // At connect time the saved URL is not trusted: rows are written as they would be after a
    // DNS change, a policy change, or by an older version.
    const refusedAtConnect = () => FORMS.filter((f) => !allowed(f.verdict, flagOn));

    it("webhook delivery: every refused form fails as refused, permanently, naming no address, and nothing connects", async () => {
      const { t, org } = s();
      const worker = createWebhookWorker({ db: t.db, config: { ...t.config, webhooks: { ...t.config.webhooks, allowPrivate: flagOn } }, logger: createLogger("silent"), batchSize: 200 });
      const before = hole.connections();
      const ids = new Map<string, Form>();
      for (const form of refusedAtConnect()) {
        const hook = await t.db.prisma.webhook.create({ data: { orgId: org.orgId, url: urlOf(form.host), events: ["plan.needs_approvals"], format: "json", secretSealed: sealWebhookSecret(SECRET_KEY, "whsec_test"), createdById: org.adminId } });
        const row = await t.db.prisma.webhookDelivery.create({ data: { orgId: org.orgId, webhookId: hook.id, eventId: `e-${hook.id}`, eventType: "plan.needs_approvals", payload: planEvent(org) } });
        ids.set(row.id, form);
      }
      while ((await worker.tick()) > 0);
      const rows = await t.db.prisma.webhookDelivery.findMany({ where: { id: { in: [...ids.keys()] } } });
      expect(rows).toHaveLength(ids.size);
      for (const row of rows) {
        const form = ids.get(row.id)!;
        expect({ status: row.status, lastError: row.lastError }, form.why).toEqual({ status: "failed", lastError: "refused: the receiver's host does not resolve to an allowed address" });
      }
      expect(hole.connections()).toBe(before);
      await t.db.prisma.webhook.deleteMany({ where: { orgId: org.orgId } });
    });

    it("connection tools read (GraphQL) and tools/call (the gateway's pool): every refused form is upstream_unavailable with a generic reason, and nothing connects", async () => {
      const { t, org, workspaceId } = s();
      const pool = createUpstreamPool({ approvalSecret: APPROVAL_SECRET, addresses: { allowPrivate: flagOn }, defaultTimeoutMs: 2_000 });
      const before = hole.connections();
      const forms = new Map<string, Form>();
      for (const form of refusedAtConnect()) {
        const row = await t.db.prisma.connection.create({ data: { orgId: org.orgId, workspaceId, name: next(), provider: "github", url: urlOf(form.host) } });
        forms.set(row.id, form);
        await expect(pool.call(row, "delete_repo", {}), form.why).rejects.toMatchObject({ code: "upstream_unavailable", message: "the upstream's host does not resolve to an allowed address" });
      }
      const listed = (await t.gql(TOOLS, { w: workspaceId }, org.adminToken)).data.toolConnections as { id: string; tools: unknown }[];
      for (const c of listed) {
        expect(c.tools, forms.get(c.id)!.why).toEqual({ __typename: "UpstreamUnavailableError", code: "UPSTREAM_UNAVAILABLE", reason: "upstream_unavailable", message: "the upstream's host does not resolve to an allowed address" });
      }
      expect(listed).toHaveLength(forms.size);
      expect(hole.connections()).toBe(before);
      await pool.close();
      await t.db.prisma.connection.deleteMany({ where: { workspaceId } });
    });
  });
}

describe("a name is judged by what it resolves to, at connect time", () => {
  it("this machine's hostname resolves to loopback: saved as a public name, refused at delivery and at connect without the flag, connected to with it", async () => {
    const name = os.hostname();
    const resolved = await dns.lookup(name, { all: true });
    // The precondition the test stands on (this sandbox's /etc/hosts maps its hostname to 127.0.0.1).
    expect(resolved.length).toBeGreaterThan(0);
    expect(resolved.every((a) => a.address.startsWith("127."))).toBe(true);
    for (const sideOf of [strict, open]) {
      const { t, org, workspaceId, allowPrivate } = sideOf;
      const before = hole.connections();
      const saved = (await t.gql(CREATE_HOOK, { input: { url: urlOf(name), events: ["PLAN_NEEDS_APPROVALS"] } }, org.adminToken)).data.createWebhook;
      expect(saved.__typename).toBe("MutationCreateWebhookSuccess");
      const webhookId = saved.data.webhook.id;
      const row = await t.db.prisma.webhookDelivery.create({ data: { orgId: org.orgId, webhookId, eventId: `e-${webhookId}`, eventType: "plan.needs_approvals", payload: planEvent(org) } });
      await createWebhookWorker({ db: t.db, config: t.config, logger: createLogger("silent") }).tick();
      const after = await t.db.prisma.webhookDelivery.findUniqueOrThrow({ where: { id: row.id } });
      const conn = (await t.gql(CREATE_CONN, { input: { workspaceId, name: next(), provider: "github", url: urlOf(name) } }, org.adminToken)).data.createToolConnection;
      expect(conn.__typename).toBe("MutationCreateToolConnectionSuccess");
      const tools = (await t.gql(TOOLS, { w: workspaceId }, org.adminToken)).data.toolConnections.find((c: { id: string }) => c.id === conn.data.id).tools;
      if (allowPrivate) {
        expect(after.lastError).not.toMatch(/^refused/);
        expect(tools).toMatchObject({ __typename: "UpstreamUnavailableError", message: "the upstream closed the connection" });
        expect(hole.connections() - before).toBe(2);
      } else {
        expect(after).toMatchObject({ status: "failed", lastError: "refused: the receiver's host does not resolve to an allowed address" });
        expect(tools).toMatchObject({ __typename: "UpstreamUnavailableError", reason: "upstream_unavailable", message: "the upstream's host does not resolve to an allowed address" });
        expect(hole.connections()).toBe(before);
      }
      await t.db.prisma.webhook.deleteMany({ where: { orgId: org.orgId } });
      await t.db.prisma.connection.deleteMany({ where: { workspaceId } });
    }
  });
});

describe("a redirect does not escape the policy", () => {
  it("a webhook receiver or an upstream answering a redirect to another address is not followed: the listener there sees nothing", async () => {
    const { t, org, workspaceId } = open;
    const target = `http://127.0.0.1:${hole.port}/latest/meta-data/`;
    const redirector = http.createServer((req, res) => {
      req.resume();
      res.writeHead(req.url?.startsWith("/307") ? 307 : 302, { location: target }).end();
    });
    await new Promise<void>((r) => redirector.listen(0, "127.0.0.1", r));
    const port = (redirector.address() as net.AddressInfo).port;
    try {
      const before = hole.connections();
      const hook = await t.db.prisma.webhook.create({ data: { orgId: org.orgId, url: `http://127.0.0.1:${port}/302`, events: ["plan.needs_approvals"], format: "json", secretSealed: sealWebhookSecret(SECRET_KEY, "whsec_test"), createdById: org.adminId } });
      const row = await t.db.prisma.webhookDelivery.create({ data: { orgId: org.orgId, webhookId: hook.id, eventId: `e-${hook.id}`, eventType: "plan.needs_approvals", payload: planEvent(org) } });
      await createWebhookWorker({ db: t.db, config: t.config, logger: createLogger("silent") }).tick();
      expect(await t.db.prisma.webhookDelivery.findUniqueOrThrow({ where: { id: row.id } })).toMatchObject({ responseCode: 302, lastError: "HTTP 302" });
      const pool = createUpstreamPool({ approvalSecret: APPROVAL_SECRET, addresses: { allowPrivate: true }, defaultTimeoutMs: 2_000 });
      for (const path of ["/302", "/307"]) {
        const conn = await t.db.prisma.connection.create({ data: { orgId: org.orgId, workspaceId, name: next(), provider: "github", url: `http://127.0.0.1:${port}${path}` } });
        await expect(pool.tools(conn)).rejects.toMatchObject({ code: "upstream_unavailable", message: "the upstream answered a redirect, which is not followed" });
      }
      await pool.close();
      expect(hole.connections()).toBe(before);
    } finally {
      await new Promise((r) => redirector.close(r));
      await t.db.prisma.webhook.deleteMany({ where: { orgId: org.orgId } });
      await t.db.prisma.connection.deleteMany({ where: { workspaceId } });
    }
  });
});

describe("the listener is reachable (the no-connection assertions above could fail)", () => {
  it("with the flag on, a loopback form is connected to, by the webhook sender and by the upstream pool", async () => {
    const { t, org, workspaceId } = open;
    const loopback = FORMS.filter((f) => f.verdict === "private" && reachesListener(f.host));
    expect(loopback.length).toBeGreaterThan(5);
    const worker = createWebhookWorker({ db: t.db, config: t.config, logger: createLogger("silent"), batchSize: 200 });
    const pool = createUpstreamPool({ approvalSecret: APPROVAL_SECRET, addresses: { allowPrivate: true }, defaultTimeoutMs: 2_000 });
    for (const form of loopback) {
      const before = hole.connections();
      const hook = await t.db.prisma.webhook.create({ data: { orgId: org.orgId, url: urlOf(form.host), events: ["plan.needs_approvals"], format: "json", secretSealed: sealWebhookSecret(SECRET_KEY, "whsec_test"), createdById: org.adminId } });
      await t.db.prisma.webhookDelivery.create({ data: { orgId: org.orgId, webhookId: hook.id, eventId: `e-${hook.id}`, eventType: "plan.needs_approvals", payload: planEvent(org) } });
      await worker.tick();
      const conn = await t.db.prisma.connection.create({ data: { orgId: org.orgId, workspaceId, name: next(), provider: "github", url: urlOf(form.host) } });
      await pool.call(conn, "x", {}).catch(() => {});
      expect(hole.connections() - before, form.why).toBeGreaterThanOrEqual(2);
    }
    await pool.close();
  });

  it("the table's own examples are judged as the table says (the policy reads its table)", () => {
    for (const range of ADDRESS_RANGES) {
      for (const e of range.examples) expect(judgeAddress(e).verdict, `${range.cidr} ${e}`).toBe(range.verdict === "embedded" ? "private" : range.verdict);
    }
  });
});
