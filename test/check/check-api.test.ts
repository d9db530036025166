// The check API through GraphQL, on the real PostgreSQL: the shared table of cases
// (test/domain/authz-cases.ts, which the in-memory check and the SQL list filter also run), the
// permission on the check itself, batching, no cross-organization leak, and the reasons.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AUTHZ_CASES } from "../domain/authz-cases.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { systemRoleId } from "../../src/services/system-roles.js";
import { checkPermission, compilePrincipal, findRule, type Permission } from "../../src/domain/catalog/index.js";
import { MAX_PERMISSION_CHECKS } from "../../src/services/permission-check.js";
import { isStorableText } from "../../src/domain/text.js";
import { CHECK } from "./queries.js";


let t: TestApp;
let org: OrgFixture;
beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
});
afterAll(() => t.close());

type Check = { principalId?: string; resourceType: string; action: string; resourceId?: string; matchValue?: string | null; groups?: string[] | null };
async function check(token: string, checks: Check[]) {
  const res = await t.gql(CHECK, { checks }, token);
  expect(res.errors).toBeUndefined();
  return res.data.checkPermissions;
}
async function answers(token: string, checks: Check[]) {
  const r = await check(token, checks);
  expect(r.__typename, JSON.stringify(r.issues ?? r.message)).toBe("QueryCheckPermissionsSuccess");
  return r.data as any[];
}

/**
 * The case's grant, plus (resource_type, read) where the operations find the object under read
 * before acting (findRule): the table is about the grant's three conditions, and the check API
 * answers the operations' decision, which also needs the object found. READ_MISSING is below.
 */
const withFind = (grant: Permission, target: { resourceType: string; action: string }): Permission[] =>
  findRule(target.resourceType as never, target.action as never) === "read"
    ? [grant, { resourceType: target.resourceType as never, action: "read", resourcePattern: "", authzGroup: "" }]
    : [grant];

describe("seed 004 Authz semantics: the shared authz case table, through the check API", () => {
  // One member per case, holding exactly the case's grant; the whole table in one batched request.
  // A match value no resource name can carry (a control character) is not typable as input: the
  // storable-text rule refuses it (test below); that case is asked "anywhere?" here and by id below.
  const typable = (c: (typeof AUTHZ_CASES)[number]) => c.target.matchValue === null || isStorableText(c.target.matchValue, "identifier");
  const asTyped = (c: (typeof AUTHZ_CASES)[number]) => ({
    resourceType: c.target.resourceType,
    action: c.target.action,
    matchValue: typable(c) ? c.target.matchValue : null,
    groups: c.target.groups === null ? null : [...c.target.groups],
  });
  const principals: string[] = [];
  let results: any[] = [];
  beforeAll(async () => {
    for (const c of AUTHZ_CASES) {
      const m = await addMember(t.db, org.orgId, { grants: withFind(c.grant, c.target) });
      principals.push(m.userId);
    }
    expect(AUTHZ_CASES.length).toBeLessThanOrEqual(MAX_PERMISSION_CHECKS);
    results = await answers(
      org.adminToken,
      AUTHZ_CASES.map((c, i) => ({
        ...asTyped(c),
        principalId: principals[i]!,
      })),
    );
  }, 120_000);

  it.each(AUTHZ_CASES.map((c, i) => [c.name, c, i] as const))("the API agrees: %s", (_name, c, i) => {
    const r = results[i];
    if (!typable(c)) {
      // A name no resource can carry (a control character) is refused as input; the case runs by id below.
      expect(r.missing?.matchValue ?? null).toBeNull();
      expect(byId).toContain(c);
      return;
    }
    expect(r.principalId).toBe(principals[i]);
    expect(r.allowed).toBe(c.expected);
    // The same answer as the in-memory check itself.
    const inMemory = checkPermission(
      compilePrincipal({ orgExists: true, orgDeleted: false, membershipActive: true, isSuperAdmin: false, grants: [c.grant] }),
      c.target,
    );
    expect(r.allowed).toBe(inMemory.allowed);
    if (c.expected) {
      expect(r.decision).toBe("GRANTED");
      expect(r.grant).toMatchObject({ resourceType: c.grant.resourceType, action: c.grant.action, likePattern: c.grant.resourcePattern, authzGroup: c.grant.authzGroup });
      expect(r.via).toHaveLength(1);
      expect(r.via[0]).toMatchObject({ kind: "DIRECT", bindingId: null });
      expect(r.missing).toBeNull();
    } else {
      expect(r.decision).toBe("NO_GRANT");
      expect(r.grant).toBeNull();
      expect(r.via).toEqual([]);
      expect(r.missing).toEqual({
        resourceType: c.target.resourceType,
        action: c.target.action,
        matchValue: c.target.matchValue,
        groups: c.target.groups === null ? null : [...c.target.groups],
      });
    }
  });

  // The same cases with the resource named by id: its name and groups are read from the row.
  const byId = AUTHZ_CASES.filter(
    (c) => (c.target.resourceType === "stack" || c.target.resourceType === "workspace") && c.target.matchValue !== null && c.target.action !== "create",
  );
  it.each(byId.map((c) => [c.name, c] as const))("by resource id: %s", async (_name, c) => {
    const o = await createOrg(t.db);
    const m = await addMember(t.db, o.orgId, { grants: withFind(c.grant, c.target) });
    const name = c.target.matchValue!;
    const groups = [...(c.target.groups ?? [])];
    const stackName = c.target.resourceType === "stack" ? name : "the-stack";
    const stack = await t.db.prisma.stack.create({
      data: { orgId: o.orgId, name: stackName, authzGroups: groups, groupMembers: { create: groups.map((g) => ({ orgId: o.orgId, groupName: g, stackName })) } },
    });
    const resourceId =
      c.target.resourceType === "stack" ? stack.id : (await t.db.prisma.workspace.create({ data: { orgId: o.orgId, stackId: stack.id, name } })).id;
    const [r] = await answers(o.adminToken, [{ principalId: m.userId, resourceType: c.target.resourceType, action: c.target.action, resourceId }]);
    expect(r.allowed).toBe(c.expected);
    expect(r.resourceId).toBe(resourceId);
    expect(r.decision).toBe(c.expected ? "GRANTED" : "NO_GRANT");
  });
});

