import { getNamedType, isInterfaceType, isObjectType, isUnionType, type GraphQLNamedType } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { schema } from "../../src/graphql/schema/index.js";
import { hashVirtualKey } from "../../src/gateway/keys.js";
import { addMember, createOrg } from "../helpers/fixtures.js";
import { createWorld, heldAndFiled, REVIEWER_ROLE, vote, type World } from "./world.js";

// Seed 003 over GraphQL: virtual keys, connections, freeze, approval policies, votes and the
// reviewer view. Real PostgreSQL and Redis.

let w: World;
beforeAll(async () => {
  w = await createWorld();
});
afterAll(async () => w?.close());

const admin = () => w.org.adminToken;

describe("virtual keys", () => {
  const CREATE = `mutation($input: CreateVirtualKeyInput!) { createVirtualKey(input: $input) { __typename
    ... on MutationCreateVirtualKeySuccess { data { plaintextKey virtualKey { id name prefix active } } }
    ... on Error { code message } ... on ValidationError { issues { field } } } }`;

  it("stores only the hash; the plaintext is in the creation payload, once", async () => {
    const r = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: "ci-agent" } }, admin());
    const { plaintextKey, virtualKey } = r.data.createVirtualKey.data;
    expect(plaintextKey).toMatch(/^vk_/);
    const row = await w.db.prisma.virtualKey.findUniqueOrThrow({ where: { id: virtualKey.id } });
    expect(row.keyHash).toBe(hashVirtualKey(plaintextKey));
    expect(JSON.stringify(row)).not.toContain(plaintextKey);
    const list = await w.t.gql(`query($w: ID!) { virtualKeys(workspaceId: $w) { id name prefix active } }`, { w: w.workspace.id }, admin());
    expect(JSON.stringify(list)).not.toContain(plaintextKey);
    expect(list.data.virtualKeys.map((k: { id: string }) => k.id)).toContain(virtualKey.id);
  });

  it("revokes once; a second revoke is an InvalidStateError", async () => {
    const created = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: "short-lived" } }, admin());
    const id = created.data.createVirtualKey.data.virtualKey.id;
    const REVOKE = `mutation($id: ID!) { revokeVirtualKey(input: { id: $id }) { __typename ... on MutationRevokeVirtualKeySuccess { data { active revokedAt } } ... on Error { code } } }`;
    expect((await w.t.gql(REVOKE, { id }, admin())).data.revokeVirtualKey.data.active).toBe(false);
    expect((await w.t.gql(REVOKE, { id }, admin())).data.revokeVirtualKey).toEqual({ __typename: "InvalidStateError", code: "INVALID_STATE" });
  });

  it("validates input, needs (virtual_key, create), and never sees another org's workspace", async () => {
    const invalid = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: "  " } }, admin());
    expect(invalid.data.createVirtualKey).toMatchObject({ __typename: "ValidationError", issues: [{ field: "input.name" }] });
    const denied = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: "x" } }, w.reviewers[0]!.token);
    expect(denied.data.createVirtualKey).toMatchObject({ __typename: "PermissionDeniedError", message: "Missing permission (virtual_key, create, payments-prod)" });
    const other = await createOrg(w.db);
    const foreign = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: "x" } }, other.adminToken);
    expect(foreign.data.createVirtualKey).toMatchObject({ __typename: "NotFoundError" });
  });
});

