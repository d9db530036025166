// The check API answers what the operations do. For every (resource_type, action) of the permission
// catalog (FAMILIES, iterated) the table below names the real GraphQL operation that enforces it and
// how to run it on a fresh resource; principals holding small generated roles (patterns, authz
// groups, untargeted, with and without read) are asked about through checkPermissions, then run the
// operation themselves: GRANTED ⟺ the operation is allowed (not NotFound, not PermissionDenied).
// A catalog pair with no operation is listed in NO_OPERATION with the reason, so a pair added to the
// catalog without either fails here.
import { randomBytes, randomUUID } from "node:crypto";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CREATE_PARENT, FAMILIES, RESOURCE_TYPES, type Action, type ConcreteResourceType } from "../../src/domain/catalog/index.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { CHECK } from "./queries.js";

let t: TestApp;
let org: OrgFixture;
beforeAll(async () => {
  // Webhook secrets are sealed under a key: without one createWebhook is an InvalidStateError.
  t = await startTestApp({ env: { COUNTERSIGN_WEBHOOK_SECRET_KEY: randomBytes(32).toString("hex") } });
  org = await createOrg(t.db);
});
afterAll(() => t.close());

type Outcome = { allowed: boolean; answer: string };
type CheckTarget = { resourceId?: string; matchValue?: string | null; groups?: string[] | null };
/** One case's fresh resource: its name (the match value grants target) and its stack's groups. */
interface World {
  name: string;
  groups: string[];
}
interface Op {
  /** The operation, for the failure message. */
  operation: string;
  /** Creates the case's fresh resources as the org's admin; returns what to check and how to run the operation. */
  setup(w: World): Promise<{ target: CheckTarget; run(token: string): Promise<Outcome> }>;
}

const DENIED = new Set(["NotFoundError", "PermissionDeniedError"]);

/** Runs a mutation or a query field; a NotFound/PermissionDenied result or error is "denied". */
async function call(token: string | null, doc: string, vars: Record<string, unknown>, field: string, deniedWhen?: (data: any) => boolean): Promise<Outcome> {
  const res = await t.gql(doc, vars, token);
  if (res.errors?.length) {
    const codes = res.errors.map((e: any) => e.extensions?.code);
    if (codes.every((c: string) => c === "NOT_FOUND" || c === "PERMISSION_DENIED")) return { allowed: false, answer: codes.join(",") };
    throw new Error(`${field}: ${JSON.stringify(res.errors)}`);
  }
  const data = res.data[field];
  const typename = data?.__typename ?? (Array.isArray(data) ? `list(${data.length})` : String(data));
  if (DENIED.has(typename)) return { allowed: false, answer: typename };
  if (deniedWhen?.(data)) return { allowed: false, answer: `${typename} (${JSON.stringify(data)})` };
  return { allowed: true, answer: typename };
}
const mutation = (token: string, field: string, decl: string, args: string, vars: Record<string, unknown>) =>
  call(token, `mutation(${decl}) { ${field}(${args}) { __typename ... on Error { code message } } }`, vars, field);

async function adminData(doc: string, vars: Record<string, unknown>, field: string): Promise<any> {
  const res = await t.gql(doc, vars, org.adminToken);
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  const r = res.data[field];
  expect(r.__typename, JSON.stringify(r)).toMatch(/Success$/);
  return r.data;
}

// ── Fresh resources, made directly or through the admin ───────────────────────────────

const uid = () => randomUUID().slice(0, 8);
async function stackOf(w: World, suffix = "") {
  const name = w.name + suffix;
  return t.db.prisma.stack.create({
    data: {
      orgId: org.orgId,
      name,
      authzGroups: w.groups,
      outputs: [{ name: "out", value: 1, sensitive: false }],
      groupMembers: { create: w.groups.map((g) => ({ orgId: org.orgId, groupName: g, stackName: name })) },
    },
  });
}
async function workspaceOf(w: World) {
  const stack = await stackOf(w, "-stack");
  return t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: w.name } });
}
const cloudIntegration = async (stackId: string, name: string) =>
  adminData(
    `mutation($i: CreateCloudIntegrationInput!) { createCloudIntegration(input: $i) { __typename ... on MutationCreateCloudIntegrationSuccess { data { id } } } }`,
    { i: { stackId, name, provider: "AWS", identity: "arn:aws:iam::123456789012:role/deployer" } },
    "createCloudIntegration",
  );