describe("the permission on the check itself: (member, check)", () => {
  it("a member without (member, check) may not probe another member", async () => {
    const prober = await addMember(t.db, org.orgId, { grants: [{ resourceType: "stack", action: "*" }, { resourceType: "member", action: "read" }] });
    const r = await check(prober.token, [{ principalId: org.adminId, resourceType: "stack", action: "deploy" }]);
    expect(r).toMatchObject({ __typename: "PermissionDeniedError", code: "PERMISSION_DENIED", missing: { resourceType: "member", action: "check", matchValue: null } });
  });

  it("checking yourself needs no (member, check)", async () => {
    const m = await addMember(t.db, org.orgId, { role: "stack-triggerer" });
    const r = await answers(m.token, [
      { resourceType: "stack", action: "deploy" },
      { principalId: m.userId, resourceType: "stack", action: "preview" },
    ]);
    expect(r.map((a) => [a.principalId, a.allowed, a.decision])).toEqual([
      [m.userId, true, "GRANTED"],
      [m.userId, false, "NO_GRANT"],
    ]);
    expect(r[0].via[0]).toMatchObject({ kind: "DIRECT", roleKey: "stack-triggerer", roleId: systemRoleId("stack-triggerer") });
  });

  it("a service account holding (member, check) checks anyone", async () => {
    const runner = await addMember(t.db, org.orgId, { grants: [{ resourceType: "member", action: "check" }, { resourceType: "role", action: "read" }] });
    const target = await addMember(t.db, org.orgId, { role: "stack-approver" });
    const r = await answers(runner.token, [{ principalId: target.userId, resourceType: "stack", action: "preview", matchValue: "api", groups: [] }]);
    expect(r[0]).toMatchObject({ allowed: true, decision: "GRANTED", via: [{ kind: "DIRECT", roleKey: "stack-approver" }] });
  });

  it("(member, check) is in the catalog, untargeted only, and the built-in admin holds it through (*, *)", async () => {
    const res = await t.gql(`{ permissionCatalog { resourceType actions supportsPattern supportsAuthzGroup } }`, {});
    const member = res.data.permissionCatalog.find((f: any) => f.resourceType === "member");
    expect(member).toMatchObject({ supportsPattern: false, supportsAuthzGroup: false });
    expect(member.actions).toContain("check");
    const admin = await addMember(t.db, org.orgId, { role: "admin" });
    const r = await answers(admin.token, [{ principalId: org.adminId, resourceType: "member", action: "check" }]);
    expect(r[0]).toMatchObject({ allowed: true, decision: "SUPER_ADMIN" });
  });
});

