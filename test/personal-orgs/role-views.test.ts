// Every view of who holds a role agrees with the decision. For the admin role, in an ordinary
// organization and in a personal one (whose owner holds admin implicitly, seed 004, Notes), each
// view's people — Role.effectiveMembers, a role reservation's currentMembers, a policy's
// eligible approvers (missingApprovers.eligibleUsers), an approval rule's eligible reviewers —
// equal the members the check API grants what only admin carries.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateApprovalRules } from "../../src/domain/approvals/policy.js";
import type { Prisma } from "../../src/generated/prisma/client.js";
import { systemRoleId } from "../../src/services/system-roles.js";
import { OWNER_ROLE_ID } from "../../src/authz/principal.js";
import { addMember, createOrg } from "../helpers/fixtures.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { allActions, GATE, ops, seedStack, seedWorkspace } from "../gate/helpers.js";

const ADMIN = systemRoleId("admin");
let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

interface OrgUnderTest {
  orgId: string;
  /** Acts for the org (its super admin, or the personal organization's owner). */
  token: string;
}

const ORG_KINDS: Record<string, () => Promise<OrgUnderTest>> = {
  async ordinary() {
    const org = await createOrg(t.db);
    // An admin by assignment, a stack reader, and a deactivated admin.
    await addMember(t.db, org.orgId, { role: "admin" });
    await addMember(t.db, org.orgId, { role: "stack-reader" });
    const gone = await addMember(t.db, org.orgId, { role: "admin" });
    await t.db.prisma.membership.update({ where: { orgId_userId: { orgId: org.orgId, userId: gone.userId } }, data: { deactivatedAt: new Date() } });
    return { orgId: org.orgId, token: org.adminToken };
  },
  async personal() {
    const home = await createOrg(t.db);
    const res = await t.gql(
      `mutation($input: CreatePersonalOrganizationInput!) { createPersonalOrganization(input: $input) { __typename ... on MutationCreatePersonalOrganizationSuccess { data { token organization { id } } } } }`,
      { input: { name: "Mine" } },
      home.adminToken,
    );
    const data = res.data.createPersonalOrganization.data;
    // A member with no role, and a deactivated one.
    await addMember(t.db, data.organization.id);
    const gone = await addMember(t.db, data.organization.id);
    await t.db.prisma.membership.update({ where: { orgId_userId: { orgId: data.organization.id, userId: gone.userId } }, data: { deactivatedAt: new Date() } });
    return { orgId: data.organization.id, token: data.token };
  },
};

const sorted = (ids: Iterable<string>) => [...new Set(ids)].sort();

/** The decision: the members the check API grants (role, create) — in these orgs, only admin carries it. */
async function decided(o: OrgUnderTest): Promise<string[]> {
  const userIds = (await t.db.prisma.membership.findMany({ where: { orgId: o.orgId } })).map((m) => m.userId);
  const res = await t.gql(
    `query($checks: [PermissionCheckInput!]!) { checkPermissions(checks: $checks) { __typename ... on QueryCheckPermissionsSuccess { data { principalId allowed } } } }`,
    { checks: userIds.map((principalId) => ({ principalId, resourceType: "role", action: "create" })) },
    o.token,
  );
  if (res.errors) throw new Error(JSON.stringify(res.errors));
  return sorted(res.data.checkPermissions.data.filter((a: { allowed: boolean }) => a.allowed).map((a: { principalId: string }) => a.principalId));
}

/** Every view of the admin role's people, by name. */
const VIEWS: Record<string, (o: OrgUnderTest) => Promise<string[]>> = {
  async "Role.effectiveMembers"(o) {
    const res = await t.gql(`{ roles { id effectiveMembers { user { id } } } }`, {}, o.token);
    if (res.errors) throw new Error(JSON.stringify(res.errors));
    const admin = res.data.roles.find((r: { id: string }) => r.id === ADMIN);
    return sorted(admin.effectiveMembers.map((m: { user: { id: string } }) => m.user.id));
  },
  async "a role reservation's currentMembers"(o) {
    const w = await seedWorkspace(t, o.orgId, (await seedStack(t, o.orgId)).id);
    const op = ops(t);
    expect((await op.reserve(o.token, w.id, ADMIN)).__typename).toBe("MutationReserveWorkspaceSuccess");
    const plan = await op.submit(o.token, w.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    const gate = await op.gate(o.token, plan.id);
    return sorted(gate.evaluation.reservations[0].currentMembers.map((u: { id: string }) => u.id));
  },
  async "a policy's eligible approvers (missingApprovers.eligibleUsers)"(o) {
    const w = await seedWorkspace(t, o.orgId, (await seedStack(t, o.orgId)).id);
    const op = ops(t);
    await op.policy(o.token, { workspaceIds: [w.id], addressPatterns: ["aws_s3_bucket.*"], requirements: allActions(1, { approverRoleIds: [ADMIN] }) });
    const plan = await op.submit(o.token, w.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    const res = await t.gql(GATE, { planId: plan.id }, o.token);
    const requirement = res.data.gate.evaluation.requirements.find((r: { action: string }) => r.action === "CREATE");
    if (!requirement) throw new Error(JSON.stringify(res));
    return sorted(requirement.missingApprovers.eligibleUsers.map((u: { id: string }) => u.id));
  },
  async "an approval rule's eligible reviewers (simulateGatewayCall)"(o) {
    const w = await seedWorkspace(t, o.orgId, (await seedStack(t, o.orgId)).id);
    await t.db.prisma.connection.create({ data: { orgId: o.orgId, workspaceId: w.id, name: "github", provider: "github" } });
    const rules = validateApprovalRules([{ id: "admins", effect: "allow", tools: ["github.*"], environments: ["*"], roles: [ADMIN], userIds: [], count: 1 }]);
    if (!rules.ok) throw new Error(JSON.stringify(rules.issues));
    await t.db.prisma.approvalPolicy.create({ data: { orgId: o.orgId, workspaceId: w.id, name: "admins", rules: rules.rules as unknown as Prisma.InputJsonValue } });
    const res = await t.gql(
      `query($input: SimulateGatewayCallInput!) { simulateGatewayCall(input: $input) { __typename ... on QuerySimulateGatewayCallSuccess { data { approval { eligibleReviewers { id } } } } ... on Error { message } } }`,
      { input: { workspaceId: w.id, tool: "github.delete_repo", destructive: true, production: true } },
      o.token,
    );
    if (res.errors) throw new Error(JSON.stringify(res.errors));
    const approval = res.data.simulateGatewayCall.data?.approval;
    if (!approval) throw new Error(JSON.stringify(res.data));
    return sorted(approval.eligibleReviewers.map((u: { id: string }) => u.id));
  },
};

describe("every view of who holds a role agrees with the decision", () => {
  it("the owner's implicit role is admin's id", () => {
    expect(OWNER_ROLE_ID).toBe(ADMIN);
  });

  for (const [kind, make] of Object.entries(ORG_KINDS)) {
    for (const [view, read] of Object.entries(VIEWS)) {
      it(`${kind} organization: ${view} for admin equals the members the check grants`, async () => {
        const o = await make();
        const expected = await decided(o);
        expect(expected.length).toBeGreaterThan(0);
        expect(await read(o)).toEqual(expected);
      });
    }
  }
});
