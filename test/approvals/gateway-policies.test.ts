import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mintApprovalToken } from "../../src/gateway/approval-token.js";
import { argumentHash } from "../../src/domain/canonical.js";
import { createGateway, RESUME_PATH } from "../../src/gateway/gateway.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { createPostgresGatewayStore } from "../../src/gateway/postgres-store.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { APPROVAL_SECRET, createWorld, SERVICE_TOKEN, type World } from "./world.js";
import { startUpstream, type Upstream } from "../helpers/mcp-upstream.js";

// The production tier, per-workspace Cedar policy sets for the gateway's gate, and the
// simulation query. Through GraphQL (yoga.fetch) and through the gateway library's handleToolCall
// and resume, on the real PostgreSQL and Redis. The world's gateway is given NO fixed gate: it
// reads each workspace's saved set, as Countersign's embedded gateway does.

let w: World;
let foreign: OrgFixture;
let upstream: Upstream;
beforeAll(async () => {
  w = await createWorld({ gateway: { gate: undefined } });
  foreign = await createOrg(w.db);
  // The simulation reads destructiveness from the connection's upstream, as the gateway does:
  // the world's connection runs on its upstream.
  upstream = w.upstream;
});
afterAll(async () => {
  await w?.close();
});

const SAVE = `mutation Save($input: SaveGatewayPolicySetInput!) {
  saveGatewayPolicySet(input: $input) {
    __typename
    ... on MutationSaveGatewayPolicySetSuccess { data { policySet { version isDefault note author { id } rules { id kind explanation } } } }
    ... on ValidationError { issues { field code message } }
    ... on ConflictError { message currentRevision }
    ... on PermissionDeniedError { message missing { resourceType action } }
    ... on NotFoundError { message }
  }
}`;

const SET = `query Set($id: ID!) {
  workspace(id: $id) {
    production
    gatewayPolicySet { version isDefault valid policies namingConvention rules { id effect kind explanation } issues { code message } author { id } }
    gatewayPolicyVersions { version note author { id name } }
  }
}`;

const SIMULATE = `query Sim($input: SimulateGatewayCallInput!) {
  simulateGatewayCall(input: $input) {
    __typename
    ... on QuerySimulateGatewayCallSuccess {
      data {
        decision reason policyIds policySource policyVersion tool destructive destructiveSource environment production argumentHash
        approval { defaultDeny rules { ruleId policyName effect count roleIds userIds roles { id name } users { id } } eligibleReviewers { id name } }
      }
    }
    ... on ValidationError { issues { field code message } }
    ... on NotFoundError { message }
    ... on PermissionDeniedError { message }
  }
}`;

async function save(policies: string, expectedVersion?: number, token = w.org.adminToken, workspaceId = w.workspace.id, note?: string) {
  const r = await w.t.gql(SAVE, { input: { workspaceId, policies, ...(expectedVersion !== undefined ? { expectedVersion } : {}), ...(note ? { note } : {}) } }, token);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data.saveGatewayPolicySet;
}

async function currentVersion(workspaceId = w.workspace.id): Promise<number> {
  const row = await w.db.prisma.gatewayPolicyVersion.findFirst({ where: { workspaceId }, orderBy: { version: "desc" } });
  return row?.version ?? 0;
}

async function simulate(input: Record<string, unknown>, token = w.org.adminToken) {
  const r = await w.t.gql(SIMULATE, { input: { workspaceId: w.workspace.id, ...input } }, token);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data.simulateGatewayCall;
}

/** A workspace of the world's stack with a github connection and an agent key. */
async function workspaceWithKey(name: string, environment: string, production: boolean) {
  const ws = await w.db.prisma.workspace.create({ data: { orgId: w.org.orgId, stackId: w.stack.id, name, environment, production } });
  await w.db.prisma.connection.create({ data: { orgId: w.org.orgId, workspaceId: ws.id, name: "github", provider: "github", url: w.upstream.url } });
  const key = generateVirtualKey();
  await w.db.prisma.virtualKey.create({ data: { orgId: w.org.orgId, workspaceId: ws.id, name: "agent", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: w.org.adminId } });
  const call = (tool: string, repo = `acme/${Math.random().toString(36).slice(2)}`) =>
    w.gateway.handleToolCall({ authorization: `Bearer ${key}`, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: tool, arguments: { repo } } } });
  return { ws, key, call };
}