describe("batching", () => {
  it(`answers up to ${MAX_PERMISSION_CHECKS} checks in order, in one request`, async () => {
    const m = await addMember(t.db, org.orgId, { grants: [{ resourceType: "stack", action: "read", resourcePattern: "even-%" }] });
    const checks = Array.from({ length: MAX_PERMISSION_CHECKS }, (_, i) => ({
      principalId: m.userId,
      resourceType: "stack",
      action: "read",
      matchValue: `${i % 2 === 0 ? "even" : "odd"}-${i}`,
    }));
    const r = await answers(org.adminToken, checks);
    expect(r.map((a) => a.allowed)).toEqual(checks.map((_, i) => i % 2 === 0));
    expect(r.map((a) => a.missing?.matchValue ?? null)).toEqual(checks.map((c, i) => (i % 2 === 0 ? null : c.matchValue)));
  });

  it("a batch costs the same statements whatever its size: principals, resources and reasons are read once per request", async () => {
    const count = async (n: number) => {
      const o = await createOrg(t.db);
      const checker = await addMember(t.db, o.orgId, { grants: [{ resourceType: "member", action: "check" }, { resourceType: "*", action: "read" }] });
      const source = await t.db.prisma.identitySource.create({ data: { orgId: o.orgId, name: "okta" } });
      await t.db.prisma.identityGroupBinding.create({
        data: { orgId: o.orgId, identitySourceId: source.id, groupKey: "g", roles: { create: [{ roleId: systemRoleId("stack-triggerer") }] } },
      });
      const checks: Check[] = [];
      for (let i = 0; i < n; i++) {
        const m = await addMember(t.db, o.orgId, { role: "stack-reader" });
        await t.db.prisma.userIdentityGroup.create({ data: { identitySourceId: source.id, userId: m.userId, groupKey: "g" } });
        const stack = await t.db.prisma.stack.create({ data: { orgId: o.orgId, name: `s-${i}` } });
        const ws = await t.db.prisma.workspace.create({ data: { orgId: o.orgId, stackId: stack.id, name: `w-${i}` } });
        checks.push({ principalId: m.userId, resourceType: "stack", action: "deploy", resourceId: stack.id });
        checks.push({ principalId: m.userId, resourceType: "workspace", action: "plan", resourceId: ws.id });
      }
      await t.gql(CHECK, { checks }, checker.token);
      const before = t.db.statementCount();
      const r = await answers(checker.token, checks);
      expect(r.filter((a) => a.allowed)).toHaveLength(n);
      return t.db.statementCount() - before;
    };
    const few = await count(2);
    const many = await count(25);
    expect(few).toBeGreaterThan(0);
    expect(many).toBe(few);
  });

  it("a runner's repeated question costs one statement beside its token's: the principal asked about and its reasons are kept under the authz epoch", async () => {
    const o = await createOrg(t.db);
    const runner = await addMember(t.db, o.orgId, { grants: [{ resourceType: "member", action: "check" }, { resourceType: "*", action: "read" }] });
    const m = await addMember(t.db, o.orgId, { role: "stack-triggerer" });
    const stack = await t.db.prisma.stack.create({ data: { orgId: o.orgId, name: "api" } });
    const question = [{ principalId: m.userId, resourceType: "stack", action: "deploy", resourceId: stack.id }];
    await answers(runner.token, question);
    const before = t.db.statementCount();
    const r = await answers(runner.token, question);
    expect(r[0]).toMatchObject({ allowed: true, decision: "GRANTED", via: [{ kind: "DIRECT", roleKey: "stack-triggerer" }] });
    // The token (with the epoch) and the stack by id: nothing about the principal is read again.
    expect(t.db.statementCount() - before).toBe(2);
  });

  it("what is kept answers a change at once: a role, an SSO binding and a deactivation, each seen by the next check", async () => {
    const o = await createOrg(t.db);
    const runner = await addMember(t.db, o.orgId, { grants: [{ resourceType: "member", action: "check" }, { resourceType: "*", action: "read" }] });
    const m = await addMember(t.db, o.orgId, { role: "stack-reader" });
    const stack = await t.db.prisma.stack.create({ data: { orgId: o.orgId, name: "api" } });
    const ask = async () => (await answers(runner.token, [{ principalId: m.userId, resourceType: "stack", action: "deploy", resourceId: stack.id }]))[0];
    expect(await ask()).toMatchObject({ allowed: false, decision: "NO_GRANT" });
    expect(await ask()).toMatchObject({ allowed: false, decision: "NO_GRANT" });

    await t.db.prisma.roleAssignment.updateMany({ where: { orgId: o.orgId, userId: m.userId }, data: { roleId: systemRoleId("stack-triggerer") } });
    expect(await ask()).toMatchObject({ allowed: true, decision: "GRANTED", via: [{ kind: "DIRECT", roleKey: "stack-triggerer" }] });

    const source = await t.db.prisma.identitySource.create({ data: { orgId: o.orgId, name: "okta" } });
    await t.db.prisma.identityGroupBinding.create({
      data: { orgId: o.orgId, identitySourceId: source.id, groupKey: "sre", roles: { create: [{ roleId: systemRoleId("stack-triggerer") }] } },
    });
    await t.db.prisma.userIdentityGroup.create({ data: { identitySourceId: source.id, userId: m.userId, groupKey: "sre" } });
    expect((await ask()).via.map((v: { kind: string }) => v.kind).sort()).toEqual(["DIRECT", "SSO_BINDING"]);

    await t.db.prisma.membership.updateMany({ where: { orgId: o.orgId, userId: m.userId }, data: { deactivatedAt: new Date() } });
    expect(await ask()).toMatchObject({ allowed: false, decision: "NOT_A_MEMBER", via: [] });
  });

  it(`over ${MAX_PERMISSION_CHECKS} checks is a ValidationError on checks, and nothing is answered`, async () => {
    const checks = Array.from({ length: MAX_PERMISSION_CHECKS + 1 }, () => ({ resourceType: "stack", action: "read" }));
    const r = await check(org.adminToken, checks);
    expect(r).toMatchObject({ __typename: "ValidationError", issues: [{ field: "checks", code: "too_many_checks" }] });
    expect((await check(org.adminToken, [])).issues).toEqual([{ field: "checks", code: "too_few_checks" }]);
  });

  it("every bad check is named by index and field", async () => {
    const r = await check(org.adminToken, [
      { resourceType: "stack", action: "read" },
      { resourceType: "runner", action: "read" },
      { resourceType: "nope", action: "read" },
      { resourceType: "*", action: "read" },
      { resourceType: "stack", action: "read", resourceId: randomUUID(), matchValue: "x" },
      { resourceType: "runner_group", action: "read", resourceId: randomUUID() },
      { resourceType: "runner_group", action: "read", matchValue: "rg", groups: ["env-prod"] },
      { resourceType: "member", action: "read", matchValue: "someone" },
      { resourceType: "stack", action: "deploy", matchValue: "api", groups: ["env-prod", "env-prod"] },
    ]);
    expect(r.__typename).toBe("ValidationError");
    expect(r.issues).toEqual([
      { field: "checks.1.action", code: "invalid_pair" },
      { field: "checks.2.resourceType", code: "unknown_resource_type" },
      { field: "checks.3.resourceType", code: "wildcard_target" },
      { field: "checks.4.resourceId", code: "one_target" },
      { field: "checks.5.resourceId", code: "resource_id_not_supported" },
      { field: "checks.6.groups", code: "group_not_supported" },
      { field: "checks.7.matchValue", code: "pattern_not_supported" },
      { field: "checks.8.groups.1", code: "duplicate_group" },
    ]);
  });

  it("a match value no resource name can carry is refused as input (the storable-text rule)", async () => {
    const r = await check(org.adminToken, [{ resourceType: "stack", action: "read", matchValue: "a\nb" }]);
    expect(r).toMatchObject({ __typename: "ValidationError", issues: [{ field: "checks.0.matchValue", code: "control_character" }] });
  });
});

