// A connection's credential never follows its URL: a secret is sent only to the upstream it was
// given for. Two real HTTP receivers: the original upstream (a real MCP server that requires the
// credential) and a new host that records every Authorization header it is sent. Real PostgreSQL
// and Redis underneath.
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { startUpstream, type Upstream } from "../helpers/mcp-upstream.js";

const SECRET = "hold-authority-test-approval-secret-0123456789";
const OLD_CREDENTIAL = "Bearer old-upstream-secret-5e1d";
const NEW_CREDENTIAL = "Bearer new-upstream-secret-9a4c";

let t: TestApp;
let org: OrgFixture;
let workspaceId: string;
let original: Upstream;
let receiver: { url: string; seen: IncomingHttpHeaders[]; close(): Promise<void> };

/** A plain HTTP server that records the headers of every request and answers 401. */
async function recordingReceiver() {
  const seen: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    seen.push({ ...req.headers, "x-path": `${req.method} ${req.url}` });
    req.resume();
    req.on("end", () => res.writeHead(401, { "content-type": "application/json" }).end('{"error":"unauthorized"}'));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    seen,
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

beforeAll(async () => {
  t = await startTestApp({ env: { COUNTERSIGN_APPROVAL_SECRET: SECRET, COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE: "1" } });
  org = await createOrg(t.db);
  const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: `payments-${t.schemaName}`, authzGroups: [] } });
  workspaceId = (await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: "payments-prod", environment: "prod", production: true } })).id;
  original = await startUpstream({ credential: OLD_CREDENTIAL });
  receiver = await recordingReceiver();
});
afterAll(async () => {
  await original?.close();
  await receiver?.close();
  await t?.close();
});

const FIELDS = `id url hasCredential`;
const CREATE = `mutation($input: CreateToolConnectionInput!) { r: createToolConnection(input: $input) { __typename ... on MutationCreateToolConnectionSuccess { data { ${FIELDS} } } ... on Error { code message } } }`;
const UPDATE = `mutation($input: UpdateToolConnectionInput!) { r: updateToolConnection(input: $input) { __typename ... on MutationUpdateToolConnectionSuccess { data { ${FIELDS} } } ... on Error { code message } } }`;
const TOOLS = `query($w: ID!) { toolConnections(workspaceId: $w) { id tools { __typename ... on ToolConnectionToolsSuccess { data { name } } ... on Error { code } } } }`;

async function tools(connectionId: string) {
  const res = await t.gql(TOOLS, { w: workspaceId }, org.adminToken);
  return res.data.toolConnections.find((c: { id: string }) => c.id === connectionId).tools;
}

let n = 0;
async function connectedToOriginal() {
  const made = await t.gql(CREATE, { input: { workspaceId, name: `gh-${++n}`, provider: "github", url: original.url, credential: OLD_CREDENTIAL } }, org.adminToken);
  const id = made.data.r.data.id as string;
  // The original upstream accepts only its credential: a tools read proves it was sent there.
  expect((await tools(id)).__typename).toMatch(/Success$/);
  return id;
}

/** The receiver's URL for one connection (the tools read lists every connection of the workspace). */
const receiverUrl = (id: string) => receiver.url.replace(/\/mcp$/, `/mcp-${id}`);
/** The Authorization headers the receiver was sent for one connection. */
const authorizations = (id: string) => receiver.seen.filter((h) => h["x-path"] === `POST /mcp-${id}`).map((h) => h.authorization ?? null);

describe("a connection's credential and its URL", () => {
  it("a new url without a credential clears the stored one: the new host never sees the old credential", async () => {
    const id = await connectedToOriginal();
    const moved = await t.gql(UPDATE, { input: { id, url: receiverUrl(id) } }, org.adminToken);
    expect(moved.data.r).toMatchObject({ __typename: "MutationUpdateToolConnectionSuccess", data: { url: receiverUrl(id), hasCredential: false } });
    expect((await tools(id)).__typename).not.toMatch(/Success$/); // the receiver answers 401
    const sent = authorizations(id);
    expect(sent.length).toBeGreaterThan(0);
    expect(sent).toEqual(sent.map(() => null));
    expect(JSON.stringify(receiver.seen)).not.toContain("old-upstream-secret");
    expect((await t.db.prisma.connection.findUniqueOrThrow({ where: { id } })).credentialSealed).toBeNull();
  });

  it("a new url with a credential stores that one: the new host sees only it", async () => {
    const id = await connectedToOriginal();
    const moved = await t.gql(UPDATE, { input: { id, url: receiverUrl(id), credential: NEW_CREDENTIAL } }, org.adminToken);
    expect(moved.data.r).toMatchObject({ __typename: "MutationUpdateToolConnectionSuccess", data: { hasCredential: true } });
    await tools(id);
    const sent = authorizations(id);
    expect(sent.length).toBeGreaterThan(0);
    expect(new Set(sent)).toEqual(new Set([NEW_CREDENTIAL]));
  });

  it("the change is recorded with who, when and the old and new host, never the secret", async () => {
    const id = await connectedToOriginal();
    await t.gql(UPDATE, { input: { id, url: receiverUrl(id) } }, org.adminToken);
    const records = await t.db.prisma.holdAuthorityChange.findMany({ where: { workspaceId, kind: "connection.url_changed", subject: `gh-${n}` } });
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      actorUserId: org.adminId,
      before: { urlHost: new URL(original.url).host },
      after: { urlHost: new URL(receiver.url).host, credential: "cleared" },
    });
    expect(records[0]!.createdAt).toBeInstanceOf(Date);
    expect(JSON.stringify(records)).not.toMatch(/secret|Bearer|\/mcp/);
  });

  it("a change that keeps the url keeps the credential (timeout, active)", async () => {
    const id = await connectedToOriginal();
    const same = await t.gql(UPDATE, { input: { id, url: original.url, timeoutMs: 4000, active: true } }, org.adminToken);
    expect(same.data.r).toMatchObject({ data: { hasCredential: true } });
    expect((await tools(id)).__typename).toMatch(/Success$/);
  });
});
