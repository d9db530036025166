// Approving from Slack, end to end: a Slack-format webhook delivers the message (with its buttons)
// to a local receiver standing in for Slack's incoming webhook; clicks are posted to the
// interactivity endpoint signed exactly as Slack documents (v0 HMAC-SHA256 of
// `v0:<timestamp>:<body>`, form-encoded `payload`); the same receiver stands in for the
// payload's response_url and records every update. Real PostgreSQL, Redis, gateway and workers.

import { createHmac, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp, type App } from "../../src/app.js";
import { createLogger } from "../../src/infra/logger.js";
import { addMember, type MemberFixture } from "../helpers/fixtures.js";
import { createWorld, heldAndFiled, type World } from "../approvals/world.js";

const TEAM = "T0COUNTERSIGN";
const SECRET = randomBytes(16).toString("hex");

type Received = { path: string; body: any };

/** Stands in for Slack: the incoming webhook (/incoming) and every response_url (/response/<n>). */
function startSlackStandIn() {
  const queues = new Map<string, Received[]>();
  const waiting = new Map<string, (r: Received) => void>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
      const r: Received = { path: req.url ?? "/", body: JSON.parse(Buffer.concat(chunks).toString("utf8")) };
      const wake = waiting.get(r.path);
      if (wake) {
        waiting.delete(r.path);
        wake(r);
      } else queues.set(r.path, [...(queues.get(r.path) ?? []), r]);
    });
  });
  return {
    server,
    /** The next POST to `path`. */
    next(path: string): Promise<Received> {
      const queued = queues.get(path)?.shift();
      if (queued) return Promise.resolve(queued);
      return new Promise((resolve) => waiting.set(path, resolve));
    },
    /** Everything received at `path` and not yet taken. */
    drain(path: string): Received[] {
      const all = queues.get(path) ?? [];
      queues.set(path, []);
      return all;
    },
  };
}

let w: World;
let slack: ReturnType<typeof startSlackStandIn>;
let slackBase: string;
let app: App;
let base: string;
let integrationId: string;
let approver: MemberFixture;
let reader: MemberFixture;
let planId: string;
let requestId: string;
let planMessage: any;
let requestMessage: any;
const logger = createLogger("silent");

async function startApp(): Promise<void> {
  app = createApp({ config: w.t.config, db: w.db, events: w.t.events, logger });
  base = `http://127.0.0.1:${await app.listen(0, "127.0.0.1")}`;
}

const deliverWebhooks = () => w.t.app.services.webhooks.tick();

const delivered: any[] = [];

/** The Slack message delivered whose buttons name `id` (messages for other objects are kept). */
async function messageFor(id: string): Promise<any> {
  for (;;) {
    const found = delivered.find((m) => JSON.stringify(actionsOf(m) ?? null).includes(id));
    if (found) return found;
    delivered.push((await slack.next("/incoming")).body);
  }
}

const actionsOf = (message: any) => message.blocks.find((b: any) => b.type === "actions");
const button = (message: any, text: "Approve" | "Deny") => actionsOf(message)?.elements.find((e: any) => e.text.text === text);

let clicks = 0;

/** Slack's signature, computed here from its documentation (not with Countersign's code). */
function signature(body: string, timestamp: string, secret = SECRET): string {
  return `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex")}`;
}

type Click = { status: number; text: string; responsePath: string; body: string; headers: Record<string, string> };

/** A block_actions click on `message`'s button, as Slack posts it. */
async function click(
  message: any,
  text: "Approve" | "Deny",
  slackUser: string,
  options: { secret?: string; timestamp?: string; team?: string; integration?: string; responseUrl?: string } = {},
): Promise<Click> {
  const b = button(message, text);
  expect(b, `${text} button on the message`).toBeTruthy();
  const responsePath = `/response/${++clicks}`;
  const payload = {
    type: "block_actions",
    team: { id: options.team ?? TEAM, domain: "countersign-test" },
    user: { id: slackUser, username: slackUser.toLowerCase(), team_id: options.team ?? TEAM },
    api_app_id: "A0COUNTERSIGN",
    token: "legacy-verification-token-unused",
    container: { type: "message", message_ts: "1700000000.000100", channel_id: "C0APPROVALS" },
    trigger_id: `${clicks}.trigger`,
    channel: { id: "C0APPROVALS", name: "approvals" },
    message: { type: "message", text: message.text, blocks: message.blocks, ts: "1700000000.000100" },
    response_url: options.responseUrl ?? `${slackBase}${responsePath}`,
    actions: [{ type: "button", action_id: b.action_id, block_id: actionsOf(message).block_id, value: b.value, text: b.text, action_ts: "1700000001.000200" }],
  };
  const body = `payload=${encodeURIComponent(JSON.stringify(payload))}`;
  const timestamp = options.timestamp ?? String(Math.floor(Date.now() / 1000));
  const headers = {
    "content-type": "application/x-www-form-urlencoded",
    "x-slack-request-timestamp": timestamp,
    "x-slack-signature": signature(body, timestamp, options.secret),
  };
  return post(`/integrations/slack/${options.integration ?? integrationId}/interactivity`, body, headers, responsePath);
}