describe("no cross-organization leak", () => {
  it("seed 004 Authz semantics (active membership): another organization's user, an unknown id and a deactivated member are one answer: NOT_A_MEMBER", async () => {
    const other = await createOrg(t.db);
    const gone = await addMember(t.db, org.orgId, { role: "admin" });
    await t.db.prisma.membership.update({ where: { orgId_userId: { orgId: org.orgId, userId: gone.userId } }, data: { deactivatedAt: new Date() } });
    const ids = [other.adminId, randomUUID(), gone.userId];
    const r = await answers(org.adminToken, ids.map((principalId) => ({ principalId, resourceType: "stack", action: "read" })));
    const strip = (a: any) => ({ ...a, principalId: undefined });
    expect(r.map((a) => a.principalId)).toEqual(ids);
    expect(strip(r[0])).toEqual(strip(r[1]));
    expect(strip(r[2])).toEqual(strip(r[1]));
    expect(r[1]).toMatchObject({ allowed: false, decision: "NOT_A_MEMBER", grant: null, via: [] });
  });

  it("another organization's resource, an unknown id and one the caller may not read are one answer: RESOURCE_NOT_FOUND", async () => {
    const other = await createOrg(t.db);
    const theirs = await t.db.prisma.stack.create({ data: { orgId: other.orgId, name: "their-secret-stack" } });
    const ours = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: `hidden-${randomUUID().slice(0, 8)}` } });
    const visible = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: `shown-${randomUUID().slice(0, 8)}` } });
    const checker = await addMember(t.db, org.orgId, {
      grants: [{ resourceType: "member", action: "check" }, { resourceType: "stack", action: "read", resourcePattern: "shown-%" }],
    });
    const ids = [theirs.id, randomUUID(), ours.id, visible.id];
    const r = await answers(checker.token, ids.map((resourceId) => ({ principalId: org.adminId, resourceType: "stack", action: "deploy", resourceId })));
    const strip = (a: any) => ({ ...a, resourceId: undefined });
    expect(strip(r[0])).toEqual(strip(r[1]));
    expect(strip(r[2])).toEqual(strip(r[1]));
    expect(r[1]).toMatchObject({ allowed: false, decision: "RESOURCE_NOT_FOUND", missing: { matchValue: null, groups: null } });
    expect(JSON.stringify(r)).not.toContain("their-secret-stack");
    expect(r[3]).toMatchObject({ allowed: true, decision: "SUPER_ADMIN" });
  });

  it("another organization's admin checking our member gets NOT_A_MEMBER, never our grants", async () => {
    const other = await createOrg(t.db);
    const m = await addMember(t.db, org.orgId, { role: "stack-admin" });
    const r = await answers(other.adminToken, [{ principalId: m.userId, resourceType: "stack", action: "deploy" }]);
    expect(r[0]).toMatchObject({ allowed: false, decision: "NOT_A_MEMBER", via: [] });
  });
});