describe("connections and freeze", () => {
  it("creates, deactivates and deletes a connection; names are unique per workspace and carry no dots", async () => {
    const CREATE = `mutation($input: CreateToolConnectionInput!) { createToolConnection(input: $input) { __typename ... on MutationCreateToolConnectionSuccess { data { id name provider active } } ... on Error { code } ... on ValidationError { issues { field } } } }`;
    const made = await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: "stripe", provider: "stripe" } }, admin());
    const id = made.data.createToolConnection.data.id;
    expect(made.data.createToolConnection.data).toMatchObject({ name: "stripe", provider: "stripe", active: true });
    expect((await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: "stripe", provider: "stripe" } }, admin())).data.createToolConnection.__typename).toBe("ConflictError");
    expect((await w.t.gql(CREATE, { input: { workspaceId: w.workspace.id, name: "a.b", provider: "x" } }, admin())).data.createToolConnection).toMatchObject({ __typename: "ValidationError", issues: [{ field: "input.name" }] });
    const updated = await w.t.gql(`mutation($id: ID!) { updateToolConnection(input: { id: $id, active: false }) { ... on MutationUpdateToolConnectionSuccess { data { active } } } }`, { id }, admin());
    expect(updated.data.updateToolConnection.data.active).toBe(false);
    await w.t.gql(`mutation($id: ID!) { deleteToolConnection(input: { id: $id }) { __typename } }`, { id }, admin());
    expect(await w.db.prisma.connection.findUnique({ where: { id } })).toBeNull();
  });

  it("freezing needs (workspace, freeze)", async () => {
    const FREEZE = `mutation($w: ID!) { freezeWorkspace(input: { workspaceId: $w }) { __typename ... on MutationFreezeWorkspaceSuccess { data { workspaceId frozen } } ... on Error { code } } }`;
    expect((await w.t.gql(FREEZE, { w: w.workspace.id }, w.reviewers[0]!.token)).data.freezeWorkspace.__typename).toBe("PermissionDeniedError");
    expect((await w.t.gql(FREEZE, { w: w.workspace.id }, admin())).data.freezeWorkspace.data).toEqual({ workspaceId: w.workspace.id, frozen: true });
    const UNFREEZE = `mutation($w: ID!) { unfreezeWorkspace(input: { workspaceId: $w }) { ... on MutationUnfreezeWorkspaceSuccess { data { frozen } } } }`;
    expect((await w.t.gql(UNFREEZE, { w: w.workspace.id }, admin())).data.unfreezeWorkspace.data.frozen).toBe(false);
  });
});

const CREATE_POLICY = `mutation($input: CreateApprovalPolicyInput!) { createApprovalPolicy(input: $input) { __typename
  ... on MutationCreateApprovalPolicySuccess { data { invalidatedRequestIds policy { id revision enabled rules { id effect count roleIds } } } }
  ... on Error { code message } ... on ValidationError { issues { field message } } } }`;
const UPDATE_POLICY = `mutation($input: UpdateApprovalPolicyInput!) { updateApprovalPolicy(input: $input) { __typename
  ... on MutationUpdateApprovalPolicySuccess { data { invalidatedRequestIds policy { id revision enabled } } }
  ... on ConflictError { currentRevision } ... on Error { code message } ... on ValidationError { issues { field } } } }`;

