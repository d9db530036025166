// A hold is lifted only by the authority that placed it. Generated from the product's own list of
// hold-lifting changes (HOLD_LIFTING_CHANGES, src/domain/hold-authority.ts) × five roles: each
// change is attempted over GraphQL by the owner, an admin, a connection editor, a workspace-scoped
// role and a plain member. Only the owner succeeds; each success leaves exactly one record and one
// hold_authority.changed webhook event; each refusal leaves neither, and the destructive
// production call stays held — proven with a real gateway call against a real upstream MCP server
// on real PostgreSQL and Redis (test/approvals/world.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HOLD_LIFTING_CHANGES, HOLD_LIFTING_KINDS, type HoldLiftingKind } from "../../src/domain/hold-authority.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { createUpstreamPool } from "../../src/gateway/upstream.js";
import type { Prisma } from "../../src/generated/prisma/client.js";
import { addMember, like, type MemberFixture } from "../helpers/fixtures.js";
import { startUpstream, type Upstream } from "../helpers/mcp-upstream.js";
import { APPROVAL_SECRET, createWorld, TWO_REVIEWERS, type World } from "../approvals/world.js";

let w: World;
let upstream: Upstream;
// The upstreams run on 127.0.0.1: the operator allows private addresses for them here.
const pool = createUpstreamPool({ approvalSecret: APPROVAL_SECRET, addresses: { allowPrivate: true }, defaultTimeoutMs: 5_000 });
const roles: Record<string, MemberFixture> = {};

beforeAll(async () => {
  upstream = await startUpstream();
  w = await createWorld({ gateway: { upstreams: pool } });
  const { db, org } = w;
  roles["owner"] = { userId: org.adminId, token: org.adminToken }; // the organization's creator: a super admin
  roles["admin"] = await addMember(db, org.orgId, { role: "admin", name: "admin (not owner)" });
  roles["connection editor"] = await addMember(db, org.orgId, {
    name: "connection editor",
    grants: [
      { resourceType: "workspace", action: "read" },
      { resourceType: "connection", action: "read" },
      { resourceType: "connection", action: "update" },
    ],
  });
  const scoped = like("hold-*");
  roles["workspace-scoped role"] = await addMember(db, org.orgId, {
    name: "workspace-scoped",
    grants: [
      { resourceType: "stack", action: "read" },
      ...(["workspace", "connection", "approval_policy", "gateway_policy", "hold_authority", "virtual_key"] as const).map((resourceType) => ({
        resourceType,
        action: "*" as const,
        resourcePattern: scoped,
      })),
    ],
  });
  roles["member"] = await addMember(db, org.orgId, { name: "member" });
  await db.prisma.webhook.create({
    data: { orgId: org.orgId, url: "https://hooks.example.com/hold", events: ["hold_authority.changed"], format: "json", secretSealed: "unused", createdById: org.adminId },
  });
}, 60_000);
afterAll(async () => {
  await pool.close();
  await upstream?.close();
  await w?.close();
});

/** One prod workspace as the issue describes it: production, a connection to the real upstream, a key, a destructive override, an approval policy. */
let n = 0;
async function prodWorkspace() {
  const { db, org, stack } = w;
  n++;
  const workspace = await db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: `hold-${n}`, environment: "prod", production: true } });
  const connection = await db.prisma.connection.create({ data: { orgId: org.orgId, workspaceId: workspace.id, name: "github", provider: "github", url: upstream.url } });
  await db.prisma.connectionToolOverride.create({ data: { orgId: org.orgId, connectionId: connection.id, tool: "delete_repo", destructive: true, updatedById: org.adminId } });
  const key = generateVirtualKey();
  await db.prisma.virtualKey.create({
    data: { orgId: org.orgId, workspaceId: workspace.id, name: "agent", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: org.adminId },
  });
  const policy = await db.prisma.approvalPolicy.create({
    data: { orgId: org.orgId, workspaceId: workspace.id, name: "two reviewers", rules: TWO_REVIEWERS as unknown as Prisma.InputJsonValue },
  });
  let calls = 0;
  /** The destructive call through the gateway, as the agent makes it. */
  const callDeleteRepo = () =>
    w.gateway.handleToolCall({
      authorization: `Bearer ${key}`,
      body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: `acme/${workspace.name}-${++calls}` } } },
    });
  return { workspace, connection, policy, callDeleteRepo };
}
type Fixture = Awaited<ReturnType<typeof prodWorkspace>>;

const RESULT = `__typename ... on Error { code message } ... on PermissionDeniedError { missing { resourceType action } }`;
const m = (name: string, input: string) => `mutation($input: ${input}!) { r: ${name}(input: $input) { ${RESULT} } }`;

interface Scenario {
  /** The change, attempted by `role` (distinct per attempt where the change creates something). */
  attempt(f: Fixture, role: string): Promise<Record<string, unknown>>;
  /** After the owner made it, the destructive call runs unheld. */
  liftsTheHold?: boolean;
}

