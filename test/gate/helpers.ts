// Shared set-up for the apply-gate tests: a stack and workspaces, people with exactly the grants
// a test needs, and the GraphQL operations the tests (and a chatops bot) run.

import type { TestApp } from "../helpers/harness.js";
import { addMember, type MemberFixture } from "../helpers/fixtures.js";
import type { Permission } from "../../src/domain/catalog/index.js";

let counter = 0;
export const uniq = (prefix: string) => `${prefix}-${process.pid}-${++counter}-${Math.random().toString(36).slice(2, 6)}`;

type Grant = Partial<Permission> & Pick<Permission, "resourceType" | "action">;

export const READ: Grant = { resourceType: "workspace", action: "read" };
export const APPROVE: Grant = { resourceType: "workspace", action: "approve" };
export const PLAN: Grant = { resourceType: "workspace", action: "plan" };

export interface Person extends MemberFixture {
  name: string;
}

/** A member holding a fresh custom role of exactly these grants (read + approve by default). */
export async function person(t: TestApp, orgId: string, name: string, grants: Grant[] = [READ, APPROVE], extra: { superAdmin?: boolean } = {}) {
  const m = await addMember(t.db, orgId, { grants, name: uniq(name), ...extra });
  return { ...m, name } as Person;
}

/** A custom role (direct assignments are single-role: assigning replaces the user's role). */
export async function role(t: TestApp, orgId: string, name: string, grants: Grant[] = [READ, APPROVE]) {
  return t.db.prisma.role.create({
    data: {
      orgId,
      key: uniq(name.toLowerCase()),
      name: uniq(name),
      permissions: {
        create: grants.map((g) => ({ resourceType: g.resourceType, action: g.action, resourcePattern: g.resourcePattern ?? "", authzGroup: g.authzGroup ?? "" })),
      },
    },
  });
}

/** A member whose single direct role is `roleId`. */
export async function memberOf(t: TestApp, orgId: string, roleId: string, name: string): Promise<Person> {
  const m = await addMember(t.db, orgId, { name: uniq(name) });
  await t.db.prisma.roleAssignment.create({ data: { orgId, userId: m.userId, roleId } });
  return { ...m, name };
}

export async function seedStack(t: TestApp, orgId: string, authzGroups: string[] = []) {
  const name = uniq("stack");
  return t.db.prisma.stack.create({
    data: { orgId, name, authzGroups, groupMembers: { create: authzGroups.map((groupName) => ({ orgId, groupName, stackName: name })) } },
  });
}

export async function seedWorkspace(t: TestApp, orgId: string, stackId: string, requiredApprovals = 0, name = uniq("ws")) {
  return t.db.prisma.workspace.create({ data: { orgId, stackId, name, requiredApprovals } });
}

// ── Operations ──────────────────────────────────────────────────────────────────────────

export const ERROR_FIELDS = `... on Error { code message }
  ... on PermissionDeniedError { missing { resourceType action matchValue } }
  ... on ValidationError { issues { field code message } }
  ... on InvalidStateError { state }`;

