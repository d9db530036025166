// The HCP Terraform run task, end to end against a local server that plays HCP Terraform: it
// signs each run task request exactly as HashiCorp documents (X-TFC-Task-Signature, the hex
// HMAC-SHA512 of the raw body under the task's HMAC key), serves the plan JSON only to the run's
// bearer token (json-output answers a temporary redirect to the download, as HCP does), and
// records every task-results PATCH. Real PostgreSQL and Redis; the worker is ticked by the test.

import { createHmac, randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../src/app.js";
import { createLogger } from "../../src/infra/logger.js";
import { createHcpRunTaskWorker, DEADLINE_MESSAGE, type HcpRunTaskWorker } from "../../src/workers/hcp-run-task.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { APPROVE, ERROR_FIELDS, READ, ops, person, seedStack, seedWorkspace, type Person } from "../gate/helpers.js";
import { SHOW_JSON } from "../gate/show-json.js";

const PUBLIC_URL = "https://countersign.example.com";
const ENV = {
  COUNTERSIGN_WEBHOOK_SECRET_KEY: randomBytes(32).toString("hex"),
  COUNTERSIGN_HCP_HOSTS: "127.0.0.1",
  COUNTERSIGN_HCP_ALLOW_PRIVATE: "1",
  COUNTERSIGN_WEBHOOK_RETRY_BASE_MS: "60000",
  // Every tick looks at every open run task: the test ticks by hand, so "due" is always now.
  COUNTERSIGN_HCP_INTERVAL_MS: "1",
  COUNTERSIGN_WEBHOOK_MAX_ATTEMPTS: "4",
  COUNTERSIGN_WEBHOOK_TIMEOUT_MS: "3000",
  COUNTERSIGN_PUBLIC_URL: PUBLIC_URL,
};
const HCP_ORG = "acme";
const HCP_WORKSPACE = "networking";

interface Patch {
  taskResult: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: { data: { type: string; attributes: { status: string; message: string; url?: string } } };
}

/** Plays HCP Terraform: plan JSON behind the run's token, and the task-results callbacks. */
async function startHcp() {
  const tokens = new Map<string, string>(); // HCP plan id → the run's access token
  const patches: Patch[] = [];
  const state = { callbackStatus: 200 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const url = req.url ?? "/";
      const json = url.match(/^\/api\/v2\/plans\/([\w-]+)\/json-output$/);
      if (req.method === "GET" && json) {
        if (req.headers.authorization !== `Bearer ${tokens.get(json[1]!)}`) return void res.writeHead(401, { "content-type": "application/vnd.api+json" }).end('{"errors":[{"status":"401","title":"unauthorized"}]}');
        return void res.writeHead(307, { location: `/archivist/v1/object/${json[1]}` }).end();
      }
      const archived = url.match(/^\/archivist\/v1\/object\/([\w-]+)$/);
      if (req.method === "GET" && archived) return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(SHOW_JSON));
      const callback = url.match(/^\/api\/v2\/task-results\/([\w-]+)\/callback$/);
      if (req.method === "PATCH" && callback) {
        patches.push({ taskResult: callback[1]!, authorization: req.headers.authorization, contentType: req.headers["content-type"], body: JSON.parse(Buffer.concat(chunks).toString("utf8")) });
        return void res.writeHead(state.callbackStatus).end();
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    tokens,
    patches,
    state,
    /** The PATCHes for one task result, in order. */
    for: (taskResult: string) => patches.filter((p) => p.taskResult === taskResult).map((p) => p.body.data.attributes),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const CREATE = `mutation { createHcpRunTask { __typename ... on MutationCreateHcpRunTaskSuccess { data { hmacKey runTask { id path url configuredById } } } ${ERROR_FIELDS} } }`;
const UPDATE = `mutation($input: UpdateHcpRunTaskInput) { updateHcpRunTask(input: $input) { __typename ... on MutationUpdateHcpRunTaskSuccess { data { hmacKey runTask { id configuredById } } } ${ERROR_FIELDS} } }`;
// Mapping never answers InvalidStateError: its fragment is left out.
const MAP = `mutation($input: AddHcpWorkspaceMappingInput!) { addHcpWorkspaceMapping(input: $input) { __typename ... on MutationAddHcpWorkspaceMappingSuccess { data { id } } ${ERROR_FIELDS.replace("... on InvalidStateError { state }", "")} } }`;
const READ_TASK = `{ hcpRunTask { id requests(first: 100) { taskResultId state planId sentStatus callbacks { status ok responseCode error } } } }`;

let t: TestApp;
let org: OrgFixture;
let hcp: Awaited<ReturnType<typeof startHcp>>;
let base: string;
let worker: HcpRunTaskWorker;
let runTaskId: string;
let hmacKey: string;
let workspaceId: string;
let approver: Person;
let n = 0;

beforeAll(async () => {
  t = await startTestApp({ env: ENV });
  org = await createOrg(t.db);
  const stack = await seedStack(t, org.orgId);
  workspaceId = (await seedWorkspace(t, org.orgId, stack.id, 1)).id;
  approver = await person(t, org.orgId, "Ada", [READ, APPROVE]);
  hcp = await startHcp();
  base = await t.listen();
  worker = createHcpRunTaskWorker({ db: t.db, config: t.config, events: t.events, logger: createLogger("silent") });
  const created = ops(t).ok<{ hmacKey: string; runTask: { id: string; path: string; url: string; configuredById: string } }>(await t.gql(CREATE, {}, org.adminToken), "createHcpRunTask");
  runTaskId = created.runTask.id;
  hmacKey = created.hmacKey;
  expect(created.runTask.url).toBe(`${PUBLIC_URL}/integrations/hcp-terraform/${runTaskId}/run-task`);
  expect(created.runTask.configuredById).toBe(org.adminId);
  ops(t).ok(await t.gql(MAP, { input: { hcpOrganization: HCP_ORG, hcpWorkspace: HCP_WORKSPACE, workspaceId } }, org.adminToken), "addHcpWorkspaceMapping");
});
afterAll(async () => {
  await worker?.stop();
  await hcp?.close();
  await t?.close();
});

/** A run task request as HCP Terraform sends it (payload_version 1, post_plan). */
function runTaskRequest(options: { workspace?: string; token?: string; register?: boolean } = {}) {
  n += 1;
  const planId = `plan-${n}${randomBytes(4).toString("hex")}`;
  const token = options.token ?? `tok-${randomBytes(12).toString("hex")}.atlasv1.${n}`;
  if (options.register !== false) hcp.tokens.set(planId, token);
  const taskResult = `taskrs-${n}${randomBytes(4).toString("hex")}`;
  const body = {
    payload_version: 1,
    stage: "post_plan",
    access_token: token,
    capabilities: { outcomes: true },
    configuration_version_download_url: `${hcp.base}/api/v2/configuration-versions/cv-${n}/download`,
    configuration_version_id: `cv-${n}`,
    is_speculative: false,
    organization_name: HCP_ORG,
    plan_json_api_url: `${hcp.base}/api/v2/plans/${planId}/json-output`,
    run_app_url: `${hcp.base}/app/${HCP_ORG}/${options.workspace ?? HCP_WORKSPACE}/runs/run-${n}`,
    run_created_at: "2026-12-03T21:00:00.000Z",
    run_created_by: "someone",
    run_id: `run-${n}`,
    run_message: "Triggered via UI",
    task_result_callback_url: `${hcp.base}/api/v2/task-results/${taskResult}/callback`,
    task_result_enforcement_level: "mandatory",
    task_result_id: taskResult,
    vcs_branch: "main",
    vcs_commit_url: null,
    vcs_pull_request_url: null,
    vcs_repo_url: null,
    workspace_app_url: `${hcp.base}/app/${HCP_ORG}/${options.workspace ?? HCP_WORKSPACE}`,
    workspace_id: `ws-${n}`,
    workspace_name: options.workspace ?? HCP_WORKSPACE,
    workspace_working_directory: "",
  };
  return { raw: JSON.stringify(body), taskResult, runUrl: body.run_app_url };
}

const sign = (key: string, raw: string) => createHmac("sha512", key).update(raw).digest("hex");

async function post(raw: string, signature: string, id = runTaskId, at = base) {
  const res = await fetch(`${at}/integrations/hcp-terraform/${id}/run-task`, {
    method: "POST",
    headers: { "content-type": "application/json", "user-agent": "TFC/1.0 (+https://app.terraform.io; TFC)", "x-tfc-task-signature": signature },
    body: raw,
  });
  return { status: res.status, body: await res.text() };
}

const requestRow = (taskResult: string) => t.db.prisma.hcpRunTaskRequest.findFirstOrThrow({ where: { taskResultId: taskResult } });
const requestCount = () => t.db.prisma.hcpRunTaskRequest.count();

describe("HCP's requests", () => {
  it("answers HCP's verification request (test-token, signed) 200 and records nothing", async () => {
    const before = await requestCount();
    const raw = JSON.stringify({ ...JSON.parse(runTaskRequest().raw), access_token: "test-token" });
    expect((await post(raw, sign(hmacKey, raw))).status).toBe(200);
    expect(await requestCount()).toBe(before);
  });

  it("refuses a bad signature, a replayed body under another signature, and an unknown run task alike (401), recording nothing", async () => {
    const before = await requestCount();
    const { raw } = runTaskRequest();
    const bad = await post(raw, sign("not-the-key", raw));
    expect(bad.status).toBe(401);
    const missing = await post(raw, "");
    expect(missing.status).toBe(401);
    // The body of a request HCP really signed, replayed with the signature of another body.
    const other = runTaskRequest().raw;
    const replayed = await post(raw, sign(hmacKey, other));
    expect(replayed.status).toBe(401);
    // An unknown run task answers exactly as a bad signature: nothing says whether it exists.
    const unknown = await post(raw, sign(hmacKey, raw), "00000000-0000-4000-8000-000000000000");
    expect(unknown).toEqual(bad);
    expect(await requestCount()).toBe(before);
  });

  it("takes a request HCP sends again (same task result) once", async () => {
    const { raw, taskResult } = runTaskRequest();
    expect((await post(raw, sign(hmacKey, raw))).status).toBe(200);
    expect((await post(raw, sign(hmacKey, raw))).status).toBe(200);
    expect(await t.db.prisma.hcpRunTaskRequest.count({ where: { taskResultId: taskResult } })).toBe(1);
    await drain();
  });
});

/** Ticks until no request is due now (rows retried later are made due by the test itself). */
async function drain() {
  for (let i = 0; i < 10; i++) {
    if ((await worker.tick()) > 0) continue;
    // A row the last tick saved is due COUNTERSIGN_HCP_INTERVAL_MS later, to the millisecond
    // ("nextRunAt" is kept to milliseconds): a tick within that millisecond leases nothing, and
    // stopping then would leave the row's next step undone. Wait for a row due that soon.
    const [due] = await t.db.sql.query<{ soon: number }>(
      `SELECT count(*)::int AS soon FROM hcp_run_task_requests
        WHERE state <> 'done' AND "leaseOwner" IS NULL AND "nextRunAt" > now() AND "nextRunAt" <= now() + interval '10 milliseconds'`,
    );
    if (!due?.soon) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("callbacks follow the gate", () => {
  it("running (what is missing, from whom, and the plan page), then passed once approved; the token is dropped", async () => {
    const { raw, taskResult, runUrl } = runTaskRequest();
    expect((await post(raw, sign(hmacKey, raw))).status).toBe(200);
    await drain();
    const row = await requestRow(taskResult);
    expect(row.state).toBe("tracking");
    const plan = await t.db.prisma.plan.findUniqueOrThrow({ where: { id: row.planId! } });
    expect(plan).toMatchObject({ workspaceId, runUrl, submittedById: org.adminId, status: "planned", originKind: "hcp_terraform_run" });
    const [running] = hcp.for(taskResult);
    expect(running).toMatchObject({ status: "running", url: `${PUBLIC_URL}/#plan/${plan.id}` });
    expect(running!.message).toMatch(/Waiting for approval/);
    const patch = hcp.patches.find((p) => p.taskResult === taskResult)!;
    expect(patch.contentType).toBe("application/vnd.api+json");
    expect(patch.body.data.type).toBe("task-results");
    expect(patch.authorization).toBe(`Bearer ${hcp.tokens.get(new URL(row.planJsonUrl!).pathname.split("/")[4]!)}`);
    // Nothing changed: nothing more is sent.
    await worker.tick();
    expect(hcp.for(taskResult)).toHaveLength(1);
    expect((await ops(t).approve(approver.token, plan.id)).__typename).toMatch(/Success/);
    await drain();
    expect(hcp.for(taskResult).map((p) => p.status)).toEqual(["running", "passed"]);
    const done = await requestRow(taskResult);
    expect(done).toMatchObject({ state: "done", accessTokenSealed: null, sentStatus: "passed" });
  });

  it("failed when a newer run's plan supersedes it", async () => {
    const first = runTaskRequest();
    await post(first.raw, sign(hmacKey, first.raw));
    await drain();
    const second = runTaskRequest();
    await post(second.raw, sign(hmacKey, second.raw));
    await drain();
    await drain();
    expect(hcp.for(first.taskResult).map((p) => p.status)).toEqual(["running", "failed"]);
    expect(hcp.for(first.taskResult)[1]!.message).toMatch(/superseded/);
    expect(hcp.for(second.taskResult).map((p) => p.status)).toEqual(["running"]);
    expect((await requestRow(first.taskResult)).accessTokenSealed).toBeNull();
  });

  it("failed at the result deadline while the gate still waits", async () => {
    const { raw, taskResult } = runTaskRequest();
    await post(raw, sign(hmacKey, raw));
    await drain();
    await t.db.sql.query(`UPDATE hcp_run_task_requests SET "deadlineAt" = now() - interval '1 second' WHERE "taskResultId" = $1`, [taskResult]);
    await drain();
    // A failure prints the row and its callback attempts.
    const row = await t.db.sql.query(
      `SELECT r.state, r."nextRunAt", r."deadlineAt", r."leaseOwner", r.attempts, r."sentStatus", now() AS "databaseNow",
              (SELECT json_agg(json_build_object('status', a.status, 'ok', a.ok, 'responseCode', a."responseCode", 'error', a.error)) FROM hcp_callback_attempts a WHERE a."requestId" = r.id) AS callbacks
         FROM hcp_run_task_requests r WHERE "taskResultId" = $1`,
      [taskResult],
    );
    expect(hcp.for(taskResult).map((p) => p.status), JSON.stringify({ processNow: new Date(), row })).toEqual(["running", "failed"]);
    expect(hcp.for(taskResult)[1]!.message).toBe(DEADLINE_MESSAGE);
  });

  it("failed for an HCP workspace nobody mapped (never a guessed workspace)", async () => {
    const { raw, taskResult } = runTaskRequest({ workspace: "unmapped" });
    expect((await post(raw, sign(hmacKey, raw))).status).toBe(200);
    await drain();
    const [result] = hcp.for(taskResult);
    expect(result).toMatchObject({ status: "failed" });
    expect(result!.message).toMatch(/acme\/unmapped is not mapped/);
    expect((await requestRow(taskResult)).planId).toBeNull();
  });

  it("failed when HCP refuses the plan JSON to the token (401)", async () => {
    const { raw, taskResult } = runTaskRequest({ register: false });
    await post(raw, sign(hmacKey, raw));
    await drain();
    expect(hcp.for(taskResult)).toEqual([expect.objectContaining({ status: "failed", message: expect.stringMatching(/could not fetch the plan JSON.*HTTP 401/) })]);
    expect(await requestRow(taskResult)).toMatchObject({ planId: null, state: "done", accessTokenSealed: null });
  });

  it("fails closed when the member it submits as may no longer plan on the workspace", async () => {
    // A member who may configure integrations but not plan on the workspace takes the run task over.
    const operator = await addMember(t.db, org.orgId, { grants: [{ resourceType: "webhook", action: "read" }, { resourceType: "webhook", action: "update" }] });
    ops(t).ok(await t.gql(UPDATE, {}, operator.token), "updateHcpRunTask");
    const { raw, taskResult } = runTaskRequest();
    await post(raw, sign(hmacKey, raw));
    await drain();
    expect(hcp.for(taskResult)).toEqual([expect.objectContaining({ status: "failed", message: expect.stringMatching(/refused the plan/) })]);
    expect((await requestRow(taskResult)).planId).toBeNull();
    ops(t).ok(await t.gql(UPDATE, {}, org.adminToken), "updateHcpRunTask");
  });
});

describe("delivery is durable", () => {
  it("a request taken by a server that then stops is submitted and reported by the next one's worker", async () => {
    const other = createApp({ config: t.config, db: t.db, events: t.events, logger: createLogger("silent") });
    const otherBase = `http://127.0.0.1:${await other.listen(0, "127.0.0.1")}`;
    const { raw, taskResult } = runTaskRequest();
    expect((await post(raw, sign(hmacKey, raw), runTaskId, otherBase)).status).toBe(200);
    await other.close();
    expect(hcp.for(taskResult)).toEqual([]);
    // A worker that leased it and died: its lease runs out, and a new worker takes the row over.
    await t.db.sql.query(`UPDATE hcp_run_task_requests SET "leaseOwner" = 'gone', "leaseExpiresAt" = now() - interval '1 second', fence = fence + 1 WHERE "taskResultId" = $1`, [taskResult]);
    const next = createHcpRunTaskWorker({ db: t.db, config: t.config, events: t.events, logger: createLogger("silent") });
    for (let i = 0; i < 5 && (await next.tick()) > 0; i++);
    expect(hcp.for(taskResult).map((p) => p.status)).toEqual(["running"]);
    expect((await requestRow(taskResult)).state).toBe("tracking");
  });

  it("a callback HCP does not take is retried with backoff, and every attempt is recorded", async () => {
    const { raw, taskResult } = runTaskRequest();
    hcp.state.callbackStatus = 503;
    try {
      await post(raw, sign(hmacKey, raw));
      await drain();
      const waiting = await requestRow(taskResult);
      expect(waiting).toMatchObject({ attempts: 1, sentStatus: null });
      expect(waiting.nextRunAt.getTime()).toBeGreaterThan(waiting.updatedAt.getTime());
    } finally {
      hcp.state.callbackStatus = 200;
    }
    await t.db.sql.query(`UPDATE hcp_run_task_requests SET "nextRunAt" = now() WHERE "taskResultId" = $1`, [taskResult]);
    await drain();
    expect(hcp.for(taskResult).map((p) => p.status)).toEqual(["running", "running"]);
    const read = await t.gql(READ_TASK, {}, org.adminToken);
    const request = read.data.hcpRunTask.requests.find((r: any) => r.taskResultId === taskResult);
    expect(request.callbacks).toEqual([
      { status: "running", ok: false, responseCode: 503, error: "HTTP 503" },
      { status: "running", ok: true, responseCode: 200, error: null },
    ]);
    expect(request.sentStatus).toBe("running");
  });
});

describe("configuration", () => {
  it("needs (webhook, …): a member without it can neither create, update, map nor read the run task", async () => {
    const reader = await addMember(t.db, org.orgId, { grants: [READ] });
    expect((await t.gql(CREATE, {}, reader.token)).data.createHcpRunTask.__typename).toBe("PermissionDeniedError");
    expect((await t.gql(UPDATE, { input: { rotateHmacKey: true } }, reader.token)).data.updateHcpRunTask.__typename).toBe("PermissionDeniedError");
    expect((await t.gql(MAP, { input: { hcpOrganization: HCP_ORG, hcpWorkspace: "other", workspaceId } }, reader.token)).data.addHcpWorkspaceMapping.__typename).toBe("PermissionDeniedError");
    const read = await t.gql(READ_TASK, {}, reader.token);
    expect(read.data?.hcpRunTask ?? null).toBeNull();
  });

  it("another organization's administrator cannot map a workspace of this one, nor reach its run task", async () => {
    const other = await createOrg(t.db);
    ops(t).ok(await t.gql(CREATE, {}, other.adminToken), "createHcpRunTask");
    const mapped = await t.gql(MAP, { input: { hcpOrganization: HCP_ORG, hcpWorkspace: "borrowed", workspaceId } }, other.adminToken);
    expect(mapped.data.addHcpWorkspaceMapping.__typename).toBe("NotFoundError");
    const read = await t.gql(READ_TASK, {}, other.adminToken);
    expect(read.data.hcpRunTask.id).not.toBe(runTaskId);
  });

  it("rotating the key refuses requests signed with the old one", async () => {
    const rotated = ops(t).ok<{ hmacKey: string }>(await t.gql(UPDATE, { input: { rotateHmacKey: true } }, org.adminToken), "updateHcpRunTask");
    const { raw } = runTaskRequest();
    expect((await post(raw, sign(hmacKey, raw))).status).toBe(401);
    hmacKey = rotated.hmacKey;
    expect((await post(raw, sign(hmacKey, raw))).status).toBe(200);
    await drain();
  });
});