const denial = (body: unknown) => (body as { error: { data: { reason: string; policy_ids: string[] } } }).error.data;

const CUSTOM = `@id("permit-all")
permit (principal, action, resource);

@id("repo-deletes-needs-approval")
forbid (principal, action, resource == Tool::"github.delete_repo")
when { context.production }
unless { context.approved };

@id("no-org-wipes")
forbid (principal, action, resource == Tool::"github.wipe_org");
`;

describe("the production tier", () => {
  it("follows the environment by default: prod is production, anything else is not; updateWorkspace sets it and the change is published", async () => {
    await w.db.prisma.webhook.create({
      data: { orgId: w.org.orgId, url: "https://hooks.example.com/tier", events: ["workspace.tier_changed", "gateway_policy.saved"], format: "json", secretSealed: "v1.unused" },
    });
    const CREATE = `mutation($input: CreateWorkspaceInput!) { createWorkspace(input: $input) { __typename ... on MutationCreateWorkspaceSuccess { data { id environment production } } } }`;
    const prod = await w.t.gql(CREATE, { input: { stackId: w.stack.id, name: "named-prod", environment: "Prod" } }, w.org.adminToken);
    expect(prod.data.createWorkspace.data).toMatchObject({ environment: "Prod", production: true });
    const created = await w.t.gql(CREATE, { input: { stackId: w.stack.id, name: "named-staging", environment: "staging" } }, w.org.adminToken);
    const ws = created.data.createWorkspace.data;
    expect(ws).toMatchObject({ environment: "staging", production: false });

    const reader = await addMember(w.db, w.org.orgId, { grants: [{ resourceType: "workspace", action: "read" }] });
    const UPDATE = `mutation($input: UpdateWorkspaceInput!) { updateWorkspace(input: $input) { __typename ... on MutationUpdateWorkspaceSuccess { data { production } } ... on PermissionDeniedError { missing { resourceType action } } } }`;
    const refused = await w.t.gql(UPDATE, { input: { id: ws.id, production: true } }, reader.token);
    expect(refused.data.updateWorkspace).toEqual({ __typename: "PermissionDeniedError", missing: { resourceType: "workspace", action: "update" } });

    const updated = await w.t.gql(UPDATE, { input: { id: ws.id, production: true } }, w.org.adminToken);
    expect(updated.data.updateWorkspace).toEqual({ __typename: "MutationUpdateWorkspaceSuccess", data: { production: true } });
    const events = await w.db.prisma.webhookDelivery.findMany({ where: { orgId: w.org.orgId, eventType: "workspace.tier_changed" } });
    expect(events).toHaveLength(1);
    expect((events[0]!.payload as { data: unknown }).data).toEqual({
      workspace: { id: ws.id, name: "named-staging", environment: "staging", production: true },
      previous: { production: false },
      changedBy: { id: w.org.adminId },
    });
    // An update that leaves the tier as it is says nothing.
    await w.t.gql(UPDATE, { input: { id: ws.id, production: true } }, w.org.adminToken);
    expect(await w.db.prisma.webhookDelivery.count({ where: { orgId: w.org.orgId, eventType: "workspace.tier_changed" } })).toBe(1);
  });

  it("a production workspace named staging holds destructive calls", async () => {
    const staging = await workspaceWithKey("payments-staging", "staging", true);
    const held = await staging.call("github.delete_repo");
    expect(held.status).toBe(423);
    expect(held.outcome.kind).toBe("approval_required");
  });

  it("a workspace named prod that is not production runs destructive calls unheld", async () => {
    const notProd = await workspaceWithKey("sandbox-prod", "prod", false);
    const before = w.executions.length;
    const ran = await notProd.call("github.delete_repo");
    expect(ran.outcome).toMatchObject({ kind: "executed" });
    expect(w.executions.length).toBe(before + 1);
  });
});

