// The dashboard's surfaces of the permission catalog: viewerCan agrees with the check
// API, costs no statement per row, effective membership (direct and SSO binding) under
// (member, read), and the catalog's targeting modes agree with the validator, pair by pair.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { systemRoleId } from "../../src/services/system-roles.js";
import { FAMILIES, PERMISSION_TARGETING, validatePermission } from "../../src/domain/catalog/index.js";
import { CHECK } from "./queries.js";

let t: TestApp;
let org: OrgFixture;
beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
});
afterAll(() => t.close());

const camel = (a: string) => a.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
const actionsOf = (family: keyof typeof FAMILIES) => (FAMILIES[family].actions as readonly string[]).filter((a) => a !== "create");

async function stackIn(orgId: string, name: string, groups: string[] = []) {
  return t.db.prisma.stack.create({
    data: { orgId, name, authzGroups: groups, groupMembers: { create: groups.map((g) => ({ orgId, groupName: g, stackName: name })) } },
  });
}

describe("viewerCan agrees with the check API", () => {
  it("Stack.viewerCan: every stack action, for a member with a mix of roles, patterns and groups", async () => {
    const m = await addMember(t.db, org.orgId, {
      grants: [
        { resourceType: "stack", action: "read" },
        { resourceType: "stack", action: "deploy", resourcePattern: "team-a-%" },
        { resourceType: "stack", action: "unlock_state", authzGroup: "env-prod" },
        { resourceType: "stack", action: "read_data", resourcePattern: "team-a-api" },
        { resourceType: "*", action: "confirm" },
      ],
    });
    const stacks = [await stackIn(org.orgId, "team-a-api", ["env-prod"]), await stackIn(org.orgId, "team-b-api", []), await stackIn(org.orgId, "team-a-web", ["env-dev"])];
    const fields = actionsOf("stack").map(camel).join(" ");
    const res = await t.gql(`{ stacks(first: 100) { edges { node { id name viewerCan { ${fields} } } } } }`, {}, m.token);
    expect(res.errors).toBeUndefined();
    const byId = new Map<string, any>(res.data.stacks.edges.map((e: any) => [e.node.id, e.node.viewerCan]));
    const checks = stacks.flatMap((s) => actionsOf("stack").map((action) => ({ resourceType: "stack", action, resourceId: s.id })));
    const answers = await t.gql(CHECK, { checks }, m.token);
    const data = answers.data.checkPermissions.data as any[];
    expect(data).toHaveLength(checks.length);
    data.forEach((a, i) => expect(byId.get(checks[i]!.resourceId)[camel(checks[i]!.action)], `${checks[i]!.action}`).toBe(a.allowed));
    // And the answers are the ones the grants mean.
    expect(byId.get(stacks[0]!.id)).toMatchObject({ read: true, deploy: true, unlockState: true, readData: true, confirm: true, update: false, preview: false });
    expect(byId.get(stacks[1]!.id)).toMatchObject({ read: true, deploy: false, unlockState: false, readData: false, confirm: true });
    expect(byId.get(stacks[2]!.id)).toMatchObject({ deploy: true, unlockState: false, readData: false });
  });

  it("Workspace.viewerCan and ResourcePolicy.viewerCan: the workspace's stack's groups and the policy's name", async () => {
    const stack = await stackIn(org.orgId, `vc-${randomUUID().slice(0, 6)}`, ["env-prod"]);
    const ws = await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: `pay-${randomUUID().slice(0, 6)}` } });
    const policy = await t.db.prisma.resourcePolicy.create({ data: { orgId: org.orgId, name: `db-${randomUUID().slice(0, 6)}` } });
    const m = await addMember(t.db, org.orgId, {
      grants: [
        { resourceType: "workspace", action: "read" },
        { resourceType: "workspace", action: "approve", authzGroup: "env-prod" },
        { resourceType: "workspace", action: "plan", resourcePattern: "other-%" },
        { resourceType: "resource_policy", action: "read", resourcePattern: "db-%" },
        { resourceType: "resource_policy", action: "update", resourcePattern: "db-%" },
      ],
    });
    const wsFields = actionsOf("workspace").map(camel).join(" ");
    const rpFields = actionsOf("resource_policy").map(camel).join(" ");
    const res = await t.gql(
      `query($w: ID!, $p: ID!) { workspace(id: $w) { viewerCan { ${wsFields} } } resourcePolicy(id: $p) { viewerCan { ${rpFields} } } }`,
      { w: ws.id, p: policy.id },
      m.token,
    );
    expect(res.errors).toBeUndefined();
    const checks = [
      ...actionsOf("workspace").map((action) => ({ resourceType: "workspace", action, resourceId: ws.id })),
      ...actionsOf("resource_policy").map((action) => ({ resourceType: "resource_policy", action, resourceId: policy.id })),
    ];
    const answers = (await t.gql(CHECK, { checks }, m.token)).data.checkPermissions.data as any[];
    answers.forEach((a, i) => {
      const c = checks[i]!;
      const got = c.resourceType === "workspace" ? res.data.workspace.viewerCan : res.data.resourcePolicy.viewerCan;
      expect(got[camel(c.action)], `${c.resourceType}.${c.action}`).toBe(a.allowed);
    });
    expect(res.data.workspace.viewerCan).toMatchObject({ read: true, approve: true, plan: false, freeze: false });
    expect(res.data.resourcePolicy.viewerCan).toEqual({ read: true, update: true, delete: false });
  });

  it("viewerCan costs no statement per row (no N+1)", async () => {
    const fields = actionsOf("stack").map(camel).join(" ");
    const query = `{ stacks(first: 100) { edges { node { name viewerCan { ${fields} } } } } }`;
    const count = async (n: number) => {
      const o = await createOrg(t.db);
      const m = await addMember(t.db, o.orgId, { grants: [{ resourceType: "stack", action: "read" }, { resourceType: "stack", action: "deploy", authzGroup: "g" }] });
      for (let i = 0; i < n; i++) await stackIn(o.orgId, `s-${i}`, i % 2 ? ["g"] : []);
      await t.gql(query, {}, m.token);
      const before = t.db.statementCount();
      const res = await t.gql(query, {}, m.token);
      expect(res.errors).toBeUndefined();
      expect(res.data.stacks.edges).toHaveLength(n);
      return t.db.statementCount() - before;
    };
    const few = await count(2);
    const many = await count(12);
    expect(few).toBeGreaterThan(0);
    expect(many).toBe(few);
  });
});

