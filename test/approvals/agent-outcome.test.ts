import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyApprovalToken } from "../../src/gateway/approval-token.js";
import { argumentHash } from "../../src/domain/canonical.js";
import { APPROVAL_CLOSED_JSONRPC_CODE, APPROVAL_REQUIRED_JSONRPC_CODE } from "../../src/gateway/errors.js";
import { APPROVAL_ID_HEADER, APPROVAL_TOKEN_HEADER, derivedIdempotencyKey, type ApprovalStatusBody } from "../../src/gateway/gateway.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { createOrg } from "../helpers/fixtures.js";
import { APPROVAL_SECRET, createWorld, heldAndFiled, vote, type World } from "./world.js";

// The agent's side of the outcome: with its virtual key the agent reads its request's
// status over GET /v1/approvals/{id} — approved with the token for the seed's re-issue — and the
// identical retry of a closed request is answered with its status, not held again. Real
// PostgreSQL, Redis and HTTP.

let w: World;
beforeAll(async () => {
  w = await createWorld();
});
afterAll(async () => w?.close());

const UPDATE_POLICY = `mutation($input: UpdateApprovalPolicyInput!) { updateApprovalPolicy(input: $input) { __typename
  ... on MutationUpdateApprovalPolicySuccess { data { invalidatedRequestIds } } ... on Error { code message } } }`;

async function statusOf(id: string, key = w.keyPlaintext): Promise<{ status: number; body: ApprovalStatusBody & { error?: string } }> {
  const res = await fetch(`${w.gatewayUrl}/v1/approvals/${encodeURIComponent(id)}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  return { status: res.status, body: (await res.json()) as ApprovalStatusBody & { error?: string } };
}

async function postCall(repo: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${w.gatewayUrl}/v1/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${w.keyPlaintext}`, ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo } } }),
  });
  return { status: res.status, body: (await res.json()) as { error?: { code: number; message: string; data: Record<string, unknown> }; result?: { structuredContent: unknown } } };
}

async function held(repo: string, headers: Record<string, string> = {}): Promise<string> {
  const answer = await postCall(repo, headers);
  expect(answer.status).toBe(423);
  return String(answer.body.error!.data["approval_id"]);
}

const runs = (id: string) => w.executions.filter((e) => e.approvalId === id).length;