async function post(path: string, body: string, headers: Record<string, string>, responsePath: string): Promise<Click> {
  const res = await fetch(`${base}${path}`, { method: "POST", headers, body });
  return { status: res.status, text: await res.text(), responsePath, body, headers };
}

async function approvalsOf(id: string) {
  return w.db.prisma.approval.findMany({ where: { planId: id, withdrawnAt: null } });
}

/** Links `slackUser` to `member` the way a person does: click, read the code, confirm it signed in. */
async function link(slackUser: string, member: { token: string }): Promise<string> {
  const c = await click(planMessage, "Approve", slackUser);
  expect(c.status).toBe(200);
  const reply = (await slack.next(c.responsePath)).body;
  const code = /\*([A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4})\*/.exec(reply.text)?.[1];
  expect(code, reply.text).toBeTruthy();
  const linked = await w.t.gql(`mutation($code: String!) { linkSlackUser(input: { code: $code }) { __typename ... on MutationLinkSlackUserSuccess { data { id slackTeam slackUser } } ... on Error { message } } }`, { code }, member.token);
  expect(linked.data.linkSlackUser).toMatchObject({ __typename: "MutationLinkSlackUserSuccess", data: { slackTeam: TEAM, slackUser } });
  return linked.data.linkSlackUser.data.id;
}

beforeAll(async () => {
  slack = startSlackStandIn();
  await new Promise<void>((resolve) => slack.server.listen(0, "127.0.0.1", resolve));
  const address = slack.server.address();
  slackBase = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  w = await createWorld({
    env: {
      COUNTERSIGN_WEBHOOK_SECRET_KEY: "slack-test-sealing-key-0123456789abcdef",
      COUNTERSIGN_WEBHOOK_ALLOW_PRIVATE: "1",
      // The stand-in listens on loopback: its host is the one allowed response_url host.
      COUNTERSIGN_SLACK_ALLOW_PRIVATE: "1",
      COUNTERSIGN_SLACK_RESPONSE_HOSTS: "127.0.0.1",
    },
  });
  await startApp();
  const admin = w.org.adminToken;
  const configured = await w.t.gql(
    `mutation($input: ConfigureSlackIntegrationInput!) { configureSlackIntegration(input: $input) { __typename ... on MutationConfigureSlackIntegrationSuccess { data { id slackTeam interactivityPath } } ... on Error { message } } }`,
    { input: { slackTeam: TEAM, signingSecret: SECRET } },
    admin,
  );
  integrationId = configured.data.configureSlackIntegration.data.id;
  expect(configured.data.configureSlackIntegration.data.interactivityPath).toBe(`/integrations/slack/${integrationId}/interactivity`);
  const hook = await w.t.gql(
    `mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { __typename ... on MutationCreateWebhookSuccess { data { secret } } ... on Error { message } } }`,
    { input: { url: `${slackBase}/incoming`, events: ["PLAN_NEEDS_APPROVALS", "APPROVAL_REQUEST_FILED"], format: "SLACK" } },
    admin,
  );
  expect(hook.data.createWebhook.__typename).toBe("MutationCreateWebhookSuccess");
  approver = await addMember(w.db, w.org.orgId, { role: "workspace-approver", name: "approver" });
  reader = await addMember(w.db, w.org.orgId, { role: "workspace-reader", name: "reader" });
  // Two approvals for every change: one click leaves the gate waiting.
  await w.db.prisma.workspace.update({ where: { id: w.workspace.id }, data: { requiredApprovals: 2 } });
  planId = await submitPlan();
  requestId = await heldAndFiled(w);
  await deliverWebhooks();
  planMessage = await messageFor(planId);
  requestMessage = await messageFor(requestId);
}, 60_000);