const gql = async (query: string, input: Record<string, unknown>, token: string) => {
  const res = await w.t.gql(query, { input }, token);
  if (res.errors) throw new Error(JSON.stringify(res.errors));
  return res.data.r as Record<string, unknown>;
};
const as = (role: string) => roles[role]!.token;

/** How each row of the product's table is made, through the API a client uses. */
const SCENARIOS: Record<HoldLiftingKind, Scenario> = {
  "workspace.tier_off": {
    attempt: (f, role) => gql(m("updateWorkspace", "UpdateWorkspaceInput"), { id: f.workspace.id, production: false }, as(role)),
    liftsTheHold: true,
  },
  "workspace.created_unheld": {
    attempt: (_f, role) =>
      gql(m("createWorkspace", "CreateWorkspaceInput"), { stackId: w.stack.id, name: `hold-new-${++n}-${role.replace(/\W+/g, "-")}`, environment: "PROD", production: false }, as(role)),
  },
  "workspace.environment_unheld": {
    attempt: async (f, role) => {
      const dev = await w.db.prisma.workspace.create({ data: { orgId: w.org.orgId, stackId: w.stack.id, name: `hold-dev-${++n}`, environment: "dev", production: false } });
      return gql(m("updateWorkspace", "UpdateWorkspaceInput"), { id: dev.id, environment: "production", production: false }, as(role));
    },
  },
  "workspace.self_approval_allowed": {
    attempt: async (f, role) => {
      await w.db.prisma.workspace.update({ where: { id: f.workspace.id }, data: { preventSelfApproval: true } });
      return gql(m("updateWorkspace", "UpdateWorkspaceInput"), { id: f.workspace.id, preventSelfApproval: false }, as(role));
    },
  },
  "tool_override.not_destructive": {
    attempt: (f, role) => gql(m("setToolAnnotationOverride", "SetToolAnnotationOverrideInput"), { connectionId: f.connection.id, tool: "delete_repo", destructive: false }, as(role)),
    liftsTheHold: true,
  },
  "tool_override.cleared": {
    attempt: (f, role) => gql(m("clearToolAnnotationOverride", "ClearToolAnnotationOverrideInput"), { connectionId: f.connection.id, tool: "delete_repo" }, as(role)),
  },
  "gateway_policy.saved": {
    attempt: (f, role) =>
      gql(m("saveGatewayPolicySet", "SaveGatewayPolicySetInput"), { workspaceId: f.workspace.id, policies: `@id("permit-all")\npermit (principal, action, resource);\n`, expectedVersion: 0 }, as(role)),
  },
  "approval_policy.disabled": {
    attempt: (f, role) => gql(m("updateApprovalPolicy", "UpdateApprovalPolicyInput"), { id: f.policy.id, expectedRevision: f.policy.revision, enabled: false }, as(role)),
  },
  "approval_policy.deleted": {
    attempt: (f, role) => gql(m("deleteApprovalPolicy", "DeleteApprovalPolicyInput"), { id: f.policy.id, expectedRevision: f.policy.revision }, as(role)),
  },
  "connection.url_changed": {
    attempt: (f, role) => gql(m("updateToolConnection", "UpdateToolConnectionInput"), { id: f.connection.id, url: "https://attacker.example.com/mcp" }, as(role)),
  },
  "connection.provider_changed": {
    attempt: (f, role) => gql(m("updateToolConnection", "UpdateToolConnectionInput"), { id: f.connection.id, provider: "gitlab" }, as(role)),
  },
  "connection.renamed": {
    attempt: (f, role) => gql(m("updateToolConnection", "UpdateToolConnectionInput"), { id: f.connection.id, name: "github-old" }, as(role)),
  },
};

const NON_OWNERS = ["admin", "connection editor", "workspace-scoped role", "member"] as const;

async function trail() {
  const [records, events] = await Promise.all([
    w.db.prisma.holdAuthorityChange.findMany({ where: { orgId: w.org.orgId }, orderBy: { createdAt: "asc" } }),
    w.db.prisma.webhookDelivery.findMany({ where: { orgId: w.org.orgId, eventType: "hold_authority.changed" }, orderBy: { createdAt: "asc" } }),
  ]);
  return { records, events };
}

