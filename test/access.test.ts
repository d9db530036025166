import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "./helpers/fixtures.js";
import { reconcileSystemRoles, systemRoleId } from "../src/services/system-roles.js";
import { SYSTEM_ROLES } from "../src/domain/catalog/index.js";

let t: TestApp;
let org: OrgFixture;

const ROLE_FIELDS = `__typename ... on Error { code message } ... on ValidationError { issues { field code } }`;
const CREATE_ROLE = `mutation($input: CreateRoleInput!) { createRole(input: $input) { ${ROLE_FIELDS} ... on MutationCreateRoleSuccess { data { id key name permissions { resourceType action resourcePattern authzGroup likePattern } } } } }`;
const UPDATE_ROLE = `mutation($input: UpdateRoleInput!) { updateRole(input: $input) { ${ROLE_FIELDS} ... on MutationUpdateRoleSuccess { data { id key name } } } }`;
const STACKS = `{ stacks { edges { node { name } } } }`;
const names = (res: any) => (res.data?.stacks?.edges ?? []).map((e: any) => e.node.name);

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  for (const name of ["team-a-one", "team-b-one"]) await t.db.prisma.stack.create({ data: { orgId: org.orgId, name } });
});
afterAll(() => t.close());

async function customRole(permissions: object[], name = `Role ${Math.random().toString(36).slice(2, 8)}`) {
  const res = await t.gql(CREATE_ROLE, { input: { name, permissions } }, org.adminToken);
  expect(res.data.createRole.__typename).toBe("MutationCreateRoleSuccess");
  return res.data.createRole.data;
}

describe("custom roles (seed 004)", () => {
  it("bundle between 1 and 50 tuples from the validity matrix", async () => {
    const none = await t.gql(CREATE_ROLE, { input: { name: "Empty", permissions: [] } }, org.adminToken);
    expect(none.data.createRole.issues[0]).toMatchObject({ field: "input.permissions", code: "too_few_permissions" });
    const many = Array.from({ length: 51 }, (_, i) => ({ resourceType: "stack", action: "read", resourcePattern: `s-${i}` }));
    const tooMany = await t.gql(CREATE_ROLE, { input: { name: "Many", permissions: many } }, org.adminToken);
    expect(tooMany.data.createRole.issues.map((i: any) => i.code)).toContain("too_many_permissions");
    const invalid = await t.gql(CREATE_ROLE, { input: { name: "Bad", permissions: [{ resourceType: "runner", action: "read" }] } }, org.adminToken);
    expect(invalid.data.createRole.issues[0]).toMatchObject({ field: "input.permissions.0.action", code: "invalid_pair" });
    expect(await t.db.prisma.role.count({ where: { orgId: org.orgId, name: { in: ["Empty", "Many", "Bad"] } } })).toBe(0);
  });

  it("compile user globs to the canonical LIKE pattern and reject a group on create", async () => {
    const role = await customRole([{ resourceType: "stack", action: "read", resourcePattern: "prod_*" }]);
    // Read back as the glob it was written as; the stored canonical LIKE pattern is likePattern.
    expect(role.permissions[0]).toMatchObject({ resourcePattern: "prod_*", likePattern: "prod\\_%" });
    const res = await t.gql(CREATE_ROLE, { input: { name: "Grp", permissions: [{ resourceType: "stack", action: "create", authzGroup: "env-prod" }] } }, org.adminToken);
    expect(res.data.createRole.issues[0].code).toBe("group_on_create");
  });

  it("derive their key from the name, and the key is immutable on update", async () => {
    const role = await customRole([{ resourceType: "stack", action: "read" }], "Payments Deployers");
    expect(role.key).toBe("payments-deployers");
    const res = await t.gql(UPDATE_ROLE, { input: { id: role.id, name: "Renamed Team" } }, org.adminToken);
    expect(res.data.updateRole.data).toMatchObject({ key: "payments-deployers", name: "Renamed Team" });
  });

  it("do not auto-bundle (role, read)", async () => {
    const role = await customRole([{ resourceType: "stack", action: "read" }]);
    expect(role.permissions).toEqual([{ resourceType: "stack", action: "read", resourcePattern: "", authzGroup: "", likePattern: "" }]);
    const m = await addMember(t.db, org.orgId);
    await t.gql(`mutation($u: ID!, $r: ID!) { assignRole(userId: $u, roleId: $r) { __typename } }`, { u: m.userId, r: role.id }, org.adminToken);
    // Without (role, read) the role picker is closed to this member.
    const roles = await t.gql(`{ roles { key } }`, {}, m.token);
    expect(roles.errors![0].message).toBe("Missing permission (role, read)");
  });

  it("system roles cannot be edited or deleted", async () => {
    const res = await t.gql(UPDATE_ROLE, { input: { id: systemRoleId("stack-reader"), name: "x" } }, org.adminToken);
    expect(res.data.updateRole).toMatchObject({ __typename: "InvalidStateError" });
  });

  it("deleting a custom role cascades through every assignment and binding attachment", async () => {
    const role = await customRole([{ resourceType: "stack", action: "read" }]);
    const direct = await addMember(t.db, org.orgId);
    await t.db.prisma.roleAssignment.create({ data: { orgId: org.orgId, userId: direct.userId, roleId: role.id } });
    const source = await t.db.prisma.identitySource.create({ data: { orgId: org.orgId, name: `sso-${role.id.slice(0, 6)}` } });
    const binding = await t.db.prisma.identityGroupBinding.create({
      data: { orgId: org.orgId, identitySourceId: source.id, groupKey: "devs", roles: { create: [{ roleId: role.id }] } },
    });
    expect(names(await t.gql(STACKS, {}, direct.token))).toContain("team-a-one");
    const res = await t.gql(`mutation($id: ID!) { deleteRole(id: $id) { __typename } }`, { id: role.id }, org.adminToken);
    expect(res.data.deleteRole.__typename).toBe("MutationDeleteRoleSuccess");
    expect(await t.db.prisma.roleAssignment.count({ where: { roleId: role.id } })).toBe(0);
    expect(await t.db.prisma.identityGroupBinding.count({ where: { id: binding.id } })).toBe(0);
    expect(names(await t.gql(STACKS, {}, direct.token))).toEqual([]);
  });
});