describe("effective membership: who holds a role, directly and through SSO bindings", () => {
  const ROLES = `{ roles { id key effectiveMembers { user { id name } via { kind bindingId identitySourceName groupKey } } } }`;
  let o: OrgFixture;
  let ids: { direct: string; bound: string; both: string; gone: string; binding: string; source: string };
  beforeAll(async () => {
    o = await createOrg(t.db);
    const source = await t.db.prisma.identitySource.create({ data: { orgId: o.orgId, name: "okta" } });
    const binding = await t.db.prisma.identityGroupBinding.create({
      data: { orgId: o.orgId, identitySourceId: source.id, groupKey: "approvers", roles: { create: [{ roleId: systemRoleId("stack-approver") }] } },
    });
    const direct = await addMember(t.db, o.orgId, { role: "stack-approver", name: "A direct" });
    const bound = await addMember(t.db, o.orgId, { name: "B bound" });
    const both = await addMember(t.db, o.orgId, { role: "stack-approver", name: "C both" });
    const gone = await addMember(t.db, o.orgId, { role: "stack-approver", name: "D gone" });
    for (const u of [bound, both, gone]) await t.db.prisma.userIdentityGroup.create({ data: { identitySourceId: source.id, userId: u.userId, groupKey: "approvers" } });
    await t.db.prisma.membership.update({ where: { orgId_userId: { orgId: o.orgId, userId: gone.userId } }, data: { deactivatedAt: new Date() } });
    ids = { direct: direct.userId, bound: bound.userId, both: both.userId, gone: gone.userId, binding: binding.id, source: source.id };
  });

  it("lists active members by direct assignment AND by SSO binding, with every way each holds the role", async () => {
    const res = await t.gql(ROLES, {}, o.adminToken);
    expect(res.errors).toBeUndefined();
    const approver = res.data.roles.find((r: any) => r.key === "stack-approver");
    const sso = { kind: "SSO_BINDING", bindingId: ids.binding, identitySourceName: "okta", groupKey: "approvers" };
    const direct = { kind: "DIRECT", bindingId: null, identitySourceName: null, groupKey: null };
    expect(approver.effectiveMembers).toEqual([
      { user: { id: ids.direct, name: "A direct" }, via: [direct] },
      { user: { id: ids.bound, name: "B bound" }, via: [sso] },
      { user: { id: ids.both, name: "C both" }, via: [direct, sso] },
    ]);
    // directMembers keeps its meaning: direct assignments only.
    const dm = await t.gql(`{ roles { key directMembers { id } } }`, {}, o.adminToken);
    expect(dm.data.roles.find((r: any) => r.key === "stack-approver").directMembers.map((u: any) => u.id)).not.toContain(ids.bound);
  });

  it("is member data: null without (member, read)", async () => {
    const m = await addMember(t.db, o.orgId, { role: "stack-reader" });
    const res = await t.gql(ROLES, {}, m.token);
    expect(res.errors).toBeUndefined();
    for (const r of res.data.roles) expect(r.effectiveMembers).toBeNull();
  });

  it("a binding's details are identity-source data: null without (identity_source, read), the kind stays", async () => {
    const m = await addMember(t.db, o.orgId, { grants: [{ resourceType: "role", action: "read" }, { resourceType: "member", action: "read" }] });
    const res = await t.gql(ROLES, {}, m.token);
    const approver = res.data.roles.find((r: any) => r.key === "stack-approver");
    expect(approver.effectiveMembers.find((e: any) => e.user.id === ids.bound).via).toEqual([
      { kind: "SSO_BINDING", bindingId: null, identitySourceName: null, groupKey: null },
    ]);
  });

  it("agrees with the check API's reasons", async () => {
    const res = await t.gql(CHECK, { checks: [ids.direct, ids.bound, ids.both].map((principalId) => ({ principalId, resourceType: "stack", action: "preview" })) }, o.adminToken);
    const kinds = res.data.checkPermissions.data.map((a: any) => a.via.map((v: any) => v.kind));
    expect(kinds).toEqual([["DIRECT"], ["SSO_BINDING"], ["DIRECT", "SSO_BINDING"]]);
  });

  it("another organization's admin never sees our holders", async () => {
    const other = await createOrg(t.db);
    const res = await t.gql(ROLES, {}, other.adminToken);
    const approver = res.data.roles.find((r: any) => r.key === "stack-approver");
    const seen = approver.effectiveMembers.map((e: any) => e.user.id);
    for (const id of Object.values(ids)) expect(seen).not.toContain(id);
  });

  it("costs no statement per role (no N+1)", async () => {
    const count = async (n: number) => {
      const x = await createOrg(t.db);
      for (let i = 0; i < n; i++) {
        await t.db.prisma.role.create({ data: { orgId: x.orgId, key: `r-${i}`, name: `R ${i}`, permissions: { create: [{ resourceType: "stack", action: "read", resourcePattern: "", authzGroup: "" }] } } });
      }
      const roles = await t.db.prisma.role.findMany({ where: { orgId: x.orgId } });
      for (const r of roles) {
        const m = await addMember(t.db, x.orgId);
        await t.db.prisma.roleAssignment.create({ data: { orgId: x.orgId, userId: m.userId, roleId: r.id } });
      }
      await t.gql(ROLES, {}, x.adminToken);
      const before = t.db.statementCount();
      const res = await t.gql(ROLES, {}, x.adminToken);
      expect(res.errors).toBeUndefined();
      return t.db.statementCount() - before;
    };
    const few = await count(2);
    const many = await count(10);
    expect(many).toBe(few);
  });
});