const resourcePolicy = async (name: string) =>
  adminData(`mutation($i: CreateResourcePolicyInput!) { createResourcePolicy(input: $i) { __typename ... on MutationCreateResourcePolicySuccess { data { id } } } }`, { i: { name } }, "createResourcePolicy");
const webhook = async () =>
  adminData(
    `mutation($i: CreateWebhookInput!) { createWebhook(input: $i) { __typename ... on MutationCreateWebhookSuccess { data { webhook { id } } } } }`,
    { i: { url: "https://hooks.example.com/countersign", events: ["PLAN_GATE_PASSED"] } },
    "createWebhook",
  );
const connection = async (workspaceId: string) =>
  adminData(
    `mutation($i: CreateToolConnectionInput!) { createToolConnection(input: $i) { __typename ... on MutationCreateToolConnectionSuccess { data { id } } } }`,
    { i: { workspaceId, name: `c-${uid()}`, provider: "stripe" } },
    "createToolConnection",
  );
const virtualKey = async (workspaceId: string) =>
  adminData(
    `mutation($i: CreateVirtualKeyInput!) { createVirtualKey(input: $i) { __typename ... on MutationCreateVirtualKeySuccess { data { virtualKey { id } } } } }`,
    { i: { workspaceId, name: `k-${uid()}` } },
    "createVirtualKey",
  );

// ── The table: (resource_type, action) → the operation enforcing it ────────────────────

const byId = (id: string): CheckTarget => ({ resourceId: id });
const untargeted: CheckTarget = {};