describe("assignments and SSO bindings (seed 004)", () => {
  it("direct user-role assignments stay single-role: assigning replaces", async () => {
    const m = await addMember(t.db, org.orgId);
    const q = `mutation($u: ID!, $r: ID!) { assignRole(userId: $u, roleId: $r) { __typename ... on MutationAssignRoleSuccess { data { role { key } } } } }`;
    await t.gql(q, { u: m.userId, r: systemRoleId("stack-reader") }, org.adminToken);
    const res = await t.gql(q, { u: m.userId, r: systemRoleId("stack-triggerer") }, org.adminToken);
    expect(res.data.assignRole.data.role.key).toBe("stack-triggerer");
    expect(await t.db.prisma.roleAssignment.count({ where: { orgId: org.orgId, userId: m.userId } })).toBe(1);
  });

  it("a binding attaches 1..5 roles and a member of the group receives their union", async () => {
    const a = await customRole([{ resourceType: "stack", action: "read", resourcePattern: "team-a-*" }]);
    const b = await customRole([{ resourceType: "stack", action: "read", resourcePattern: "team-b-*" }]);
    const src = await t.gql(`mutation { createIdentitySource(name: "okta-union") { ... on MutationCreateIdentitySourceSuccess { data { id } } } }`, {}, org.adminToken);
    const sourceId = src.data.createIdentitySource.data.id;
    const six = await t.gql(
      `mutation($i: CreateGroupBindingInput!) { createGroupBinding(input: $i) { __typename ... on ValidationError { issues { code } } } }`,
      { i: { identitySourceId: sourceId, groupKey: "eng", roleIds: Array(6).fill(0).map((_, i) => (i < 2 ? [a.id, b.id][i] : systemRoleId(["stack-reader", "stack-triggerer", "stack-approver", "state-restorer"][i - 2]!))) } },
      org.adminToken,
    );
    expect(six.data.createGroupBinding.issues[0].code).toBe("too_many_roles");
    const ok = await t.gql(
      `mutation($i: CreateGroupBindingInput!) { createGroupBinding(input: $i) { __typename } }`,
      { i: { identitySourceId: sourceId, groupKey: "eng", roleIds: [a.id, b.id] } },
      org.adminToken,
    );
    expect(ok.data.createGroupBinding.__typename).toBe("MutationCreateGroupBindingSuccess");
    const m = await addMember(t.db, org.orgId);
    expect(names(await t.gql(STACKS, {}, m.token))).toEqual([]);
    const sync = `mutation($i: SyncUserGroupsInput!) { syncUserGroups(input: $i) { __typename } }`;
    await t.gql(sync, { i: { identitySourceId: sourceId, userId: m.userId, groupKeys: ["eng"] } }, org.adminToken);
    expect(names(await t.gql(STACKS, {}, m.token))).toEqual(["team-a-one", "team-b-one"]);
    // Removing a group removes what its bindings granted at once.
    await t.gql(sync, { i: { identitySourceId: sourceId, userId: m.userId, groupKeys: [] } }, org.adminToken);
    expect(names(await t.gql(STACKS, {}, m.token))).toEqual([]);
  });

  it("personal organizations reject manual assignments, bindings and custom roles; the owner is admin", async () => {
    const owner = await t.db.prisma.user.create({ data: { email: `owner-${Date.now()}@test.local`, name: "Owner" } });
    const personal = await t.db.prisma.organization.create({ data: { name: "Personal", slug: `personal-${Date.now()}`, ownerUserId: owner.id, personal: true } });
    await t.db.prisma.membership.create({ data: { orgId: personal.id, userId: owner.id } });
    const { issueToken } = await import("../src/services/accounts.js");
    const { token } = await issueToken(t.db.prisma, { userId: owner.id, orgId: personal.id, name: "t" });
    await t.db.prisma.stack.create({ data: { orgId: personal.id, name: "mine" } });
    expect(names(await t.gql(STACKS, {}, token))).toEqual(["mine"]);
    const res = await t.gql(CREATE_ROLE, { input: { name: "Nope", permissions: [{ resourceType: "stack", action: "read" }] } }, token);
    expect(res.data.createRole).toMatchObject({ __typename: "InvalidStateError" });
    const assign = await t.gql(`mutation($u: ID!, $r: ID!) { assignRole(userId: $u, roleId: $r) { __typename } }`, { u: owner.id, r: systemRoleId("stack-reader") }, token);
    expect(assign.data.assignRole.__typename).toBe("InvalidStateError");
  });
});

