// Seed 004's surfaces that had no API: personal organizations, PR preview mode and
// cloud integrations. One test per rule of the seed that names them, named by the rule's words,
// each through the GraphQL API on the real PostgreSQL.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { runAdmin } from "../src/cli/admin.js";
import { TEST_DATABASE_URL } from "./helpers/env.js";
import { startTestApp, type TestApp } from "./helpers/harness.js";
import { addMember, createOrg, like, type OrgFixture } from "./helpers/fixtures.js";
import { CHECK } from "./check/queries.js";

let t: TestApp;
let org: OrgFixture;
let n = 0;
const uniq = (prefix: string) => `${prefix}-${++n}-${Math.random().toString(36).slice(2, 6)}`;

beforeAll(async () => {
  // One admin opens many personal organizations here: the per-person cap and rate are not under test (test/personal-orgs/limits.test.ts).
  t = await startTestApp({ env: { COUNTERSIGN_PERSONAL_ORGS_PER_PERSON: "100", COUNTERSIGN_PERSONAL_ORG_CREATE_BURST: "100" } });
  org = await createOrg(t.db);
});
afterAll(() => t.close());

type Grant = { resourceType: string; action: string; resourcePattern?: string; authzGroup?: string };
const member = async (grants: Grant[]) => (await addMember(t.db, org.orgId, { grants: grants as never })).token;
const systemRoleMember = async (role: string) => (await addMember(t.db, org.orgId, { role })).token;

async function seedStack(name: string, authzGroups: string[] = []) {
  return t.db.prisma.stack.create({
    data: {
      orgId: org.orgId,
      name,
      authzGroups,
      groupMembers: { create: authzGroups.map((groupName) => ({ orgId: org.orgId, groupName, stackName: name })) },
    },
  });
}

const RESULT = `__typename
  ... on Error { code message }
  ... on PermissionDeniedError { missing { resourceType action matchValue } }
  ... on ValidationError { issues { field code message } }`;
/** For mutations whose result union carries InvalidStateError. */
const RESULT_STATE = `${RESULT} ... on InvalidStateError { resource state }`;

// ── Personal organizations ─────────────────────────────────────────────────────────────────────

const CREATE_PERSONAL = `mutation($input: CreatePersonalOrganizationInput!) {
  createPersonalOrganization(input: $input) {
    ${RESULT_STATE}
    ... on MutationCreatePersonalOrganizationSuccess { data { token organization { id slug name personal } } }
  }
}`;

async function personalOrg(callerToken = org.adminToken) {
  const res = await t.gql(CREATE_PERSONAL, { input: { name: uniq("Mine") } }, callerToken);
  expect(res.errors).toBeUndefined();
  expect(res.data.createPersonalOrganization.__typename).toBe("MutationCreatePersonalOrganizationSuccess");
  const { token, organization } = res.data.createPersonalOrganization.data;
  return { token: token as string, orgId: organization.id as string, organization };
}