const OPERATIONS: Record<string, Op> = {
  "stack.create": {
    operation: "createStack",
    // No groups: each group of a create is (stack_authz_group, assign), a pair of its own.
    setup: async (w) => ({
      target: { matchValue: w.name, groups: [] },
      run: (tk) => mutation(tk, "createStack", "$i: CreateStackInput!", "input: $i", { i: { name: w.name } }),
    }),
  },
  "stack.read": {
    operation: "stack(id)",
    setup: async (w) => {
      const s = await stackOf(w);
      return { target: byId(s.id), run: (tk) => call(tk, `query($id: ID!) { stack(id: $id) { __typename } }`, { id: s.id }, "stack", (d) => d === null) };
    },
  },
  "stack.update": {
    operation: "updateStack",
    setup: async (w) => {
      const s = await stackOf(w);
      return { target: byId(s.id), run: (tk) => mutation(tk, "updateStack", "$i: UpdateStackInput!", "input: $i", { i: { id: s.id, description: "edited" } }) };
    },
  },
  "stack.delete": {
    operation: "deleteStack",
    setup: async (w) => {
      const s = await stackOf(w);
      return { target: byId(s.id), run: (tk) => mutation(tk, "deleteStack", "$id: ID!", "id: $id", { id: s.id }) };
    },
  },
  "stack.deploy": {
    operation: "requestPrPreview",
    setup: async (w) => {
      const s = await stackOf(w);
      return {
        target: byId(s.id),
        run: (tk) => mutation(tk, "requestPrPreview", "$i: RequestPrPreviewInput!", "input: $i", { i: { stackId: s.id, pullRequest: 7, commitSha: "a".repeat(40) } }),
      };
    },
  },
  "stack.preview": {
    operation: "confirmPrPreview",
    setup: async (w) => {
      const s = await stackOf(w);
      const preview = await adminData(
        `mutation($i: RequestPrPreviewInput!) { requestPrPreview(input: $i) { __typename ... on MutationRequestPrPreviewSuccess { data { id } } } }`,
        { i: { stackId: s.id, pullRequest: 7, commitSha: "b".repeat(40) } },
        "requestPrPreview",
      );
      return { target: byId(s.id), run: (tk) => mutation(tk, "confirmPrPreview", "$id: ID!", "id: $id", { id: preview.id }) };
    },
  },
  "stack.read_data": {
    operation: "stackOutputs(stackName)",
    setup: async (w) => {
      const s = await stackOf(w);
      return {
        target: byId(s.id),
        run: (tk) => call(tk, `query($n: String!) { stackOutputs(stackName: $n) { name value } }`, { n: s.name }, "stackOutputs", (d) => d.length === 0),
      };
    },
  },
  "cloud_integration.create": {
    operation: "createCloudIntegration",
    setup: async (w) => {
      const s = await stackOf(w, "-stack");
      return {
        target: { resourceId: s.id, matchValue: w.name },
        run: (tk) =>
          mutation(tk, "createCloudIntegration", "$i: CreateCloudIntegrationInput!", "input: $i", {
            i: { stackId: s.id, name: w.name, provider: "AWS", identity: "arn:aws:iam::123456789012:role/deployer" },
          }),
      };
    },
  },
  "cloud_integration.read": {
    operation: "cloudIntegration(id)",
    setup: async (w) => {
      const ci = await cloudIntegration((await stackOf(w, "-stack")).id, w.name);
      return { target: byId(ci.id), run: (tk) => call(tk, `query($id: ID!) { cloudIntegration(id: $id) { __typename } }`, { id: ci.id }, "cloudIntegration", (d) => d === null) };
    },
  },
  "cloud_integration.update": {
    operation: "updateCloudIntegration",
    setup: async (w) => {
      const ci = await cloudIntegration((await stackOf(w, "-stack")).id, w.name);
      return {
        target: byId(ci.id),
        run: (tk) => mutation(tk, "updateCloudIntegration", "$i: UpdateCloudIntegrationInput!", "input: $i", { i: { id: ci.id, identity: "arn:aws:iam::123456789012:role/other" } }),
      };
    },
  },
  "cloud_integration.delete": {
    operation: "deleteCloudIntegration",
    setup: async (w) => {
      const ci = await cloudIntegration((await stackOf(w, "-stack")).id, w.name);
      return { target: byId(ci.id), run: (tk) => mutation(tk, "deleteCloudIntegration", "$id: ID!", "id: $id", { id: ci.id }) };
    },
  },
  "resource_policy.create": {
    operation: "createResourcePolicy",
    setup: async (w) => ({
      target: { matchValue: w.name },
      run: (tk) => mutation(tk, "createResourcePolicy", "$i: CreateResourcePolicyInput!", "input: $i", { i: { name: w.name } }),
    }),
  },
  "resource_policy.read": {
    operation: "resourcePolicy(id)",
    setup: async (w) => {
      const p = await resourcePolicy(w.name);
      return { target: byId(p.id), run: (tk) => call(tk, `query($id: ID!) { resourcePolicy(id: $id) { __typename } }`, { id: p.id }, "resourcePolicy", (d) => d === null) };
    },
  },
  "resource_policy.update": {
    operation: "updateResourcePolicy",
    setup: async (w) => {
      const p = await resourcePolicy(w.name);
      return { target: byId(p.id), run: (tk) => mutation(tk, "updateResourcePolicy", "$i: UpdateResourcePolicyInput!", "input: $i", { i: { id: p.id, description: "edited" } }) };
    },
  },
  "resource_policy.delete": {
    operation: "deleteResourcePolicy",
    setup: async (w) => {
      const p = await resourcePolicy(w.name);
      return { target: byId(p.id), run: (tk) => mutation(tk, "deleteResourcePolicy", "$id: ID!", "id: $id", { id: p.id }) };
    },
  },
  "workspace.create": {
    operation: "createWorkspace",
    setup: async (w) => {
      const s = await stackOf(w, "-stack");
      return {
        target: { resourceId: s.id, matchValue: w.name },
        run: (tk) => mutation(tk, "createWorkspace", "$i: CreateWorkspaceInput!", "input: $i", { i: { stackId: s.id, name: w.name } }),
      };
    },
  },
  "workspace.read": {
    operation: "workspace(id)",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return { target: byId(ws.id), run: (tk) => call(tk, `query($id: ID!) { workspace(id: $id) { __typename } }`, { id: ws.id }, "workspace", (d) => d === null) };
    },
  },
  "workspace.update": {
    operation: "updateWorkspace",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return { target: byId(ws.id), run: (tk) => mutation(tk, "updateWorkspace", "$i: UpdateWorkspaceInput!", "input: $i", { i: { id: ws.id, environment: "staging" } }) };
    },
  },
  "workspace.archive": {
    operation: "archiveWorkspace",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return { target: byId(ws.id), run: (tk) => mutation(tk, "archiveWorkspace", "$id: ID!", "id: $id", { id: ws.id }) };
    },
  },
  "workspace.approve": {
    operation: "reserveWorkspace",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return { target: byId(ws.id), run: (tk) => mutation(tk, "reserveWorkspace", "$i: ReserveWorkspaceInput!", "input: $i", { i: { workspaceId: ws.id } }) };
    },
  },
  "workspace.plan": {
    operation: "submitPlan",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return {
        target: byId(ws.id),
        run: (tk) => mutation(tk, "submitPlan", "$i: SubmitPlanInput!", "input: $i", { i: { workspaceId: ws.id, changes: [{ address: "null_resource.a", action: "CREATE" }] } }),
      };
    },
  },
  "workspace.freeze": {
    operation: "freezeWorkspace",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return { target: byId(ws.id), run: (tk) => mutation(tk, "freezeWorkspace", "$i: WorkspaceFreezeInput!", "input: $i", { i: { workspaceId: ws.id } }) };
    },
  },
  "approval_policy.read": {
    operation: "approvalPolicies(workspaceId)",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return { target: byId(ws.id), run: (tk) => call(tk, `query($id: ID!) { approvalPolicies(workspaceId: $id) { id } }`, { id: ws.id }, "approvalPolicies") };
    },
  },
  "gateway_policy.read": {
    operation: "gatewayPolicyVersions(workspaceId)",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return {
        target: byId(ws.id),
        run: (tk) => call(tk, `query($id: ID!) { gatewayPolicyVersions(workspaceId: $id) { __typename } }`, { id: ws.id }, "gatewayPolicyVersions"),
      };
    },
  },
  "approval_request.read": {
    operation: "approvalRequests(workspaceId)",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return {
        target: byId(ws.id),
        run: (tk) => call(tk, `query($id: ID!) { approvalRequests(workspaceId: $id) { __typename } }`, { id: ws.id }, "approvalRequests"),
      };
    },
  },
  "virtual_key.create": {
    operation: "createVirtualKey",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return { target: byId(ws.id), run: (tk) => mutation(tk, "createVirtualKey", "$i: CreateVirtualKeyInput!", "input: $i", { i: { workspaceId: ws.id, name: "k" } }) };
    },
  },
  "virtual_key.read": {
    operation: "virtualKeys(workspaceId)",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return { target: byId(ws.id), run: (tk) => call(tk, `query($id: ID!) { virtualKeys(workspaceId: $id) { id } }`, { id: ws.id }, "virtualKeys") };
    },
  },
  "virtual_key.revoke": {
    operation: "revokeVirtualKey",
    setup: async (w) => {
      const key = await virtualKey((await workspaceOf(w)).id);
      return { target: byId(key.virtualKey.id), run: (tk) => mutation(tk, "revokeVirtualKey", "$i: RevokeVirtualKeyInput!", "input: $i", { i: { id: key.virtualKey.id } }) };
    },
  },
  "connection.create": {
    operation: "createToolConnection",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return {
        target: byId(ws.id),
        run: (tk) => mutation(tk, "createToolConnection", "$i: CreateToolConnectionInput!", "input: $i", { i: { workspaceId: ws.id, name: "stripe", provider: "stripe" } }),
      };
    },
  },
  "connection.read": {
    operation: "toolConnections(workspaceId)",
    setup: async (w) => {
      const ws = await workspaceOf(w);
      return { target: byId(ws.id), run: (tk) => call(tk, `query($id: ID!) { toolConnections(workspaceId: $id) { id } }`, { id: ws.id }, "toolConnections") };
    },
  },
  "connection.update": {
    operation: "updateToolConnection",
    setup: async (w) => {
      const c = await connection((await workspaceOf(w)).id);
      return { target: byId(c.id), run: (tk) => mutation(tk, "updateToolConnection", "$i: UpdateToolConnectionInput!", "input: $i", { i: { id: c.id, active: false } }) };
    },
  },
  "connection.delete": {
    operation: "deleteToolConnection",
    setup: async (w) => {
      const c = await connection((await workspaceOf(w)).id);
      return { target: byId(c.id), run: (tk) => mutation(tk, "deleteToolConnection", "$i: DeleteToolConnectionInput!", "input: $i", { i: { id: c.id } }) };
    },
  },
  "webhook.read": {
    operation: "webhook(id)",
    setup: async () => {
      const h = await webhook();
      return { target: byId(h.webhook.id), run: (tk) => call(tk, `query($id: ID!) { webhook(id: $id) { __typename } }`, { id: h.webhook.id }, "webhook", (d) => d === null) };
    },
  },
  "webhook.create": {
    operation: "createWebhook",
    setup: async () => ({
      target: untargeted,
      run: (tk) =>
        mutation(tk, "createWebhook", "$i: CreateWebhookInput!", "input: $i", { i: { url: "https://hooks.example.com/countersign", events: ["PLAN_GATE_PASSED"] } }),
    }),
  },
  "webhook.update": {
    operation: "updateWebhook",
    setup: async () => {
      const h = await webhook();
      return { target: byId(h.webhook.id), run: (tk) => mutation(tk, "updateWebhook", "$i: UpdateWebhookInput!", "input: $i", { i: { id: h.webhook.id, active: false } }) };
    },
  },
  "webhook.delete": {
    operation: "deleteWebhook",
    setup: async () => {
      const h = await webhook();
      return { target: byId(h.webhook.id), run: (tk) => mutation(tk, "deleteWebhook", "$id: ID!", "id: $id", { id: h.webhook.id }) };
    },
  },
  "role.create": {
    operation: "createRole",
    setup: async (w) => ({
      target: untargeted,
      run: (tk) => mutation(tk, "createRole", "$i: CreateRoleInput!", "input: $i", { i: { name: `R ${w.name}`, permissions: [] } }),
    }),
  },
  "role.read": {
    operation: "roles",
    setup: async () => ({ target: untargeted, run: (tk) => call(tk, `{ roles { id } }`, {}, "roles") }),
  },
  "role.delete": {
    operation: "deleteRole",
    setup: async (w) => {
      const role = await t.db.prisma.role.create({ data: { orgId: org.orgId, key: `r-${uid()}`, name: `R ${w.name}` } });
      return { target: untargeted, run: (tk) => mutation(tk, "deleteRole", "$id: ID!", "id: $id", { id: role.id }) };
    },
  },
  "role.update": {
    operation: "updateRole (description only: no tuple changes, so no escalation guard runs)",
    setup: async (w) => {
      const role = await t.db.prisma.role.create({ data: { orgId: org.orgId, key: `r-${uid()}`, name: `R ${w.name}` } });
      return { target: untargeted, run: (tk) => mutation(tk, "updateRole", "$i: UpdateRoleInput!", "input: $i", { i: { id: role.id, description: "edited" } }) };
    },
  },
  "role.assign": {
    operation: "assignRole (a role with no tuples)",
    setup: async (w) => {
      const role = await t.db.prisma.role.create({ data: { orgId: org.orgId, key: `r-${uid()}`, name: `R ${w.name}` } });
      const m = await addMember(t.db, org.orgId);
      return { target: untargeted, run: (tk) => mutation(tk, "assignRole", "$r: ID!, $u: ID!", "roleId: $r, userId: $u", { r: role.id, u: m.userId }) };
    },
  },
  "identity_source.sync": {
    operation: "syncUserGroups",
    setup: async (w) => {
      const source = await t.db.prisma.identitySource.create({ data: { orgId: org.orgId, name: `idp ${w.name}` } });
      const m = await addMember(t.db, org.orgId);
      return {
        target: untargeted,
        run: (tk) => mutation(tk, "syncUserGroups", "$i: SyncUserGroupsInput!", "input: $i", { i: { identitySourceId: source.id, userId: m.userId, groupKeys: ["platform"] } }),
      };
    },
  },
  "identity_source.create": {
    operation: "createIdentitySource",
    setup: async (w) => ({
      target: untargeted,
      run: (tk) => mutation(tk, "createIdentitySource", "$n: String!", "name: $n", { n: `idp ${w.name}` }),
    }),
  },
  "identity_source.read": {
    operation: "identitySources",
    setup: async () => ({ target: untargeted, run: (tk) => call(tk, `{ identitySources { id } }`, {}, "identitySources") }),
  },
  "identity_source.delete": {
    operation: "deleteIdentitySource",
    setup: async (w) => {
      const source = await t.db.prisma.identitySource.create({ data: { orgId: org.orgId, name: `idp ${w.name}` } });
      return { target: untargeted, run: (tk) => mutation(tk, "deleteIdentitySource", "$id: ID!", "id: $id", { id: source.id }) };
    },
  },
  "label.read": {
    operation: "protectedLabelKeys",
    setup: async () => ({ target: untargeted, run: (tk) => call(tk, `{ protectedLabelKeys }`, {}, "protectedLabelKeys") }),
  },
  "label.create": {
    operation: "setProtectedLabelKeys",
    setup: async () => ({
      target: untargeted,
      run: async (tk) => {
        const { protectedLabelKeysRevision: revision } = await t.db.prisma.organization.findUniqueOrThrow({ where: { id: org.orgId } });
        return mutation(tk, "setProtectedLabelKeys", "$k: [String!]!, $r: Int!", "keys: $k, revision: $r", { k: [], r: revision });
      },
    }),
  },
  "member.create": {
    operation: "addMember",
    setup: async (w) => ({
      target: untargeted,
      run: (tk) => mutation(tk, "addMember", "$i: AddMemberInput!", "input: $i", { i: { email: `${w.name}@example.com`, name: w.name } }),
    }),
  },
  "member.read": {
    operation: "members",
    setup: async () => ({ target: untargeted, run: (tk) => call(tk, `{ members { __typename } }`, {}, "members") }),
  },
  "member.update": {
    operation: "deactivateMember",
    setup: async () => {
      const m = await addMember(t.db, org.orgId);
      return { target: untargeted, run: (tk) => mutation(tk, "deactivateMember", "$id: ID!", "userId: $id", { id: m.userId }) };
    },
  },
  "member.check": {
    operation: "checkPermissions (about another member)",
    setup: async () => ({
      target: untargeted,
      run: (tk) => call(tk, CHECK, { checks: [{ principalId: org.adminId, resourceType: "stack", action: "read" }] }, "checkPermissions"),
    }),
  },
};