describe("a workspace's gate policy set", () => {
  it("a workspace with no saved version runs the default set, shown with the naming convention explained", async () => {
    const r = await w.t.gql(SET, { id: w.workspace.id }, w.org.adminToken);
    const set = r.data.workspace.gatewayPolicySet;
    expect(set).toMatchObject({ version: 0, isDefault: true, valid: true, author: null });
    expect(set.rules.map((p: { id: string; kind: string }) => [p.id, p.kind])).toEqual([
      ["permit-all", "PERMIT"],
      ["prod-destructive-needs-approval", "NEEDS_APPROVAL"],
    ]);
    expect(set.namingConvention).toMatch(/forbid whose @id ends in needs-approval makes tickets/);
    expect(set.namingConvention).toMatch(/Any other forbid denies/);
    expect(r.data.workspace.gatewayPolicyVersions).toEqual([]);
  });

  it("a set that cannot be parsed is refused on save with the Cedar error, at its policy", async () => {
    const broken = await save(`@id("permit-all") permit (principal, action, resource);\n@id("broken") forbid (principal, action, resource) when { context.x == };`);
    expect(broken.__typename).toBe("ValidationError");
    expect(broken.issues).toHaveLength(1);
    expect(broken.issues[0]).toMatchObject({ field: "input.policies", code: "cedar_parse_error" });
    expect(broken.issues[0].message).toMatch(/^policy 2 \("broken"\), line 2, column \d+: unexpected token `\}`/);

    const unnamed = await save(`@id("a") permit (principal, action, resource);\npermit (principal, action, resource);\n@id("a") forbid (principal, action, resource);`);
    expect(unnamed.issues.map((i: { code: string }) => i.code)).toEqual(["missing_id", "duplicate_id"]);
    expect(await currentVersion()).toBe(0);
  });

  it("a forbid whose @id ends in needs-approval makes tickets; any other forbid denies", async () => {
    const saved = await save(CUSTOM, 0, w.org.adminToken, w.workspace.id, "hold repo deletes, never wipe an org");
    expect(saved.__typename).toBe("MutationSaveGatewayPolicySetSuccess");
    expect(saved.data.policySet).toMatchObject({ version: 1, isDefault: false, note: "hold repo deletes, never wipe an org", author: { id: w.org.adminId } });
    expect(saved.data.policySet.rules.map((p: { id: string; kind: string }) => [p.id, p.kind])).toEqual([
      ["permit-all", "PERMIT"],
      ["repo-deletes-needs-approval", "NEEDS_APPROVAL"],
      ["no-org-wipes", "DENY"],
    ]);

    const held = await w.callTool({ repo: "acme/custom-held" });
    expect(held.status).toBe(423);
    const wiped = await w.callTool({ org: "acme" }, {}, "github.wipe_org");
    expect(wiped.status).toBe(403);
    expect(denial(wiped.body)).toMatchObject({ reason: "forbidden", policy_ids: ["no-org-wipes"] });
    // The default set would have held this destructive call; the saved one allows what it does not name.
    const before = w.executions.length;
    const purged = await w.callTool({ repo: "acme/cache" }, {}, "github.purge_cache");
    expect(purged.outcome.kind).toBe("executed");
    expect(w.executions.length).toBe(before + 1);

    const versions = await w.t.gql(SET, { id: w.workspace.id }, w.org.adminToken);
    expect(versions.data.workspace.gatewayPolicyVersions).toEqual([{ version: 1, note: "hold repo deletes, never wipe an org", author: { id: w.org.adminId, name: expect.any(String) } }]);
    const event = await w.db.prisma.webhookDelivery.findFirstOrThrow({ where: { orgId: w.org.orgId, eventType: "gateway_policy.saved" } });
    expect((event.payload as { data: unknown }).data).toMatchObject({ version: 1, policyIds: ["permit-all", "repo-deletes-needs-approval", "no-org-wipes"], author: { id: w.org.adminId } });
    expect(JSON.stringify(event.payload)).not.toContain("forbid");
  });

  it("a stale expectedVersion is a ConflictError carrying the current version", async () => {
    const v = await currentVersion();
    const stale = await save(CUSTOM, v - 1);
    expect(stale).toMatchObject({ __typename: "ConflictError", currentRevision: v });
    const omitted = await save(CUSTOM);
    expect(omitted).toMatchObject({ __typename: "ConflictError", currentRevision: v });
    expect(await currentVersion()).toBe(v);
  });

  it("a saved set takes effect on the next call, also in another gateway process", async () => {
    // Another gateway (its own cache, as in another process) on the same database.
    const other = createGateway({ store: createPostgresGatewayStore(w.db.prisma), stream: w.redis, streamKey: w.streamKey, approvalSecret: APPROVAL_SECRET, upstreams: w.upstreams });
    const call = (repo: string) => other.handleToolCall({ authorization: `Bearer ${w.keyPlaintext}`, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.wipe_org", arguments: { repo } } } });
    expect((await call("acme/a")).status).toBe(403); // parsed and cached under the current version

    const v = await currentVersion();
    const saved = await save(`@id("permit-all") permit (principal, action, resource);`, v);
    expect(saved.data.policySet.version).toBe(v + 1);
    expect((await call("acme/b")).outcome.kind).toBe("executed");
    expect((await w.callTool({ org: "acme" }, {}, "github.wipe_org")).outcome.kind).toBe("executed");
    await save(CUSTOM, v + 1);
    expect((await call("acme/c")).status).toBe(403);
  });

  it("a set's text is read and parsed once per version, not once per call", async () => {
    const store = createPostgresGatewayStore(w.db.prisma);
    const loads: string[] = [];
    const counting = { ...store, loadPolicySet: async (id: string) => (loads.push(id), store.loadPolicySet!(id)) };
    const gateway = createGateway({ store: counting, stream: w.redis, streamKey: w.streamKey, approvalSecret: APPROVAL_SECRET, upstreams: w.upstreams });
    const list = () => gateway.handleToolCall({ authorization: `Bearer ${w.keyPlaintext}`, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.list_repos", arguments: {} } } });
    for (let i = 0; i < 3; i++) expect((await list()).outcome.kind).toBe("executed");
    expect(loads).toHaveLength(1);
    await save(CUSTOM, await currentVersion());
    await list();
    await list();
    expect(loads).toHaveLength(2);
    // A workspace that never saved a set reads nothing: the default is parsed once, up front.
    const fresh = await workspaceWithKey("never-saved", "dev", false);
    const before = loads.length;
    await gateway.handleToolCall({ authorization: `Bearer ${fresh.key}`, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.list_repos", arguments: {} } } });
    expect(loads.length).toBe(before);
  });

  it("an unreadable set denies: never an allow, never the default set", async () => {
    const before = w.executions.length;
    // A real database error on the read of the set's text (the key and its version still read).
    await w.db.sql.query(`ALTER TABLE gateway_policy_versions RENAME COLUMN policies TO policies_unreadable`);
    try {
      const fresh = createGateway({ store: createPostgresGatewayStore(w.db.prisma), stream: w.redis, streamKey: w.streamKey, approvalSecret: APPROVAL_SECRET, upstreams: w.upstreams });
      const r = await fresh.handleToolCall({ authorization: `Bearer ${w.keyPlaintext}`, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.list_repos", arguments: {} } } });
      expect(r.status).toBe(403);
      expect(denial(r.body)).toEqual({ error: "denied", reason: "policy_set_unavailable", policy_ids: [] });
    } finally {
      await w.db.sql.query(`ALTER TABLE gateway_policy_versions RENAME COLUMN policies_unreadable TO policies`);
    }
    expect(w.executions.length).toBe(before);
  });

  it("a stored set that does not parse denies every call of its workspace", async () => {
    const v = await currentVersion();
    // Written past the API (by hand, or refused by a later Cedar): the gate never falls back.
    await w.db.prisma.gatewayPolicyVersion.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, version: v + 1, policies: "permit (principal, action", authorId: w.org.adminId } });
    const r = await w.callTool({}, {}, "github.list_repos");
    expect(denial(r.body)).toMatchObject({ reason: "policy_set_invalid" });
    const shown = await w.t.gql(SET, { id: w.workspace.id }, w.org.adminToken);
    expect(shown.data.workspace.gatewayPolicySet).toMatchObject({ version: v + 1, valid: false, rules: [] });
    expect(shown.data.workspace.gatewayPolicySet.issues[0].code).toBe("cedar_parse_error");
    expect((await simulate({ tool: "github.list_repos" })).data).toMatchObject({ decision: "DENY", reason: "policy_set_invalid" });
    await save(CUSTOM, v + 1);
    expect((await w.callTool({}, {}, "github.list_repos")).outcome.kind).toBe("executed");
  });

  it("a new set does not invalidate a held request; resume re-applies the set now in force", async () => {
    const v = await currentVersion();
    const held = await w.callTool({ repo: "acme/resume-under-new-set" });
    expect(held.outcome.kind).toBe("approval_required");
    const approvalId = (held.outcome as { approvalId: string }).approvalId;
    await w.ingest.tick();
    await save(`@id("permit-all") permit (principal, action, resource);\n@id("no-repo-deletes") forbid (principal, action, resource == Tool::"github.delete_repo");`, v);
    expect((await w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id: approvalId } })).status).toBe("pending");

    const record = await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId } });
    const args = { repo: "acme/resume-under-new-set" };
    const token = await mintApprovalToken(APPROVAL_SECRET, { approvalId, workspaceId: record.workspaceId, keyId: record.virtualKeyId, tool: record.tool, argumentHash: argumentHash(args), idempotencyKey: record.idempotencyKey });
    const before = w.executions.length;
    const response = await fetch(`${w.gatewayUrl}${RESUME_PATH}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${SERVICE_TOKEN}` },
      body: JSON.stringify({
        approval_id: approvalId, workspace_id: record.workspaceId, virtual_key_id: record.virtualKeyId, key_hash: hashVirtualKey(w.keyPlaintext),
        connection_id: record.connectionId, tool: record.tool, logical_tool: record.logicalTool, invocation_id: record.invocationId,
        arguments: args, idempotency_key: record.idempotencyKey, token,
      }),
    });
    expect(response.status).toBe(403);
    expect(await response.json()).toMatchObject({ error: "denied", reason: "forbidden", policy_ids: ["no-repo-deletes"] });
    expect(w.executions.length).toBe(before);
    await save(CUSTOM, v + 1);
  });
});