describe("hold-lifting changes × roles", () => {
  it("every row of the product's table has a scenario here, and nothing else does", () => {
    expect(Object.keys(SCENARIOS).sort()).toEqual([...HOLD_LIFTING_KINDS].sort());
    expect(HOLD_LIFTING_KINDS.length).toBeGreaterThanOrEqual(11);
  });

  for (const kind of HOLD_LIFTING_KINDS) {
    describe(`${kind} (${HOLD_LIFTING_CHANGES[kind].mutation})`, () => {
      for (const role of NON_OWNERS) {
        it(`refused for the ${role}: no record, no event, the destructive production call stays held`, async () => {
          const f = await prodWorkspace();
          expect((await f.callDeleteRepo()).outcome.kind).toBe("approval_required");
          const before = await trail();
          const answer = await SCENARIOS[kind].attempt(f, role);
          expect(["PermissionDeniedError", "NotFoundError"], JSON.stringify(answer)).toContain(answer["__typename"]);
          // The admin holds (*, *): only the owner-only hold authority stops it.
          if (role === "admin") expect(answer).toMatchObject({ __typename: "PermissionDeniedError", missing: { action: expect.stringMatching(/^(change|manage)$/) } });
          const after = await trail();
          expect(after.records).toHaveLength(before.records.length);
          expect(after.events).toHaveLength(before.events.length);
          const held = await f.callDeleteRepo();
          expect(held.outcome.kind, JSON.stringify(held.body)).toBe("approval_required");
          expect(upstream.calls.get("delete_repo") ?? 0).toBe(0);
        });
      }

      it("made by the owner: exactly one record and one hold_authority.changed event, naming who", async () => {
        const f = await prodWorkspace();
        const before = await trail();
        const answer = await SCENARIOS[kind].attempt(f, "owner");
        expect(String(answer["__typename"]), JSON.stringify(answer)).toMatch(/^Mutation.*Success$/);
        const after = await trail();
        const records = after.records.slice(before.records.length);
        const events = after.events.slice(before.events.length);
        expect(records).toHaveLength(1);
        expect(records[0]).toMatchObject({ kind, actorUserId: w.org.adminId });
        expect(events).toHaveLength(1);
        expect(events[0]!.payload).toMatchObject({
          type: "hold_authority.changed",
          data: { change: { id: records[0]!.id, kind }, workspace: { id: records[0]!.workspaceId }, changedBy: { id: w.org.adminId } },
        });
        if (SCENARIOS[kind].liftsTheHold) {
          const ran = await f.callDeleteRepo();
          expect(ran.outcome.kind, JSON.stringify(ran.body)).toBe("executed");
          upstream.calls.delete("delete_repo");
        }
      });
    });
  }
});

describe("the record", () => {
  it("is read-only over GraphQL for those holding (hold_authority, read); others get null", async () => {
    const f = await prodWorkspace();
    await SCENARIOS["workspace.tier_off"].attempt(f, "owner");
    const Q = `query($id: ID!) { workspace(id: $id) { ... on Workspace { holdAuthorityChanges { kind subject before after changedBy { id } createdAt } } } }`;
    const read = async (token: string) => (await w.t.gql(Q, { id: f.workspace.id }, token)).data;
    const owner = await read(as("owner"));
    expect(JSON.stringify(owner)).toContain("WORKSPACE_TIER_OFF");
    const admin = await read(as("admin"));
    expect(admin).toEqual(owner);
    expect(JSON.stringify(await read(as("connection editor")))).toContain('"holdAuthorityChanges":null');
  });

  it("is append-only: the database refuses UPDATE and DELETE", async () => {
    await SCENARIOS["workspace.tier_off"].attempt(await prodWorkspace(), "owner");
    const row = (await trail()).records.at(-1);
    await expect(w.db.sql.query(`UPDATE hold_authority_changes SET subject = 'x' WHERE id = $1`, [row!.id])).rejects.toThrow(/append-only/);
    await expect(w.db.sql.query(`DELETE FROM hold_authority_changes WHERE id = $1`, [row!.id])).rejects.toThrow(/append-only/);
  });
});

describe("the tier's default follows the environment (no authority needed to hold more)", () => {
  const CREATE = `mutation($input: CreateWorkspaceInput!) { r: createWorkspace(input: $input) { __typename ... on MutationCreateWorkspaceSuccess { data { id production } } ... on Error { code } } }`;
  const UPDATE = `mutation($input: UpdateWorkspaceInput!) { r: updateWorkspace(input: $input) { __typename ... on MutationUpdateWorkspaceSuccess { data { id environment production } } ... on Error { code } } }`;

  it("an admin creates a prod/production workspace (any case): production, nothing recorded", async () => {
    const before = await trail();
    for (const environment of ["prod", "PROD", "Production", "production"]) {
      const r = await w.t.gql(CREATE, { input: { stackId: w.stack.id, name: `hold-default-${++n}`, environment } }, as("admin"));
      expect(r.data.r, environment).toMatchObject({ __typename: "MutationCreateWorkspaceSuccess", data: { production: true } });
    }
    for (const environment of ["staging", "prod-eu", "preprod"]) {
      const r = await w.t.gql(CREATE, { input: { stackId: w.stack.id, name: `hold-default-${++n}`, environment } }, as("admin"));
      expect(r.data.r, environment).toMatchObject({ data: { production: false } });
    }
    expect((await trail()).records).toHaveLength(before.records.length);
  });

  it("an environment that becomes prod turns the tier on; one that leaves prod keeps it on", async () => {
    const dev = await w.t.gql(CREATE, { input: { stackId: w.stack.id, name: `hold-default-${++n}`, environment: "dev" } }, as("admin"));
    const id = dev.data.r.data.id;
    expect((await w.t.gql(UPDATE, { input: { id, environment: "Prod" } }, as("admin"))).data.r).toMatchObject({ data: { environment: "Prod", production: true } });
    expect((await w.t.gql(UPDATE, { input: { id, environment: "dev" } }, as("admin"))).data.r).toMatchObject({ data: { environment: "dev", production: true } });
  });
});
