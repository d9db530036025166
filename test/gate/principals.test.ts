// loadPrincipals (the gate's batched principal load) agrees with loadPrincipal, user by user:
// direct roles, SSO bindings, both, deactivated, super admin, not a member, a personal org's owner.

import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg } from "../helpers/fixtures.js";
import { loadPrincipal, loadPrincipals } from "../../src/authz/principal.js";
import { APPROVE, READ, role } from "./helpers.js";

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const comparable = (p: Awaited<ReturnType<typeof loadPrincipal>>) => ({
  orgExists: p.orgExists,
  orgDeleted: p.orgDeleted,
  membershipActive: p.membershipActive,
  isSuperAdmin: p.isSuperAdmin,
  roleIds: [...p.roleIds].sort(),
  grants: p.grants.map((g) => JSON.stringify(g)).sort(),
});

it("loadPrincipals loads every user exactly as loadPrincipal does", async () => {
  const org = await createOrg(t.db);
  const approvers = await role(t, org.orgId, "Approvers", [READ, APPROVE]);
  const readers = await role(t, org.orgId, "Readers", [READ]);
  const direct = await addMember(t.db, org.orgId, { grants: [READ, APPROVE] });
  const sso = await addMember(t.db, org.orgId, {});
  const both = await addMember(t.db, org.orgId, { role: "workspace-runner" });
  const deactivated = await addMember(t.db, org.orgId, { grants: [READ] });
  const boss = await addMember(t.db, org.orgId, { superAdmin: true });
  const stranger = await addMember(t.db, (await createOrg(t.db)).orgId, { grants: [READ] });
  await t.db.prisma.membership.updateMany({ where: { orgId: org.orgId, userId: deactivated.userId }, data: { deactivatedAt: new Date() } });
  const source = await t.db.prisma.identitySource.create({ data: { orgId: org.orgId, name: "okta" } });
  await t.db.prisma.identityGroupBinding.create({
    data: { orgId: org.orgId, identitySourceId: source.id, groupKey: "eng", roles: { create: [{ roleId: approvers.id }, { roleId: readers.id }] } },
  });
  for (const u of [sso, both]) await t.db.prisma.userIdentityGroup.create({ data: { identitySourceId: source.id, userId: u.userId, groupKey: "eng" } });

  const owner = await t.db.prisma.user.create({ data: { email: `owner-${Date.now()}@test.local`, name: "Owner" } });
  const personal = await t.db.prisma.organization.create({ data: { slug: `personal-${Date.now()}`, name: "Personal", ownerUserId: owner.id, personal: true } });
  await t.db.prisma.membership.create({ data: { orgId: personal.id, userId: owner.id } });

  const users = [direct, sso, both, deactivated, boss, stranger, { userId: org.adminId }].map((u) => u.userId);
  const batch = await loadPrincipals(t.db.sql, org.orgId, [...users, users[0]!]);
  expect(batch.size).toBe(users.length);
  for (const id of users) expect(comparable(batch.get(id)!)).toEqual(comparable(await loadPrincipal(t.db.sql, org.orgId, id)));
  const ownerBatch = await loadPrincipals(t.db.sql, personal.id, [owner.id]);
  expect(comparable(ownerBatch.get(owner.id)!)).toEqual(comparable(await loadPrincipal(t.db.sql, personal.id, owner.id)));
  expect(comparable(batch.get(sso.userId)!).roleIds).toEqual([approvers.id, readers.id].sort());
});

it("loadPrincipals with approversOf adds whoever approved those plans, loaded the same way", async () => {
  const org = await createOrg(t.db);
  const viewer = await addMember(t.db, org.orgId, { grants: [READ] });
  const approver = await addMember(t.db, org.orgId, { grants: [READ, APPROVE] });
  const sso = await addMember(t.db, org.orgId, {});
  const elsewhere = await addMember(t.db, org.orgId, { grants: [READ, APPROVE] });
  const approvers = await role(t, org.orgId, "Approvers", [READ, APPROVE]);
  const source = await t.db.prisma.identitySource.create({ data: { orgId: org.orgId, name: "okta" } });
  await t.db.prisma.identityGroupBinding.create({ data: { orgId: org.orgId, identitySourceId: source.id, groupKey: "eng", roles: { create: [{ roleId: approvers.id }] } } });
  await t.db.prisma.userIdentityGroup.create({ data: { identitySourceId: source.id, userId: sso.userId, groupKey: "eng" } });
  const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: "net" } });
  const ws = await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: "prod" } });
  const [watched, other] = await Promise.all(
    [0, 1].map(() => t.db.prisma.plan.create({ data: { orgId: org.orgId, workspaceId: ws.id, submittedById: org.adminId } })),
  );
  await t.db.prisma.approval.createMany({
    data: [
      { planId: watched!.id, userId: approver.userId },
      { planId: watched!.id, userId: sso.userId },
      { planId: watched!.id, userId: viewer.userId }, // also a viewer: loaded once
      { planId: other!.id, userId: elsewhere.userId }, // another plan's: not asked for
    ],
  });

  const batch = await loadPrincipals(t.db.sql, org.orgId, [viewer.userId], [watched!.id]);
  expect([...batch.keys()].sort()).toEqual([viewer.userId, approver.userId, sso.userId].sort());
  for (const id of batch.keys()) expect(comparable(batch.get(id)!)).toEqual(comparable(await loadPrincipal(t.db.sql, org.orgId, id)));
  expect(batch.get(sso.userId)!.roleIds).toEqual([approvers.id]);
  // Approvers only, no viewers.
  expect([...(await loadPrincipals(t.db.sql, org.orgId, [], [other!.id])).keys()]).toEqual([elsewhere.userId]);
});
