import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openConnectionCredential } from "../../src/gateway/connection-credential.js";
import { addMember, createOrg, type MemberFixture, type OrgFixture } from "../helpers/fixtures.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { startUpstream, type Upstream } from "../helpers/mcp-upstream.js";

// A connection is an upstream MCP server: its URL, a write-only credential sealed at
// rest, a timeout, and per-tool destructive overrides, over GraphQL. Real PostgreSQL and Redis.

const SECRET = "connection-test-approval-secret-0123456789";
type Setup = { t: TestApp; org: OrgFixture; workspace: { id: string }; reviewer: MemberFixture; adminEmail: string };

async function setUp(env: Record<string, string>): Promise<Setup> {
  // The test upstreams listen on 127.0.0.1.
  const t = await startTestApp({ env: { COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE: "1", ...env } });
  const org = await createOrg(t.db);
  const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: `payments-${t.schemaName}`, authzGroups: ["team-payments"] } });
  const workspace = await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: "payments-prod", environment: "prod", production: true } });
  const reviewer = await addMember(t.db, org.orgId, { role: "approval-reviewer", name: "reviewer" });
  const admin = await t.db.prisma.user.findUniqueOrThrow({ where: { id: org.adminId } });
  return { t, org, workspace, reviewer, adminEmail: admin.email };
}

let w: Setup;
let noSecret: Setup;
beforeAll(async () => {
  w = await setUp({ COUNTERSIGN_APPROVAL_SECRET: SECRET });
  noSecret = await setUp({});
});
afterAll(async () => {
  await w?.t.close();
  await noSecret?.t.close();
});

const admin = () => w.org.adminToken;
const withSecret = async () => w.t;

const FIELDS = `id name provider active url hasCredential timeoutMs toolOverrides { tool destructive updatedBy { email } }`;
const CREATE = `mutation($input: CreateToolConnectionInput!) { createToolConnection(input: $input) { __typename
  ... on MutationCreateToolConnectionSuccess { data { ${FIELDS} } }
  ... on Error { code message } ... on ValidationError { issues { field message } } } }`;
const UPDATE = `mutation($input: UpdateToolConnectionInput!) { updateToolConnection(input: $input) { __typename
  ... on MutationUpdateToolConnectionSuccess { data { ${FIELDS} } }
  ... on Error { code message } ... on ValidationError { issues { field message } } } }`;
const SET_OVERRIDE = `mutation($input: SetToolAnnotationOverrideInput!) { setToolAnnotationOverride(input: $input) { __typename
  ... on MutationSetToolAnnotationOverrideSuccess { data { ${FIELDS} } }
  ... on Error { code message } ... on ValidationError { issues { field message } } } }`;
const CLEAR_OVERRIDE = `mutation($input: ClearToolAnnotationOverrideInput!) { clearToolAnnotationOverride(input: $input) { __typename
  ... on MutationClearToolAnnotationOverrideSuccess { data { ${FIELDS} } }
  ... on Error { code message } } }`;

let counter = 0;
const name = () => `upstream-${++counter}`;