/**
 * Catalog pairs no Countersign operation decides on its own, each with why. Adding a pair to the
 * catalog means adding it to OPERATIONS or here.
 */
const NO_OPERATION: Record<string, string> = {
  ...Object.fromEntries(
    ["confirm", "cancel", "prioritize", "read_logs", "run_command", "local_deploy", "unlock_state", "overwrite_state", "restore_state"].map((a) => [
      `stack.${a}`,
      "runs and Terraform state are executed by runners outside Countersign: the runner asks the check API, no Countersign operation enforces it",
    ]),
  ),
  ...Object.fromEntries(["create", "read", "update", "delete"].map((a) => [`runner_group.${a}`, "runner groups are not modeled in Countersign: the tuple exists for runners asking the check API"])),
  "runner.delete": "runners are not modeled in Countersign: the tuple exists for runners asking the check API",
  "label.update": "checked per protected key inside createStack/updateStack, after (stack, create|update): no operation decides it alone",
  "stack_authz_group.assign": "checked per group inside createStack/updateStack, after (stack, create|update): no operation decides it alone",
  "member.delete": "no operation removes a membership (deactivateMember is (member, update))",
  "identity_source.update": "createGroupBinding/updateGroupBinding also need (role, assign) on every attached role: no operation decides it alone",
  "approval_policy.manage": "owner-only: no grant reaches it, only the organization's owner (test/check/check-api.test.ts, OWNER)",
  "gateway_policy.manage": "owner-only: no grant reaches it, only the organization's owner",
  "hold_authority.change": "owner-only: no grant reaches it, only the organization's owner (test/hold-authority runs every change as every role)",
  // Has an operation, not run here: Workspace.holdAuthorityChanges answers null, not an error, to a
  // reader without the grant, so "allowed" is not an error here; test/hold-authority covers who reads it.
  "hold_authority.read": "read as the field Workspace.holdAuthorityChanges, null without the grant: covered by test/hold-authority",
  // Has an operation, not run here: voteOnApprovalRequest needs a tool call held by the gateway
  // (test/approvals covers who may vote); the check answers (approval_request, decide) on the
  // workspace, found by the action itself like every workspace-scoped gateway family.
  "approval_request.decide": "voteOnApprovalRequest needs a call held by the gateway: covered by test/approvals",
};

