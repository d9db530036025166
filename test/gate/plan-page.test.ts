// The plan page's API: the CI run's link (plan submit --run-url), approval comments, the
// add/change/destroy summary and the attribute diff kept from `terraform show -json` — sensitive
// values masked as Terraform masks them, before anything is stored; unknown-after-apply said as
// such; readable exactly as the plan is, never across organizations. Through GraphQL on real
// PostgreSQL.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_ATTRIBUTES_PER_RESOURCE, MAX_PLAN_DIFF_BYTES, MAX_VALUE_CHARS, planDiffOf } from "../../src/domain/gate/index.js";
import { setPlanOrigin } from "../../src/services/plans.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { APPROVE, ERROR_FIELDS, PLAN, READ, ops, person, seedStack, seedWorkspace, type Person } from "./helpers.js";
import { SHOW_JSON } from "./show-json.js";

let t: TestApp;
let org: OrgFixture;
let other: OrgFixture;
let o: ReturnType<typeof ops>;
let runner: Person;
let reader: Person;
let stackId: string;

const PLAN_PAGE = `query($id: ID!) { plan(id: $id) {
  id runUrl changeSummary { add change destroy replace }
  approvals { user { id } comment }
  diff { resourceCount truncated bytes resources { address action actions deposed attributesClipped
    attributes { path before after beforeSensitive afterSensitive afterUnknown } } }
} }`;
const SUBMIT_JSON = `mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { __typename ... on MutationSubmitPlanSuccess { data { id runUrl } } ${ERROR_FIELDS} } }`;
const APPROVE_WITH = `mutation($planId: ID!, $comment: String) { approvePlan(planId: $planId, comment: $comment) { __typename ... on MutationApprovePlanSuccess { data { id comment } } ${ERROR_FIELDS} } }`;

beforeAll(async () => {
  t = await startTestApp();
  [org, other] = await Promise.all([createOrg(t.db), createOrg(t.db)]);
  o = ops(t);
  runner = await person(t, org.orgId, "runner", [READ, PLAN]);
  reader = await person(t, org.orgId, "reader", [READ]);
  stackId = (await seedStack(t, org.orgId)).id;
});
afterAll(() => t.close());

async function submitJson(input: Record<string, unknown>, token = runner.token) {
  const w = await seedWorkspace(t, org.orgId, stackId, 1);
  const res = await t.gql(SUBMIT_JSON, { input: { workspaceId: w.id, ...input } }, token);
  if (res.errors) throw new Error(JSON.stringify(res.errors));
  return res.data.submitPlan;
}
const page = async (id: string, token: string) => {
  const res = await t.gql(PLAN_PAGE, { id }, token);
  if (res.errors) throw new Error(JSON.stringify(res.errors));
  return res.data.plan;
};