describe("a connection's upstream", () => {
  it("stores the credential sealed under the approval secret and never answers it back", async () => {
    const app = await withSecret();
    const credential = "Bearer upstream-secret-7f3a9c";
    const made = await app.gql(CREATE, { input: { workspaceId: w.workspace.id, name: name(), provider: "github", url: "http://127.0.0.1:9/mcp", credential, timeoutMs: 2500 } }, admin());
    const data = made.data.createToolConnection.data;
    expect(data).toMatchObject({ url: "http://127.0.0.1:9/mcp", hasCredential: true, timeoutMs: 2500 });
    expect(JSON.stringify(made)).not.toContain("upstream-secret");

    const row = await w.t.db.prisma.connection.findUniqueOrThrow({ where: { id: data.id } });
    expect(row.credentialSealed).not.toContain("upstream-secret");
    expect(openConnectionCredential(SECRET, row.credentialSealed!)).toBe(credential);
    expect(openConnectionCredential("another-secret-of-32-characters-or-more", row.credentialSealed!)).toBeNull();

    const listed = await app.gql(`query($w: ID!) { toolConnections(workspaceId: $w) { ${FIELDS} } }`, { w: w.workspace.id }, admin());
    expect(JSON.stringify(listed)).not.toContain("upstream-secret");

    const cleared = await app.gql(UPDATE, { input: { id: data.id, credential: null, url: null, timeoutMs: null } }, admin());
    expect(cleared.data.updateToolConnection.data).toMatchObject({ hasCredential: false, url: null, timeoutMs: null });
    expect((await w.t.db.prisma.connection.findUniqueOrThrow({ where: { id: data.id } })).credentialSealed).toBeNull();
  });

  it("refuses a credential when there is no approval secret to seal it under, and writes nothing", async () => {
    const n = name();
    const r = await noSecret.t.gql(CREATE, { input: { workspaceId: noSecret.workspace.id, name: n, provider: "github", credential: "Bearer x" } }, noSecret.org.adminToken);
    expect(r.data.createToolConnection).toMatchObject({ __typename: "InvalidStateError" });
    expect(await noSecret.t.db.prisma.connection.findFirst({ where: { workspaceId: noSecret.workspace.id, name: n } })).toBeNull();
  });

  it.each([
    ["ftp://example.com/mcp", "must be http or https"],
    ["/relative/mcp", "is not an absolute URL"],
    ["https://user:pw@example.com/mcp", "must not carry credentials"],
    ["https://example.com/mcp#frag", "must not have a fragment"],
    [`https://example.com/${"a".repeat(2100)}`, "at most 2048 characters"],
  ])("refuses the upstream URL %s: %s", async (url, message) => {
    const r = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: name(), provider: "github", url } }, admin());
    expect(r.data.createToolConnection.__typename).toBe("ValidationError");
    expect(r.data.createToolConnection.issues).toEqual([expect.objectContaining({ field: "input.url", message: expect.stringContaining(message) })]);
  });

  it.each([
    [{ timeoutMs: 50 }, "input.timeoutMs"],
    [{ timeoutMs: 300_001 }, "input.timeoutMs"],
    [{ credential: "" }, "input.credential"],
    [{ credential: "Bearer a\nb" }, "input.credential"],
  ])("refuses %o", async (extra, field) => {
    const app = await withSecret();
    const r = await app.gql(CREATE, { input: { workspaceId: w.workspace.id, name: name(), provider: "github", ...extra } }, admin());
    expect(r.data.createToolConnection.__typename).toBe("ValidationError");
    expect(r.data.createToolConnection.issues).toEqual(expect.arrayContaining([expect.objectContaining({ field })]));
  });

  it("changing the URL needs (connection, update); a reviewer cannot, another org cannot even see it", async () => {
    const made = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: name(), provider: "github", url: "https://a.example/mcp" } }, admin());
    const id = made.data.createToolConnection.data.id;
    const denied = await w.t.gql(UPDATE, { input: { id, url: "https://evil.example/mcp" } }, w.reviewer.token);
    expect(denied.data.updateToolConnection.__typename).toBe("PermissionDeniedError");
    const other = await createOrg(w.t.db);
    const foreign = await w.t.gql(UPDATE, { input: { id, url: "https://evil.example/mcp" } }, other.adminToken);
    expect(foreign.data.updateToolConnection.__typename).toBe("NotFoundError");
    expect((await w.t.db.prisma.connection.findUniqueOrThrow({ where: { id } })).url).toBe("https://a.example/mcp");
  });
});

describe("per-tool destructive overrides", () => {
  it("sets, replaces and clears an override by the upstream's tool name, recording who", async () => {
    const made = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: name(), provider: "github" } }, admin());
    const id = made.data.createToolConnection.data.id;
    const set = await w.t.gql(SET_OVERRIDE, { input: { connectionId: id, tool: "cleanup_repo", destructive: true } }, admin());
    expect(set.data.setToolAnnotationOverride.data.toolOverrides).toEqual([{ tool: "cleanup_repo", destructive: true, updatedBy: { email: w.adminEmail } }]);
    const replaced = await w.t.gql(SET_OVERRIDE, { input: { connectionId: id, tool: "cleanup_repo", destructive: false } }, admin());
    expect(replaced.data.setToolAnnotationOverride.data.toolOverrides).toEqual([expect.objectContaining({ tool: "cleanup_repo", destructive: false })]);
    expect(await w.t.db.prisma.connectionToolOverride.count({ where: { connectionId: id } })).toBe(1);

    const cleared = await w.t.gql(CLEAR_OVERRIDE, { input: { connectionId: id, tool: "cleanup_repo" } }, admin());
    expect(cleared.data.clearToolAnnotationOverride.data.toolOverrides).toEqual([]);
    const again = await w.t.gql(CLEAR_OVERRIDE, { input: { connectionId: id, tool: "cleanup_repo" } }, admin());
    expect(again.data.clearToolAnnotationOverride.__typename).toBe("NotFoundError");
  });

  it("needs (connection, update), refuses namespaced or malformed tool names, and hides other orgs' connections", async () => {
    const made = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: name(), provider: "github" } }, admin());
    const id = made.data.createToolConnection.data.id;
    const denied = await w.t.gql(SET_OVERRIDE, { input: { connectionId: id, tool: "delete_repo", destructive: false } }, w.reviewer.token);
    expect(denied.data.setToolAnnotationOverride.__typename).toBe("PermissionDeniedError");
    const bad = await w.t.gql(SET_OVERRIDE, { input: { connectionId: id, tool: "has space", destructive: true } }, admin());
    expect(bad.data.setToolAnnotationOverride).toMatchObject({ __typename: "ValidationError", issues: [expect.objectContaining({ field: "input.tool" })] });
    const other = await createOrg(w.t.db);
    const foreign = await w.t.gql(SET_OVERRIDE, { input: { connectionId: id, tool: "delete_repo", destructive: false } }, other.adminToken);
    expect(foreign.data.setToolAnnotationOverride.__typename).toBe("NotFoundError");
    expect(await w.t.db.prisma.connectionToolOverride.count({ where: { connectionId: id } })).toBe(0);
  });

  it("a list of connections reads every connection's overrides in one statement", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const made = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: name(), provider: "github" } }, admin());
      ids.push(made.data.createToolConnection.data.id);
      await w.t.gql(SET_OVERRIDE, { input: { connectionId: ids[i], tool: `tool_${i}`, destructive: true } }, admin());
    }
    const listed = await w.t.gql(`query($w: ID!) { toolConnections(workspaceId: $w) { id toolOverrides { tool } } }`, { w: w.workspace.id }, admin());
    const byId = new Map(listed.data.toolConnections.map((c: { id: string; toolOverrides: { tool: string }[] }) => [c.id, c.toolOverrides.map((o) => o.tool)]));
    expect(ids.map((id) => byId.get(id))).toEqual([["tool_0"], ["tool_1"], ["tool_2"]]);
  });
});