afterAll(async () => {
  await app?.close();
  await w?.close();
  slack?.server.close();
});

async function submitPlan(): Promise<string> {
  const submitted = await w.t.gql(
    `mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { __typename ... on MutationSubmitPlanSuccess { data { id } } ... on Error { message } } }`,
    { input: { workspaceId: w.workspace.id, changes: [{ address: "aws_s3_bucket.ledger", action: "DELETE" }] } },
    w.org.adminToken,
  );
  expect(submitted.data.submitPlan.__typename, JSON.stringify(submitted)).toBe("MutationSubmitPlanSuccess");
  return submitted.data.submitPlan.data.id;
}

describe("the messages carry buttons naming the object and its revision, never a secret", () => {
  it("a plan whose gate waits: Approve; a held call filed for review: Approve and Deny at its revision", () => {
    expect(actionsOf(planMessage).elements.map((e: any) => [e.text.text, e.action_id, e.value])).toEqual([["Approve", "countersign_plan_approve", `plan:${planId}`]]);
    expect(actionsOf(requestMessage).elements.map((e: any) => [e.text.text, e.value])).toEqual([
      ["Approve", `request:${requestId}:1`],
      ["Deny", `request:${requestId}:1`],
    ]);
    expect(JSON.stringify([planMessage, requestMessage])).not.toContain(SECRET);
  });
});

describe("linking a Slack user to a member", () => {
  it("an unlinked click changes nothing and tells only that person how to link; the code links once", async () => {
    const c = await click(planMessage, "Approve", "UAPPROVER1");
    expect(c.status).toBe(200);
    const reply = (await slack.next(c.responsePath)).body;
    expect(reply).toMatchObject({ response_type: "ephemeral", replace_original: false });
    expect(reply.text).toContain("not linked");
    expect(await approvalsOf(planId)).toEqual([]);
    const code = /\*([A-Z0-9-]{14})\*/.exec(reply.text)![1]!;
    const LINK = `mutation($code: String!) { linkSlackUser(input: { code: $code }) { __typename ... on MutationLinkSlackUserSuccess { data { slackUser memberId } } ... on Error { message } } }`;
    const linked = await w.t.gql(LINK, { code }, approver.token);
    expect(linked.data.linkSlackUser).toMatchObject({ data: { slackUser: "UAPPROVER1", memberId: approver.userId } });
    const again = await w.t.gql(LINK, { code }, reader.token);
    expect(again.data.linkSlackUser.__typename).toBe("NotFoundError");
    const mine = await w.t.gql(`{ mySlackLinks { slackUser linkedAt } }`, {}, approver.token);
    expect(mine.data.mySlackLinks.map((l: any) => l.slackUser)).toEqual(["UAPPROVER1"]);
  });

  it("a code is bound to the Slack user it was shown to: another organization's member cannot use it", async () => {
    const c = await click(planMessage, "Approve", "USTRANGER1");
    const code = /\*([A-Z0-9-]{14})\*/.exec((await slack.next(c.responsePath)).body.text)![1]!;
    const { createOrg } = await import("../helpers/fixtures.js");
    const other = await createOrg(w.db);
    const tried = await w.t.gql(`mutation($code: String!) { linkSlackUser(input: { code: $code }) { __typename } }`, { code }, other.adminToken);
    expect(tried.data.linkSlackUser.__typename).toBe("NotFoundError");
  });
});