describe("permissionCatalog: targeting modes per action, from the validator", () => {
  const TARGETING = `{ permissionTargeting { resourceType action ownerOnly modes { mode accepted refusals { code message } } } }`;

  it("lists every pair a role may name, wildcards included, and each family lists its own", async () => {
    const res = await t.gql(TARGETING, {});
    expect(res.errors).toBeUndefined();
    const pairs = res.data.permissionTargeting.map((p: any) => `${p.resourceType}/${p.action}`);
    expect(pairs).toContain("*/*");
    for (const [rt, f] of Object.entries(FAMILIES)) {
      expect(pairs).toContain(`${rt}/*`);
      for (const a of f.actions) expect(pairs).toContain(`${rt}/${a}`);
    }
    const fam = await t.gql(`{ permissionCatalog { resourceType targeting { resourceType action } } }`, {});
    for (const f of fam.data.permissionCatalog) {
      expect(f.targeting.map((p: any) => p.action)).toEqual(["*", ...(FAMILIES as any)[f.resourceType].actions]);
    }
  });

  it("seed 004 Targeting (a group never on create, only on the stack family): (*, *, group) is refused, and the catalog says why before a role editor tries", async () => {
    const res = await t.gql(TARGETING, {});
    const star = res.data.permissionTargeting.find((p: any) => p.resourceType === "*" && p.action === "*");
    const group = star.modes.find((m: any) => m.mode === "AUTHZ_GROUP");
    expect(group.accepted).toBe(false);
    expect(group.refusals.map((r: any) => r.code).sort()).toEqual(["group_not_supported", "group_on_create"]);
    expect(star.modes.find((m: any) => m.mode === "NAME_PATTERN").refusals.map((r: any) => r.code)).toEqual(["pattern_on_wildcard_type"]);
    expect(star.modes.find((m: any) => m.mode === "ANY_RESOURCE").accepted).toBe(true);
    const create = res.data.permissionTargeting.find((p: any) => p.resourceType === "stack" && p.action === "create");
    expect(create.modes.map((m: any) => [m.mode, m.accepted])).toEqual([["ANY_RESOURCE", true], ["NAME_PATTERN", true], ["AUTHZ_GROUP", false]]);
    const manage = res.data.permissionTargeting.find((p: any) => p.resourceType === "approval_policy" && p.action === "manage");
    expect(manage.ownerOnly).toBe(true);
    expect(manage.modes.every((m: any) => !m.accepted && m.refusals.some((r: any) => r.code === "owner_only"))).toBe(true);
  });

  it("seed 004 Notes (the catalog carries the targeting modes Validate accepts): every pair and mode, generated, createRole accepts exactly what the catalog accepts and refuses with its codes", async () => {
    const samples = { ANY_RESOURCE: {}, NAME_PATTERN: { resourcePattern: "team-a-*" }, AUTHZ_GROUP: { authzGroup: "env-prod" } } as const;
    const cases = PERMISSION_TARGETING.flatMap((p) => p.modes.map((m) => ({ p, m })));
    // The served catalog is the domain's.
    const served = (await t.gql(TARGETING, {})).data.permissionTargeting;
    expect(served).toEqual(PERMISSION_TARGETING.map((p) => ({ ...p, modes: p.modes.map((m) => ({ ...m, refusals: [...m.refusals] })) })));
    const CREATE = `mutation($i: CreateRoleInput!) { createRole(input: $i) { __typename ... on ValidationError { issues { field code } } } }`;
    let n = 0;
    for (let i = 0; i < cases.length; i += 16) {
      await Promise.all(
        cases.slice(i, i + 16).map(async ({ p, m }) => {
          const permission = { resourceType: p.resourceType, action: p.action, ...samples[m.mode] };
          const res = await t.gql(CREATE, { i: { name: `targeting ${++n} ${randomUUID().slice(0, 6)}`, permissions: [permission] } }, org.adminToken);
          const label = `${p.resourceType}/${p.action}/${m.mode}`;
          expect(res.errors, label).toBeUndefined();
          if (m.accepted) {
            expect(res.data.createRole.__typename, label).toBe("MutationCreateRoleSuccess");
          } else {
            expect(res.data.createRole.__typename, label).toBe("ValidationError");
            expect(res.data.createRole.issues.map((x: any) => x.code).sort(), label).toEqual(m.refusals.map((r) => r.code).sort());
          }
          // And the domain validator, directly.
          expect(validatePermission(permission).ok, label).toBe(m.accepted);
        }),
      );
    }
  }, 300_000);
});