export const SUBMIT = `mutation($input: SubmitPlanInput!) {
  submitPlan(input: $input) { __typename ... on MutationSubmitPlanSuccess { data { id status targeted targets changeCount } } ${ERROR_FIELDS} }
}`;
export const APPROVE_PLAN = `mutation($planId: ID!) {
  approvePlan(planId: $planId) { __typename ... on MutationApprovePlanSuccess { data { id approvedAt user { id } } } ${ERROR_FIELDS} }
}`;
export const APPLY = `mutation($planId: ID!) {
  applyPlan(planId: $planId) {
    __typename
    ... on MutationApplyPlanSuccess { data { id status applyStartedBy { id } storedGate { source passed evaluation { approvalsCounted } } } }
    ... on GateNotPassedError { reasons { code message } gate { version passed evaluation { reasons { code message } } } }
    ${ERROR_FIELDS}
  }
}`;
export const GATE = `query($planId: ID!) {
  gate(planId: $planId) {
    planId planStatus version source passed
    evaluation {
      passed countMet reservationsAnswered approvalsCounted summary
      countedApprovers { id } ignoredApprovers { id }
      baseline { applies required counted met holdingChanges countedApprovers { id } }
      changes { address action effectiveCount onBaseline governedBy { policyName count auto } }
      requirements { policyName action count auto counted countMet approverListSatisfied satisfied namedApprovers { id }
                     missingApprovers { users { id } roles { id name } eligibleUsers { id } } }
      reservations { reservationId holderKind holderUser { id } holderRole { id name } placedBy { id } answered answeredBy { id } currentMembers { id name } }
      reasons { code message policyId action reservationId }
    }
  }
}`;
export const RESERVE = `mutation($input: ReserveWorkspaceInput!) {
  reserveWorkspace(input: $input) { __typename ... on MutationReserveWorkspaceSuccess { data { id holderKind active placedBy { id } holderUser { id } holderRole { id } } } ${ERROR_FIELDS} }
}`;
export const RELEASE = `mutation($id: ID!) {
  releaseReservation(id: $id) { __typename ... on MutationReleaseReservationSuccess { data { id active releasedAt releasedBy { id } releaseReason } } ${ERROR_FIELDS} }
}`;
export const CREATE_POLICY = `mutation($input: CreateResourcePolicyInput!) {
  createResourcePolicy(input: $input) { __typename ... on MutationCreateResourcePolicySuccess { data { id name revision } } ${ERROR_FIELDS} }
}`;
export const UPDATE_POLICY = `mutation($input: UpdateResourcePolicyInput!) {
  updateResourcePolicy(input: $input) { __typename ... on MutationUpdateResourcePolicySuccess { data { id name revision } } ${ERROR_FIELDS} ... on ConflictError { currentRevision } }
}`;

export type Action = "CREATE" | "UPDATE" | "DELETE" | "REPLACE";

export function ops(t: TestApp) {
  const ok = <T>(res: { data: any; errors?: any[] }, field: string): T => {
    if (res.errors) throw new Error(`${field}: ${JSON.stringify(res.errors)}`);
    const value = res.data[field];
    if (value?.__typename && !value.__typename.endsWith("Success")) throw new Error(`${field}: ${value.__typename} ${value.message}`);
    return value?.data ?? value;
  };
  return {
    ok,
    async submit(token: string, workspaceId: string, changes: { address: string; action: Action }[], extra: Record<string, unknown> = {}) {
      return ok<{ id: string }>(await t.gql(SUBMIT, { input: { workspaceId, changes, ...extra } }, token), "submitPlan");
    },
    async approve(token: string, planId: string) {
      return (await t.gql(APPROVE_PLAN, { planId }, token)).data.approvePlan;
    },
    async apply(token: string, planId: string) {
      return (await t.gql(APPLY, { planId }, token)).data.applyPlan;
    },
    async gate(token: string, planId: string) {
      const res = await t.gql(GATE, { planId }, token);
      if (res.errors) throw new Error(JSON.stringify(res.errors));
      return res.data.gate;
    },
    async reserve(token: string, workspaceId: string, roleId?: string) {
      return (await t.gql(RESERVE, { input: { workspaceId, ...(roleId ? { roleId } : {}) } }, token)).data.reserveWorkspace;
    },
    async release(token: string, id: string) {
      return (await t.gql(RELEASE, { id }, token)).data.releaseReservation;
    },
    async policy(
      token: string,
      input: {
        name?: string;
        workspaceIds: string[];
        addressPatterns?: string[];
        assignments?: { workspaceId: string; address: string }[];
        requirements?: { action: Action; count?: number | null; approverUserIds?: string[]; approverRoleIds?: string[] }[];
      },
    ) {
      return ok<{ id: string; revision: number }>(
        await t.gql(CREATE_POLICY, { input: { name: uniq("policy"), ...input } }, token),
        "createResourcePolicy",
      );
    },
  };
}

/** Every action of a policy asking the same count (and approvers). */
export const allActions = (count: number | null, approvers: { approverUserIds?: string[]; approverRoleIds?: string[] } = {}) =>
  (["CREATE", "UPDATE", "DELETE", "REPLACE"] as const).map((action) => ({ action, count, ...approvers }));