describe("seed 004: personal organizations", () => {
  it("the owner gets the admin role implicitly via RoleService.GrantAdminRoleInTx on org creation", async () => {
    const { token, organization } = await personalOrg();
    expect(organization.personal).toBe(true);
    const viewer = await t.gql(`{ viewer { email organization { id personal } } }`, {}, token);
    expect(viewer.data.viewer.organization).toEqual({ id: organization.id, personal: true });
    // Admin: creates a stack, adds a member, reads the members — with no role assignment written.
    const stack = await t.gql(
      `mutation { createStack(input: { name: "mine", authzGroups: ["env-prod"] }) { __typename ... on MutationCreateStackSuccess { data { name } } } }`,
      {},
      token,
    );
    expect(stack.data.createStack).toEqual({ __typename: "MutationCreateStackSuccess", data: { name: "mine" } });
    const added = await t.gql(
      `mutation { addMember(input: { email: "friend@example.com", name: "Friend" }) { __typename } }`,
      {},
      token,
    );
    expect(added.data.addMember.__typename).toBe("MutationAddMemberSuccess");
    expect(await t.db.prisma.roleAssignment.count({ where: { orgId: organization.id } })).toBe(0);
    // Nothing of the caller's own organization came along: the owner is a new user of the new org.
    const owner = await t.db.prisma.organization.findUniqueOrThrow({ where: { id: organization.id }, include: { owner: true } });
    expect(owner.owner!.orgId).toBe(organization.id);
  });

  it("Personal organizations (owner_user_id IS NOT NULL) reject all manual role assignments", async () => {
    const { token, orgId } = await personalOrg();
    const friend = await addMember(t.db, orgId);
    const assign = await t.gql(
      `mutation($u: ID!) { assignRole(roleId: "system:stack-reader", userId: $u) { ${RESULT_STATE} } }`,
      { u: friend.userId },
      token,
    );
    expect(assign.data.assignRole).toMatchObject({ __typename: "InvalidStateError", code: "INVALID_STATE", resource: "Organization", state: "personal" });
    const withRole = await t.gql(
      `mutation { addMember(input: { email: "other@example.com", name: "Other", roleId: "system:stack-reader" }) { ${RESULT_STATE} } }`,
      {},
      token,
    );
    expect(withRole.data.addMember).toMatchObject({ __typename: "InvalidStateError", state: "personal" });
    expect(await t.db.prisma.roleAssignment.count({ where: { orgId } })).toBe(0);
  });

  it("Personal organizations reject all manual role assignments and group bindings", async () => {
    const { token, orgId } = await personalOrg();
    const source = await t.gql(`mutation { createIdentitySource(name: "okta") { __typename ... on MutationCreateIdentitySourceSuccess { data { id } } } }`, {}, token);
    const sourceId = source.data.createIdentitySource.data.id;
    const binding = await t.gql(
      `mutation($s: ID!) { createGroupBinding(input: { identitySourceId: $s, groupKey: "devs", roleIds: ["system:stack-reader"] }) { ${RESULT_STATE} } }`,
      { s: sourceId },
      token,
    );
    expect(binding.data.createGroupBinding).toMatchObject({ __typename: "InvalidStateError", state: "personal" });
    expect(await t.db.prisma.identityGroupBinding.count({ where: { orgId } })).toBe(0);
  });

  it("Personal organizations reject … (and custom-role creation)", async () => {
    const { token, orgId } = await personalOrg();
    const res = await t.gql(
      `mutation { createRole(input: { name: "Mine", permissions: [{ resourceType: "stack", action: "read" }] }) { ${RESULT_STATE} } }`,
      {},
      token,
    );
    expect(res.data.createRole).toMatchObject({ __typename: "InvalidStateError", state: "personal" });
    expect(await t.db.prisma.role.count({ where: { orgId } })).toBe(0);
  });

  it("no other writer can put an assignment, a binding or a custom role in a personal organization (the database refuses)", async () => {
    const { orgId } = await personalOrg();
    const user = await t.db.prisma.user.create({ data: { orgId, email: "direct@example.com", name: "Direct" } });
    await expect(t.db.prisma.roleAssignment.create({ data: { orgId, userId: user.id, roleId: "system:admin" } })).rejects.toThrow(/personal organization/);
    await expect(t.db.prisma.role.create({ data: { orgId, key: "x", name: "X" } })).rejects.toThrow(/personal organization/);
    const source = await t.db.prisma.identitySource.create({ data: { orgId, name: "idp" } });
    await expect(t.db.prisma.identityGroupBinding.create({ data: { orgId, identitySourceId: source.id, groupKey: "g" } })).rejects.toThrow(
      /personal organization/,
    );
    // Flag and owner stay together: the owner cannot vanish and leave an ordinary organization behind.
    await expect(t.db.prisma.organization.update({ where: { id: orgId }, data: { ownerUserId: null } })).rejects.toThrow();
  });

  it("the owner may close their personal organization; a member of it may not", async () => {
    const { token, orgId } = await personalOrg();
    const friend = await addMember(t.db, orgId);
    const byFriend = await t.gql(`mutation { deleteOrganization { ${RESULT_STATE} } }`, {}, friend.token);
    expect(byFriend.data.deleteOrganization.__typename).toBe("PermissionDeniedError");
    const byOwner = await t.gql(`mutation { deleteOrganization { __typename } }`, {}, token);
    expect(byOwner.data.deleteOrganization.__typename).toBe("MutationDeleteOrganizationSuccess");
    expect((await t.gql(`{ viewer { email } }`, {}, token)).data?.viewer ?? null).toBeNull();
  });

  it("a service account cannot own a personal organization; a blank name is a ValidationError", async () => {
    const bot = await addMember(t.db, org.orgId);
    await t.db.prisma.user.update({ where: { id: bot.userId }, data: { isServiceAccount: true } });
    const res = await t.gql(CREATE_PERSONAL, { input: { name: "Bot's" } }, bot.token);
    expect(res.data.createPersonalOrganization).toMatchObject({ __typename: "InvalidStateError", state: "service_account" });
    const blank = await t.gql(CREATE_PERSONAL, { input: { name: "   " } }, org.adminToken);
    expect(blank.data.createPersonalOrganization.__typename).toBe("ValidationError");
    const anonymous = await t.gql(CREATE_PERSONAL, { input: { name: "Nobody" } }, null);
    expect(anonymous.data?.createPersonalOrganization?.__typename ?? anonymous.errors?.[0]?.extensions?.code).toMatch(/UNAUTHENTICATED|UnauthenticatedError/);
  });

  it("the admin CLI creates a personal organization with an owner (create-org --personal)", async () => {
    const slug = uniq("cli-personal");
    const printedLines: string[] = [];
    const log = vi.spyOn(console, "log").mockImplementation((line: string) => void printedLines.push(line));
    const saved = { url: process.env.DATABASE_URL, schema: process.env.DATABASE_SCHEMA };
    process.env.DATABASE_URL = TEST_DATABASE_URL;
    process.env.DATABASE_SCHEMA = t.schemaName;
    try {
      const code = await runAdmin(["create-org", "--personal", "--name", "CLI personal", "--slug", slug, "--admin-email", "owner@example.com", "--json"]);
      expect(code).toBe(0);
    } finally {
      log.mockRestore();
      for (const [key, value] of [["DATABASE_URL", saved.url], ["DATABASE_SCHEMA", saved.schema]] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
    const printed = JSON.parse(printedLines.at(-1)!);
    expect(printed).toMatchObject({ organization: slug, personal: true, owner: "owner@example.com" });
    const res = await t.gql(`{ viewer { organization { slug personal } } }`, {}, printed.token);
    expect(res.data.viewer.organization).toEqual({ slug, personal: true });
    const role = await t.gql(`mutation { createRole(input: { name: "R", permissions: [{ resourceType: "stack", action: "read" }] }) { ${RESULT_STATE} } }`, {}, printed.token);
    expect(role.data.createRole.__typename).toBe("InvalidStateError");
  }, 60_000);
});

// ── PR preview mode ────────────────────────────────────────────────────────────────────────────

const SET_MODE = `mutation($input: SetStackPrPlanModeInput!) {
  setStackPrPlanMode(input: $input) { ${RESULT} ... on MutationSetStackPrPlanModeSuccess { data { prPlanMode revision } } }
}`;
const REQUEST = `mutation($input: RequestPrPreviewInput!) {
  requestPrPreview(input: $input) { ${RESULT} ... on MutationRequestPrPreviewSuccess { data { id status autoConfirmed pullRequest commitSha } } }
}`;
const CONFIRM = `mutation($id: ID!) {
  confirmPrPreview(id: $id) { ${RESULT_STATE} ... on MutationConfirmPrPreviewSuccess { data { id status autoConfirmed confirmedById confirmedAt } } }
}`;

const CI = [
  { resourceType: "stack", action: "read" },
  { resourceType: "stack", action: "deploy" },
];

async function request(token: string, stackId: string, pullRequest = 42, commitSha = "0a1b2c3d4e5f") {
  const res = await t.gql(REQUEST, { input: { stackId, pullRequest, commitSha } }, token);
  expect(res.errors).toBeUndefined();
  return res.data.requestPrPreview;
}

describe("seed 004: PR preview mode", () => {
  it("When a stack's pr_plan_mode is manual (the default), a pull request's read-only preview plan is created parked on a confirmation stage instead of running, and preview is what confirms it", async () => {
    const stack = await seedStack(uniq("pr-manual"));
    const mode = await t.gql(`query($id: ID!) { stack(id: $id) { prPlanMode } }`, { id: stack.id }, org.adminToken);
    expect(mode.data.stack.prPlanMode).toBe("MANUAL");
    const ci = await member(CI);
    const parked = await request(ci, stack.id);
    expect(parked).toMatchObject({ __typename: "MutationRequestPrPreviewSuccess", data: { status: "AWAITING_CONFIRMATION", autoConfirmed: false } });
    // The runner polls it: still parked.
    const polled = await t.gql(`query($id: ID!) { prPreview(id: $id) { status viewerCanConfirm } }`, { id: parked.data.id }, ci);
    expect(polled.data.prPreview).toEqual({ status: "AWAITING_CONFIRMATION", viewerCanConfirm: false });
    const approver = await member([{ resourceType: "stack", action: "read" }, { resourceType: "stack", action: "preview" }]);
    const confirmed = await t.gql(CONFIRM, { id: parked.data.id }, approver);
    expect(confirmed.data.confirmPrPreview).toMatchObject({ __typename: "MutationConfirmPrPreviewSuccess", data: { status: "CONFIRMED", autoConfirmed: false } });
    expect(confirmed.data.confirmPrPreview.data.confirmedAt).toEqual(expect.any(String));
    const again = await t.gql(CONFIRM, { id: parked.data.id }, approver);
    expect(again.data.confirmPrPreview).toMatchObject({ __typename: "InvalidStateError", state: "confirmed" });
    // Asking again for the same commit answers the same (now confirmed) preview; a new commit parks anew.
    expect((await request(ci, stack.id)).data).toMatchObject({ id: parked.data.id, status: "CONFIRMED" });
    expect((await request(ci, stack.id, 42, "ffffffffffff")).data.status).toBe("AWAITING_CONFIRMATION");
  });

  it("It is deliberately separate from both deploy and confirm", async () => {
    const stack = await seedStack(uniq("pr-separate"));
    const preview = await request(await member(CI), stack.id);
    const deployAndConfirm = await member([
      { resourceType: "stack", action: "read" },
      { resourceType: "stack", action: "deploy" },
      { resourceType: "stack", action: "confirm" },
      { resourceType: "stack", action: "update" },
    ]);
    const denied = await t.gql(CONFIRM, { id: preview.data.id }, deployAndConfirm);
    expect(denied.data.confirmPrPreview).toMatchObject({
      __typename: "PermissionDeniedError",
      missing: { resourceType: "stack", action: "preview", matchValue: stack.name },
    });
    const row = await t.db.prisma.prPreview.findUniqueOrThrow({ where: { id: preview.data.id } });
    expect(row.status).toBe("awaiting_confirmation");
  });

  it("It also gates setting pr_plan_mode to auto, which turns every future PR preview into a standing yes", async () => {
    const stack = await seedStack(uniq("pr-auto"));
    const updater = await member([{ resourceType: "stack", action: "read" }, { resourceType: "stack", action: "update" }]);
    const denied = await t.gql(SET_MODE, { input: { stackId: stack.id, mode: "AUTO" } }, updater);
    expect(denied.data.setStackPrPlanMode).toMatchObject({ __typename: "PermissionDeniedError", missing: { action: "preview", matchValue: stack.name } });
    // preview alone is not a stack setting: update is needed too.
    const previewOnly = await member([{ resourceType: "stack", action: "read" }, { resourceType: "stack", action: "preview" }]);
    const alsoDenied = await t.gql(SET_MODE, { input: { stackId: stack.id, mode: "AUTO" } }, previewOnly);
    expect(alsoDenied.data.setStackPrPlanMode).toMatchObject({ __typename: "PermissionDeniedError", missing: { action: "update" } });

    const both = await member([
      { resourceType: "stack", action: "read" },
      { resourceType: "stack", action: "update" },
      { resourceType: "stack", action: "preview" },
    ]);
    const set = await t.gql(SET_MODE, { input: { stackId: stack.id, mode: "AUTO", revision: 1 } }, both);
    expect(set.data.setStackPrPlanMode).toMatchObject({ __typename: "MutationSetStackPrPlanModeSuccess", data: { prPlanMode: "AUTO", revision: 2 } });
    const stale = await t.gql(SET_MODE, { input: { stackId: stack.id, mode: "AUTO", revision: 1 } }, both);
    expect(stale.data.setStackPrPlanMode.__typename).toBe("ConflictError");
    // The standing yes: a new preview is confirmed when it is requested, by no one.
    const preview = await request(await member(CI), stack.id, 7);
    expect(preview.data).toMatchObject({ status: "CONFIRMED", autoConfirmed: true });
    // Back to manual takes (stack, update) only: it makes previews wait again.
    const back = await t.gql(SET_MODE, { input: { stackId: stack.id, mode: "MANUAL" } }, updater);
    expect(back.data.setStackPrPlanMode.data.prPlanMode).toBe("MANUAL");
    expect((await request(await member(CI), stack.id, 8)).data.status).toBe("AWAITING_CONFIRMATION");
  });

  it("Carried by stack-approver, not stack-triggerer", async () => {
    const stack = await seedStack(uniq("pr-roles"));
    const triggerer = await systemRoleMember("stack-triggerer");
    const preview = await request(triggerer, stack.id); // the triggerer (a CI identity) may ask for one
    const byTriggerer = await t.gql(CONFIRM, { id: preview.data.id }, triggerer);
    expect(byTriggerer.data.confirmPrPreview.__typename).toBe("PermissionDeniedError");
    const byApprover = await t.gql(CONFIRM, { id: preview.data.id }, await systemRoleMember("stack-approver"));
    expect(byApprover.data.confirmPrPreview.data.status).toBe("CONFIRMED");
  });

  it("admin and stack-admin hold it through their (stack, *) wildcard", async () => {
    const stack = await seedStack(uniq("pr-admins"));
    for (const role of ["admin", "stack-admin"]) {
      const token = await systemRoleMember(role);
      const preview = await request(token, stack.id, role === "admin" ? 1 : 2);
      const confirmed = await t.gql(CONFIRM, { id: preview.data.id }, token);
      expect(confirmed.data.confirmPrPreview.data?.status, role).toBe("CONFIRMED");
      for (const mode of ["AUTO", "MANUAL"]) {
        const set = await t.gql(SET_MODE, { input: { stackId: stack.id, mode } }, token);
        expect(set.data.setStackPrPlanMode.data?.prPlanMode, role).toBe(mode);
      }
    }
  });

  it("(stack, preview, authz_group = env-prod) confirms the previews of every stack carrying env-prod, and only those", async () => {
    const prod = await seedStack(uniq("pr-prod"), ["env-prod"]);
    const dev = await seedStack(uniq("pr-dev"), ["env-dev"]);
    const ci = await member(CI);
    const [p1, p2] = [await request(ci, prod.id), await request(ci, dev.id)];
    const grouped = await member([
      { resourceType: "stack", action: "read" },
      { resourceType: "stack", action: "preview", authzGroup: "env-prod" },
    ]);
    expect((await t.gql(CONFIRM, { id: p1.data.id }, grouped)).data.confirmPrPreview.data.status).toBe("CONFIRMED");
    expect((await t.gql(CONFIRM, { id: p2.data.id }, grouped)).data.confirmPrPreview.__typename).toBe("PermissionDeniedError");
  });

  it("requesting a preview needs (stack, deploy); bad input is a typed ValidationError", async () => {
    const stack = await seedStack(uniq("pr-input"));
    const reader = await member([{ resourceType: "stack", action: "read" }]);
    const denied = await t.gql(REQUEST, { input: { stackId: stack.id, pullRequest: 1, commitSha: "abcdef1" } }, reader);
    expect(denied.data.requestPrPreview).toMatchObject({ __typename: "PermissionDeniedError", missing: { action: "deploy" } });
    const bad = await t.gql(REQUEST, { input: { stackId: stack.id, pullRequest: 0, commitSha: "XYZ" } }, await member(CI));
    expect(bad.data.requestPrPreview.__typename).toBe("ValidationError");
    expect(bad.data.requestPrPreview.issues.map((i: { field: string }) => i.field).sort()).toEqual(["input.commitSha", "input.pullRequest"]);
  });
});

// ── Cloud integrations ─────────────────────────────────────────────────────────────────────────

const CREATE_CI = `mutation($input: CreateCloudIntegrationInput!) {
  createCloudIntegration(input: $input) { ${RESULT} ... on MutationCreateCloudIntegrationSuccess { data { id name provider identity revision stack { name } } } }
}`;
const UPDATE_CI = `mutation($input: UpdateCloudIntegrationInput!) {
  updateCloudIntegration(input: $input) { ${RESULT} ... on MutationUpdateCloudIntegrationSuccess { data { id name identity revision } } }
}`;
const LIST_CI = `{ cloudIntegrations(first: 100) { edges { node { name } } } }`;
const ARN = "arn:aws:iam::123456789012:role/deployer";

async function integration(stackId: string, name: string) {
  const res = await t.gql(CREATE_CI, { input: { stackId, name, provider: "AWS", identity: ARN } }, org.adminToken);
  expect(res.data.createCloudIntegration.__typename).toBe("MutationCreateCloudIntegrationSuccess");
  return res.data.createCloudIntegration.data as { id: string; name: string };
}

describe("seed 004: cloud integrations", () => {
  it("(cloud_integration, update, authz_group = env-prod) matches those stacks' cloud integrations", async () => {
    const prod = await seedStack(uniq("ci-prod"), ["env-prod", "team-a"]);
    const dev = await seedStack(uniq("ci-dev"), ["env-dev"]);
    const onProd = await integration(prod.id, uniq("prod-aws"));
    const onDev = await integration(dev.id, uniq("dev-aws"));
    const grouped = await member([
      { resourceType: "cloud_integration", action: "read", authzGroup: "env-prod" },
      { resourceType: "cloud_integration", action: "update", authzGroup: "env-prod" },
    ]);
    const ok = await t.gql(UPDATE_CI, { input: { id: onProd.id, identity: "arn:aws:iam::123456789012:role/other" } }, grouped);
    expect(ok.data.updateCloudIntegration).toMatchObject({ __typename: "MutationUpdateCloudIntegrationSuccess", data: { revision: 2 } });
    // The dev stack's integration is not reached: not readable, so not found.
    const no = await t.gql(UPDATE_CI, { input: { id: onDev.id, identity: "arn:aws:iam::123456789012:role/other" } }, grouped);
    expect(no.data.updateCloudIntegration.__typename).toBe("NotFoundError");
    expect((await t.db.prisma.cloudIntegration.findUniqueOrThrow({ where: { id: onDev.id } })).identity).toBe(ARN);
  });

  it("target_groups is the stack's authz_groups (a cloud integration passes its stack's): the list filter agrees with the check", async () => {
    const group = uniq("grp");
    const tagged = await seedStack(uniq("ci-tagged"), [group]);
    const other = await seedStack(uniq("ci-other"), []);
    const a = await integration(tagged.id, uniq("tagged-1"));
    const b = await integration(tagged.id, uniq("tagged-2"));
    const c = await integration(other.id, uniq("other-1"));
    const reader = await member([{ resourceType: "cloud_integration", action: "read", authzGroup: group }, { resourceType: "stack", action: "read" }]);
    const list = await t.gql(LIST_CI, {}, reader);
    expect(list.data.cloudIntegrations.edges.map((e: any) => e.node.name)).toEqual([a.name, b.name].sort());
    for (const [ci, visible] of [[a, true], [c, false]] as const) {
      const one = await t.gql(`query($id: ID!) { cloudIntegration(id: $id) { name } }`, { id: ci.id }, reader);
      expect(one.data.cloudIntegration).toEqual(visible ? { name: ci.name } : null);
    }
    // Through the stack: its integrations, each authorized as itself.
    const viaStack = await t.gql(
      `query($a: ID!, $b: ID!) { a: stack(id: $a) { cloudIntegrations { name } } b: stack(id: $b) { cloudIntegrations { name } } }`,
      { a: tagged.id, b: other.id },
      reader,
    );
    expect(viaStack.errors).toBeUndefined();
    expect(viaStack.data.a.cloudIntegrations.map((x: any) => x.name)).toEqual([a.name, b.name].sort());
    expect(viaStack.data.b.cloudIntegrations).toEqual([]);
  });

  it("the check API takes a cloud integration by id: its own name, its stack's groups (and another org's id is not found)", async () => {
    const group = uniq("grp");
    const tagged = await seedStack(uniq("ci-chk"), [group]);
    const other = await seedStack(uniq("ci-chk-other"), []);
    const a = await integration(tagged.id, uniq("chk-1"));
    const c = await integration(other.id, uniq("chk-2"));
    const reader = await member([{ resourceType: "cloud_integration", action: "read", authzGroup: group }]);
    const foreign = await createOrg(t.db);
    const res = await t.gql(
      CHECK,
      {
        checks: [a.id, c.id].map((resourceId) => ({ resourceType: "cloud_integration", action: "read", resourceId })),
      },
      reader,
    );
    expect(res.errors).toBeUndefined();
    const [onTagged, onOther] = res.data.checkPermissions.data;
    expect(onTagged).toMatchObject({ allowed: true, decision: "GRANTED", grant: { authzGroup: group } });
    // One the caller cannot read is answered like one that does not exist (no name leaks).
    expect(onOther).toMatchObject({ allowed: false, decision: "RESOURCE_NOT_FOUND" });
    const cross = await t.gql(CHECK, { checks: [{ resourceType: "cloud_integration", action: "read", resourceId: a.id }] }, foreign.adminToken);
    expect(cross.data.checkPermissions.data[0]).toMatchObject({ allowed: false, decision: "RESOURCE_NOT_FOUND" });
  });

  it("Pattern matching applies at create time too: (cloud_integration, create, \"team-a-*\") constrains what names a user may create", async () => {
    const stack = await seedStack(uniq("ci-create"));
    const creator = await member([
      { resourceType: "stack", action: "read" },
      { resourceType: "cloud_integration", action: "create", resourcePattern: like("team-a-*") },
    ]);
    const input = { stackId: stack.id, provider: "GCP", identity: "deployer@my-project.iam.gserviceaccount.com" };
    const ok = await t.gql(CREATE_CI, { input: { ...input, name: uniq("team-a-gcp") } }, creator);
    expect(ok.data.createCloudIntegration.__typename).toBe("MutationCreateCloudIntegrationSuccess");
    const no = await t.gql(CREATE_CI, { input: { ...input, name: uniq("team-b-gcp") } }, creator);
    expect(no.data.createCloudIntegration).toMatchObject({ __typename: "PermissionDeniedError", missing: { resourceType: "cloud_integration", action: "create" } });
  });

  it("Never on create: Validate rejects authz_group on create (cloud_integration too)", async () => {
    const res = await t.gql(
      `mutation { createRole(input: { name: "${uniq("Grouped create")}", permissions: [{ resourceType: "cloud_integration", action: "create", authzGroup: "env-prod" }] }) { ${RESULT} } }`,
      {},
      org.adminToken,
    );
    expect(res.data.createRole.__typename).toBe("ValidationError");
    expect(res.data.createRole.issues.map((i: any) => i.code)).toContain("group_on_create");
  });

  it("The same rule keeps a rename honest: the new name is re-checked without groups", async () => {
    const stack = await seedStack(uniq("ci-rename"), ["env-prod"]);
    const ci = await integration(stack.id, uniq("rename-me"));
    const grouped = await member([
      { resourceType: "cloud_integration", action: "read", authzGroup: "env-prod" },
      { resourceType: "cloud_integration", action: "update", authzGroup: "env-prod" },
    ]);
    const res = await t.gql(UPDATE_CI, { input: { id: ci.id, name: uniq("renamed") } }, grouped);
    expect(res.data.updateCloudIntegration).toMatchObject({ __typename: "PermissionDeniedError", missing: { action: "update" } });
    expect((await t.db.prisma.cloudIntegration.findUniqueOrThrow({ where: { id: ci.id } })).name).toBe(ci.name);
  });

  it("A targeted grant does NOT satisfy a NULL match value: a name-targeted reader lists only what its pattern matches", async () => {
    const stack = await seedStack(uniq("ci-pattern"));
    const prefix = uniq("pfx");
    const mine = await integration(stack.id, `${prefix}-one`);
    await integration(stack.id, uniq("elsewhere"));
    const reader = await member([{ resourceType: "cloud_integration", action: "read", resourcePattern: like(`${prefix}-*`) }]);
    const list = await t.gql(LIST_CI, {}, reader);
    expect(list.data.cloudIntegrations.edges.map((e: any) => e.node.name)).toEqual([mine.name]);
    // Its stack is not readable to it: the edge answers null, the integration is still its own.
    const one = await t.gql(`query($id: ID!) { cloudIntegration(id: $id) { name stack { name } } }`, { id: mine.id }, reader);
    expect(one.data.cloudIntegration).toEqual({ name: mine.name, stack: null });
  });

  it("every bad input is a typed error naming the field; nothing is written", async () => {
    const stack = await seedStack(uniq("ci-bad"));
    const before = await t.db.prisma.cloudIntegration.count();
    const bad = await t.gql(CREATE_CI, { input: { stackId: stack.id, name: "ok-name", provider: "AWS", identity: "not-an-arn" } }, org.adminToken);
    expect(bad.data.createCloudIntegration).toMatchObject({ __typename: "ValidationError", issues: [{ field: "input.identity", code: "invalid_identity" }] });
    const badName = await t.gql(CREATE_CI, { input: { stackId: stack.id, name: "bad name!", provider: "AZURE", identity: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0" } }, org.adminToken);
    expect(badName.data.createCloudIntegration.issues[0].field).toBe("input.name");
    const ci = await integration(stack.id, uniq("dup"));
    const dup = await t.gql(CREATE_CI, { input: { stackId: stack.id, name: ci.name, provider: "AWS", identity: ARN } }, org.adminToken);
    expect(dup.data.createCloudIntegration.__typename).toBe("ConflictError");
    const switchProvider = await t.gql(UPDATE_CI, { input: { id: ci.id, provider: "GCP" } }, org.adminToken);
    expect(switchProvider.data.updateCloudIntegration).toMatchObject({ __typename: "ValidationError", issues: [{ field: "input.identity" }] });
    expect(await t.db.prisma.cloudIntegration.count()).toBe(before + 1);
    // A stack carrying integrations is not deleted from under them.
    const del = await t.gql(`mutation($id: ID!) { deleteStack(id: $id) { ${RESULT} } }`, { id: stack.id }, org.adminToken);
    expect(del.data.deleteStack.__typename).toBe("ConflictError");
    const gone = await t.gql(`mutation($id: ID!) { deleteCloudIntegration(id: $id) { ${RESULT} ... on MutationDeleteCloudIntegrationSuccess { data { id name } } } }`, { id: ci.id }, org.adminToken);
    expect(gone.data.deleteCloudIntegration.data).toEqual({ id: ci.id, name: ci.name });
  });

  it("nothing crosses organizations: another organization's admin finds none of ours", async () => {
    const stack = await seedStack(uniq("ci-iso"), ["env-prod"]);
    const ci = await integration(stack.id, uniq("iso"));
    const preview = await request(org.adminToken, stack.id, 99);
    const foreign = await createOrg(t.db);
    const res = await t.gql(
      `query($ci: ID!, $p: ID!) { cloudIntegration(id: $ci) { name } prPreview(id: $p) { id } cloudIntegrations { edges { node { name } } } }`,
      { ci: ci.id, p: preview.data.id },
      foreign.adminToken,
    );
    expect(res.data).toEqual({ cloudIntegration: null, prPreview: null, cloudIntegrations: { edges: [] } });
    const confirm = await t.gql(CONFIRM, { id: preview.data.id }, foreign.adminToken);
    expect(confirm.data.confirmPrPreview.__typename).toBe("NotFoundError");
    const update = await t.gql(UPDATE_CI, { input: { id: ci.id, name: "stolen" } }, foreign.adminToken);
    expect(update.data.updateCloudIntegration.__typename).toBe("NotFoundError");
    expect(JSON.stringify([confirm, update])).not.toContain(ci.name);
  });
});