describe("a click is the member's own approval or vote, through the API's checks", () => {
  it("Approve on a plan: the linked member's approval, and the message shows the result with the button still there", async () => {
    const c = await click(planMessage, "Approve", "UAPPROVER1");
    expect(c.status).toBe(200);
    const reply = (await slack.next(c.responsePath)).body;
    expect(reply.replace_original).toBe(true);
    const result = reply.blocks.find((b: any) => b.block_id === "countersign-result");
    expect(result.text.text).toContain("<@UAPPROVER1> approved");
    expect(result.text.text).toContain("still waits");
    expect(actionsOf(reply).elements[0].value).toBe(`plan:${planId}`);
    expect((await approvalsOf(planId)).map((a) => a.userId)).toEqual([approver.userId]);
  });

  it("a replayed click (same signature and timestamp) is refused and changes nothing", async () => {
    const c = await click(planMessage, "Approve", "UAPPROVER1");
    await slack.next(c.responsePath);
    const before = await approvalsOf(planId);
    const replay = await post(`/integrations/slack/${integrationId}/interactivity`, c.body, c.headers, c.responsePath);
    expect(replay.status).toBe(401);
    expect(JSON.parse(replay.text)).toMatchObject({ error: "replayed" });
    expect(await approvalsOf(planId)).toEqual(before);
  });

  it("a linked member without approve: nothing changes, and only they are told why", async () => {
    await link("UREADER01", reader);
    const c = await click(planMessage, "Approve", "UREADER01");
    const reply = (await slack.next(c.responsePath)).body;
    expect(reply).toMatchObject({ response_type: "ephemeral", replace_original: false });
    expect(reply.text).toContain("changed nothing");
    expect(reply.text).toContain("(workspace, approve");
    expect((await approvalsOf(planId)).map((a) => a.userId)).toEqual([approver.userId]);
  });

  it("Approve on a held call: the reviewer's vote at the shown revision; the message moves to the next revision", async () => {
    await link("UREVIEWER1", w.reviewers[0]!);
    const c = await click(requestMessage, "Approve", "UREVIEWER1");
    const reply = (await slack.next(c.responsePath)).body;
    expect(reply.replace_original).toBe(true);
    expect(reply.blocks.find((b: any) => b.block_id === "countersign-result").text.text).toContain("<@UREVIEWER1> approved. It waits for more votes.");
    expect(actionsOf(reply).elements.map((e: any) => e.value)).toEqual([`request:${requestId}:2`, `request:${requestId}:2`]);
    const votes = await w.db.prisma.vote.findMany({ where: { requestId } });
    expect(votes.map((v) => [v.userId, v.decision])).toEqual([[w.reviewers[0]!.userId, "approve"]]);
    requestMessage = reply;
  });

  it("a click on buttons of an older revision is the API's conflict: no vote, told why, and the buttons are refreshed", async () => {
    await link("UREVIEWER2", w.reviewers[1]!);
    const stale = structuredClone(requestMessage);
    for (const e of actionsOf(stale).elements) e.value = `request:${requestId}:1`;
    const c = await click(stale, "Approve", "UREVIEWER2");
    const told = (await slack.next(c.responsePath)).body;
    expect(told).toMatchObject({ response_type: "ephemeral" });
    expect(told.text).toContain("revision 2, not 1");
    const refreshed = (await slack.next(c.responsePath)).body;
    expect(refreshed.replace_original).toBe(true);
    expect(actionsOf(refreshed).elements[0].value).toBe(`request:${requestId}:2`);
    expect(await w.db.prisma.vote.count({ where: { requestId, userId: w.reviewers[1]!.userId } })).toBe(0);
  });

  it("Deny on a held call: the reviewer's deny vote closes it, and the message says so without buttons", async () => {
    const c = await click(requestMessage, "Deny", "UREVIEWER2");
    const reply = (await slack.next(c.responsePath)).body;
    const request = await w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id: requestId } });
    const votes = await w.db.prisma.vote.findMany({ where: { requestId }, orderBy: { createdAt: "asc" } });
    expect(votes.map((v) => [v.userId, v.decision])).toEqual([
      [w.reviewers[0]!.userId, "approve"],
      [w.reviewers[1]!.userId, "deny"],
    ]);
    // An eligible reviewer's deny closes the request (seed 003): no buttons are left.
    expect(request.status).toBe("rejected");
    const result = reply.blocks.find((b: any) => b.block_id === "countersign-result").text.text;
    expect(result).toBe(":no_entry: <@UREVIEWER2> denied. The call is denied.");
    expect(actionsOf(reply)).toBeUndefined();
  });

  it("after unlinking, the same Slack user's click changes nothing again", async () => {
    const links = await w.t.gql(`{ mySlackLinks { id } }`, {}, reader.token);
    const id = links.data.mySlackLinks[0].id;
    const unlinked = await w.t.gql(`mutation($id: ID!) { unlinkSlackUser(input: { id: $id }) { __typename ... on MutationUnlinkSlackUserSuccess { data { unlinkedAt unlinkedById } } } }`, { id }, reader.token);
    expect(unlinked.data.unlinkSlackUser.data.unlinkedById).toBe(reader.userId);
    const c = await click(planMessage, "Approve", "UREADER01");
    expect((await slack.next(c.responsePath)).body.text).toContain("not linked");
  });
});