const PAIRS = RESOURCE_TYPES.flatMap((rt) => (FAMILIES[rt].actions as readonly string[]).map((action) => ({ rt, action, key: `${rt}.${action}` })));

describe("the table covers the catalog", () => {
  it("every (resource_type, action) of the catalog has an operation or a stated reason, and nothing else is listed", () => {
    const keys = new Set(PAIRS.map((p) => p.key));
    const unlisted = PAIRS.filter((p) => !(p.key in OPERATIONS) && !(p.key in NO_OPERATION)).map((p) => p.key);
    expect(unlisted, "catalog pairs with neither an operation nor a reason").toEqual([]);
    expect(Object.keys(OPERATIONS).filter((k) => k in NO_OPERATION)).toEqual([]);
    expect([...Object.keys(OPERATIONS), ...Object.keys(NO_OPERATION)].filter((k) => !keys.has(k))).toEqual([]);
  });
});

// ── Principals: small generated roles over patterns and authz groups ──────────────────

/** A grant as the fixture takes it. */
type Grant = NonNullable<NonNullable<Parameters<typeof addMember>[2]>["grants"]>[number];
/** One grant's targeting, or absent. */
const TARGETINGS = ["absent", "any", "team-a", "other", "group"] as const;
type Targeting = (typeof TARGETINGS)[number];

