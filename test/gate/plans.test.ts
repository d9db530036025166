// Plans: submission (Terraform show JSON or a plain list, all-or-nothing), targeting,
// superseding, the runner's result, discarding, the targeted plan picker, and the records the
// gate keeps (plans and approvals are never deleted).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { APPROVE, ERROR_FIELDS, PLAN, READ, SUBMIT, allActions, ops, person, seedStack, seedWorkspace, type Person } from "./helpers.js";

let t: TestApp;
let org: OrgFixture;
let o: ReturnType<typeof ops>;
let runner: Person;
let stackId: string;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  o = ops(t);
  runner = await person(t, org.orgId, "runner", [READ, PLAN]);
  stackId = (await seedStack(t, org.orgId)).id;
});
afterAll(() => t.close());

const terraformShow = (resourceChanges: unknown[]) => ({
  format_version: "1.2",
  terraform_version: "1.9.5",
  planned_values: {},
  resource_changes: resourceChanges,
});
const rc = (address: string, actions: string[]) => ({ address, mode: "managed", type: address.split(".").at(-2), name: "x", change: { actions } });

const submitRaw = (token: string, input: Record<string, unknown>) => t.gql(SUBMIT, { input }, token).then((r) => r.data.submitPlan);

describe("submitting a plan", () => {
  it("accepts terraform show -json: no-op and read changes are ignored, delete+create is replace", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const res = await submitRaw(runner.token, {
      workspaceId: ws.id,
      plan: terraformShow([
        rc("aws_s3_bucket.logs", ["create"]),
        rc("aws_instance.web", ["delete", "create"]),
        rc("aws_iam_role.ci", ["no-op"]),
        rc("data.aws_caller_identity.me", ["read"]),
        rc("aws_db_instance.old", ["delete"]),
      ]),
    });
    expect(res.__typename).toBe("MutationSubmitPlanSuccess");
    const stored = await t.db.prisma.resourceChange.findMany({ where: { planId: res.data.id }, orderBy: { address: "asc" } });
    expect(stored.map((c) => [c.address, c.action])).toEqual([
      ["aws_db_instance.old", "delete"],
      ["aws_instance.web", "replace"],
      ["aws_s3_bucket.logs", "create"],
    ]);
  });

  it("accepts the JSON text of terraform show -json, and a plain list", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const text = JSON.stringify(terraformShow([rc("aws_s3_bucket.a", ["update"])]));
    expect((await submitRaw(runner.token, { workspaceId: ws.id, plan: text })).data.changeCount).toBe(1);
    const list = await submitRaw(runner.token, { workspaceId: ws.id, plan: [{ address: "aws_s3_bucket.b", action: "delete" }] });
    expect(list.data.changeCount).toBe(1);
  });

  it("bad Terraform JSON gets a ValidationError naming the path, and nothing is stored", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const res = await submitRaw(runner.token, {
      workspaceId: ws.id,
      plan: terraformShow([rc("aws_s3_bucket.ok", ["create"]), { address: "aws_s3_bucket.bad", change: { actions: ["explode"] } }, { change: { actions: ["create"] } }]),
    });
    expect(res.__typename).toBe("ValidationError");
    expect(res.issues.map((i: { field: string }) => i.field)).toEqual([
      "input.plan.resource_changes.1.change.actions",
      "input.plan.resource_changes.2.address",
    ]);
    expect(res.issues[0].message).toContain("resource_changes[1].change.actions");
    const notJson = await submitRaw(runner.token, { workspaceId: ws.id, plan: "{ not json" });
    expect(notJson.issues[0].field).toBe("input.plan");
    expect(await t.db.prisma.plan.count({ where: { workspaceId: ws.id } })).toBe(0);
    expect(await t.db.prisma.resourceChange.count({ where: { plan: { workspaceId: ws.id } } })).toBe(0);
  });

  it("a plain list with a duplicate address names the entry", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const res = await submitRaw(runner.token, {
      workspaceId: ws.id,
      changes: [
        { address: "aws_s3_bucket.a", action: "CREATE" },
        { address: "aws_s3_bucket.a", action: "DELETE" },
      ],
    });
    expect(res.issues[0].field).toBe("input.changes.1.address");
  });

  it("records whether it is targeted and at what", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const res = await submitRaw(runner.token, {
      workspaceId: ws.id,
      changes: [{ address: "module.app.aws_instance.web", action: "UPDATE" }],
      targets: ["module.app"],
    });
    expect(res.data).toMatchObject({ targeted: true, targets: ["module.app"] });
    const bad = await submitRaw(runner.token, { workspaceId: ws.id, changes: [], targeted: true });
    expect(bad.issues[0].field).toBe("input.targets");
  });

  it("needs (workspace, plan): an approver cannot submit, and the missing tuple is named", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const approver = await person(t, org.orgId, "approver", [READ, APPROVE]);
    const res = await submitRaw(approver.token, { workspaceId: ws.id, changes: [] });
    expect(res).toMatchObject({ __typename: "PermissionDeniedError", missing: { resourceType: "workspace", action: "plan", matchValue: ws.name } });
  });

  it("a newer plan on the workspace supersedes an older planned one", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const first = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    const second = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    const old = await t.db.prisma.plan.findUniqueOrThrow({ where: { id: first.id } });
    expect(old).toMatchObject({ status: "discarded", discardReason: "superseded", supersededById: second.id });
    expect((await o.approve(org.adminToken, first.id)).__typename).toBe("InvalidStateError");
  });
});

