import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDeliveryWorker, type DeliveryOptions } from "../../src/workers/delivery.js";
import { checkPermission, compilePrincipal, type Permission } from "../../src/domain/catalog/index.js";
import { systemRoleId } from "../../src/services/system-roles.js";
import { addMember } from "../helpers/fixtures.js";
import { APPROVAL_SECRET, createWorld, heldAndFiled, REVIEWER_ROLE, SERVICE_TOKEN, vote, type World } from "./world.js";

// Seed 003: what an approval depends on cannot change under it and leave the answer "yes".
// - A policy change closes every request that has not executed, a delivery waiting for its
//   retry included (the gateway answered 503 first, on a real HTTP receiver).
// - Resume pins the concrete tool, the connection AND the provider the hold saw.
// - approval.policy.manage is owner-only; admins decide, they do not manage.
// Real PostgreSQL, Redis and HTTP throughout.

let w: World;
beforeAll(async () => {
  w = await createWorld();
});
afterAll(async () => w?.close());

const admin = () => w.org.adminToken;
const request = (id: string) => w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id } });
const job = (requestId: string) => w.db.prisma.deliveryJob.findUniqueOrThrow({ where: { requestId } });
const runs = (id: string) => w.executions.filter((e) => e.approvalId === id).length;

const UPDATE_POLICY = `mutation($input: UpdateApprovalPolicyInput!) { updateApprovalPolicy(input: $input) { __typename
  ... on MutationUpdateApprovalPolicySuccess { data { invalidatedRequestIds policy { id revision } } }
  ... on Error { code message } } }`;
const CREATE_POLICY = `mutation($input: CreateApprovalPolicyInput!) { createApprovalPolicy(input: $input) { __typename
  ... on MutationCreateApprovalPolicySuccess { data { invalidatedRequestIds policy { id revision } } }
  ... on Error { code message } } }`;
const DELETE_POLICY = `mutation($input: DeleteApprovalPolicyInput!) { deleteApprovalPolicy(input: $input) { __typename
  ... on MutationDeleteApprovalPolicySuccess { data { policy { id } } }
  ... on Error { code message } } }`;
const UPDATE_CONNECTION = `mutation($input: UpdateToolConnectionInput!) { updateToolConnection(input: $input) { __typename
  ... on MutationUpdateToolConnectionSuccess { data { id provider active } } ... on Error { code message } } }`;
const DELETE_CONNECTION = `mutation($input: DeleteToolConnectionInput!) { deleteToolConnection(input: $input) { __typename
  ... on MutationDeleteToolConnectionSuccess { data { id } } ... on Error { code message } } }`;
const REVIEWER_VIEW = `query($id: ID!) { approvalRequest(id: $id) { id tool connectionName connectionProvider providerAtHold status closeReason executionStatus delivery { status errorCode } } }`;

/** Renames the world's policy: a change to an active policy (its revision, so the set's hash, moves). */
async function editPolicy(token = admin()) {
  const policy = await w.db.prisma.approvalPolicy.findUniqueOrThrow({ where: { id: w.policy.id } });
  const result = await w.t.gql(UPDATE_POLICY, { input: { id: policy.id, expectedRevision: policy.revision, name: `${policy.name.split("~")[0]}~${policy.revision + 1}` } }, token);
  return result.data.updateApprovalPolicy;
}

async function approvedCall(repo: string, tool?: string): Promise<string> {
  const held = await w.callTool({ repo }, {}, tool);
  if (held.outcome.kind !== "approval_required") throw new Error(`expected a hold, got ${JSON.stringify(held.body)}`);
  await w.ingest.tick();
  const id = held.outcome.approvalId;
  await vote(w, w.reviewers[0]!, id);
  await vote(w, w.reviewers[1]!, id);
  return id;
}

/**
 * A real HTTP receiver in front of the gateway: it answers the first resume of each approval
 * 503 not_ready (retryable), and forwards every later one to the gateway.
 */