function grantOf(rt: ConcreteResourceType, a: string, how: Targeting): Grant | null {
  const f = FAMILIES[rt];
  const action = a as Action;
  // A group on a create is refused by the validator and by the table's CHECK: no such grant exists.
  if (how === "absent" || (how === "group" && action === "create")) return null;
  if (how === "any" || (how !== "group" && !f.supportsPattern) || (how === "group" && !f.supportsAuthzGroup)) return { resourceType: rt, action };
  if (how === "group") return { resourceType: rt, action, authzGroup: "grp-a" };
  return { resourceType: rt, action, resourcePattern: how === "team-a" ? "team-a-%" : "other-%" };
}

interface Case {
  label: string;
  prefix: "team-a-" | "other-";
  grouped: boolean;
  grants: Grant[];
}

/** The principal's role: the action, read on the family, and read on the parent stack of a create, each targeted or absent. */
function generated(rt: ConcreteResourceType, action: string, runs: number, seed: number): Case[] {
  const arb = fc.record({
    prefix: fc.constantFrom("team-a-" as const, "other-" as const),
    grouped: fc.boolean(),
    act: fc.constantFrom(...TARGETINGS),
    read: fc.constantFrom(...TARGETINGS),
    parent: fc.constantFrom(...TARGETINGS),
  });
  const hasRead = (FAMILIES[rt].actions as readonly string[]).includes("read");
  return fc.sample(arb, { numRuns: runs, seed }).map((s) => {
    const grants = [
      grantOf(rt, action, s.act),
      hasRead && action !== "read" ? grantOf(rt, "read", s.read) : null,
      CREATE_PARENT[rt] && action === "create" ? grantOf("stack", "read", s.parent) : null,
    ].filter((g): g is Grant => g !== null);
    return { label: JSON.stringify(s), prefix: s.prefix, grouped: s.grouped, grants };
  });
}