describe("what changes", () => {
  it("summary as Terraform counts it; per resource the changed attributes, before → after", async () => {
    const r = await submitJson({ plan: SHOW_JSON, runUrl: "https://ci.example.com/acme/infra/runs/42" });
    const p = await page(r.data.id, reader.token);
    expect(p.changeSummary).toEqual({ add: 2, change: 1, destroy: 2, replace: 1 });
    expect(p.runUrl).toBe("https://ci.example.com/acme/infra/runs/42");
    expect(p.diff.resources.map((x: { address: string; action: string }) => [x.address, x.action])).toEqual([
      ["aws_db_instance.main", "UPDATE"],
      ["aws_iam_role.gone", "DELETE"],
      ["aws_instance.old", "REPLACE"],
      ["aws_s3_bucket.logs", "CREATE"],
    ]);
    const db = p.diff.resources[0];
    expect(db.attributes).toEqual([
      { path: "instance_class", before: '"db.t3.micro"', after: '"db.t3.large"', beforeSensitive: false, afterSensitive: false, afterUnknown: false },
      { path: "password", before: null, after: null, beforeSensitive: true, afterSensitive: true, afterUnknown: false },
      { path: 'tags["kubernetes.io/role"]', before: null, after: '"db"', beforeSensitive: false, afterSensitive: false, afterUnknown: false },
    ]);
    const bucket = p.diff.resources[3];
    expect(bucket.attributes).toEqual([
      { path: "arn", before: null, after: null, beforeSensitive: false, afterSensitive: false, afterUnknown: true },
      { path: "bucket", before: null, after: '"acme-logs"', beforeSensitive: false, afterSensitive: false, afterUnknown: false },
      { path: "force_destroy", before: null, after: "false", beforeSensitive: false, afterSensitive: false, afterUnknown: false },
      { path: "grants[0].id", before: null, after: null, beforeSensitive: false, afterSensitive: false, afterUnknown: true },
      { path: "grants[0].type", before: null, after: '"CanonicalUser"', beforeSensitive: false, afterSensitive: false, afterUnknown: false },
      { path: "id", before: null, after: null, beforeSensitive: false, afterSensitive: false, afterUnknown: true },
    ]);
    // An unchanged sensitive value is not listed (Terraform hides unchanged attributes).
    expect(p.diff.resources[2].attributes.map((a: { path: string }) => a.path)).toEqual(["ami", "id"]);
  });

  it("a sensitive value never reaches the database, in any form", async () => {
    const r = await submitJson({ plan: JSON.stringify(SHOW_JSON) });
    const [row] = await t.db.sql.query<{ text: string }>(`SELECT diff::text AS text FROM plan_diffs WHERE "planId" = $1`, [r.data.id]);
    expect(row!.text).toContain("db.t3.large");
    expect(row!.text).not.toContain("hunter2");
    const [plans] = await t.db.sql.query<{ text: string }>(`SELECT row_to_json(p)::text AS text FROM plans p WHERE id = $1`, [r.data.id]);
    expect(plans!.text).not.toContain("hunter2");
  });

  it("a plan submitted as a list has a summary and no diff", async () => {
    const w = await seedWorkspace(t, org.orgId, stackId, 0);
    const plan = await o.submit(runner.token, w.id, [{ address: "a.b", action: "REPLACE" }]);
    const p = await page(plan.id, reader.token);
    expect(p.diff).toBeNull();
    expect(p.changeSummary).toEqual({ add: 1, change: 0, destroy: 1, replace: 1 });
  });

  it("bounded: values clipped, attributes per resource capped, the whole diff within its byte bound", () => {
    const wide = Object.fromEntries(Array.from({ length: MAX_ATTRIBUTES_PER_RESOURCE + 7 }, (_, i) => [`k${i}`, i]));
    const long = "x".repeat(MAX_VALUE_CHARS * 2);
    const many = Array.from({ length: 700 }, (_, i) => ({
      address: `null_resource.r${String(i).padStart(4, "0")}`,
      change: { actions: ["create"], before: null, after: { blob: "y".repeat(4000) } },
    }));
    const d = planDiffOf({ resource_changes: [{ address: "a.wide", change: { actions: ["create"], before: null, after: { ...wide, long } } }, ...many] })!;
    expect(d.diff.resources[0]!.attributes).toHaveLength(MAX_ATTRIBUTES_PER_RESOURCE);
    expect(d.diff.resources[0]!.clipped).toBe(8);
    expect(d.bytes).toBeLessThanOrEqual(MAX_PLAN_DIFF_BYTES);
    expect(d.diff.truncated).toBeGreaterThan(0);
    expect(d.diff.resources.length + d.diff.truncated).toBe(701);
    const clippedValue = planDiffOf({ resource_changes: [{ address: "a.b", change: { actions: ["create"], before: null, after: { long } } }] })!;
    expect(clippedValue.diff.resources[0]!.attributes[0]!.a!.length).toBeLessThan(MAX_VALUE_CHARS + 40);
  });

  it("readable exactly as the plan is: another organization's admin gets null", async () => {
    const r = await submitJson({ plan: SHOW_JSON });
    expect(await page(r.data.id, other.adminToken)).toBeNull();
  });
});

describe("the CI run's link", () => {
  const BAD: [string, RegExp][] = [
    ["javascript:alert(1)", /http or https/],
    ["ftp://ci.example.com/run", /http or https/],
    ["/runs/42", /absolute http\(s\) URL/],
    ["https://user:pass@ci.example.com/run", /user name or password/],
    [`https://ci.example.com/${"a".repeat(2048)}`, /at most 2048 characters/],
  ];
  for (const [runUrl, message] of BAD) {
    it(`refuses ${runUrl.slice(0, 40)}: a ValidationError on input.runUrl, nothing stored`, async () => {
      const before = await t.db.prisma.plan.count({ where: { orgId: org.orgId } });
      const r = await submitJson({ changes: [{ address: "a.b", action: "CREATE" }], runUrl });
      expect(r.__typename).toBe("ValidationError");
      expect(r.issues[0]).toMatchObject({ field: "input.runUrl", message: expect.stringMatching(message) });
      expect(await t.db.prisma.plan.count({ where: { orgId: org.orgId } })).toBe(before);
    });
  }
});