describe("the agent reads its request's status", () => {
  it("pending: held and not yet filed, then filed; the plain retry gets the same ticket", async () => {
    const id = await held("acme/pending");
    expect(await statusOf(id)).toMatchObject({ status: 200, body: { approval_id: id, status: "pending", tool: "github.delete_repo", execution_status: "none", decided_at: null } });
    await w.ingest.tick();
    const read = await statusOf(id);
    expect(read.body).toMatchObject({ status: "pending", execution_status: "none" });
    expect(read.body.approval_token).toBeUndefined();
    expect(await held("acme/pending")).toBe(id);
  });

  it("approved: carries an approval token bound to the call; the agent's re-issue with it executes once, and delivery only replays", async () => {
    const id = await heldAndFiled(w, { repo: "acme/approved" });
    await vote(w, w.reviewers[0]!, id);
    await vote(w, w.reviewers[1]!, id);
    const { status, body } = await statusOf(id);
    expect(status).toBe(200);
    expect(body).toMatchObject({ status: "approved", execution_status: "pending" });
    expect(body.approval_token).toEqual(expect.any(String));
    expect(Date.parse(body.approval_token_expires_at!)).toBeGreaterThan(Date.now());
    const verified = await verifyApprovalToken(APPROVAL_SECRET, body.approval_token!);
    const hash = argumentHash({ repo: "acme/approved" });
    expect(verified).toMatchObject({
      ok: true,
      claims: { approvalId: id, workspaceId: w.workspace.id, keyId: w.virtualKey.id, tool: "github.delete_repo", argumentHash: hash, idempotencyKey: derivedIdempotencyKey({ id: w.virtualKey.id, workspaceId: w.workspace.id }, "github.delete_repo", hash) },
    });

    const reissued = await w.callTool({ repo: "acme/approved" }, { approvalId: id, approvalToken: body.approval_token! });
    expect(reissued.outcome).toMatchObject({ kind: "executed", replayed: false, approvalId: id });
    expect(runs(id)).toBe(1);
    expect(await w.delivery.tick()).toContainEqual({ kind: "delivered", replayed: true });
    expect(runs(id)).toBe(1);
    expect((await statusOf(id)).body).toMatchObject({ status: "approved", execution_status: "executed" });
    // The plain retry after it ran is answered with the stored result.
    const again = await postCall("acme/approved");
    expect(again.status).toBe(200);
    expect(again.body.result?.structuredContent).toEqual({ deleted: "acme/approved" });
    expect(runs(id)).toBe(1);
  });

  it("approved but no longer executable (frozen workspace): no token, the reason instead", async () => {
    const id = await heldAndFiled(w, { repo: "acme/frozen" });
    await vote(w, w.reviewers[0]!, id);
    await vote(w, w.reviewers[1]!, id);
    await w.db.prisma.workspace.update({ where: { id: w.workspace.id }, data: { frozen: true } });
    try {
      const { body } = await statusOf(id);
      expect(body).toMatchObject({ status: "approved", reason: "workspace_frozen" });
      expect(body.approval_token).toBeUndefined();
    } finally {
      await w.db.prisma.workspace.update({ where: { id: w.workspace.id }, data: { frozen: false } });
    }
    expect((await statusOf(id)).body.approval_token).toEqual(expect.any(String));
  });

  it("another key — same workspace or another org — reads 404, the same as a missing id; no key reads 401", async () => {
    const id = await held("acme/foreign");
    const sibling = generateVirtualKey();
    await w.db.prisma.virtualKey.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: "sibling", keyHash: hashVirtualKey(sibling), prefix: virtualKeyPrefix(sibling), createdById: w.org.adminId } });
    const other = await createOrg(w.db);
    const stack = await w.db.prisma.stack.create({ data: { orgId: other.orgId, name: "other" } });
    const ws = await w.db.prisma.workspace.create({ data: { orgId: other.orgId, stackId: stack.id, name: "other-prod", environment: "prod", production: true } });
    const foreign = generateVirtualKey();
    await w.db.prisma.virtualKey.create({ data: { orgId: other.orgId, workspaceId: ws.id, name: "foreign", keyHash: hashVirtualKey(foreign), prefix: virtualKeyPrefix(foreign), createdById: other.adminId } });

    const missing = await statusOf("apr_00000000-0000-0000-0000-000000000000");
    expect(missing.status).toBe(404);
    for (const key of [sibling, foreign]) {
      const read = await statusOf(id, key);
      expect(read).toEqual(missing);
    }
    await w.ingest.tick(); // filed: still only its own key reads it
    expect(await statusOf(id, foreign)).toEqual(missing);
    expect(await statusOf("not an id/..", w.keyPlaintext)).toEqual(missing);
    expect((await statusOf(id, "")).status).toBe(401);
    expect((await statusOf(id, "vk_nope")).status).toBe(401);
  });
});