const RUNS = 3;
const SEED = 20261203;
const CASES = PAIRS.filter((p) => p.key in OPERATIONS).flatMap((p, i) =>
  generated(p.rt, p.action, RUNS, SEED + i).map((c) => ({ ...p, ...c })),
);
/** The two disagreements found by hand, verbatim. */
const VERBATIM = [
  {
    rt: "stack" as ConcreteResourceType,
    action: "update",
    key: "stack.update",
    label: "(stack, update, team-a-*) + (stack, read, other-*) on team-a-1",
    prefix: "team-a-" as const,
    grouped: false,
    grants: [
      { resourceType: "stack", action: "update", resourcePattern: "team-a-%" },
      { resourceType: "stack", action: "read", resourcePattern: "other-%" },
    ] as Grant[],
  },
  {
    rt: "stack" as ConcreteResourceType,
    action: "read_data",
    key: "stack.read_data",
    label: "(stack, read_data, team-b-*) alone, self-check by resourceId",
    prefix: "team-b-" as unknown as "team-a-",
    grouped: false,
    grants: [{ resourceType: "stack", action: "read_data", resourcePattern: "team-b-%" }] as Grant[],
    self: true,
  },
];

async function ask(token: string, check: Record<string, unknown>) {
  const res = await t.gql(CHECK, { checks: [check] }, token);
  expect(res.errors).toBeUndefined();
  const r = res.data.checkPermissions;
  expect(r.__typename, JSON.stringify(r)).toBe("QueryCheckPermissionsSuccess");
  return r.data[0];
}

// Each case makes its own resources and principal: they run a few at a time.
describe.concurrent("the check API answers what the operation does (principal × action × resource)", () => {
  it.each([...VERBATIM, ...CASES].map((c) => [`${c.key} — ${c.label}`, c] as const))("%s", async (_name, c) => {
    const op = OPERATIONS[c.key]!;
    const w: World = { name: `${c.prefix}${uid()}`, groups: c.grouped ? ["grp-a"] : [] };
    const { target, run } = await op.setup(w);
    const principal = await addMember(t.db, org.orgId, { grants: c.grants });
    const self = "self" in c && c.self === true;
    const answer = await ask(self ? principal.token : org.adminToken, {
      ...(self ? {} : { principalId: principal.userId }),
      resourceType: c.rt,
      action: c.action,
      ...target,
    });
    const outcome = await run(principal.token);
    expect(
      answer.allowed,
      `${op.operation} answered ${outcome.answer}; the check API said ${answer.decision} (missing ${JSON.stringify(answer.missing)}) for grants ${JSON.stringify(c.grants)} on ${JSON.stringify(w)}`,
    ).toBe(outcome.allowed);
  });
});