describe("who may read and save a set", () => {
  it("saving is owner-only: (*, *) through a role is not enough; (gateway_policy, read) reads and simulates but cannot save", async () => {
    const everything = await addMember(w.db, w.org.orgId, { grants: [{ resourceType: "*", action: "*" }] });
    const denied = await save(CUSTOM, await currentVersion(), everything.token);
    expect(denied).toMatchObject({ __typename: "PermissionDeniedError", missing: { resourceType: "gateway_policy", action: "manage" } });

    const reader = await addMember(w.db, w.org.orgId, { grants: [{ resourceType: "workspace", action: "read" }, { resourceType: "gateway_policy", action: "read" }] });
    const read = await w.t.gql(SET, { id: w.workspace.id }, reader.token);
    expect(read.data.workspace.gatewayPolicySet.version).toBe(await currentVersion());
    expect((await simulate({ tool: "github.delete_repo" }, reader.token)).__typename).toBe("QuerySimulateGatewayCallSuccess");

    const workspaceOnly = await addMember(w.db, w.org.orgId, { grants: [{ resourceType: "workspace", action: "read" }] });
    const hidden = await w.t.gql(SET, { id: w.workspace.id }, workspaceOnly.token);
    expect(hidden.data.workspace).toMatchObject({ gatewayPolicySet: null, gatewayPolicyVersions: null });
    expect((await simulate({ tool: "github.delete_repo" }, workspaceOnly.token)).__typename).toBe("PermissionDeniedError");
  });

  it("another organization's workspace is NotFound, to save, to simulate and to read", async () => {
    expect((await save(CUSTOM, 0, foreign.adminToken)).__typename).toBe("NotFoundError");
    expect((await simulate({ tool: "github.delete_repo" }, foreign.adminToken)).__typename).toBe("NotFoundError");
    expect((await w.t.gql(SET, { id: w.workspace.id }, foreign.adminToken)).data.workspace).toBeNull();
    const versions = await w.t.gql(`query($id: ID!) { gatewayPolicyVersions(workspaceId: $id) { __typename ... on NotFoundError { message } } }`, { id: w.workspace.id }, foreign.adminToken);
    expect(versions.data.gatewayPolicyVersions.__typename).toBe("NotFoundError");
    expect(await w.db.prisma.gatewayPolicyVersion.count({ where: { authorId: foreign.adminId } })).toBe(0);
  });
});