describe("the plan's life", () => {
  const REPORT = `mutation($input: ReportPlanResultInput!) { reportPlanResult(input: $input) { __typename ... on MutationReportPlanResultSuccess { data { status finishedAt } } ${ERROR_FIELDS} } }`;
  const DISCARD = `mutation($planId: ID!) { discardPlan(planId: $planId) { __typename ... on MutationDiscardPlanSuccess { data { status discardReason } } ${ERROR_FIELDS} } }`;

  it("the runner reports applied or failed, only for an applying plan", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    const early = await t.gql(REPORT, { input: { planId: plan.id, outcome: "APPLIED" } }, runner.token);
    expect(early.data.reportPlanResult).toMatchObject({ __typename: "InvalidStateError", state: "planned" });
    expect((await o.apply(org.adminToken, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
    const done = await t.gql(REPORT, { input: { planId: plan.id, outcome: "FAILED" } }, runner.token);
    expect(done.data.reportPlanResult.data.status).toBe("FAILED");
    // A new plan can apply once the first one is finished.
    const next = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    expect((await o.apply(org.adminToken, next.id)).__typename).toBe("MutationApplyPlanSuccess");
  });

  it("the runner's report carries a message that reads back with the plan; over 4,000 characters is refused, nothing written", async () => {
    const REPORT_MSG = `mutation($input: ReportPlanResultInput!) { reportPlanResult(input: $input) {
      __typename ... on MutationReportPlanResultSuccess { data { status resultMessage } }
      ... on ValidationError { issues { field code } } } }`;
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    expect((await o.apply(org.adminToken, plan.id)).__typename).toBe("MutationApplyPlanSuccess");
    const long = await t.gql(REPORT_MSG, { input: { planId: plan.id, outcome: "FAILED", message: "x".repeat(4001) } }, runner.token);
    expect(long.data.reportPlanResult.__typename).toBe("ValidationError");
    expect(long.data.reportPlanResult.issues.map((i: { field: string }) => i.field)).toEqual(["input.message"]);
    expect((await t.db.prisma.plan.findUniqueOrThrow({ where: { id: plan.id } })).status).toBe("applying");
    const message = "Error: creating S3 Bucket: BucketAlreadyExists\nsee job 4242";
    const done = await t.gql(REPORT_MSG, { input: { planId: plan.id, outcome: "FAILED", message } }, runner.token);
    expect(done.data.reportPlanResult.data).toEqual({ status: "FAILED", resultMessage: message });
  });

  it("only one plan applies at a time on a workspace", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const first = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    expect((await o.apply(org.adminToken, first.id)).__typename).toBe("MutationApplyPlanSuccess");
    const second = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.b", action: "CREATE" }]);
    expect(await o.apply(org.adminToken, second.id)).toMatchObject({ __typename: "ConflictError" });
  });

  it("discarding keeps the plan and its approvals", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId, 1);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    await o.approve(org.adminToken, plan.id);
    const res = await t.gql(DISCARD, { planId: plan.id }, runner.token);
    expect(res.data.discardPlan.data).toEqual({ status: "DISCARDED", discardReason: "discarded" });
    expect(await t.db.prisma.approval.count({ where: { planId: plan.id } })).toBe(1);
    expect((await t.gql(DISCARD, { planId: plan.id }, runner.token)).data.discardPlan.__typename).toBe("InvalidStateError");
  });

  it("plans and their approvals survive the workspace being archived", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId, 1);
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    await o.approve(org.adminToken, plan.id);
    const archived = await t.gql(`mutation($id: ID!) { archiveWorkspace(id: $id) { __typename ... on MutationArchiveWorkspaceSuccess { data { archived } } } }`, { id: ws.id }, org.adminToken);
    expect(archived.data.archiveWorkspace.data.archived).toBe(true);
    const page = await t.gql(
      `query($id: ID!) { plan(id: $id) { status discardReason approvals { user { id } approvedAt } workspace { archived } } }`,
      { id: plan.id },
      org.adminToken,
    );
    expect(page.data.plan).toMatchObject({ status: "DISCARDED", discardReason: "workspace_archived", approvals: [{ user: { id: org.adminId } }], workspace: { archived: true } });
    expect((await submitRaw(runner.token, { workspaceId: ws.id, changes: [] })).__typename).toBe("InvalidStateError");
  });
});