describe("requests that are not Slack's are refused and change nothing", () => {
  const refusedWith = async (c: Click, status: number, error: string) => {
    expect(c.status, c.text).toBe(status);
    expect(JSON.parse(c.text)).toMatchObject({ error });
  };

  it("a bad signature, a stale or future timestamp, missing headers, an unknown integration: 401, no approval, no reply", async () => {
    const before = await approvalsOf(planId);
    const now = Math.floor(Date.now() / 1000);
    const bad = [
      await click(planMessage, "Approve", "UAPPROVER1", { secret: randomBytes(16).toString("hex") }),
      await click(planMessage, "Approve", "UAPPROVER1", { timestamp: String(now - 301) }),
      // Far enough ahead that the server's clock, read a moment later, still sees it past the window
      // (the window's exact edges are test/domain/slack.test.ts's).
      await click(planMessage, "Approve", "UAPPROVER1", { timestamp: String(now + 600) }),
      await click(planMessage, "Approve", "UAPPROVER1", { integration: "00000000-0000-0000-0000-000000000000" }),
    ];
    await refusedWith(bad[0]!, 401, "invalid_signature");
    await refusedWith(bad[1]!, 401, "stale_timestamp");
    await refusedWith(bad[2]!, 401, "stale_timestamp");
    await refusedWith(bad[3]!, 401, "invalid_signature");
    const unsigned = await post(`/integrations/slack/${integrationId}/interactivity`, "payload=%7B%7D", { "content-type": "application/x-www-form-urlencoded" }, "/response/none");
    await refusedWith(unsigned, 401, "invalid_signature");
    // A body changed after signing.
    const c = await click(planMessage, "Approve", "UAPPROVER1");
    await slack.next(c.responsePath);
    const tampered = await post(`/integrations/slack/${integrationId}/interactivity`, c.body.replace("UAPPROVER1", "UREVIEWER1"), c.headers, c.responsePath);
    await refusedWith(tampered, 401, "invalid_signature");
    expect(await approvalsOf(planId)).toEqual(before);
    for (const r of bad) expect(slack.drain(r.responsePath)).toEqual([]);
  });

  it("a response_url outside the allowed hosts is refused before anything is done", async () => {
    const c = await click(planMessage, "Approve", "UAPPROVER1", { responseUrl: "http://127.0.0.2:9/elsewhere" });
    await refusedWith(c, 400, "response_url_refused");
  });

  it("a click from another Slack workspace changes nothing and is told so", async () => {
    const before = await approvalsOf(planId);
    const c = await click(planMessage, "Approve", "UAPPROVER1", { team: "T0SOMEONEELSE" });
    expect(c.status).toBe(200);
    expect((await slack.next(c.responsePath)).body).toMatchObject({ response_type: "ephemeral" });
    expect(await approvalsOf(planId)).toEqual(before);
  });

  it("a payload that is not a block_actions Slack would send is 400; other interaction types are taken and ignored", async () => {
    const send = (payload: unknown) => {
      const body = `payload=${encodeURIComponent(JSON.stringify(payload))}`;
      const ts = String(Math.floor(Date.now() / 1000));
      return post(`/integrations/slack/${integrationId}/interactivity`, body, { "content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": ts, "x-slack-signature": signature(body, ts) }, "/response/none");
    };
    await refusedWith(await send({ type: "block_actions", team: { id: TEAM } }), 400, "bad_payload");
    expect((await send({ type: "view_submission", view: {} })).status).toBe(200);
    const ts = String(Math.floor(Date.now() / 1000));
    await refusedWith(await post(`/integrations/slack/${integrationId}/interactivity`, "not a form", { "x-slack-request-timestamp": ts, "x-slack-signature": signature("not a form", ts) }, "/none"), 400, "bad_payload");
  });
});

describe("a restart between the message and the click", () => {
  it("the buttons carry all a click needs: a new process takes it, and a superseded plan's button changes nothing", async () => {
    const fresh = await submitPlan();
    await deliverWebhooks();
    const message = await messageFor(fresh);
    await app.close();
    await startApp();
    const c = await click(message, "Approve", "UAPPROVER1");
    expect(c.status).toBe(200);
    expect((await slack.next(c.responsePath)).body.replace_original).toBe(true);
    expect((await approvalsOf(fresh)).map((a) => a.userId)).toEqual([approver.userId]);
    // The first plan was superseded by this one: its button is the API's answer for a discarded plan.
    const old = await click(planMessage, "Approve", "UAPPROVER1");
    const told = (await slack.next(old.responsePath)).body;
    expect(told).toMatchObject({ response_type: "ephemeral" });
    expect(told.text).toContain("changed nothing");
  });
});
