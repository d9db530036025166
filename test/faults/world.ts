// The data a fault test runs against, written straight to the database the server will use:
// an organization, a runner who plans, three approvers, a stack, a workspace with a connection,
// a virtual key and an approval policy (held calls file as pending requests).

import { createApprovalPolicy } from "../../src/services/approvals/policies.js";
import { Authz } from "../../src/authz/authz.js";
import { DEMO_UPSTREAM_URL } from "../../src/gateway/demo-upstream.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { openPostgres, type Database } from "../../src/infra/db.js";
import { createEventBus } from "../../src/infra/events.js";
import { migrate } from "../../src/infra/migrate.js";
import { reconcileSystemRoles, systemRoleId } from "../../src/services/system-roles.js";
import { addMember, createOrg } from "../helpers/fixtures.js";
import { gql } from "./harness.js";

export const APPROVAL_SECRET = "fault-test-approval-secret-0123456789abcdef";
export const SERVICE_TOKEN = "fault-test-gateway-service-token-0123456789";

export interface FaultWorld {
  db: Database;
  orgId: string;
  adminToken: string;
  adminId: string;
  runnerToken: string;
  approverTokens: string[];
  /** Holds the approval-reviewer system role: decides held calls. */
  reviewerToken: string;
  workspaceId: string;
  keyPlaintext: string;
}

export async function seedWorld(url: string, schema?: string): Promise<FaultWorld> {
  const db = await openPostgres(url, schema);
  await migrate(db.sql);
  await reconcileSystemRoles(db.prisma);
  const org = await createOrg(db);
  const runner = await addMember(db, org.orgId, { grants: [{ resourceType: "workspace", action: "read" }, { resourceType: "workspace", action: "plan" }] });
  const approvers = [];
  for (let i = 0; i < 3; i++) {
    approvers.push(await addMember(db, org.orgId, { grants: [{ resourceType: "workspace", action: "read" }, { resourceType: "workspace", action: "approve" }] }));
  }
  const reviewer = await addMember(db, org.orgId, { role: "approval-reviewer" });
  const stack = await db.prisma.stack.create({ data: { orgId: org.orgId, name: "faults" } });
  const ws = await db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: "faults-prod", environment: "prod", production: true, requiredApprovals: 3 } });
  // Its tools run on the server's in-process demo upstream (src/gateway/demo-upstream.ts).
  await db.prisma.connection.create({ data: { orgId: org.orgId, workspaceId: ws.id, name: "github", provider: "github", url: DEMO_UPSTREAM_URL } });
  const key = generateVirtualKey();
  await db.prisma.virtualKey.create({
    data: { orgId: org.orgId, workspaceId: ws.id, name: "agent", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: org.adminId },
  });
  const admin = await db.prisma.user.findUniqueOrThrow({ where: { id: org.adminId } });
  const viewer = { userId: admin.id, orgId: org.orgId, tokenId: "seed", name: admin.name, email: admin.email, isServiceAccount: false };
  const events = createEventBus({});
  await createApprovalPolicy({ db, events, authz: new Authz(db.sql, viewer) }, {
    workspaceId: ws.id,
    name: "reviewers",
    rules: [{ id: "one", effect: "allow", tools: ["github.*"], environments: ["prod"], roles: [systemRoleId("approval-reviewer")], count: 1 }],
  });
  await events.close();
  return {
    db,
    orgId: org.orgId,
    adminToken: org.adminToken,
    adminId: org.adminId,
    runnerToken: runner.token,
    approverTokens: approvers.map((a) => a.token),
    reviewerToken: reviewer.token,
    workspaceId: ws.id,
    keyPlaintext: key,
  };
}

export const SUBMIT = `mutation($input: SubmitPlanInput!) {
  submitPlan(input: $input) { __typename ... on MutationSubmitPlanSuccess { data { id } } ... on Error { code message } }
}`;
export const APPROVE_PLAN = `mutation($planId: ID!) {
  approvePlan(planId: $planId) { __typename ... on MutationApprovePlanSuccess { data { id } } ... on Error { code message } }
}`;
export const RESERVE = `mutation($input: ReserveWorkspaceInput!) {
  reserveWorkspace(input: $input) { __typename ... on MutationReserveWorkspaceSuccess { data { id } } ... on Error { code message } }
}`;
export const PLAN_GATE = `subscription($planId: ID!) { planGate(planId: $planId) {
  planId version passed evaluation { approvalsCounted reservations { reservationId } }
} }`;
export const WORKSPACE_GATES = `subscription($w: ID!) { workspaceGates(workspaceId: $w) { workspaceId version plans { planId passed evaluation { approvalsCounted } } } }`;

export const REQUEST_STATUS = `subscription($id: ID!) { approvalRequestStatus(requestId: $id) { id status revision } }`;
export const VOTE = `mutation($input: VoteOnApprovalRequestInput!) {
  voteOnApprovalRequest(input: $input) { __typename ... on MutationVoteOnApprovalRequestSuccess { data { request { id status revision } } } ... on Error { code message } }
}`;

export type GateMsg = { planId: string; version: number; passed: boolean; evaluation: { approvalsCounted: number; reservations: { reservationId: string }[] } };
export type WorkspaceMsg = { workspaceId: string; version: number; plans: { planId: string; passed: boolean; evaluation: { approvalsCounted: number } }[] };

export async function submitPlan(base: string, w: FaultWorld): Promise<string> {
  const res = await gql(base, w.runnerToken, SUBMIT, { input: { workspaceId: w.workspaceId, changes: [{ address: "aws_s3_bucket.logs", action: "CREATE" }] } });
  const id = res.body.data?.submitPlan?.data?.id;
  if (!id) throw new Error(`submitPlan: ${JSON.stringify(res.body)}`);
  return id;
}

/** A destructive tools/call through the embedded gateway: 423 + approval_id when held. */
export async function heldCall(base: string, w: FaultWorld, repo: string) {
  const response = await fetch(`${base}/gateway/v1/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${w.keyPlaintext}` },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo } } }),
  });
  const body = (await response.json()) as any;
  return { status: response.status, approvalId: body?.error?.data?.approval_id as string | undefined, body };
}
