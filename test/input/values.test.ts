// Values that can never be right get a ValidationError naming the field, and nothing is written.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { systemRoleId } from "../../src/services/system-roles.js";

let t: TestApp;
let org: OrgFixture;
let other: OrgFixture;
let workspaceId: string;
let foreignRoleId: string;

const CREATE = `mutation($input: CreateApprovalPolicyInput!) { createApprovalPolicy(input: $input) { __typename
  ... on MutationCreateApprovalPolicySuccess { data { policy { id revision } } }
  ... on ValidationError { issues { field code message } } } }`;
const UPDATE = `mutation($input: UpdateApprovalPolicyInput!) { updateApprovalPolicy(input: $input) { __typename
  ... on ValidationError { issues { field code message } } } }`;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  other = await createOrg(t.db);
  const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: "values", authzGroups: [] } });
  workspaceId = (await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: "values-prod", environment: "prod" } })).id;
  foreignRoleId = (await t.db.prisma.role.create({ data: { orgId: other.orgId, key: "foreign", name: "Foreign" } })).id;
});
afterAll(() => t?.close());

const rule = (p: { roleIds?: string[]; userIds?: string[] }) => ({ id: `r-${Math.random().toString(36).slice(2, 8)}`, effect: "ALLOW", tools: ["github.*"], environments: ["prod"], ...p });

describe("approval-policy rules name only roles and members of the caller's organization", () => {
  it("an unknown role id and another organization's role id get the same ValidationError naming the field", async () => {
    const unknown = await t.gql(CREATE, { input: { workspaceId, name: "unknown-role", rules: [rule({ roleIds: ["no-such-role"] })] } }, org.adminToken);
    const foreign = await t.gql(CREATE, { input: { workspaceId, name: "foreign-role", rules: [rule({ roleIds: [foreignRoleId] })] } }, org.adminToken);
    expect(unknown.data.createApprovalPolicy).toEqual({
      __typename: "ValidationError",
      issues: [{ field: "input.rules.0.roleIds.0", code: "unknown_role", message: "No role of this organization has this id." }],
    });
    expect(foreign.data.createApprovalPolicy).toEqual(unknown.data.createApprovalPolicy);
    expect(await t.db.prisma.approvalPolicy.count({ where: { workspaceId } })).toBe(0);
  });

  it("an unknown user id and another organization's member get the same ValidationError naming the field", async () => {
    const unknown = await t.gql(CREATE, { input: { workspaceId, name: "unknown-user", rules: [rule({ userIds: ["no-such-user"] })] } }, org.adminToken);
    const foreign = await t.gql(CREATE, { input: { workspaceId, name: "foreign-user", rules: [rule({ userIds: [other.adminId] })] } }, org.adminToken);
    expect(unknown.data.createApprovalPolicy).toEqual({
      __typename: "ValidationError",
      issues: [{ field: "input.rules.0.userIds.0", code: "unknown_user", message: "No member of this organization has this id." }],
    });
    expect(foreign.data.createApprovalPolicy).toEqual(unknown.data.createApprovalPolicy);
  });

  it("built-in roles, the org's own roles and its members are accepted; an update is checked the same way", async () => {
    const member = await addMember(t.db, org.orgId, { role: "approval-reviewer" });
    const ok = await t.gql(
      CREATE,
      { input: { workspaceId, name: "good", rules: [rule({ roleIds: [systemRoleId("approval-reviewer")], userIds: [member.userId] })] } },
      org.adminToken,
    );
    const policy = ok.data.createApprovalPolicy.data.policy;
    expect(policy.revision).toBe(1);
    const bad = await t.gql(UPDATE, { input: { id: policy.id, expectedRevision: 1, rules: [rule({ userIds: [member.userId, other.adminId] })] } }, org.adminToken);
    expect(bad.data.updateApprovalPolicy).toMatchObject({ __typename: "ValidationError", issues: [{ field: "input.rules.0.userIds.1", code: "unknown_user" }] });
    expect((await t.db.prisma.approvalPolicy.findUniqueOrThrow({ where: { id: policy.id } })).revision).toBe(1);
  });

  it("a deleted custom role is unknown", async () => {
    const role = await t.db.prisma.role.create({ data: { orgId: org.orgId, key: "gone", name: "Gone", deletedAt: new Date() } });
    const res = await t.gql(CREATE, { input: { workspaceId, name: "deleted-role", rules: [rule({ roleIds: [role.id] })] } }, org.adminToken);
    expect(res.data.createApprovalPolicy.issues).toEqual([expect.objectContaining({ field: "input.rules.0.roleIds.0", code: "unknown_role" })]);
  });
});

describe("createApiToken", () => {
  const CREATE_TOKEN = `mutation($input: CreateApiTokenInput!) { createApiToken(input: $input) { __typename ... on ValidationError { issues { field } } } }`;
  it("an empty userId is a ValidationError naming input.userId, never a token for the caller", async () => {
    const before = await t.db.prisma.apiToken.count({ where: { userId: org.adminId } });
    const res = await t.gql(CREATE_TOKEN, { input: { name: "ci", userId: "" } }, org.adminToken);
    expect(res.data.createApiToken).toEqual({ __typename: "ValidationError", issues: [{ field: "input.userId" }] });
    expect(await t.db.prisma.apiToken.count({ where: { userId: org.adminId } })).toBe(before);
  });

  it("an omitted userId is a token for the caller", async () => {
    const res = await t.gql(CREATE_TOKEN, { input: { name: "mine" } }, org.adminToken);
    expect(res.data.createApiToken.__typename).toBe("MutationCreateApiTokenSuccess");
  });
});