describe("where a plan came from", () => {
  const ORIGIN = `query($id: ID!) { plan(id: $id) { origin { kind url } } }`;
  const origin = async (id: string) => (await t.gql(ORIGIN, { id }, reader.token)).data.plan.origin;
  const CHANGES = [{ address: "a.b", action: "CREATE" }];

  it("the API unless the client says CLI; the link is the run URL", async () => {
    const bare = await submitJson({ changes: CHANGES });
    expect(await origin(bare.data.id)).toEqual({ kind: "API", url: null });
    const cli = await submitJson({ changes: CHANGES, origin: "CLI", runUrl: "https://ci.example.com/acme/infra/runs/43" });
    expect(await origin(cli.data.id)).toEqual({ kind: "CLI", url: "https://ci.example.com/acme/infra/runs/43" });
  });

  it("a client cannot claim an integration's origin: every kind beyond the client's own is refused, nothing stored", async () => {
    const kinds = (await t.gql(`{ __type(name: "PlanOriginKind") { enumValues { name } } }`)).data.__type.enumValues.map((v: { name: string }) => v.name);
    const clients = (await t.gql(`{ __type(name: "PlanSubmitOrigin") { enumValues { name } } }`)).data.__type.enumValues.map((v: { name: string }) => v.name);
    const integrations = kinds.filter((k: string) => !clients.includes(k));
    expect(integrations.length).toBeGreaterThan(0);
    const w = await seedWorkspace(t, org.orgId, stackId, 1);
    for (const kind of integrations) {
      const before = await t.db.prisma.plan.count({ where: { orgId: org.orgId } });
      const res = await t.gql(SUBMIT_JSON, { input: { workspaceId: w.id, changes: CHANGES, origin: kind } }, runner.token);
      expect(res.errors?.[0]?.message, kind).toMatch(/PlanSubmitOrigin/);
      expect(await t.db.prisma.plan.count({ where: { orgId: org.orgId } })).toBe(before);
    }
  });

  it("an integration that recognizes a plan marks it as its own", async () => {
    const cli = await submitJson({ changes: CHANGES, origin: "CLI", runUrl: "https://github.com/acme/infra/actions/runs/7" });
    await setPlanOrigin(t.db, cli.data.id, "github_deployment");
    expect(await origin(cli.data.id)).toEqual({ kind: "GITHUB_DEPLOYMENT", url: "https://github.com/acme/infra/actions/runs/7" });
  });
});

describe("approving with a comment", () => {
  it("the comment is kept with the approval; blank is none; over 2,000 characters is a ValidationError", async () => {
    const approver = await person(t, org.orgId, "approver", [READ, APPROVE]);
    const w = await seedWorkspace(t, org.orgId, stackId, 1);
    const plan = await o.submit(runner.token, w.id, [{ address: "a.b", action: "CREATE" }]);
    const tooLong = (await t.gql(APPROVE_WITH, { planId: plan.id, comment: "x".repeat(2001) }, approver.token)).data.approvePlan;
    expect(tooLong).toMatchObject({ __typename: "ValidationError", issues: [{ field: "comment" }] });
    expect(await t.db.prisma.approval.count({ where: { planId: plan.id } })).toBe(0);
    const ok = (await t.gql(APPROVE_WITH, { planId: plan.id, comment: "Looks right:\nsize bump only." }, approver.token)).data.approvePlan;
    expect(ok.data.comment).toBe("Looks right:\nsize bump only.");
    const p = await page(plan.id, reader.token);
    expect(p.approvals).toEqual([{ user: { id: approver.userId }, comment: "Looks right:\nsize bump only." }]);
    const blank = await person(t, org.orgId, "blank", [READ, APPROVE]);
    const b = (await t.gql(APPROVE_WITH, { planId: plan.id, comment: "   " }, blank.token)).data.approvePlan;
    expect(b.data.comment).toBeNull();
  });
});