describe("viewerCan on the gateway's objects and webhooks agrees with the check API", () => {
  it("ApprovalPolicy, ApprovalRequest, VirtualKey, ToolConnection and Webhook", async () => {
    const { createWorld } = await import("../graphql/world.js");
    const w = await createWorld(t);
    const member = await w.member([
      { resourceType: "approval_policy", action: "read" },
      { resourceType: "approval_request", action: "read" },
      { resourceType: "virtual_key", action: "*" },
      { resourceType: "connection", action: "read" },
      { resourceType: "connection", action: "update", resourcePattern: "no-such-workspace-*" },
      { resourceType: "webhook", action: "read" },
    ] as never);
    const f = (family: keyof typeof FAMILIES) => `viewerCan { ${actionsOf(family).map(camel).join(" ")} }`;
    const res = await t.gql(
      `query($w: ID!, $p: ID!, $r: ID!, $h: ID!) {
        approvalPolicy(id: $p) { id ${f("approval_policy")} }
        approvalRequest(id: $r) { id ${f("approval_request")} }
        virtualKeys(workspaceId: $w) { id ${f("virtual_key")} }
        toolConnections(workspaceId: $w) { id ${f("connection")} }
        webhook(id: $h) { id ${f("webhook")} }
      }`,
      { w: w.ids.workspace, p: w.ids.approvalPolicy, r: w.ids.approvalRequest, h: w.ids.webhook },
      member,
    );
    expect(res.errors).toBeUndefined();
    const objects: [string, any][] = [
      ["approval_policy", res.data.approvalPolicy],
      ["approval_request", res.data.approvalRequest],
      ...res.data.virtualKeys.map((k: any) => ["virtual_key", k] as [string, any]),
      ...res.data.toolConnections.map((c: any) => ["connection", c] as [string, any]),
      ["webhook", res.data.webhook],
    ];
    expect(objects.every(([, o]) => o !== null)).toBe(true);
    expect(res.data.virtualKeys.length).toBeGreaterThan(0);
    expect(res.data.toolConnections.length).toBeGreaterThan(0);
    expect(res.data.virtualKeys[0].viewerCan).toEqual({ read: true, revoke: true });
    expect(res.data.toolConnections[0].viewerCan).toEqual({ read: true, update: false, delete: false });
    const checks = objects.flatMap(([family, o]) => actionsOf(family as never).map((action) => ({ resourceType: family, action, resourceId: o.id })));
    const answers = (await t.gql(CHECK, { checks }, member)).data.checkPermissions.data as any[];
    expect(answers).toHaveLength(checks.length);
    answers.forEach((a, i) => {
      const [family, o] = objects.find(([, x]) => x.id === checks[i]!.resourceId)!;
      expect(o.viewerCan[camel(checks[i]!.action)], `${family}.${checks[i]!.action}`).toBe(a.allowed);
    });
    expect(res.data.approvalPolicy.viewerCan).toEqual({ read: true, manage: false });
    expect(res.data.approvalRequest.viewerCan).toEqual({ read: true, decide: false });
    expect(res.data.webhook.viewerCan).toEqual({ read: true, update: false, delete: false });
  });
});