describe("a connection's tools, as its upstream lists them", () => {
  let upstream: Upstream;
  beforeAll(async () => {
    upstream = await startUpstream({ credential: "Bearer tools-credential" });
  });
  afterAll(async () => upstream?.close());

  const TOOLS = `query($w: ID!) { toolConnections(workspaceId: $w) { id name tools { __typename
    ... on ToolConnectionToolsSuccess { data { name upstreamName destructive destructiveSource readOnlyHint destructiveHint inputSchema } }
    ... on UpstreamUnavailableError { code reason message } } } }`;
  const toolsOf = async (connectionId: string) => {
    const r = await w.t.gql(TOOLS, { w: w.workspace.id }, admin());
    return r.data.toolConnections.find((c: { id: string }) => c.id === connectionId).tools;
  };

  it("lists each tool namespaced by the connection, destructive from its annotations, an override winning, and no hint meaning destructive", async () => {
    const n = name();
    const made = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: n, provider: "github", url: upstream.url, credential: "Bearer tools-credential" } }, admin());
    const id = made.data.createToolConnection.data.id;
    await w.t.gql(SET_OVERRIDE, { input: { connectionId: id, tool: "read_file", destructive: true } }, admin());

    const tools = await toolsOf(id);
    expect(tools.__typename).toBe("ToolConnectionToolsSuccess");
    const byName = Object.fromEntries(tools.data.map((t: { upstreamName: string }) => [t.upstreamName, t]));
    expect(byName["delete_repo"]).toMatchObject({ name: `${n}.delete_repo`, destructive: true, destructiveSource: "ANNOTATION", destructiveHint: true });
    expect(byName["read_file"]).toMatchObject({ name: `${n}.read_file`, destructive: true, destructiveSource: "OVERRIDE", readOnlyHint: true });
    expect(byName["plain_tool"]).toMatchObject({ destructive: true, destructiveSource: "FALLBACK", readOnlyHint: null, destructiveHint: null });
    expect(byName["fails"]).toMatchObject({ destructive: false, destructiveSource: "ANNOTATION" });
    expect(byName["delete_repo"].inputSchema).toMatchObject({ type: "object", properties: { repo: { type: "string" } } });
  });

  it("answers UpstreamUnavailableError, never an empty list, when the upstream cannot be read", async () => {
    const noUrl = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: name(), provider: "github" } }, admin());
    expect(await toolsOf(noUrl.data.createToolConnection.data.id)).toMatchObject({ __typename: "UpstreamUnavailableError", code: "UPSTREAM_UNAVAILABLE", reason: "upstream_not_configured" });

    const wrongCredential = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: name(), provider: "github", url: upstream.url, credential: "Bearer wrong" } }, admin());
    expect(await toolsOf(wrongCredential.data.createToolConnection.data.id)).toMatchObject({ __typename: "UpstreamUnavailableError", reason: "upstream_unavailable" });

    const down = await startUpstream();
    const url = down.url;
    await down.close();
    const gone = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: name(), provider: "github", url, timeoutMs: 1000 } }, admin());
    expect(await toolsOf(gone.data.createToolConnection.data.id)).toMatchObject({ __typename: "UpstreamUnavailableError", reason: "upstream_unavailable" });
  });
});