async function gatewayAnswering503First() {
  const seen = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const body = Buffer.concat(chunks).toString("utf8");
        const approvalId = String((JSON.parse(body) as { approval_id?: string }).approval_id);
        const count = (seen.get(approvalId) ?? 0) + 1;
        seen.set(approvalId, count);
        if (count === 1) {
          res.writeHead(503, { "content-type": "application/json", "retry-after": "1" }).end(JSON.stringify({ error: "not_ready", reason: "upstream_busy", retryable: true }));
          return;
        }
        const forwarded = await fetch(new URL(req.url ?? "/", w.gatewayUrl), { method: "POST", headers: { "content-type": "application/json", authorization: String(req.headers.authorization) }, body });
        res.writeHead(forwarded.status, { "content-type": "application/json" }).end(await forwarded.text());
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return {
    url: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`,
    resumes: (approvalId: string) => seen.get(approvalId) ?? 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function worker(extra: Partial<DeliveryOptions> = {}) {
  return createDeliveryWorker({ db: w.db, events: w.t.events, logger: w.logger, approvalSecret: APPROVAL_SECRET, gatewayUrl: w.gatewayUrl, serviceToken: SERVICE_TOKEN, retryBaseMs: 20, intervalMs: 0, ...extra });
}

const makeDue = (requestId: string) => w.db.prisma.deliveryJob.updateMany({ where: { requestId }, data: { nextRunAt: new Date(Date.now() - 1) } });

describe("a policy change closes every request that has not executed", () => {
  it("an approved request waiting for a delivery retry after a 503 closes as invalidated / policy_changed, its job is cancelled, and nothing is resumed again", async () => {
    const gateway = await gatewayAnswering503First();
    try {
      const delivery = worker({ gatewayUrl: gateway.url });
      const id = await approvedCall("acme/retry-then-policy");
      expect(await delivery.tick()).toContainEqual({ kind: "retry", reason: "gateway answered 503 not_ready", nextRunAt: expect.any(Date) });
      expect(await request(id)).toMatchObject({ status: "approved", executionStatus: "dispatched", closeReason: null });
      expect(await job(id)).toMatchObject({ status: "queued", attempts: 1 });

      const edited = await editPolicy();
      expect(edited.__typename).toBe("MutationUpdateApprovalPolicySuccess");
      expect(edited.data.invalidatedRequestIds).toContain(id);
      expect(await request(id)).toMatchObject({ status: "invalidated", closeReason: "policy_changed", executionStatus: "failed" });
      expect(await job(id)).toMatchObject({ status: "failed", errorCode: "policy_changed", leaseOwner: null });

      await makeDue(id);
      await delivery.tick();
      expect(gateway.resumes(id)).toBe(1);
      expect(runs(id)).toBe(0);
      const view = await w.t.gql(REVIEWER_VIEW, { id }, w.reviewers[2]!.token);
      expect(view.data.approvalRequest).toMatchObject({ status: "INVALIDATED", closeReason: "policy_changed", delivery: { status: "failed", errorCode: "policy_changed" } });
    } finally {
      await gateway.close();
    }
  });

  it("a dispatch in flight during the change cannot be retracted; when it comes back unexecuted, the worker closes the request under the lock instead of queueing a retry", async () => {
    const id = await approvedCall("acme/in-flight-policy");
    let invalidatedMeanwhile: string[] | undefined;
    const delivery = worker({
      fetch: async () => {
        invalidatedMeanwhile = (await editPolicy()).data.invalidatedRequestIds as string[];
        return new Response(JSON.stringify({ error: "not_ready", retryable: true }), { status: 503, headers: { "content-type": "application/json" } });
      },
    });
    const results = await delivery.tick();
    expect(invalidatedMeanwhile).toBeDefined();
    expect(invalidatedMeanwhile).not.toContain(id); // in flight: left alone by the change
    expect(results).toContainEqual({ kind: "failed", code: "policy_changed" });
    expect(await request(id)).toMatchObject({ status: "invalidated", closeReason: "policy_changed", executionStatus: "failed" });
    expect(await job(id)).toMatchObject({ status: "failed", errorCode: "policy_changed" });
    expect(runs(id)).toBe(0);
  });

  it("a policy edited behind the service's back: the preflight fails policy_changed and closes the approved request too", async () => {
    const id = await approvedCall("acme/behind-the-back");
    await w.db.prisma.approvalPolicy.update({ where: { id: w.policy.id }, data: { revision: { increment: 1 } } });
    expect(await worker().tick()).toContainEqual({ kind: "preflight_failed", code: "policy_changed" });
    expect(await request(id)).toMatchObject({ status: "invalidated", closeReason: "policy_changed", executionStatus: "failed" });
    expect(runs(id)).toBe(0);
    // The requests filed under the old revision are stale now; put them out of the way.
    await w.db.prisma.approvalRequest.updateMany({ where: { status: "pending" }, data: { status: "invalidated" } });
  });
});

describe("resume pins the route the hold saw", () => {
  let n = 0;
  async function connection() {
    n += 1;
    // Its own path on the world's upstream: what the upstream runs through it is told apart.
    return w.db.prisma.connection.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: `gh-${n}`, provider: "github", url: `${w.upstream.url}/gh-${n}` } });
  }

  it("a connection pointed at another provider after the hold: delivery fails route_changed, nothing runs anywhere, and the reviewer view shows the provider at hold time", async () => {
    const gh = await connection();
    const held = await w.callTool({ repo: "acme/moved" }, {}, `${gh.name}.delete_repo`);
    expect(held.outcome.kind).toBe("approval_required");
    await w.ingest.tick();
    const id = (held.outcome as { approvalId: string }).approvalId;
    expect(await request(id)).toMatchObject({ provider: "github", tool: "github.delete_repo", connectionId: gh.id });

    const moved = await w.t.gql(UPDATE_CONNECTION, { input: { id: gh.id, provider: "gitlab" } }, admin());
    expect(moved.data.updateToolConnection).toMatchObject({ data: { provider: "gitlab" } });
    await vote(w, w.reviewers[0]!, id);
    await vote(w, w.reviewers[1]!, id);

    expect(await worker().tick()).toContainEqual({ kind: "preflight_failed", code: "route_changed" });
    expect(await job(id)).toMatchObject({ status: "failed", errorCode: "route_changed" });
    expect(w.executions.filter((e) => e.connectionId === gh.id)).toEqual([]);
    const view = await w.t.gql(REVIEWER_VIEW, { id }, w.reviewers[2]!.token);
    expect(view.errors).toBeUndefined();
    expect(view.data.approvalRequest).toMatchObject({ tool: "github.delete_repo", providerAtHold: "github", connectionProvider: "gitlab", executionStatus: "FAILED" });
  });

  it("the gateway refuses on its own (409 route_changed) when the provider moves after control's preflight: nothing runs", async () => {
    const gh = await connection();
    const id = await approvedCall("acme/moved-in-flight", `${gh.name}.delete_repo`);
    const delivery = worker({
      fetch: async (url, init) => {
        await w.db.prisma.connection.update({ where: { id: gh.id }, data: { provider: "gitlab" } });
        return fetch(url, init);
      },
    });
    expect(await delivery.tick()).toContainEqual({ kind: "failed", code: "gateway_route_changed" });
    expect(runs(id)).toBe(0);
    expect(await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId: id } })).toMatchObject({ provider: "github", state: "AwaitingApproval" });
    expect(await w.db.prisma.gatewayExecution.count({ where: { approvalId: id } })).toBe(0);
  });

  it("the agent's own re-issue after the provider moved is not approved: the call is held again as the other provider's tool", async () => {
    const gh = await connection();
    const id = await approvedCall("acme/reissue-moved", `${gh.name}.delete_repo`);
    // Take the token the delivery would carry, then stop it reaching the gateway.
    let token = "";
    await worker({
      fetch: async (_url, init) => {
        token = String((JSON.parse(String(init?.body)) as { token: string }).token);
        return new Response(JSON.stringify({ error: "stopped_by_test" }), { status: 400, headers: { "content-type": "application/json" } });
      },
    }).tick();
    expect(token).not.toBe("");
    await w.db.prisma.connection.update({ where: { id: gh.id }, data: { provider: "gitlab" } });
    const reissued = await w.callTool({ repo: "acme/reissue-moved" }, { approvalId: id, approvalToken: token }, `${gh.name}.delete_repo`);
    expect(reissued.outcome.kind).toBe("approval_required");
    expect(runs(id)).toBe(0);
    expect(w.executions.filter((e) => e.connectionId === gh.id)).toEqual([]);
  });

  for (const [what, change] of [
    ["deleted", (id: string) => w.t.gql(DELETE_CONNECTION, { input: { id } }, admin())],
    ["deactivated", (id: string) => w.t.gql(UPDATE_CONNECTION, { input: { id, active: false } }, admin())],
  ] as const) {
    it(`a connection ${what} after the approval: delivery fails connection_unavailable, nothing runs`, async () => {
      const gh = await connection();
      const id = await approvedCall(`acme/connection-${what}`, `${gh.name}.delete_repo`);
      const changed = await change(gh.id);
      expect(changed.errors).toBeUndefined();
      expect(JSON.stringify(changed.data)).toContain("Success");
      expect(await worker().tick()).toContainEqual({ kind: "preflight_failed", code: "connection_unavailable" });
      expect(await job(id)).toMatchObject({ status: "failed", errorCode: "connection_unavailable" });
      expect(runs(id)).toBe(0);
    });
  }
});

describe("approval.policy.manage is owner-only; admins decide", () => {
  const rules = (id: string) => [{ id, effect: "ALLOW", tools: ["github.*"], environments: ["prod"], roleIds: [systemRoleId("admin")], count: 1 }];

  it("an admin who is not the owner may not create, edit or delete a policy; neither may (approval_policy, *) nor the approval-policy-manager role", async () => {
    const nonOwnerAdmin = await addMember(w.db, w.org.orgId, { role: "admin", name: "admin-not-owner" });
    const familyWildcard = await addMember(w.db, w.org.orgId, { grants: [{ resourceType: "approval_policy", action: "*" }], name: "policy-wildcard" });
    const managerRole = await addMember(w.db, w.org.orgId, { role: "approval-policy-manager", name: "policy-manager" });
    const policy = await w.db.prisma.approvalPolicy.findUniqueOrThrow({ where: { id: w.policy.id } });
    for (const member of [nonOwnerAdmin, familyWildcard, managerRole]) {
      const created = await w.t.gql(CREATE_POLICY, { input: { workspaceId: w.workspace.id, name: `by-${member.userId}`, rules: rules(`r-${member.userId}`.slice(0, 60)) } }, member.token);
      expect(created.data.createApprovalPolicy).toMatchObject({ __typename: "PermissionDeniedError" });
      const updated = await w.t.gql(UPDATE_POLICY, { input: { id: policy.id, expectedRevision: policy.revision, enabled: false } }, member.token);
      expect(updated.data.updateApprovalPolicy).toMatchObject({ __typename: "PermissionDeniedError" });
      const deleted = await w.t.gql(DELETE_POLICY, { input: { id: policy.id, expectedRevision: policy.revision } }, member.token);
      expect(deleted.data.deleteApprovalPolicy).toMatchObject({ __typename: "PermissionDeniedError" });
    }
    expect(await w.db.prisma.approvalPolicy.findUniqueOrThrow({ where: { id: policy.id } })).toMatchObject({ revision: policy.revision, enabled: true });
    // Reading stays a grant: the policy-manager role (and admin) still see the rules.
    const read = await w.t.gql(`query($ws: ID!) { approvalPolicies(workspaceId: $ws) { id } }`, { ws: w.workspace.id }, managerRole.token);
    expect(read.errors).toBeUndefined();
    expect(read.data.approvalPolicies.map((p: { id: string }) => p.id)).toContain(policy.id);
  });

  it("the owner (a super admin) manages policies, and an admin who is not the owner still votes", async () => {
    const created = await w.t.gql(CREATE_POLICY, { input: { workspaceId: w.workspace.id, name: "admins-decide", rules: rules("admins-decide") } }, admin());
    expect(created.data.createApprovalPolicy.__typename).toBe("MutationCreateApprovalPolicySuccess");
    const adminVoter = await addMember(w.db, w.org.orgId, { role: "admin", name: "admin-voter" });
    const id = await heldAndFiled(w, { repo: "acme/admin-votes" });
    const cast = await vote(w, adminVoter, id);
    expect(cast).toMatchObject({ __typename: "MutationVoteOnApprovalRequestSuccess", data: { request: { status: "APPROVED" } } });
    const policy = created.data.createApprovalPolicy.data.policy;
    const deleted = await w.t.gql(DELETE_POLICY, { input: { id: policy.id, expectedRevision: policy.revision } }, admin());
    expect(deleted.data.deleteApprovalPolicy.__typename).toBe("MutationDeleteApprovalPolicySuccess");
  });

  it("the check: no grant reaches (approval_policy, manage) — not (*, *), not an explicit tuple; a super admin and a personal organization's owner do", () => {
    const target = { resourceType: "approval_policy", action: "manage", matchValue: "payments-prod", groups: ["team-payments"] } as const;
    const principal = (grants: Permission[], extra: { isSuperAdmin?: boolean; isOwner?: boolean } = {}) =>
      compilePrincipal({ orgExists: true, orgDeleted: false, membershipActive: true, isSuperAdmin: false, grants, ...extra });
    const grant = (resourceType: string, action: string, resourcePattern = "", authzGroup = ""): Permission => ({ resourceType, action, resourcePattern, authzGroup }) as Permission;
    for (const grants of [[grant("*", "*")], [grant("approval_policy", "*")], [grant("*", "manage")], [grant("approval_policy", "manage")], [grant("approval_policy", "manage", "payments-%")], [grant("approval_policy", "manage", "", "team-payments")]]) {
      expect(checkPermission(principal(grants), target).allowed, JSON.stringify(grants)).toBe(false);
    }
    expect(checkPermission(principal([], { isSuperAdmin: true }), target).allowed).toBe(true);
    expect(checkPermission(principal([grant("*", "*")], { isOwner: true }), target).allowed).toBe(true);
    // The rest of the family is ordinary: read and decide are reached by grants, wildcards included.
    expect(checkPermission(principal([grant("*", "*")]), { ...target, action: "read" }).allowed).toBe(true);
    expect(checkPermission(principal([grant("*", "*")]), { ...target, resourceType: "approval_request", action: "decide" }).allowed).toBe(true);
    expect(REVIEWER_ROLE).toBe(systemRoleId("approval-reviewer"));
  });
});

describe("a deny rule whose role disappears keeps blocking", () => {
  it("once the role a deny rule names is deleted, the rule excludes every reviewer: votes are refused and an approved request's delivery fails reviewer_authority_changed", async () => {
    const contractors = await w.db.prisma.role.create({ data: { orgId: w.org.orgId, key: `contractors-${Date.now()}`, name: "Contractors" } });
    const policy = await w.t.gql(CREATE_POLICY, {
      input: { workspaceId: w.workspace.id, name: "no-contractors", rules: [{ id: "no-contractors", effect: "DENY", tools: ["github.*"], environments: ["prod"], roleIds: [contractors.id] }] },
    }, admin());
    expect(policy.data.createApprovalPolicy.__typename).toBe("MutationCreateApprovalPolicySuccess");
    const pending = await heldAndFiled(w, { repo: "acme/deny-role-pending" });
    const approved = await approvedCall("acme/deny-role-approved");
    expect(await vote(w, w.reviewers[0]!, pending)).toMatchObject({ __typename: "MutationVoteOnApprovalRequestSuccess" });

    // What deleteRole does to the row: it stays, marked deleted, with no holders.
    await w.db.prisma.role.update({ where: { id: contractors.id }, data: { deletedAt: new Date(), key: `${contractors.key}~deleted` } });

    expect(await vote(w, w.reviewers[1]!, pending)).toMatchObject({ __typename: "PermissionDeniedError", message: expect.stringContaining("no-contractors") });
    expect((await request(pending)).status).toBe("pending");
    const view = await w.t.gql(`query($id: ID!) { approvalRequest(id: $id) { viewerCanVote viewerEligibility { eligible } } }`, { id: pending }, w.reviewers[2]!.token);
    expect(view.data.approvalRequest).toEqual({ viewerCanVote: false, viewerEligibility: { eligible: false } });
    expect(await worker().tick()).toContainEqual({ kind: "preflight_failed", code: "reviewer_authority_changed" });
    expect(await job(approved)).toMatchObject({ status: "failed", errorCode: "reviewer_authority_changed" });
    expect(runs(approved)).toBe(0);
  });
});