describe("a closed request answers the identical retry with its status", () => {
  async function expectClosed(repo: string, id: string, status: string, reason?: string) {
    expect((await statusOf(id)).body).toMatchObject({ status, ...(reason ? { reason } : {}) });
    const retry = await postCall(repo);
    expect(retry.status).toBe(409);
    expect(retry.body.error).toMatchObject({ code: APPROVAL_CLOSED_JSONRPC_CODE, message: "approval_closed", data: { error: "approval_closed", status, approval_id: id, tool: "github.delete_repo", retryable: false, ...(reason ? { reason } : {}) } });
    // A new idempotency key opens a new request.
    const fresh = await postCall(repo, { "idempotency-key": `new-${status}` });
    expect(fresh.status).toBe(423);
    expect(fresh.body.error).toMatchObject({ code: APPROVAL_REQUIRED_JSONRPC_CODE });
    expect(fresh.body.error!.data["approval_id"]).not.toBe(id);
  }

  it("rejected", async () => {
    const id = await heldAndFiled(w, { repo: "acme/rejected" });
    await vote(w, w.reviewers[0]!, id, "DENY");
    await expectClosed("acme/rejected", id, "rejected");
    expect(runs(id)).toBe(0);
  });

  it("default_deny (no rule covers the tool), with an explicit idempotency key that stays closed", async () => {
    await w.db.prisma.connection.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: "gitlab", provider: "gitlab", url: w.upstream.url } });
    const call = (key: string) =>
      w.gateway.handleToolCall({ authorization: `Bearer ${w.keyPlaintext}`, idempotencyKey: key, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "gitlab.delete_project", arguments: { project: "p" } } } });
    const first = await call("deploy-42");
    expect(first.status).toBe(423);
    const id = (first.outcome as { approvalId: string }).approvalId;
    await w.ingest.tick();
    expect((await statusOf(id)).body).toMatchObject({ status: "default_deny", reason: "default_deny", tool: "gitlab.delete_project" });
    const retry = await call("deploy-42");
    expect(retry.outcome).toEqual({ kind: "approval_closed", approvalId: id, status: "default_deny" });
    expect(retry.body).toMatchObject({ error: { code: APPROVAL_CLOSED_JSONRPC_CODE, data: { status: "default_deny", approval_id: id, tool: "gitlab.delete_project" } } });
    expect((await call("deploy-43")).outcome).toMatchObject({ kind: "approval_required", reused: false });
  });

  it("invalidated by a policy change", async () => {
    const id = await heldAndFiled(w, { repo: "acme/invalidated" });
    const policy = await w.db.prisma.approvalPolicy.findUniqueOrThrow({ where: { id: w.policy.id } });
    const edited = await w.t.gql(UPDATE_POLICY, { input: { id: policy.id, expectedRevision: policy.revision, name: `${policy.name}-edited` } }, w.org.adminToken);
    expect(edited.data.updateApprovalPolicy.data.invalidatedRequestIds).toContain(id);
    await expectClosed("acme/invalidated", id, "invalidated", "policy_changed");
  });

  it("expired: past its 24 hours, swept or not", async () => {
    const id = await heldAndFiled(w, { repo: "acme/expired" });
    const past = new Date(Date.now() - 1000);
    await w.db.prisma.approvalRequest.update({ where: { id }, data: { expiresAt: past } });
    await w.db.prisma.gatewayInvocation.update({ where: { approvalId: id }, data: { expiresAt: past } });
    await expectClosed("acme/expired", id, "expired"); // not yet swept: pending past its expiry
    await w.delivery.tick(); // the sweep closes it
    expect(await w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: "expired" });
    expect((await statusOf(id)).body).toMatchObject({ status: "expired" });
  });

  it("expired after approval, before it ran: no token, and the retry is closed as expired", async () => {
    const id = await heldAndFiled(w, { repo: "acme/approved-late" });
    await vote(w, w.reviewers[0]!, id);
    await vote(w, w.reviewers[1]!, id);
    const past = new Date(Date.now() - 1000);
    await w.db.prisma.approvalRequest.update({ where: { id }, data: { expiresAt: past } });
    await w.db.prisma.gatewayInvocation.update({ where: { approvalId: id }, data: { expiresAt: past } });
    const read = await statusOf(id);
    expect(read.body.approval_token).toBeUndefined();
    await expectClosed("acme/approved-late", id, "expired", "approval_expired");
    expect(runs(id)).toBe(0);
  });

  it("failed: approved, then its delivery could not run it (the connection went inactive)", async () => {
    const id = await heldAndFiled(w, { repo: "acme/failed" });
    await vote(w, w.reviewers[0]!, id);
    await vote(w, w.reviewers[1]!, id);
    await w.db.prisma.connection.update({ where: { id: w.connection.id }, data: { active: false } });
    try {
      expect(await w.delivery.tick()).toContainEqual({ kind: "preflight_failed", code: "connection_unavailable" });
    } finally {
      await w.db.prisma.connection.update({ where: { id: w.connection.id }, data: { active: true } });
    }
    const read = await statusOf(id);
    expect(read.body).toMatchObject({ status: "failed", reason: "connection_unavailable", execution_status: "failed" });
    expect(read.body.approval_token).toBeUndefined();
    await expectClosed("acme/failed", id, "failed", "connection_unavailable");
    expect(runs(id)).toBe(0);
  });
});