describe("reasons: which grant, through which role, direct or SSO binding", () => {
  it("seed 004 Multi-role SSO bindings: a member of the binding's group receives the union of every attached role, and the check names the binding", async () => {
    const deployer = await t.db.prisma.role.create({
      data: { orgId: org.orgId, key: `deployer-${randomUUID().slice(0, 6)}`, name: `Deployer ${randomUUID().slice(0, 6)}`, permissions: { create: [{ resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" }] } },
    });
    const source = await t.db.prisma.identitySource.create({ data: { orgId: org.orgId, name: `okta-${randomUUID().slice(0, 6)}` } });
    const binding = await t.db.prisma.identityGroupBinding.create({
      data: { orgId: org.orgId, identitySourceId: source.id, groupKey: "sre", roles: { create: [{ roleId: deployer.id }, { roleId: systemRoleId("state-lock-manager") }] } },
    });
    const m = await addMember(t.db, org.orgId, { role: "stack-reader" });
    await t.db.prisma.userIdentityGroup.create({ data: { identitySourceId: source.id, userId: m.userId, groupKey: "sre" } });
    const r = await answers(org.adminToken, [
      { principalId: m.userId, resourceType: "stack", action: "deploy", matchValue: "api", groups: ["env-prod"] },
      { principalId: m.userId, resourceType: "stack", action: "unlock_state", matchValue: "api", groups: [] },
      { principalId: m.userId, resourceType: "stack", action: "read_logs", matchValue: "api", groups: [] },
      { principalId: m.userId, resourceType: "stack", action: "deploy", matchValue: "api", groups: ["env-dev"] },
    ]);
    expect(r[0]).toMatchObject({
      allowed: true,
      decision: "GRANTED",
      grant: { resourceType: "stack", action: "deploy", resourcePattern: "", authzGroup: "env-prod" },
      via: [{ kind: "SSO_BINDING", roleId: deployer.id, bindingId: binding.id, identitySourceId: source.id, identitySourceName: source.name, groupKey: "sre" }],
    });
    expect(r[1]).toMatchObject({ allowed: true, via: [{ kind: "SSO_BINDING", roleKey: "state-lock-manager", groupKey: "sre" }] });
    expect(r[2]).toMatchObject({ allowed: true, via: [{ kind: "DIRECT", roleKey: "stack-reader", bindingId: null, groupKey: null }] });
    expect(r[3]).toMatchObject({ allowed: false, decision: "NO_GRANT", missing: { resourceType: "stack", action: "deploy", matchValue: "api", groups: ["env-dev"] } });
  });

  it("a grant held both directly and through a binding names both", async () => {
    const source = await t.db.prisma.identitySource.create({ data: { orgId: org.orgId, name: `azure-${randomUUID().slice(0, 6)}` } });
    await t.db.prisma.identityGroupBinding.create({
      data: { orgId: org.orgId, identitySourceId: source.id, groupKey: "readers", roles: { create: [{ roleId: systemRoleId("stack-reader") }] } },
    });
    const m = await addMember(t.db, org.orgId, { role: "stack-reader" });
    await t.db.prisma.userIdentityGroup.create({ data: { identitySourceId: source.id, userId: m.userId, groupKey: "readers" } });
    const [r] = await answers(org.adminToken, [{ principalId: m.userId, resourceType: "stack", action: "read" }]);
    expect(r.via.map((v: any) => [v.kind, v.roleKey, v.groupKey])).toEqual([
      ["DIRECT", "stack-reader", null],
      ["SSO_BINDING", "stack-reader", "readers"],
    ]);
  });

  it("seed 004 Notes: a personal organization's owner gets the admin role implicitly — the check says OWNER", async () => {
    const personal = await createOrg(t.db);
    const owner = await addMember(t.db, personal.orgId);
    await t.db.prisma.organization.update({ where: { id: personal.orgId }, data: { ownerUserId: owner.userId, personal: true } });
    const r = await answers(personal.adminToken, [
      { principalId: owner.userId, resourceType: "stack", action: "run_command", matchValue: "x" },
      { principalId: owner.userId, resourceType: "approval_policy", action: "manage" },
    ]);
    expect(r[0]).toMatchObject({ allowed: true, decision: "OWNER", grant: { resourceType: "*", action: "*" }, via: [{ kind: "OWNER", roleId: null }] });
    expect(r[1]).toMatchObject({ allowed: true, decision: "OWNER", grant: null });
  });

  it("seed 004 Authz semantics: a targeted grant does NOT satisfy a NULL match value — 'may P deploy anywhere?' needs an untargeted grant", async () => {
    const m = await addMember(t.db, org.orgId, {
      grants: [{ resourceType: "stack", action: "deploy", resourcePattern: "team-a-%" }, { resourceType: "stack", action: "read", resourcePattern: "team-a-%" }],
    });
    const r = await answers(org.adminToken, [
      { principalId: m.userId, resourceType: "stack", action: "deploy" },
      { principalId: m.userId, resourceType: "stack", action: "deploy", matchValue: "team-a-api" },
    ]);
    expect(r.map((a) => a.allowed)).toEqual([false, true]);
    expect(r[1].grant.resourcePattern).toBe("team-a-*");
  });

  it("an action the principal holds on a stack it cannot read is READ_MISSING, naming the read tuple: the operation answers NotFound", async () => {
    const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: `team-a-${randomUUID().slice(0, 8)}`, authzGroups: ["env-prod"] } });
    const m = await addMember(t.db, org.orgId, {
      grants: [{ resourceType: "stack", action: "update", resourcePattern: "team-a-%" }, { resourceType: "stack", action: "read", resourcePattern: "other-%" }],
    });
    const r = await answers(org.adminToken, [
      { principalId: m.userId, resourceType: "stack", action: "update", resourceId: stack.id },
      { principalId: m.userId, resourceType: "stack", action: "update", matchValue: stack.name, groups: ["env-prod"] },
    ]);
    for (const a of r) {
      expect(a).toMatchObject({ allowed: false, decision: "READ_MISSING", grant: null, via: [] });
      expect(a.missing).toEqual({ resourceType: "stack", action: "read", matchValue: stack.name, groups: ["env-prod"] });
    }
    const res = await t.gql(`mutation($i: UpdateStackInput!) { updateStack(input: $i) { __typename } }`, { i: { id: stack.id, description: "x" } }, m.token);
    expect(res.data.updateStack.__typename).toBe("NotFoundError");
  });

  it("a create in a stack names the stack by resourceId: read on the stack is needed, as createWorkspace finds it first", async () => {
    const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: `hidden-${randomUUID().slice(0, 8)}`, authzGroups: ["env-prod"] } });
    const creator = await addMember(t.db, org.orgId, { grants: [{ resourceType: "workspace", action: "create" }] });
    const reader = await addMember(t.db, org.orgId, { grants: [{ resourceType: "workspace", action: "create", authzGroup: "" }, { resourceType: "stack", action: "read", authzGroup: "env-prod" }] });
    const r = await answers(org.adminToken, [
      { principalId: creator.userId, resourceType: "workspace", action: "create", resourceId: stack.id, matchValue: "payments" },
      { principalId: reader.userId, resourceType: "workspace", action: "create", resourceId: stack.id, matchValue: "payments" },
    ]);
    expect(r.map((a) => a.decision)).toEqual(["READ_MISSING", "GRANTED"]);
    expect(r[0].missing).toEqual({ resourceType: "stack", action: "read", matchValue: stack.name, groups: ["env-prod"] });
  });

  it("seed 004 Authz semantics: the workspace-scoped families are checked by their workspace, with its stack's groups", async () => {
    const stack = await t.db.prisma.stack.create({
      data: { orgId: org.orgId, name: `ws-stack-${randomUUID().slice(0, 6)}`, authzGroups: ["env-prod"] },
    });
    const ws = await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: `payments-${randomUUID().slice(0, 6)}` } });
    const m = await addMember(t.db, org.orgId, { grants: [{ resourceType: "virtual_key", action: "create", resourcePattern: "payments-%" }, { resourceType: "approval_request", action: "decide", authzGroup: "env-prod" }] });
    const r = await answers(org.adminToken, [
      { principalId: m.userId, resourceType: "virtual_key", action: "create", resourceId: ws.id },
      { principalId: m.userId, resourceType: "approval_request", action: "decide", resourceId: ws.id },
      { principalId: m.userId, resourceType: "workspace", action: "approve", resourceId: ws.id },
    ]);
    expect(r.map((a) => [a.allowed, a.decision])).toEqual([
      [true, "GRANTED"],
      [true, "GRANTED"],
      [false, "NO_GRANT"],
    ]);
    expect(r[2].missing).toEqual({ resourceType: "workspace", action: "approve", matchValue: ws.name, groups: ["env-prod"] });
  });
});
