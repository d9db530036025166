// checkPermissions.via shows how the principal holds the grant: a role (role data) and, through an
// SSO binding, the binding, its identity source and group key (identity-source data). Generated over
// the schema's GrantSourceKind enum and VIA_REVEALS: for each kind, a caller who may check but not
// read the revealing types sees those fields null; one who also reads them sees them.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { REVEALING_FIELDS, VIA_REVEALS } from "../../src/graphql/schema/permission-check.js";
import { CHECK } from "./queries.js";

let t: TestApp;
let org: OrgFixture;
let kinds: string[];
let sourceFields: string[];
beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  const res = await t.gql(`{ kind: __type(name: "GrantSourceKind") { enumValues { name } } source: __type(name: "GrantSource") { fields { name } } }`, {});
  kinds = res.data.kind.enumValues.map((v: { name: string }) => v.name);
  sourceFields = res.data.source.fields.map((f: { name: string }) => f.name);
});
afterAll(() => t.close());

type RevealingType = keyof typeof REVEALING_FIELDS;
const READ = (resourceType: RevealingType) => ({ resourceType, action: "read" as const });

/** A principal holding (stack, read) through `kind`, and a maker of checkers holding (member, check) and the given reads. */
async function holderThrough(kind: string): Promise<{ orgId: string; principalId: string; checker: (reads: RevealingType[]) => Promise<string> }> {
  const personal = kind === "OWNER";
  const o = personal ? await createOrg(t.db) : org;
  // A personal organization takes no custom role: its admin checks (OWNER reveals nothing to hide anyway).
  const checker = async (reads: RevealingType[]) =>
    personal ? o.adminToken : (await addMember(t.db, o.orgId, { grants: [{ resourceType: "member", action: "check" }, ...reads.map(READ)] })).token;
  if (kind === "DIRECT") {
    const m = await addMember(t.db, o.orgId, { grants: [{ resourceType: "stack", action: "read" }] });
    return { orgId: o.orgId, principalId: m.userId, checker };
  }
  if (kind === "SSO_BINDING") {
    const role = await t.db.prisma.role.create({
      data: { orgId: o.orgId, key: `sso-${randomUUID().slice(0, 6)}`, name: `SSO ${randomUUID().slice(0, 6)}`, permissions: { create: [{ resourceType: "stack", action: "read", resourcePattern: "", authzGroup: "" }] } },
    });
    const source = await t.db.prisma.identitySource.create({ data: { orgId: o.orgId, name: `okta-${randomUUID().slice(0, 6)}` } });
    await t.db.prisma.identityGroupBinding.create({ data: { orgId: o.orgId, identitySourceId: source.id, groupKey: "platform", roles: { create: [{ roleId: role.id }] } } });
    const m = await addMember(t.db, o.orgId);
    await t.db.prisma.userIdentityGroup.create({ data: { identitySourceId: source.id, userId: m.userId, groupKey: "platform" } });
    return { orgId: o.orgId, principalId: m.userId, checker };
  }
  if (kind === "OWNER") {
    const owner = await addMember(t.db, o.orgId);
    await t.db.prisma.organization.update({ where: { id: o.orgId }, data: { ownerUserId: owner.userId, personal: true } });
    return { orgId: o.orgId, principalId: owner.userId, checker };
  }
  throw new Error(`GrantSourceKind ${kind} has no holder in this test: add one (and its VIA_REVEALS entry).`);
}

async function via(token: string, principalId: string) {
  const res = await t.gql(CHECK, { checks: [{ principalId, resourceType: "stack", action: "read" }] }, token);
  expect(res.errors).toBeUndefined();
  const r = res.data.checkPermissions;
  expect(r.__typename, JSON.stringify(r)).toBe("QueryCheckPermissionsSuccess");
  expect(r.data[0].allowed).toBe(true);
  return r.data[0].via as Record<string, unknown>[];
}

describe("checkPermissions.via is redacted like the types it reveals", () => {
  it("every GrantSourceKind of the schema has a VIA_REVEALS entry, and every GrantSource field but kind is some type's guarded data", () => {
    expect([...kinds].sort()).toEqual(Object.keys(VIA_REVEALS).sort());
    const guarded = Object.values(REVEALING_FIELDS).flatMap((r) => [...r.fields]);
    expect(sourceFields.filter((f) => f !== "kind").sort()).toEqual([...guarded].sort());
  });

  const KINDS = Object.keys(VIA_REVEALS) as (keyof typeof VIA_REVEALS)[];
  it.each(KINDS)("%s: a caller holding (member, check) but not read on what it reveals sees those fields null; with read, sees them", async (kind) => {
    const holder = await holderThrough(kind);
    const reveals = VIA_REVEALS[kind];
    const blind = await via(await holder.checker([]), holder.principalId);
    const sighted = await via(await holder.checker([...reveals]), holder.principalId);
    const entry = (list: Record<string, unknown>[]) => list.find((v) => v.kind === kind);
    expect(entry(blind), JSON.stringify(blind)).toBeDefined();
    expect(entry(sighted), JSON.stringify(sighted)).toBeDefined();
    for (const type of Object.keys(REVEALING_FIELDS) as RevealingType[]) {
      for (const field of REVEALING_FIELDS[type].fields) {
        // Without the read: null, whatever the kind. With it: present exactly where the kind reveals it.
        expect(entry(blind)![field], `${kind}.${field} without (${type}, read)`).toBeNull();
        if (reveals.includes(type)) expect(entry(sighted)![field], `${kind}.${field} with (${type}, read)`).not.toBeNull();
      }
    }
  });

  it("one read does not open the other type: (role, read) alone still hides the binding of an SSO_BINDING", async () => {
    const holder = await holderThrough("SSO_BINDING");
    const [v] = await via(await holder.checker(["role"]), holder.principalId);
    expect(v).toMatchObject({ kind: "SSO_BINDING", bindingId: null, identitySourceId: null, identitySourceName: null, groupKey: null });
    expect(v!.roleKey).not.toBeNull();
  });

  it("every answer of a batch is redacted alike: the rule is decided once per request, for the first entry and the last", async () => {
    const holder = await holderThrough("SSO_BINDING");
    const batch = async (token: string) => {
      const checks = Array.from({ length: 5 }, () => ({ principalId: holder.principalId, resourceType: "stack", action: "read" }));
      const res = await t.gql(CHECK, { checks }, token);
      expect(res.errors).toBeUndefined();
      return (res.data.checkPermissions.data as { via: Record<string, unknown>[] }[]).map((a) => a.via[0]!);
    };
    const blind = await batch(await holder.checker([]));
    const rolesOnly = await batch(await holder.checker(["role"]));
    expect(blind).toHaveLength(5);
    for (const v of blind) expect(v).toMatchObject({ kind: "SSO_BINDING", roleId: null, roleKey: null, roleName: null, bindingId: null, groupKey: null });
    for (const v of rolesOnly) {
      expect(v).toMatchObject({ kind: "SSO_BINDING", bindingId: null, identitySourceId: null, identitySourceName: null, groupKey: null });
      expect(v.roleKey).not.toBeNull();
    }
  });

  it("checking yourself shows the role you hold (the Role type's rule: holding it) without (role, read)", async () => {
    const m = await addMember(t.db, org.orgId, { grants: [{ resourceType: "stack", action: "read" }] });
    const [v] = await via(m.token, m.userId);
    expect(v).toMatchObject({ kind: "DIRECT", bindingId: null });
    expect(v!.roleKey).not.toBeNull();
  });
});