describe("simulating a call", () => {
  it("destructive comes from the upstream as the gateway reads it: annotations, else destructive; a tool it does not serve, or an upstream it cannot reach, denies", async () => {
    expect((await simulate({ tool: "github.list_repos" })).data).toMatchObject({ destructive: false, destructiveSource: "ANNOTATION" });
    expect((await simulate({ tool: "github.plain_tool", arguments: { x: 1 } })).data).toMatchObject({ destructive: true, destructiveSource: "FALLBACK" });
    expect((await simulate({ tool: "github.no_such_tool" })).data).toMatchObject({ decision: "DENY", reason: "unknown_tool" });
    const down = await startUpstream();
    const url = down.url;
    await down.close();
    await w.db.prisma.connection.update({ where: { id: w.connection.id }, data: { url } });
    try {
      expect((await simulate({ tool: "github.list_repos" })).data).toMatchObject({ decision: "DENY", reason: "upstream_unavailable" });
    } finally {
      await w.db.prisma.connection.update({ where: { id: w.connection.id }, data: { url: upstream.url } });
    }
  });

  it("answers what the gateway does: a held call with the approval-policy rules that would match it and who could review it", async () => {
    const sim = await simulate({ tool: "github.delete_repo", arguments: { repo: "acme/sim" }, virtualKeyId: w.virtualKey.id });
    expect(sim.data).toMatchObject({
      decision: "APPROVAL_REQUIRED",
      policyIds: ["repo-deletes-needs-approval"],
      policySource: "SAVED",
      tool: "github.delete_repo",
      destructive: true,
      destructiveSource: "ANNOTATION",
      environment: "prod",
      production: true,
      argumentHash: argumentHash({ repo: "acme/sim" }),
    });
    expect(sim.data.approval.defaultDeny).toBe(false);
    expect(sim.data.approval.rules).toEqual([
      expect.objectContaining({ ruleId: "prod-github-two", effect: "ALLOW", count: 2, roles: [{ id: "system:approval-reviewer", name: expect.any(String) }], users: [] }),
    ]);
    expect(sim.data.approval.eligibleReviewers.map((r: { id: string }) => r.id).sort()).toEqual(w.reviewers.map((r) => r.userId).sort());
    // And the gateway agrees.
    expect((await w.callTool({ repo: "acme/sim" })).outcome.kind).toBe("approval_required");
  });

  it("a deny names the policy; an allow names none; a draft is simulated without saving", async () => {
    expect((await simulate({ tool: "github.wipe_org" })).data).toMatchObject({ decision: "DENY", reason: "forbidden", policyIds: ["no-org-wipes"] });
    expect((await simulate({ tool: "github.list_repos" })).data).toMatchObject({ decision: "ALLOW", policyIds: [], approval: null });
    const v = await currentVersion();
    const draft = await simulate({ tool: "github.list_repos", policies: `@id("reads-off") forbid (principal, action, resource); @id("p") permit (principal, action, resource);` });
    expect(draft.data).toMatchObject({ decision: "DENY", policyIds: ["reads-off"], policySource: "DRAFT", policyVersion: null });
    expect(await currentVersion()).toBe(v);
    const badDraft = await simulate({ tool: "github.list_repos", policies: "permit (" });
    expect(badDraft.__typename).toBe("ValidationError");
    expect(badDraft.issues[0].field).toBe("input.policies");
  });

  it("the tier, the environment name and destructiveness can be overridden; rules match on the environment NAME", async () => {
    const staging = await simulate({ tool: "github.delete_repo", environment: "staging" });
    // Still production, so held; but no approval rule names staging: the request would close at once.
    expect(staging.data).toMatchObject({ decision: "APPROVAL_REQUIRED", environment: "staging" });
    expect(staging.data.approval).toEqual({ defaultDeny: true, rules: [], eligibleReviewers: [] });
    // The saved approval forbid reads context.production: outside production it does not match.
    expect((await simulate({ tool: "github.delete_repo", production: false })).data).toMatchObject({ decision: "ALLOW", production: false });
    expect((await simulate({ tool: "github.delete_repo", destructive: false })).data).toMatchObject({ decision: "DENY", destructiveSource: "INPUT" });
    expect((await simulate({ tool: "github.delete_repo", approved: true })).data).toMatchObject({ decision: "ALLOW" });
  });

  it("who could review is member data: null without (member, read)", async () => {
    // The rules themselves are approval-policy data (test/leaks/simulation.test.ts): this reader may read them.
    const reader = await addMember(w.db, w.org.orgId, { grants: [{ resourceType: "gateway_policy", action: "read" }, { resourceType: "approval_policy", action: "read" }] });
    const sim = await simulate({ tool: "github.delete_repo" }, reader.token);
    expect(sim.data.approval.rules).toHaveLength(1);
    expect(sim.data.approval.rules[0]).toMatchObject({ roleIds: ["system:approval-reviewer"], roles: null, users: null });
    expect(sim.data.approval.eligibleReviewers).toBeNull();
  });

  it("an unknown tool, a foreign key and malformed arguments are typed errors", async () => {
    const unknown = await simulate({ tool: "gitlab.delete_repo" });
    expect(unknown).toMatchObject({ __typename: "ValidationError", issues: [{ field: "input.tool", code: "unknown_tool" }] });
    const stack = await w.db.prisma.stack.create({ data: { orgId: foreign.orgId, name: "theirs" } });
    const ws = await w.db.prisma.workspace.create({ data: { orgId: foreign.orgId, stackId: stack.id, name: "theirs-prod", environment: "prod", production: true } });
    const key = generateVirtualKey();
    const theirs = await w.db.prisma.virtualKey.create({ data: { orgId: foreign.orgId, workspaceId: ws.id, name: "agent", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: foreign.adminId } });
    expect((await simulate({ tool: "github.delete_repo", virtualKeyId: theirs.id })).__typename).toBe("NotFoundError");
    expect((await simulate({ tool: "github.delete_repo", arguments: [1, 2] })).__typename).toBe("ValidationError");
  });
});