describe("memberships and organizations (seed 004)", () => {
  it("a deactivated member's grants stop at once and come back on reactivation", async () => {
    const m = await addMember(t.db, org.orgId, { role: "stack-reader" });
    expect(names(await t.gql(STACKS, {}, m.token))).toHaveLength(2);
    const off = await t.gql(`mutation($u: ID!) { deactivateMember(userId: $u) { __typename } }`, { u: m.userId }, org.adminToken);
    expect(off.data.deactivateMember.__typename).toBe("MutationDeactivateMemberSuccess");
    expect(names(await t.gql(STACKS, {}, m.token))).toEqual([]);
    await t.gql(`mutation($u: ID!) { reactivateMember(userId: $u) { __typename } }`, { u: m.userId }, org.adminToken);
    expect(names(await t.gql(STACKS, {}, m.token))).toHaveLength(2);
  });

  it("every check fails for a soft-deleted organization", async () => {
    const doomed = await createOrg(t.db);
    await t.db.prisma.stack.create({ data: { orgId: doomed.orgId, name: "x" } });
    expect(names(await t.gql(STACKS, {}, doomed.adminToken))).toEqual(["x"]);
    const res = await t.gql(`mutation { deleteOrganization { __typename } }`, {}, doomed.adminToken);
    expect(res.data.deleteOrganization.__typename).toBe("MutationDeleteOrganizationSuccess");
    expect(names(await t.gql(STACKS, {}, doomed.adminToken))).toEqual([]);
    expect(await t.db.prisma.organization.count({ where: { id: doomed.orgId } })).toBe(1);
  });

  it("permission denied names the missing tuple", async () => {
    const m = await addMember(t.db, org.orgId, { role: "stack-reader" });
    const res = await t.gql(CREATE_ROLE, { input: { name: "X", permissions: [{ resourceType: "stack", action: "read" }] } }, m.token);
    expect(res.data.createRole).toMatchObject({ __typename: "PermissionDeniedError" });
  });
});

describe("tokens", () => {
  it("are shown once, stored as a hash, listed, and stop working when revoked", async () => {
    const bot = await t.gql(
      `mutation { addMember(input: { email: "bot@test.local", name: "Bot", serviceAccount: true }) { ... on MutationAddMemberSuccess { data { user { id isServiceAccount } } } } }`,
      {},
      org.adminToken,
    );
    const botId = bot.data.addMember.data.user.id;
    const created = await t.gql(
      `mutation($u: ID!) { createApiToken(input: { name: "chatops", userId: $u }) { ... on MutationCreateApiTokenSuccess { data { token apiToken { id prefix } } } } }`,
      { u: botId },
      org.adminToken,
    );
    const { token, apiToken } = created.data.createApiToken.data;
    expect(token.startsWith(apiToken.prefix)).toBe(true);
    const stored = await t.db.prisma.apiToken.findUniqueOrThrow({ where: { id: apiToken.id } });
    expect(stored.tokenHash).not.toContain(token.slice(3));
    expect((await t.gql(`{ viewer { id } }`, {}, token)).data.viewer.id).toBe(botId);
    await t.gql(`mutation($id: ID!) { revokeApiToken(id: $id) { __typename } }`, { id: apiToken.id }, org.adminToken);
    const after = await t.gql(`{ viewer { id } }`, {}, token);
    expect(after.errors![0].extensions.code).toBe("UNAUTHENTICATED");
  });
});

describe("built-in roles", () => {
  it("are reconciled idempotently: a drifting system role converges back and a group on one is removed", async () => {
    const id = systemRoleId("stack-reader");
    await t.db.prisma.rolePermission.deleteMany({ where: { roleId: id, action: "read_logs" } });
    await t.db.prisma.rolePermission.create({ data: { roleId: id, resourceType: "stack", action: "deploy", authzGroup: "env-prod" } });
    const first = await reconcileSystemRoles(t.db.prisma);
    expect(first).toEqual({ added: 1, removed: 1 });
    expect(await reconcileSystemRoles(t.db.prisma)).toEqual({ added: 0, removed: 0 });
    const rows = await t.db.prisma.rolePermission.findMany({ where: { roleId: id } });
    const expected = SYSTEM_ROLES.find((r) => r.key === "stack-reader")!.permissions;
    expect(rows.map((r) => `${r.resourceType}:${r.action}`).sort()).toEqual(expected.map((p) => `${p.resourceType}:${p.action}`).sort());
  });
});
