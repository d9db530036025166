// A gate to look at, made through the public API with the clients' own documents: an org, an
// approver (workspace-approver) and a runner (workspace-runner), a stack, a workspace with
// baseline 1 and one planned plan on it.
import {
  ApplyPlanDocument,
  ApprovePlanDocument,
  CreateWorkspaceDocument,
  ReportPlanResultDocument,
  ReserveWorkspaceDocument,
  SubmitPlanDocument,
  type TypedDocumentString,
} from "../../src/generated/graphql/graphql.js";
import type { TestApp } from "../helpers/harness.js";
import { addMember, createOrg } from "../helpers/fixtures.js";

export interface GateSeed {
  orgId: string;
  admin: { userId: string; token: string };
  approver: { userId: string; token: string; name: string };
  runner: { userId: string; token: string };
  workspaceId: string;
  workspaceName: string;
  planId: string;
}

/** One typed operation through yoga.fetch; GraphQL errors throw. */
export async function op<TResult, TVariables>(t: TestApp, document: TypedDocumentString<TResult, TVariables>, variables: TVariables, token: string): Promise<TResult> {
  const result = await t.gql<TResult>(document.toString(), variables as Record<string, unknown>, token);
  if (result.errors?.length) throw new Error(JSON.stringify(result.errors));
  return result.data;
}

function success<T>(result: { __typename: string; data?: T; message?: string }): T {
  if (result.data === undefined) throw new Error(`${result.__typename}: ${result.message ?? ""}`);
  return result.data;
}

let counter = 0;

export async function seedGate(t: TestApp, options: { approverName?: string } = {}): Promise<GateSeed> {
  const n = `${process.pid}-${++counter}`;
  const org = await createOrg(t.db);
  const approverName = options.approverName ?? `Carol ${n}`;
  const approver = await addMember(t.db, org.orgId, { role: "workspace-approver", name: approverName });
  const runner = await addMember(t.db, org.orgId, { role: "workspace-runner", name: `CI bot ${n}` });
  const stack = await t.gql<{ createStack: { data?: { id: string } } }>(
    `mutation($name: String!) { createStack(input: { name: $name }) { ... on MutationCreateStackSuccess { data { id } } ... on Error { message } } }`,
    { name: `payments-${n}` },
    org.adminToken,
  );
  const stackId = stack.data.createStack.data?.id;
  if (!stackId) throw new Error(`createStack failed: ${JSON.stringify(stack)}`);
  const workspaceName = `payments-prod-${n}`;
  const workspace = success(
    (await op(t, CreateWorkspaceDocument, { input: { stackId, name: workspaceName, environment: "prod", requiredApprovals: 1 } }, org.adminToken)).createWorkspace,
  );
  const plan = success(
    (
      await op(
        t,
        SubmitPlanDocument,
        { input: { workspaceId: workspace.id, changes: [{ address: "aws_db_instance.main", action: "DELETE" }, { address: "aws_s3_bucket.logs", action: "CREATE" }] } },
        runner.token,
      )
    ).submitPlan,
  );
  return {
    orgId: org.orgId,
    admin: { userId: org.adminId, token: org.adminToken },
    approver: { ...approver, name: approverName },
    runner,
    workspaceId: workspace.id,
    workspaceName,
    planId: plan.id,
  };
}

export const approveAs = async (t: TestApp, planId: string, token: string) => success((await op(t, ApprovePlanDocument, { planId }, token)).approvePlan);
export const reserveFor = async (t: TestApp, workspaceId: string, token: string, roleId: string | null = null) =>
  success((await op(t, ReserveWorkspaceDocument, { workspaceId, roleId }, token)).reserveWorkspace);
export const applyAs = async (t: TestApp, planId: string, token: string) => (await op(t, ApplyPlanDocument, { planId }, token)).applyPlan;
export const reportApplied = async (t: TestApp, planId: string, token: string) =>
  success((await op(t, ReportPlanResultDocument, { input: { planId, outcome: "APPLIED" } }, token)).reportPlanResult);