describe("reading many sets", () => {
  it("a workspace list selecting each set in force and its history costs the same statements for two workspaces as for five", async () => {
    const LIST = `{ workspaces(first: 10) { edges { node { name gatewayPolicySet { version isDefault rules { id kind } author { name } } gatewayPolicyVersions(first: 2) { version author { name } } } } } }`;
    const org = await createOrg(w.db);
    const stack = await w.db.prisma.stack.create({ data: { orgId: org.orgId, name: "many" } });
    const addWorkspaces = async (n: number, from: number) => {
      for (let i = from; i < from + n; i++) {
        const ws = await w.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: `many-${i}`, production: true } });
        await w.db.prisma.gatewayPolicyVersion.create({ data: { orgId: org.orgId, workspaceId: ws.id, version: 1, policies: CUSTOM, authorId: org.adminId } });
      }
    };
    const statements = async () => {
      await w.t.gql(LIST, {}, org.adminToken);
      const before = w.db.statementCount();
      const r = await w.t.gql(LIST, {}, org.adminToken);
      expect(r.errors).toBeUndefined();
      return {
        count: w.db.statementCount() - before,
        sets: r.data.workspaces.edges.map((e: any) => e.node.gatewayPolicySet.version),
        histories: r.data.workspaces.edges.map((e: any) => e.node.gatewayPolicyVersions.map((v: any) => v.version)),
      };
    };
    await addWorkspaces(2, 0);
    const two = await statements();
    await addWorkspaces(3, 2);
    const five = await statements();
    expect(two.sets).toEqual([1, 1]);
    expect(five.sets).toEqual([1, 1, 1, 1, 1]);
    expect(five.histories).toEqual([[1], [1], [1], [1], [1]]);
    expect(five.count).toBe(two.count);
  });
});