describe("approval policies", () => {
  it("approval.policy.manage: a reviewer may not manage policies", async () => {
    const r = await w.t.gql(CREATE_POLICY, { input: { workspaceId: w.workspace.id, name: "nope", rules: [] } }, w.reviewers[0]!.token);
    expect(r.data.createApprovalPolicy).toMatchObject({ __typename: "PermissionDeniedError", message: "Missing permission (approval_policy, manage, payments-prod)" });
  });

  it("validates the rules with the domain, naming the field", async () => {
    const bad = await w.t.gql(CREATE_POLICY, { input: { workspaceId: w.workspace.id, name: "bad", rules: [{ id: "r1", effect: "ALLOW", tools: [], environments: ["prod"], roleIds: [REVIEWER_ROLE] }] } }, admin());
    expect(bad.data.createApprovalPolicy).toMatchObject({ __typename: "ValidationError", issues: [{ field: "input.rules.0.tools" }] });
    const denyCount = await w.t.gql(CREATE_POLICY, { input: { workspaceId: w.workspace.id, name: "bad2", rules: [{ id: "r2", effect: "DENY", tools: ["*"], environments: ["*"], roleIds: [REVIEWER_ROLE], count: 2 }] } }, admin());
    expect(denyCount.data.createApprovalPolicy.issues[0].field).toBe("input.rules.0.count");
    const dupe = await w.t.gql(CREATE_POLICY, { input: { workspaceId: w.workspace.id, name: "dupe", rules: [{ id: "prod-github-two", effect: "ALLOW", tools: ["x"], environments: ["prod"], userIds: [w.reviewers[0]!.userId] }] } }, admin());
    expect(dupe.data.createApprovalPolicy).toMatchObject({ __typename: "ValidationError", issues: [{ field: "input.rules.0.id" }] });
    expect(await w.db.prisma.approvalPolicy.count({ where: { workspaceId: w.workspace.id } })).toBe(1);
  });

  it("changing an active policy invalidates every unexecuted request under the old set (policy_changed); a stale revision is a conflict", async () => {
    const pending = await heldAndFiled(w, { repo: "acme/pol-1" });
    const approved = await heldAndFiled(w, { repo: "acme/pol-2" });
    await vote(w, w.reviewers[0]!, approved);
    await vote(w, w.reviewers[1]!, approved);
    const created = await w.t.gql(CREATE_POLICY, { input: { workspaceId: w.workspace.id, name: "extra", rules: [{ id: "extra-1", effect: "ALLOW", tools: ["stripe.*"], environments: ["prod"], roleIds: [REVIEWER_ROLE] }] } }, admin());
    const data = created.data.createApprovalPolicy.data;
    expect(data.invalidatedRequestIds.sort()).toEqual([pending, approved].sort());
    expect(await w.db.prisma.approvalRequest.findUnique({ where: { id: pending } })).toMatchObject({ status: "invalidated", closeReason: "policy_changed" });
    expect(await w.db.prisma.approvalRequest.findUnique({ where: { id: approved } })).toMatchObject({ status: "invalidated", closeReason: "policy_changed" });
    expect(await w.db.prisma.deliveryJob.findUnique({ where: { requestId: approved } })).toMatchObject({ status: "failed", errorCode: "policy_changed" });

    const stale = await w.t.gql(UPDATE_POLICY, { input: { id: data.policy.id, expectedRevision: 7, enabled: false } }, admin());
    expect(stale.data.updateApprovalPolicy).toMatchObject({ __typename: "ConflictError", currentRevision: 1 });

    const next = await heldAndFiled(w, { repo: "acme/pol-3" });
    const disabled = await w.t.gql(UPDATE_POLICY, { input: { id: data.policy.id, expectedRevision: 1, enabled: false } }, admin());
    expect(disabled.data.updateApprovalPolicy.data).toMatchObject({ invalidatedRequestIds: [next], policy: { revision: 2, enabled: false } });

    // Editing a disabled policy leaves the active set — and its requests — alone.
    const survivor = await heldAndFiled(w, { repo: "acme/pol-4" });
    const edited = await w.t.gql(UPDATE_POLICY, { input: { id: data.policy.id, expectedRevision: 2, name: "extra-renamed" } }, admin());
    expect(edited.data.updateApprovalPolicy.data.invalidatedRequestIds).toEqual([]);
    expect((await w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id: survivor } })).status).toBe("pending");
  });
});

