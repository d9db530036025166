// A type is authorized as itself, through every path. For each permissioned type, every path from
// a root query field to it (generated from the executable schema, up to four hops through object
// fields and connection edges) is queried on a populated organization: a member holding every read
// grant but that type's gets nothing of it through ANY path (null, absent, or NOT_FOUND, as the
// type's own root field answers), a member who also holds it gets what the admin gets, and the
// admin of another organization never sees any of it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import type { GraphQLObjectType } from "graphql";
import type { ConcreteResourceType } from "../../src/domain/catalog/matrix.js";
import { argsFrom, pathQuery, pathsTo, schema, stepName, valuesAt } from "./generate.js";
import { createWorld, type World } from "./world.js";

/** Each permissioned type and the family whose (family, read) it needs (src/domain/catalog/matrix.ts). */
const TYPES: Record<string, ConcreteResourceType> = {
  Stack: "stack",
  Workspace: "workspace",
  Plan: "workspace",
  Reservation: "workspace",
  ResourcePolicy: "resource_policy",
  PolicyAssignment: "resource_policy",
  PolicyRequirement: "resource_policy",
  Role: "role",
  Membership: "member",
  IdentitySource: "identity_source",
  IdentityGroupBinding: "identity_source",
  ApprovalPolicy: "approval_policy",
  GatewayPolicySet: "gateway_policy",
  GatewayPolicyVersion: "gateway_policy",
  HoldAuthorityChange: "hold_authority",
  ApprovalRequest: "approval_request",
  VirtualKey: "virtual_key",
  ToolConnection: "connection",
  Webhook: "webhook",
  WebhookDelivery: "webhook",
  CloudIntegration: "cloud_integration",
  PrPreview: "stack",
};
const READ_FAMILIES = [...new Set(Object.values(TYPES))];
/** What the member holds besides reads, so paths behind approve and decide are walked too. */
const ALSO = [
  { resourceType: "workspace", action: "approve" },
  { resourceType: "approval_request", action: "decide" },
] as const;
/** Fields whose answer depends on who asks (their own tokens, inbox, roles): not compared with the admin's. */
const VIEWER_DEPENDENT = new Set(["apiTokens", "approvalInbox", "reservableRoles", "viewer"]);
const HOPS = 5;
const ALLOWED_CODES = new Set(["NOT_FOUND", "PERMISSION_DENIED"]);

let t: TestApp;
let w: World;
beforeAll(async () => {
  t = await startTestApp();
  w = await createWorld(t);
}, 120_000);
afterAll(() => t.close());

type Answer = { found: number; ids: string[]; bad: string[] };

async function ask(query: string, names: string[], token: string): Promise<Answer> {
  const res = await t.gql(query, {}, token);
  const bad = (res.errors ?? [])
    .filter((e: any) => !ALLOWED_CODES.has(e.extensions?.code))
    .map((e: any) => `${e.extensions?.code}: ${e.message}`);
  const values = valuesAt(res.data, names) as Array<{ id?: string }>;
  return { found: values.length, ids: values.map((v) => v.id ?? "?"), bad };
}

describe("a type is authorized as itself, through every path from the root", () => {
  for (const [type, family] of Object.entries(TYPES)) {
    it(`${type}: without (${family}, read) no path reaches it; with it every path answers as for the admin; never across organizations`, async () => {
      const grants = (withFamily: boolean): Parameters<World["member"]>[0] => [
        ...READ_FAMILIES.filter((f) => withFamily || f !== family).map((f) => ({ resourceType: f, action: "read" as const })),
        ...ALSO,
      ];
      const { token: narrow, roleIds: narrowOwn } = await w.memberWithRoles(grants(false));
      const permitted = await w.member(grants(true));
      const paths = pathsTo(type, HOPS, argsFrom(w));
      const hasId = "id" in (schema.getType(type) as GraphQLObjectType).getFields();
      expect(paths.length, `paths to ${type}`).toBeGreaterThan(0);
      const leaked: string[] = [];
      const crashed: string[] = [];
      const missing: string[] = [];
      let seenByPermitted = 0;
      for (const path of paths) {
        const names = path.map(stepName);
        const query = pathQuery(path, hasId ? "__typename id" : "__typename");
        const [admin, asNarrow, asPermitted, foreign] = (await Promise.all(
          [w.admin, narrow, permitted, w.foreignAdmin].map((token) => ask(query, names, token)),
        )) as [Answer, Answer, Answer, Answer];
        const label = names.join(".");
        for (const [who, a] of [["admin", admin], ["narrow", asNarrow], ["permitted", asPermitted], ["foreign", foreign]] as const) {
          if (a.bad.length) crashed.push(`${who} ${label}: ${a.bad.join("; ")}`);
        }
        // A role the narrow member holds is theirs to see (docs/permissions.md); nothing else.
        const narrowSees = hasId ? asNarrow.ids.filter((id) => !narrowOwn.includes(id)).length : asNarrow.found;
        if (narrowSees > 0) leaked.push(`narrow member sees ${narrowSees} through ${label}`);
        // Another organization's admin sees their own roles and membership, never ours (the
        // built-in system roles are everyone's).
        const ours = new Set(admin.ids.filter((id) => !id.startsWith("system:")));
        const foreignSeesOurs = hasId ? foreign.ids.filter((id) => ours.has(id)).length : foreign.found;
        if (foreignSeesOurs > 0) leaked.push(`another organization's admin sees ${foreignSeesOurs} of ours through ${label}`);
        seenByPermitted += asPermitted.found;
        if (!names.some((n) => VIEWER_DEPENDENT.has(n)) && asPermitted.found !== admin.found) {
          missing.push(`${label}: permitted ${asPermitted.found}, admin ${admin.found}`);
        }
      }
      expect(crashed).toEqual([]);
      expect(leaked).toEqual([]);
      expect(missing).toEqual([]);
      expect(seenByPermitted, `the permitted member reaches ${type} somewhere`).toBeGreaterThan(0);
    }, 300_000);
  }
});

