// A GitHub custom deployment protection rule, end to end, against a local server that plays
// GitHub: it signs deployment_protection_rule events exactly as GitHub documents
// (X-Hub-Signature-256: sha256=HMAC-SHA256 of the raw body under the App's webhook secret, computed
// here, not with Countersign's code), serves POST /app/installations/:id/access_tokens checking the
// App JWT's RS256 signature with the App's public key, and records every POST to the
// deployment_callback_url. Real PostgreSQL and Redis; the worker's ticks are driven by the test.

import { createHmac, generateKeyPairSync, randomBytes, randomUUID, verify as verifySignature } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { ERROR_FIELDS, ops, person, READ, seedStack, seedWorkspace, uniq } from "../gate/helpers.js";

const APP_ID = "424242";
const INSTALLATION_ID = 9001;
const WEBHOOK_SECRET = randomBytes(20).toString("hex");
const REPO = "Acme/Infra";
const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
// GitHub hands out PKCS#1 PEM files ("BEGIN RSA PRIVATE KEY").
const PRIVATE_PEM = privateKey.export({ type: "pkcs1", format: "pem" }).toString();

interface Callback {
  path: string;
  token: string;
  body: { environment_name: string; state: string; comment: string };
}

/** The GitHub stand-in: installation tokens for a valid App JWT, and the callback endpoint. */
async function startGithub() {
  const issued: string[] = [];
  const jwtClaims: Array<{ iss: string; iat: number; exp: number }> = [];
  const tokenRequests: any[] = [];
  const callbacks: Callback[] = [];
  /** Statuses the callback endpoint answers, in order; 204 (GitHub's) once they run out. */
  const callbackStatuses: number[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? "";
      const tokenPath = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(req.url ?? "");
      if (req.method === "POST" && tokenPath) {
        const [header, payload, signature] = bearer.split(".");
        const signed = !!(header && payload && signature) && verifySignature("RSA-SHA256", Buffer.from(`${header}.${payload}`), publicKey, Buffer.from(signature, "base64url"));
        const claims = signed ? JSON.parse(Buffer.from(payload!, "base64url").toString("utf8")) : null;
        const now = Math.floor(Date.now() / 1000);
        const alg = signed ? JSON.parse(Buffer.from(header!, "base64url").toString("utf8")).alg : null;
        if (!claims || alg !== "RS256" || claims.iss !== APP_ID || claims.exp <= now || claims.exp - claims.iat > 660 || tokenPath[1] !== String(INSTALLATION_ID)) {
          res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({ message: "A JSON web token could not be decoded" }));
          return;
        }
        jwtClaims.push(claims);
        tokenRequests.push(JSON.parse(body || "{}"));
        const token = `ghs_${randomBytes(18).toString("hex")}`;
        issued.push(token);
        res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ token, expires_at: new Date(Date.now() + 3_600_000).toISOString() }));
        return;
      }
      if (req.method === "POST" && /^\/repos\/[^/]+\/[^/]+\/actions\/runs\/\d+\/deployment_protection_rule$/.test(req.url ?? "")) {
        if (!issued.includes(bearer)) {
          res.writeHead(401).end();
          return;
        }
        callbacks.push({ path: req.url!, token: bearer, body: JSON.parse(body) });
        res.writeHead(callbackStatuses.shift() ?? 204).end();
        return;
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, issued, jwtClaims, tokenRequests, callbacks, callbackStatuses, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

let gh: Awaited<ReturnType<typeof startGithub>>;
let env: Record<string, string>;
let t: TestApp;
let base: string;
let org: OrgFixture;
let stackId: string;
let integrationId: string;

const CONFIGURE = `mutation($input: ConfigureGithubIntegrationInput!) {
  configureGithubIntegration(input: $input) { __typename ... on MutationConfigureGithubIntegrationSuccess { data { id appId webhookPath webhookUrl } } ${ERROR_FIELDS} }
}`;
const MAP = `mutation($input: MapGithubEnvironmentInput!) {
  mapGithubEnvironment(input: $input) { __typename ... on MutationMapGithubEnvironmentSuccess { data { id repository environment workspaceId } } ${ERROR_FIELDS} }
}`;

let runs = 1000;
const runPage = (runId: number, repo = REPO) => `${gh.base}/${repo}/actions/runs/${runId}`;

/** A deployment_protection_rule `requested` event as GitHub sends it. */
function protectionEvent(runId: number, environment: string, overrides: Record<string, unknown> = {}) {
  return {
    action: "requested",
    environment,
    event: "push",
    deployment_callback_url: `${gh.base}/repos/${REPO}/actions/runs/${runId}/deployment_protection_rule`,
    deployment: { id: runId * 10, sha: randomBytes(20).toString("hex"), ref: "refs/heads/main", url: `${gh.base}/repos/${REPO}/deployments/${runId * 10}` },
    pull_requests: [],
    repository: { id: 1, full_name: REPO, html_url: `${gh.base}/${REPO}` },
    organization: { login: "Acme" },
    installation: { id: INSTALLATION_ID, node_id: "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uOTAwMQ==" },
    sender: { login: "octocat" },
    ...overrides,
  };
}

/** POSTs `body` to the integration's webhook, signed as GitHub signs (unless `signature` says otherwise). */
async function deliver(body: string, options: { event?: string; secret?: string; signature?: string; integration?: string } = {}) {
  const res = await fetch(`${base}/integrations/github/${options.integration ?? integrationId}/webhook`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-github-event": options.event ?? "deployment_protection_rule",
      "x-github-delivery": randomUUID(),
      "x-hub-signature-256": options.signature ?? `sha256=${createHmac("sha256", options.secret ?? WEBHOOK_SECRET).update(body).digest("hex")}`,
    },
    body,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

const tick = () => t.app.services.github.tick();

/**
 * The callback GitHub got for `runId`, after the worker's ticks: one tick decides and answers a
 * request whose plan is decided, and this waits (5 s at most, ticking) only so that a slow
 * machine does not fail the test; a callback that never comes fails with the request's rows
 * (status, attempts, last error), which say why.
 */
async function callbackOf(runId: number): Promise<Callback> {
  const until = Date.now() + 5_000;
  for (;;) {
    const [callback] = gh.callbacks.filter((c) => c.path.includes(`/runs/${runId}/`));
    if (callback) return callback;
    if (Date.now() > until) throw new Error(`no callback for run ${runId}: ${JSON.stringify(await requestsOf(runId))}`);
    await new Promise((r) => setTimeout(r, 50));
    await tick();
  }
}
const requestsOf = (runId: string | number) => t.db.prisma.githubProtectionRequest.findMany({ where: { runId: String(runId) }, include: { callbacks: { orderBy: { attempt: "asc" } } } });

/** A workspace (needing `approvals`) mapped to a fresh environment of REPO. */
async function mappedEnvironment(approvals: number) {
  const ws = await seedWorkspace(t, org.orgId, stackId, approvals);
  const environment = uniq("production");
  const mapped = await t.gql(MAP, { input: { repository: REPO, environment, workspaceId: ws.id } }, org.adminToken);
  expect(mapped.data.mapGithubEnvironment.__typename, JSON.stringify(mapped)).toBe("MutationMapGithubEnvironmentSuccess");
  return { ws, environment };
}

beforeAll(async () => {
  gh = await startGithub();
  env = {
    COUNTERSIGN_WEBHOOK_SECRET_KEY: randomBytes(32).toString("hex"),
    COUNTERSIGN_GITHUB_API_URL: gh.base,
    COUNTERSIGN_GITHUB_ALLOW_PRIVATE: "1",
    COUNTERSIGN_WEBHOOK_RETRY_BASE_MS: "40",
    COUNTERSIGN_WEBHOOK_MAX_ATTEMPTS: "4",
    COUNTERSIGN_WEBHOOK_TIMEOUT_MS: "3000",
    COUNTERSIGN_PUBLIC_URL: "https://countersign.example",
  };
  t = await startTestApp({ env });
  base = await t.listen();
  org = await createOrg(t.db);
  stackId = (await seedStack(t, org.orgId)).id;
  const configured = await t.gql(CONFIGURE, { input: { appId: APP_ID, privateKey: PRIVATE_PEM, webhookSecret: WEBHOOK_SECRET } }, org.adminToken);
  expect(configured.data.configureGithubIntegration.__typename, JSON.stringify(configured)).toBe("MutationConfigureGithubIntegrationSuccess");
  integrationId = configured.data.configureGithubIntegration.data.id;
}, 60_000);

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

describe("configuring the GitHub App", () => {
  it("gives the webhook URL to enter in GitHub; the private key and webhook secret are stored sealed and never readable back", async () => {
    const read = await t.gql(`{ githubIntegration { id appId webhookPath webhookUrl } }`, {}, org.adminToken);
    expect(read.data.githubIntegration).toEqual({
      id: integrationId,
      appId: APP_ID,
      webhookPath: `/integrations/github/${integrationId}/webhook`,
      webhookUrl: `https://countersign.example/integrations/github/${integrationId}/webhook`,
    });
    const row = await t.db.prisma.githubIntegration.findUniqueOrThrow({ where: { id: integrationId } });
    expect(JSON.stringify(row)).not.toContain(WEBHOOK_SECRET);
    expect(JSON.stringify(row)).not.toContain("PRIVATE KEY");
  });

  it("a key that is not an RSA PEM key, or a short webhook secret, is a typed ValidationError naming the field; nothing is stored", async () => {
    const other = await createOrg(t.db);
    const bad = await t.gql(CONFIGURE, { input: { appId: APP_ID, privateKey: "-----BEGIN RSA PRIVATE KEY-----\nnope\n-----END RSA PRIVATE KEY-----", webhookSecret: WEBHOOK_SECRET } }, other.adminToken);
    expect(bad.data.configureGithubIntegration.issues.map((i: any) => i.field)).toEqual(["input.privateKey"]);
    const short = await t.gql(CONFIGURE, { input: { appId: APP_ID, privateKey: PRIVATE_PEM, webhookSecret: "short" } }, other.adminToken);
    expect(short.data.configureGithubIntegration.issues.map((i: any) => i.field)).toEqual(["input.webhookSecret"]);
    expect(await t.db.prisma.githubIntegration.count({ where: { orgId: other.orgId } })).toBe(0);
  });

  it("needs the webhook family's permissions: a workspace reader may neither configure nor map, and another organization sees nothing of ours", async () => {
    const reader = await person(t, org.orgId, "reader", [READ]);
    const denied = await t.gql(CONFIGURE, { input: { appId: APP_ID, privateKey: PRIVATE_PEM, webhookSecret: WEBHOOK_SECRET } }, reader.token);
    expect(denied.data.configureGithubIntegration.__typename).toBe("PermissionDeniedError");
    const ws = await seedWorkspace(t, org.orgId, stackId, 0);
    const map = await t.gql(MAP, { input: { repository: REPO, environment: "staging", workspaceId: ws.id } }, reader.token);
    expect(map.data.mapGithubEnvironment.__typename).toBe("PermissionDeniedError");
    const other = await createOrg(t.db);
    expect((await t.gql(`{ githubIntegration { id } }`, {}, other.adminToken)).data.githubIntegration).toBeNull();
    // Our workspace is not theirs to map: not found, as for a workspace that does not exist.
    await t.gql(CONFIGURE, { input: { appId: "1", privateKey: PRIVATE_PEM, webhookSecret: WEBHOOK_SECRET } }, other.adminToken);
    const cross = await t.gql(MAP, { input: { repository: REPO, environment: "x", workspaceId: ws.id } }, other.adminToken);
    expect(cross.data.mapGithubEnvironment.__typename).toBe("NotFoundError");
  });
});

describe("the webhook endpoint", () => {
  it("a ping is answered 200", async () => {
    const ping = await deliver(JSON.stringify({ zen: "Keep it logically awesome.", hook_id: 1 }), { event: "ping" });
    expect(ping).toEqual({ status: 200, body: { ok: true, event: "ping" } });
  });

  it("a bad signature is refused 401 and nothing is recorded; an unknown integration answers exactly the same", async () => {
    const runId = ++runs;
    const body = JSON.stringify(protectionEvent(runId, "production"));
    const wrongSecret = await deliver(body, { secret: "not-the-apps-webhook-secret" });
    const unsigned = await deliver(body, { signature: "" });
    const sha1 = await deliver(body, { signature: `sha1=${createHmac("sha1", WEBHOOK_SECRET).update(body).digest("hex")}` });
    const unknown = await deliver(body, { integration: randomUUID() });
    for (const refused of [wrongSecret, unsigned, sha1]) expect(refused).toEqual(unknown);
    expect(unknown.status).toBe(401);
    expect(await requestsOf(runId)).toEqual([]);
  });

  it("the same signed request again (a replay, or GitHub's redelivery) is recorded once and answered once", async () => {
    const { environment } = await mappedEnvironment(0);
    const runId = ++runs;
    const body = JSON.stringify(protectionEvent(runId, environment));
    expect((await deliver(body)).body.status).toBe("waiting");
    expect(await deliver(body)).toEqual({ status: 200, body: { status: "already_recorded" } });
    expect(await requestsOf(runId)).toHaveLength(1);
  });

  it("a callback URL that is not GitHub's documented one under COUNTERSIGN_GITHUB_API_URL, for the event's repository, is refused: no token is ever sent there", async () => {
    const { environment } = await mappedEnvironment(0);
    const runId = ++runs;
    const elsewhere = [
      `http://127.0.0.1:1/repos/${REPO}/actions/runs/${runId}/deployment_protection_rule`,
      `${gh.base}/repos/acme/other-repo/actions/runs/${runId}/deployment_protection_rule`,
      `${gh.base}/repos/${REPO}/actions/runs/${runId}/deployment_protection_rule/../../../../app`,
      `${gh.base}/repos/${REPO}/actions/runs/${runId}/deployment_protection_rule?x=1`,
    ];
    for (const url of elsewhere) {
      const answer = await deliver(JSON.stringify(protectionEvent(runId, environment, { deployment_callback_url: url })));
      expect(answer.status, url).toBe(400);
      expect(answer.body.error).toBe("callback_url_refused");
    }
    expect(await requestsOf(runId)).toEqual([]);
  });

  it("an event that is not a deployment_protection_rule request is taken and ignored", async () => {
    expect((await deliver(JSON.stringify({ action: "created" }), { event: "installation" })).body).toEqual({ ignored: "installation" });
  });
});

describe("answering GitHub", () => {
  it("plan then event: the deployment waits for the quorum, then is approved with who approved and the plan page", async () => {
    const { ws, environment } = await mappedEnvironment(2);
    const runId = ++runs;
    const o = ops(t);
    const plan = await o.submit(org.adminToken, ws.id, [{ address: "aws_s3_bucket.ledger", action: "UPDATE" }], { runUrl: `${runPage(runId)}/attempts/1` });
    expect((await deliver(JSON.stringify(protectionEvent(runId, environment)))).body.status).toBe("waiting");
    await tick();
    expect((await requestsOf(runId))[0]).toMatchObject({ status: "waiting", planId: plan.id });
    // The plan page says where the plan came from: this GitHub deployment, linking its run.
    const origin = await t.gql(`query($id: ID!) { plan(id: $id) { origin { kind url } } }`, { id: plan.id }, org.adminToken);
    expect(origin.data.plan.origin).toEqual({ kind: "GITHUB_DEPLOYMENT", url: `${runPage(runId)}/attempts/1` });
    const first = await person(t, org.orgId, "First Approver");
    const second = await person(t, org.orgId, "Second Approver");
    expect((await o.approve(first.token, plan.id)).__typename).toBe("MutationApprovePlanSuccess");
    await tick();
    expect((await requestsOf(runId))[0]!.status).toBe("waiting");
    expect(gh.callbacks.filter((c) => c.path.includes(`/runs/${runId}/`))).toEqual([]);
    expect((await o.approve(second.token, plan.id)).__typename).toBe("MutationApprovePlanSuccess");
    await tick();
    const callback = await callbackOf(runId);
    expect(callback.path).toBe(`/repos/${REPO}/actions/runs/${runId}/deployment_protection_rule`);
    expect(callback.body).toMatchObject({ environment_name: environment, state: "approved" });
    expect(callback.body.comment).toMatch(/approved by First Approver[^,]*, Second Approver/);
    expect(callback.body.comment).toContain(`https://countersign.example/#plan/${plan.id}`);
    const [request] = await requestsOf(runId);
    expect(request).toMatchObject({ status: "delivered", state: "approved", responseCode: 204 });
    expect(request!.callbacks.map((c) => [c.attempt, c.responseCode])).toEqual([[1, 204]]);
  });

  it("event then plan: the request waits for the run's plan, and is answered once its gate passes", async () => {
    const { ws, environment } = await mappedEnvironment(1);
    const runId = ++runs;
    await deliver(JSON.stringify(protectionEvent(runId, environment)));
    await tick();
    expect((await requestsOf(runId))[0]).toMatchObject({ status: "waiting", planId: null });
    // Another run's plan on the same workspace is not this deployment's, nor does it become one.
    const o = ops(t);
    const unrelated = await o.submit(org.adminToken, ws.id, [{ address: "aws_instance.web", action: "UPDATE" }], { runUrl: runPage(runId + 100000) });
    await tick();
    expect((await requestsOf(runId))[0]).toMatchObject({ status: "waiting", planId: null });
    expect((await t.db.prisma.plan.findUniqueOrThrow({ where: { id: unrelated.id } })).originKind).toBe("api");
    const plan = await o.submit(org.adminToken, ws.id, [{ address: "aws_instance.web", action: "UPDATE" }], { runUrl: `${runPage(runId).toLowerCase()}/job/77` });
    await tick();
    expect((await requestsOf(runId))[0]).toMatchObject({ status: "waiting", planId: plan.id });
    const approver = await person(t, org.orgId, "Only Approver");
    await o.approve(approver.token, plan.id);
    await tick();
    const callback = await callbackOf(runId);
    expect(callback.body).toMatchObject({ environment_name: environment, state: "approved" });
  });

  it("a plan superseded before its gate passed can no longer pass: the deployment is rejected, saying so", async () => {
    const { ws, environment } = await mappedEnvironment(1);
    const runId = ++runs;
    const o = ops(t);
    const plan = await o.submit(org.adminToken, ws.id, [{ address: "aws_iam_role.deploy", action: "UPDATE" }], { runUrl: runPage(runId) });
    await deliver(JSON.stringify(protectionEvent(runId, environment)));
    await tick();
    const newer = await o.submit(org.adminToken, ws.id, [{ address: "aws_iam_role.deploy", action: "UPDATE" }], { runUrl: runPage(runId + 200000) });
    await tick();
    const callback = await callbackOf(runId);
    expect(callback.body).toMatchObject({ environment_name: environment, state: "rejected" });
    expect(callback.body.comment).toContain(`${plan.id}`);
    expect(callback.body.comment).toContain(`superseded by plan ${newer.id}`);
  });

  it("an environment no mapping names is rejected at once with a comment saying it is not configured (fail closed)", async () => {
    const runId = ++runs;
    expect((await deliver(JSON.stringify(protectionEvent(runId, "unmapped-env")))).body.status).toBe("rejected_unmapped");
    await tick();
    const callback = await callbackOf(runId);
    expect(callback.body.state).toBe("rejected");
    expect(callback.body.comment).toContain(`no Countersign workspace is mapped to ${REPO.toLowerCase()} environment "unmapped-env"`);
  });

  it("a request still waiting after GitHub's 30-day hold is closed failed, and nothing is sent", async () => {
    const { environment } = await mappedEnvironment(1);
    const runId = ++runs;
    await deliver(JSON.stringify(protectionEvent(runId, environment)));
    await t.db.sql.query(`UPDATE github_protection_requests SET "createdAt" = now() - interval '31 days' WHERE "runId" = $1`, [String(runId)]);
    await tick();
    expect((await requestsOf(runId))[0]).toMatchObject({ status: "failed", lastError: "no plan or gate answer within GitHub's 30-day wait" });
    expect(gh.callbacks.filter((c) => c.path.includes(`/runs/${runId}/`))).toEqual([]);
  });

  it("a callback GitHub answers 500 is retried with backoff; every attempt is recorded", async () => {
    const runId = ++runs;
    gh.callbackStatuses.push(500);
    await deliver(JSON.stringify(protectionEvent(runId, "retry-unmapped")));
    await tick();
    expect((await requestsOf(runId))[0]).toMatchObject({ status: "queued", attempts: 1, lastError: "HTTP 500" });
    await new Promise((r) => setTimeout(r, 100));
    await tick();
    const [request] = await requestsOf(runId);
    expect(request).toMatchObject({ status: "delivered", attempts: 2, responseCode: 204 });
    expect(request!.callbacks.map((c) => [c.attempt, c.responseCode, c.error])).toEqual([
      [1, 500, "HTTP 500"],
      [2, 204, null],
    ]);
    expect(gh.callbacks.filter((c) => c.path.includes(`/runs/${runId}/`))).toHaveLength(2);
  });

  it("the App's JWT is RS256, iss = App id, at most ten minutes; each token is narrowed to the repository and deployments: write, and never stored", async () => {
    expect(gh.jwtClaims.length).toBeGreaterThan(0);
    for (const claims of gh.jwtClaims) {
      expect(claims.iss).toBe(APP_ID);
      expect(claims.exp - claims.iat).toBeLessThanOrEqual(660);
    }
    for (const body of gh.tokenRequests) expect(body).toEqual({ repositories: ["infra"], permissions: { deployments: "write" } });
    const stored = JSON.stringify([await t.db.prisma.githubProtectionRequest.findMany(), await t.db.prisma.githubCallbackAttempt.findMany()]);
    for (const token of gh.issued) expect(stored).not.toContain(token);
  });
});

describe("durability", () => {
  it("a restart between the event and the callback: the next server's worker still answers", async () => {
    const first = await startTestApp({ env });
    const schemaName = first.schemaName;
    const o1 = await createOrg(first.db);
    const configured = await first.gql(CONFIGURE, { input: { appId: APP_ID, privateKey: PRIVATE_PEM, webhookSecret: WEBHOOK_SECRET } }, o1.adminToken);
    const id = configured.data.configureGithubIntegration.data.id;
    const firstBase = await first.listen();
    const runId = ++runs;
    const body = JSON.stringify(protectionEvent(runId, "restart-unmapped"));
    const res = await fetch(`${firstBase}/integrations/github/${id}/webhook`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-github-event": "deployment_protection_rule", "x-hub-signature-256": `sha256=${createHmac("sha256", WEBHOOK_SECRET).update(body).digest("hex")}` },
      body,
    });
    expect(res.status).toBe(200);
    // A worker that leased the answer and died: its lease expires and the next one takes it over.
    await first.db.sql.query(`UPDATE github_protection_requests SET status = 'delivering', "leaseOwner" = 'gone', "leaseExpiresAt" = now() - interval '1 second', attempts = 1, fence = 1`);
    await first.app.close();
    await first.events.close();
    await first.db.close();

    const second = await startTestApp({ schemaName, env: { ...env, COUNTERSIGN_WORKERS: "all", COUNTERSIGN_GITHUB_INTERVAL_MS: "50", COUNTERSIGN_APPROVAL_STREAM: `stream:${schemaName}` } });
    try {
      const until = Date.now() + 10_000;
      while (!gh.callbacks.some((c) => c.path.includes(`/runs/${runId}/`)) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      const [callback] = gh.callbacks.filter((c) => c.path.includes(`/runs/${runId}/`));
      expect(callback!.body).toMatchObject({ environment_name: "restart-unmapped", state: "rejected" });
      const until2 = Date.now() + 5_000;
      while ((await second.db.prisma.githubProtectionRequest.count({ where: { status: "delivered" } })) < 1 && Date.now() < until2) await new Promise((r) => setTimeout(r, 50));
      expect(await second.db.prisma.githubProtectionRequest.findFirst({ where: { runId: String(runId) } })).toMatchObject({ status: "delivered", attempts: 2 });
    } finally {
      await second.close();
    }
  });
});