describe("the check API knows the family", () => {
  it("(gateway_policy, manage) on a workspace's id: the owner passes, (*, *) through a role does not; (gateway_policy, read) is an ordinary grant", async () => {
    const everything = await addMember(w.db, w.org.orgId, { grants: [{ resourceType: "*", action: "*" }] });
    const reader = await addMember(w.db, w.org.orgId, { grants: [{ resourceType: "gateway_policy", action: "read", resourcePattern: "payments-%" }] });
    const r = await w.t.gql(
      `query($checks: [PermissionCheckInput!]!) { checkPermissions(checks: $checks) { __typename ... on QueryCheckPermissionsSuccess { data { allowed decision } } } }`,
      {
        checks: [
          { principalId: w.org.adminId, resourceType: "gateway_policy", action: "manage", resourceId: w.workspace.id },
          { principalId: everything.userId, resourceType: "gateway_policy", action: "manage", resourceId: w.workspace.id },
          { principalId: reader.userId, resourceType: "gateway_policy", action: "read", resourceId: w.workspace.id },
          { principalId: reader.userId, resourceType: "gateway_policy", action: "manage", resourceId: w.workspace.id },
        ],
      },
      w.org.adminToken,
    );
    expect(r.data.checkPermissions.data).toEqual([
      { allowed: true, decision: "SUPER_ADMIN" },
      { allowed: false, decision: "NO_GRANT" },
      { allowed: true, decision: "GRANTED" },
      { allowed: false, decision: "NO_GRANT" },
    ]);
  });
});