describe("who holds a role is member data", () => {
  it("Role.directMembers is null without (member, read), wherever the role is reached, and lists the holders with it", async () => {
    const roleReader = await w.member([
      { resourceType: "role", action: "read" },
      { resourceType: "workspace", action: "read" },
      { resourceType: "workspace", action: "approve" },
    ] as const);
    const memberReader = await w.member([
      { resourceType: "role", action: "read" },
      { resourceType: "member", action: "read" },
    ] as const);
    for (const path of pathsTo("Role", HOPS, argsFrom(w))) {
      const names = [...path.map(stepName), "directMembers"];
      const query = pathQuery(path, "directMembers { email }");
      const res = await t.gql(query, {}, roleReader);
      const emails = valuesAt(res.data, names);
      expect(emails, names.join(".")).toEqual([]);
    }
    const res = await t.gql(`{ roles { key directMembers { email } } }`, {}, memberReader);
    expect(res.errors).toBeUndefined();
    const admin = res.data.roles.find((r: any) => r.key === "admin");
    expect(admin.directMembers.map((u: any) => u.email)).toContain("alice@acme.test");
  });
});

describe("a person's email is member data, wherever a user is reached", () => {
  it("User.email is null without (member, read) on every path to a User but the caller's own, and the address with it", async () => {
    // Every read but (member, read), and the approve and decide paths: a plan's submitter, an
    // approval's and a vote's person, a reservation's holder, who last changed a connection, ….
    const grants = (withMembers: boolean): Parameters<World["member"]>[0] => [
      ...READ_FAMILIES.filter((f) => withMembers || f !== "member").map((f) => ({ resourceType: f, action: "read" as const })),
      ...ALSO,
    ];
    const narrow = await w.member(grants(false));
    const permitted = await w.member(grants(true));
    const own = async (token: string) => (await t.gql(`{ viewer { email } }`, {}, token)).data.viewer.email as string;
    const [narrowEmail, permittedEmail] = await Promise.all([own(narrow), own(permitted)]);
    const paths = pathsTo("User", HOPS, argsFrom(w));
    const leaked: string[] = [];
    const crashed: string[] = [];
    let othersSeenByNarrow = 0;
    let addressesSeenByPermitted = 0;
    for (const path of paths) {
      const names = path.map(stepName);
      const query = pathQuery(path, "id email");
      const [asNarrow, asPermitted] = await Promise.all([t.gql(query, {}, narrow), t.gql(query, {}, permitted)]);
      for (const res of [asNarrow, asPermitted]) {
        for (const e of res.errors ?? []) if (!ALLOWED_CODES.has(e.extensions?.code)) crashed.push(`${names.join(".")}: ${e.message}`);
      }
      for (const u of valuesAt(asNarrow.data, names) as { email: string | null }[]) {
        if (u.email === narrowEmail) continue;
        othersSeenByNarrow++;
        if (u.email !== null) leaked.push(`${names.join(".")}: ${u.email}`);
      }
      for (const u of valuesAt(asPermitted.data, names) as { email: string | null }[]) {
        if (u.email !== permittedEmail && u.email?.includes("@")) addressesSeenByPermitted++;
      }
    }
    expect(crashed).toEqual([]);
    expect(leaked).toEqual([]);
    // The walk reached other people (by id) for the narrow member, and their addresses with (member, read).
    expect(othersSeenByNarrow).toBeGreaterThan(0);
    expect(addressesSeenByPermitted).toBeGreaterThan(0);
    // The caller's own address, on the path that reaches themself.
    const self = await t.gql(`{ viewer { user { email } } }`, {}, narrow);
    expect(self.data.viewer.user.email).toBe(narrowEmail);
  }, 300_000);
});

describe("a denied edge answers null, and only a caller without a token is unauthenticated", () => {
  it("workspace(id){ stack { outputs } } gives a (workspace, read)-only member stack: null, no error, as stack(id) does", async () => {
    const token = await w.member([{ resourceType: "workspace", action: "read" }] as const);
    const res = await t.gql(
      `query($w: ID!, $s: ID!) { workspace(id: $w) { name stack { name labels authzGroups outputs { name value } } resourcePolicies { name } } stack(id: $s) { name } }`,
      { w: w.ids.workspace, s: w.ids.stack },
      token,
    );
    expect(res.errors).toBeUndefined();
    expect(res.data).toEqual({ workspace: { name: "payments-prod", stack: null, resourcePolicies: [] }, stack: null });
  });

  it("a signed-in member who may not read an object is never told UNAUTHENTICATED; a caller with no token is", async () => {
    const token = await w.member([{ resourceType: "workspace", action: "read" }] as const);
    const signedIn = await t.gql(`query($id: ID!) { approvalRequest(id: $id) { id } }`, { id: w.ids.approvalRequest }, token);
    expect(signedIn.data.approvalRequest).toBeNull();
    expect((signedIn.errors ?? []).map((e: any) => e.extensions?.code)).not.toContain("UNAUTHENTICATED");
    const anonymous = await t.gql(`query($id: ID!) { workspace(id: $id) { name } }`, { id: w.ids.workspace }, null);
    expect(anonymous.errors?.[0]?.extensions?.code).toBe("UNAUTHENTICATED");
  });
});