describe("voting", () => {
  it("two eligible approvals reach quorum: approved, execution pending, a delivery job queued", async () => {
    const id = await heldAndFiled(w, { repo: "acme/vote-1" });
    const first = await vote(w, w.reviewers[0]!, id);
    expect(first.data.request).toMatchObject({ status: "PENDING", revision: 2 });
    const second = await vote(w, w.reviewers[1]!, id);
    expect(second.data.request).toMatchObject({ status: "APPROVED", executionStatus: "PENDING", revision: 3 });
    expect(await w.db.prisma.deliveryJob.findUnique({ where: { requestId: id } })).toMatchObject({ status: "queued" });
  });

  it("rechecks the revision (409 → ConflictError with the current one), the voter's eligibility and their earlier vote", async () => {
    const id = await heldAndFiled(w, { repo: "acme/vote-2" });
    const stale = await vote(w, w.reviewers[0]!, id, "APPROVE", 5);
    expect(stale).toMatchObject({ __typename: "ConflictError", code: "CONFLICT", currentRevision: 1 });
    await vote(w, w.reviewers[0]!, id);
    const twice = await vote(w, w.reviewers[0]!, id);
    expect(twice).toMatchObject({ __typename: "ConflictError", message: "You have already voted on this request." });
    // Holds approval.decide, but no rule of this request selects them.
    const outsider = await addMember(w.db, w.org.orgId, { grants: [{ resourceType: "approval_request", action: "decide" }, { resourceType: "approval_request", action: "read" }] });
    expect(await vote(w, outsider, id)).toMatchObject({ __typename: "PermissionDeniedError", message: "No approval rule of this request selects you as a reviewer." });
    // Without approval.decide at all.
    const reader = await addMember(w.db, w.org.orgId, { role: "workspace-reader" });
    expect(await vote(w, reader, id)).toMatchObject({ __typename: "PermissionDeniedError", message: "Missing permission (approval_request, decide, payments-prod)" });
    const other = await createOrg(w.db);
    expect(await vote(w, { token: other.adminToken }, id, "APPROVE", 2)).toMatchObject({ __typename: "NotFoundError" });
  });

  it("two votes on the same revision at once: the request lock lets one in, the other is a conflict", async () => {
    const id = await heldAndFiled(w, { repo: "acme/vote-race" });
    const [a, b] = await Promise.all([vote(w, w.reviewers[0]!, id, "APPROVE", 1), vote(w, w.reviewers[1]!, id, "APPROVE", 1)]);
    const kinds = [a.__typename, b.__typename].sort();
    expect(kinds).toEqual(["ConflictError", "MutationVoteOnApprovalRequestSuccess"]);
    expect([a, b].find((r) => r.__typename === "ConflictError").currentRevision).toBe(2);
    expect(await w.db.prisma.vote.count({ where: { requestId: id } })).toBe(1);
  });

  it("a matching reviewer deny rule excludes that person from reviewing", async () => {
    const excluded = w.reviewers[2]!;
    const policy = await w.setPolicy([{ id: `no-r3-${Date.now()}`, effect: "deny", tools: ["*"], environments: ["*"], roles: [], userIds: [excluded.userId] }]);
    const id = await heldAndFiled(w, { repo: "acme/vote-3" });
    const r = await vote(w, excluded, id);
    expect(r.__typename).toBe("PermissionDeniedError");
    expect(r.message).toMatch(/excludes you from reviewing/);
    const inbox = await w.t.gql(`{ approvalInbox { edges { node { id } } } }`, {}, excluded.token);
    expect(inbox.data.approvalInbox.edges.map((e: { node: { id: string } }) => e.node.id)).not.toContain(id);
    await w.db.prisma.approvalPolicy.delete({ where: { id: policy.id } });
  });

  it("a permitted reviewer's deny vote closes the request", async () => {
    const id = await heldAndFiled(w, { repo: "acme/vote-4" });
    await vote(w, w.reviewers[0]!, id);
    const denied = await vote(w, w.reviewers[1]!, id, "DENY");
    expect(denied.data.request.status).toBe("REJECTED");
    expect(await vote(w, w.reviewers[2]!, id)).toMatchObject({ __typename: "InvalidStateError", state: "rejected" });
    expect(await w.db.prisma.deliveryJob.findUnique({ where: { requestId: id } })).toBeNull();
  });

  it("an expired request and a request under a changed policy set take no votes", async () => {
    const expired = await heldAndFiled(w, { repo: "acme/vote-5" });
    await w.db.prisma.approvalRequest.update({ where: { id: expired }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect(await vote(w, w.reviewers[0]!, expired)).toMatchObject({ __typename: "InvalidStateError", state: "expired" });

    const drifted = await heldAndFiled(w, { repo: "acme/vote-6" });
    await w.db.prisma.approvalRequest.update({ where: { id: drifted }, data: { policySetHash: "0".repeat(64) } });
    expect(await vote(w, w.reviewers[0]!, drifted)).toMatchObject({ __typename: "InvalidStateError", state: "policy_changed" });
    expect(await w.db.prisma.vote.count({ where: { requestId: { in: [expired, drifted] } } })).toBe(0);
  });

  it("validates the vote input", async () => {
    const r = await w.t.gql(
      `mutation { voteOnApprovalRequest(input: { requestId: "x", decision: APPROVE, expectedRevision: 0, comment: "${"c".repeat(2001)}" }) { __typename ... on ValidationError { issues { field } } } }`,
      {},
      w.reviewers[0]!.token,
    );
    expect(r.data.voteOnApprovalRequest.issues.map((i: { field: string }) => i.field).sort()).toEqual(["input.comment", "input.expectedRevision"]);
  });
});

describe("the inbox", () => {
  it("lists the requests the viewer may decide: pending, eligible, not yet voted on by them", async () => {
    const id = await heldAndFiled(w, { repo: "acme/inbox-1" });
    const INBOX = `query($w: ID) { approvalInbox(workspaceId: $w) { edges { node { id viewerCanVote } } } }`;
    const before = await w.t.gql(INBOX, { w: w.workspace.id }, w.reviewers[0]!.token);
    expect(before.data.approvalInbox.edges).toContainEqual({ node: { id, viewerCanVote: true } });
    await vote(w, w.reviewers[0]!, id);
    const after = await w.t.gql(INBOX, { w: w.workspace.id }, w.reviewers[0]!.token);
    expect(after.data.approvalInbox.edges.map((e: { node: { id: string } }) => e.node.id)).not.toContain(id);
    const reader = await addMember(w.db, w.org.orgId, { role: "workspace-reader" });
    expect((await w.t.gql(INBOX, { w: w.workspace.id }, reader.token)).data.approvalInbox.edges).toEqual([]);
  });
});

describe("lists without N+1", () => {
  it("an inbox page costs the same statements for 2 requests as for 8", async () => {
    for (let i = 0; i < 8; i++) {
      const id = await heldAndFiled(w, { repo: `acme/n-plus-one-${i}` });
      await vote(w, w.reviewers[0]!, id);
    }
    const query = (first: number) =>
      `{ approvalInbox(first: ${first}) { edges { node { id workspaceName agentKeyName connectionName viewerCanVote quorum { state rules { approvals } } votes { reviewer { name } } delivery { status } viewerEligibility { eligible } } } } }`;
    const statements = async (first: number) => {
      await w.t.gql(query(first), {}, w.reviewers[1]!.token);
      const before = w.db.statementCount();
      const r = await w.t.gql(query(first), {}, w.reviewers[1]!.token);
      expect(r.errors).toBeUndefined();
      expect(r.data.approvalInbox.edges).toHaveLength(first);
      return w.db.statementCount() - before;
    };
    const few = await statements(2);
    expect(await statements(8)).toBe(few);
  });
});

describe("the reviewer view is closed and credential-free", () => {
  const FORBIDDEN = /argument|idempot|payload|snapshot|token|hash|secret|plaintext|credential|password|apikey/i;

  it("no field reachable from ApprovalRequest names arguments, idempotency keys, payloads, tokens or key hashes", () => {
    const seen = new Set<string>();
    const offending: string[] = [];
    const walk = (type: GraphQLNamedType) => {
      if (seen.has(type.name)) return;
      seen.add(type.name);
      if (FORBIDDEN.test(type.name)) offending.push(type.name);
      if (isUnionType(type)) type.getTypes().forEach(walk);
      if (isObjectType(type) || isInterfaceType(type)) {
        for (const field of Object.values(type.getFields())) {
          if (FORBIDDEN.test(field.name)) offending.push(`${type.name}.${field.name}`);
          for (const arg of field.args) if (FORBIDDEN.test(arg.name)) offending.push(`${type.name}.${field.name}(${arg.name})`);
          walk(getNamedType(field.type));
        }
      }
      if (isInterfaceType(type)) schema.getPossibleTypes(type).forEach(walk);
    };
    walk(schema.getType("ApprovalRequest")!);
    walk(schema.getType("ApprovalInboxUpdate")!);
    expect([...seen]).toContain("ApprovalVote");
    expect(offending).toEqual([]);
  });

  it("selecting every field reachable from a request returns none of the held call's private values", async () => {
    const secretArgs = { repo: "acme/very-private-repo", api_key: "sk_live_do_not_show" };
    const id = await heldAndFiled(w, secretArgs);
    await vote(w, w.reviewers[0]!, id, "APPROVE");
    const row = await w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id } });
    const selection = (type: GraphQLNamedType, depth: number): string => {
      if (!isObjectType(type) || depth > 4) return "";
      return `{ ${Object.values(type.getFields())
        .map((f) => {
          const inner = getNamedType(f.type);
          return isObjectType(inner) ? `${f.name} ${selection(inner, depth + 1)}` : f.name;
        })
        .join(" ")} }`;
    };
    const result = await w.t.gql(`query($id: ID!) { approvalRequest(id: $id) ${selection(schema.getType("ApprovalRequest")!, 0)} }`, { id }, w.reviewers[1]!.token);
    expect(result.errors).toBeUndefined();
    expect(result.data.approvalRequest.id).toBe(id);
    expect(result.data.approvalRequest.amountUsd).toBe(125);
    const text = JSON.stringify(result);
    for (const value of ["acme/very-private-repo", "sk_live_do_not_show", row.idempotencyKey, row.argumentHash, row.payloadHash, w.virtualKey.keyHash, w.keyPlaintext]) {
      expect(text).not.toContain(value);
    }
  });
});