describe("the targeted plan picker", () => {
  const PICK = `query($w: ID!, $a: [String!]!) { targetedPlanPicker(workspaceId: $w, addresses: $a) {
    currentPlanId total baselineApplies holdingChanges notes resources { address action count onBaseline governedBy { policyName count } selectedBy } } }`;

  it("shows each chosen resource's count using the action the workspace's current plan has for it, with the total", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId, 2);
    await o.policy(org.adminToken, {
      workspaceIds: [ws.id],
      addressPatterns: ["module.status_page.*"],
      requirements: [{ action: "UPDATE", count: 1 }, { action: "DELETE", count: 3 }],
    });
    const current = await o.submit(runner.token, ws.id, [
      { address: "module.status_page.aws_s3_bucket.site", action: "UPDATE" },
      { address: "module.status_page.aws_cloudfront_distribution.cdn", action: "DELETE" },
      { address: "aws_route53_record.status", action: "UPDATE" },
    ]);
    const pick = (await t.gql(PICK, { w: ws.id, a: ["module.status_page"] }, runner.token)).data.targetedPlanPicker;
    expect(pick).toMatchObject({ currentPlanId: current.id, total: 3, baselineApplies: false });
    expect(pick.resources.map((r: { address: string; count: number }) => [r.address, r.count])).toEqual([
      ["module.status_page.aws_cloudfront_distribution.cdn", 3],
      ["module.status_page.aws_s3_bucket.site", 1],
    ]);
    const withDependency = (await t.gql(PICK, { w: ws.id, a: ["module.status_page.aws_s3_bucket.site", "aws_route53_record.status"] }, runner.token)).data.targetedPlanPicker;
    expect(withDependency).toMatchObject({ total: 2, baselineApplies: true, holdingChanges: ["aws_route53_record.status"] });
    expect(withDependency.notes.join(" ")).toContain("can rise");
  });

  it("validates the addresses", async () => {
    const ws = await seedWorkspace(t, org.orgId, stackId);
    const res = await t.gql(PICK, { w: ws.id, a: [" padded "] }, runner.token);
    expect(res.errors?.[0]?.extensions?.code).toBe("VALIDATION_FAILED");
  });
});

it("allActions helper covers every action", () => {
  expect(allActions(1).map((r) => r.action)).toEqual(["CREATE", "UPDATE", "DELETE", "REPLACE"]);
});
