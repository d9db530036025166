-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateEnum
CREATE TYPE "PlanStatus" AS ENUM ('planned', 'applying', 'applied', 'failed', 'discarded');

-- CreateEnum
CREATE TYPE "ChangeAction" AS ENUM ('create', 'update', 'delete', 'replace');

-- CreateEnum
CREATE TYPE "ApprovalRequestStatus" AS ENUM ('pending', 'approved', 'rejected', 'expired', 'invalidated', 'default_deny');

-- CreateEnum
CREATE TYPE "ExecutionStatus" AS ENUM ('none', 'pending', 'dispatched', 'executed', 'failed');

-- CreateTable
CREATE TABLE "organizations" (
    "id" TEXT NOT NULL,
    "slug" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "ownerUserId" TEXT,
    "protectedLabelKeys" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "deletedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "organizations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "users" (
    "id" TEXT NOT NULL,
    "email" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "isServiceAccount" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "users_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "memberships" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "userId" TEXT NOT NULL,
    "isSuperAdmin" BOOLEAN NOT NULL DEFAULT false,
    "deactivatedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "memberships_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_tokens" (
    "id" TEXT NOT NULL,
    "userId" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "tokenHash" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lastUsedAt" TIMESTAMP(3),
    "expiresAt" TIMESTAMP(3),
    "revokedAt" TIMESTAMP(3),

    CONSTRAINT "api_tokens_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "roles" (
    "id" TEXT NOT NULL,
    "orgId" TEXT,
    "key" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "system" BOOLEAN NOT NULL DEFAULT false,
    "deletedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "roles_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "role_permissions" (
    "id" TEXT NOT NULL,
    "roleId" TEXT NOT NULL,
    "resourceType" TEXT NOT NULL,
    "action" TEXT NOT NULL,
    "resourcePattern" TEXT NOT NULL DEFAULT '',
    "authzGroup" TEXT NOT NULL DEFAULT '',

    CONSTRAINT "role_permissions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "role_assignments" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "userId" TEXT NOT NULL,
    "roleId" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "role_assignments_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "identity_sources" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "kind" TEXT NOT NULL DEFAULT 'saml',
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "identity_sources_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "user_identity_groups" (
    "identitySourceId" TEXT NOT NULL,
    "userId" TEXT NOT NULL,
    "groupKey" TEXT NOT NULL,
    "syncedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "user_identity_groups_pkey" PRIMARY KEY ("identitySourceId","userId","groupKey")
);

-- CreateTable
CREATE TABLE "identity_group_bindings" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "identitySourceId" TEXT NOT NULL,
    "groupKey" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "identity_group_bindings_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "identity_group_binding_roles" (
    "bindingId" TEXT NOT NULL,
    "roleId" TEXT NOT NULL,

    CONSTRAINT "identity_group_binding_roles_pkey" PRIMARY KEY ("bindingId","roleId")
);

-- CreateTable
CREATE TABLE "stacks" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "labels" JSONB NOT NULL DEFAULT '{}',
    "authzGroups" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "outputs" JSONB NOT NULL DEFAULT '[]',
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "stacks_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "stack_authz_group_members" (
    "orgId" TEXT NOT NULL,
    "groupName" TEXT NOT NULL,
    "stackName" TEXT NOT NULL,
    "stackId" TEXT NOT NULL,

    CONSTRAINT "stack_authz_group_members_pkey" PRIMARY KEY ("orgId","groupName","stackName")
);

-- CreateTable
CREATE TABLE "workspaces" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "stackId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "environment" TEXT NOT NULL DEFAULT 'dev',
    "requiredApprovals" INTEGER NOT NULL DEFAULT 0,
    "frozen" BOOLEAN NOT NULL DEFAULT false,
    "archivedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "workspaces_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "plans" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "status" "PlanStatus" NOT NULL DEFAULT 'planned',
    "targeted" BOOLEAN NOT NULL DEFAULT false,
    "targets" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "submittedById" TEXT NOT NULL,
    "discardReason" TEXT,
    "supersededById" TEXT,
    "applyEvaluation" JSONB,
    "applyStartedById" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    "applyStartedAt" TIMESTAMP(3),
    "finishedAt" TIMESTAMP(3),

    CONSTRAINT "plans_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "resource_changes" (
    "id" TEXT NOT NULL,
    "planId" TEXT NOT NULL,
    "address" TEXT NOT NULL,
    "action" "ChangeAction" NOT NULL,

    CONSTRAINT "resource_changes_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "approvals" (
    "id" TEXT NOT NULL,
    "planId" TEXT NOT NULL,
    "userId" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "approvals_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "resource_policies" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "addressPatterns" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "revision" INTEGER NOT NULL DEFAULT 1,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "resource_policies_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "resource_policy_workspaces" (
    "policyId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,

    CONSTRAINT "resource_policy_workspaces_pkey" PRIMARY KEY ("policyId","workspaceId")
);

-- CreateTable
CREATE TABLE "resource_policy_assignments" (
    "policyId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "address" TEXT NOT NULL,

    CONSTRAINT "resource_policy_assignments_pkey" PRIMARY KEY ("policyId","workspaceId","address")
);

-- CreateTable
CREATE TABLE "policy_requirements" (
    "id" TEXT NOT NULL,
    "policyId" TEXT NOT NULL,
    "action" "ChangeAction" NOT NULL,
    "count" INTEGER,

    CONSTRAINT "policy_requirements_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "policy_approvers" (
    "id" TEXT NOT NULL,
    "requirementId" TEXT NOT NULL,
    "userId" TEXT,
    "roleId" TEXT,

    CONSTRAINT "policy_approvers_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "reservations" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "holderUserId" TEXT,
    "holderRoleId" TEXT,
    "placedById" TEXT NOT NULL,
    "placedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "releasedById" TEXT,
    "releasedAt" TIMESTAMP(3),
    "releaseReason" TEXT,

    CONSTRAINT "reservations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "virtual_keys" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "keyHash" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "createdById" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "revokedAt" TIMESTAMP(3),

    CONSTRAINT "virtual_keys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "connections" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "provider" TEXT NOT NULL,
    "active" BOOLEAN NOT NULL DEFAULT true,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "connections_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "approval_policies" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "revision" INTEGER NOT NULL DEFAULT 1,
    "rules" JSONB NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "approval_policies_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "approval_requests" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "virtualKeyId" TEXT NOT NULL,
    "connectionId" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "logicalTool" TEXT,
    "environment" TEXT NOT NULL,
    "invocationId" TEXT NOT NULL,
    "idempotencyKey" TEXT NOT NULL,
    "argumentHash" TEXT NOT NULL,
    "payloadHash" TEXT NOT NULL,
    "requestSnapshot" JSONB NOT NULL,
    "amountUsd" DOUBLE PRECISION,
    "status" "ApprovalRequestStatus" NOT NULL DEFAULT 'pending',
    "closeReason" TEXT,
    "executionStatus" "ExecutionStatus" NOT NULL DEFAULT 'none',
    "policyRevisions" JSONB NOT NULL,
    "matchedRules" JSONB NOT NULL,
    "policySetHash" TEXT NOT NULL,
    "revision" INTEGER NOT NULL DEFAULT 1,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    "decidedAt" TIMESTAMP(3),

    CONSTRAINT "approval_requests_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "votes" (
    "id" TEXT NOT NULL,
    "requestId" TEXT NOT NULL,
    "userId" TEXT NOT NULL,
    "decision" TEXT NOT NULL,
    "comment" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "votes_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "delivery_jobs" (
    "id" TEXT NOT NULL,
    "requestId" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'queued',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "fence" INTEGER NOT NULL DEFAULT 0,
    "leaseOwner" TEXT,
    "leaseExpiresAt" TIMESTAMP(3),
    "nextRunAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "errorCode" TEXT,
    "lastError" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "delivery_jobs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "gateway_invocations" (
    "approvalId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "virtualKeyId" TEXT NOT NULL,
    "connectionId" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "logicalTool" TEXT,
    "invocationId" TEXT NOT NULL,
    "argumentHash" TEXT NOT NULL,
    "idempotencyKey" TEXT NOT NULL,
    "state" TEXT NOT NULL,
    "result" JSONB,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "executedAt" TIMESTAMP(3),

    CONSTRAINT "gateway_invocations_pkey" PRIMARY KEY ("approvalId")
);

-- CreateTable
CREATE TABLE "gateway_executions" (
    "virtualKeyId" TEXT NOT NULL,
    "idempotencyKey" TEXT NOT NULL,
    "approvalId" TEXT NOT NULL,
    "invocationId" TEXT NOT NULL,
    "state" TEXT NOT NULL,
    "result" JSONB,
    "error" TEXT,
    "startedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finishedAt" TIMESTAMP(3),

    CONSTRAINT "gateway_executions_pkey" PRIMARY KEY ("virtualKeyId","idempotencyKey")
);

-- CreateIndex
CREATE UNIQUE INDEX "organizations_slug_key" ON "organizations"("slug");

-- CreateIndex
CREATE UNIQUE INDEX "users_email_key" ON "users"("email");

-- CreateIndex
CREATE INDEX "memberships_userId_idx" ON "memberships"("userId");

-- CreateIndex
CREATE UNIQUE INDEX "memberships_orgId_userId_key" ON "memberships"("orgId", "userId");

-- CreateIndex
CREATE UNIQUE INDEX "api_tokens_tokenHash_key" ON "api_tokens"("tokenHash");

-- CreateIndex
CREATE INDEX "api_tokens_userId_idx" ON "api_tokens"("userId");

-- CreateIndex
CREATE UNIQUE INDEX "roles_orgId_key_key" ON "roles"("orgId", "key");

-- CreateIndex
CREATE UNIQUE INDEX "role_permissions_roleId_resourceType_action_resourcePattern_key" ON "role_permissions"("roleId", "resourceType", "action", "resourcePattern", "authzGroup");

-- CreateIndex
CREATE INDEX "role_assignments_roleId_idx" ON "role_assignments"("roleId");

-- CreateIndex
CREATE UNIQUE INDEX "role_assignments_orgId_userId_key" ON "role_assignments"("orgId", "userId");

-- CreateIndex
CREATE UNIQUE INDEX "identity_sources_orgId_name_key" ON "identity_sources"("orgId", "name");

-- CreateIndex
CREATE INDEX "user_identity_groups_userId_idx" ON "user_identity_groups"("userId");

-- CreateIndex
CREATE INDEX "identity_group_bindings_orgId_idx" ON "identity_group_bindings"("orgId");

-- CreateIndex
CREATE UNIQUE INDEX "identity_group_bindings_identitySourceId_groupKey_key" ON "identity_group_bindings"("identitySourceId", "groupKey");

-- CreateIndex
CREATE INDEX "identity_group_binding_roles_roleId_idx" ON "identity_group_binding_roles"("roleId");

-- CreateIndex
CREATE UNIQUE INDEX "stacks_orgId_name_key" ON "stacks"("orgId", "name");

-- CreateIndex
CREATE INDEX "stack_authz_group_members_stackId_idx" ON "stack_authz_group_members"("stackId");

-- CreateIndex
CREATE INDEX "workspaces_stackId_idx" ON "workspaces"("stackId");

-- CreateIndex
CREATE UNIQUE INDEX "workspaces_orgId_name_key" ON "workspaces"("orgId", "name");

-- CreateIndex
CREATE INDEX "plans_workspaceId_status_idx" ON "plans"("workspaceId", "status");

-- CreateIndex
CREATE UNIQUE INDEX "resource_changes_planId_address_key" ON "resource_changes"("planId", "address");

-- CreateIndex
CREATE UNIQUE INDEX "approvals_planId_userId_key" ON "approvals"("planId", "userId");

-- CreateIndex
CREATE UNIQUE INDEX "resource_policies_orgId_name_key" ON "resource_policies"("orgId", "name");

-- CreateIndex
CREATE INDEX "resource_policy_workspaces_workspaceId_idx" ON "resource_policy_workspaces"("workspaceId");

-- CreateIndex
CREATE INDEX "resource_policy_assignments_workspaceId_idx" ON "resource_policy_assignments"("workspaceId");

-- CreateIndex
CREATE UNIQUE INDEX "policy_requirements_policyId_action_key" ON "policy_requirements"("policyId", "action");

-- CreateIndex
CREATE UNIQUE INDEX "policy_approvers_requirementId_userId_roleId_key" ON "policy_approvers"("requirementId", "userId", "roleId");

-- CreateIndex
CREATE INDEX "reservations_workspaceId_releasedAt_idx" ON "reservations"("workspaceId", "releasedAt");

-- CreateIndex
CREATE INDEX "reservations_holderRoleId_idx" ON "reservations"("holderRoleId");

-- CreateIndex
CREATE UNIQUE INDEX "virtual_keys_keyHash_key" ON "virtual_keys"("keyHash");

-- CreateIndex
CREATE INDEX "virtual_keys_workspaceId_idx" ON "virtual_keys"("workspaceId");

-- CreateIndex
CREATE UNIQUE INDEX "connections_workspaceId_name_key" ON "connections"("workspaceId", "name");

-- CreateIndex
CREATE UNIQUE INDEX "approval_policies_workspaceId_name_key" ON "approval_policies"("workspaceId", "name");

-- CreateIndex
CREATE INDEX "approval_requests_workspaceId_status_idx" ON "approval_requests"("workspaceId", "status");

-- CreateIndex
CREATE INDEX "approval_requests_orgId_status_idx" ON "approval_requests"("orgId", "status");

-- CreateIndex
CREATE INDEX "approval_requests_status_expiresAt_idx" ON "approval_requests"("status", "expiresAt");

-- CreateIndex
CREATE UNIQUE INDEX "votes_requestId_userId_key" ON "votes"("requestId", "userId");

-- CreateIndex
CREATE UNIQUE INDEX "delivery_jobs_requestId_key" ON "delivery_jobs"("requestId");

-- CreateIndex
CREATE INDEX "delivery_jobs_status_nextRunAt_idx" ON "delivery_jobs"("status", "nextRunAt");

-- CreateIndex
CREATE INDEX "gateway_invocations_virtualKeyId_idempotencyKey_idx" ON "gateway_invocations"("virtualKeyId", "idempotencyKey");

-- AddForeignKey
ALTER TABLE "organizations" ADD CONSTRAINT "organizations_ownerUserId_fkey" FOREIGN KEY ("ownerUserId") REFERENCES "users"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "memberships" ADD CONSTRAINT "memberships_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "memberships" ADD CONSTRAINT "memberships_userId_fkey" FOREIGN KEY ("userId") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_userId_fkey" FOREIGN KEY ("userId") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "roles" ADD CONSTRAINT "roles_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "role_permissions" ADD CONSTRAINT "role_permissions_roleId_fkey" FOREIGN KEY ("roleId") REFERENCES "roles"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "role_assignments" ADD CONSTRAINT "role_assignments_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "role_assignments" ADD CONSTRAINT "role_assignments_userId_fkey" FOREIGN KEY ("userId") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "role_assignments" ADD CONSTRAINT "role_assignments_roleId_fkey" FOREIGN KEY ("roleId") REFERENCES "roles"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "role_assignments" ADD CONSTRAINT "role_assignments_orgId_userId_fkey" FOREIGN KEY ("orgId", "userId") REFERENCES "memberships"("orgId", "userId") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "identity_sources" ADD CONSTRAINT "identity_sources_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "user_identity_groups" ADD CONSTRAINT "user_identity_groups_identitySourceId_fkey" FOREIGN KEY ("identitySourceId") REFERENCES "identity_sources"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "user_identity_groups" ADD CONSTRAINT "user_identity_groups_userId_fkey" FOREIGN KEY ("userId") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "identity_group_bindings" ADD CONSTRAINT "identity_group_bindings_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "identity_group_bindings" ADD CONSTRAINT "identity_group_bindings_identitySourceId_fkey" FOREIGN KEY ("identitySourceId") REFERENCES "identity_sources"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "identity_group_binding_roles" ADD CONSTRAINT "identity_group_binding_roles_bindingId_fkey" FOREIGN KEY ("bindingId") REFERENCES "identity_group_bindings"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "identity_group_binding_roles" ADD CONSTRAINT "identity_group_binding_roles_roleId_fkey" FOREIGN KEY ("roleId") REFERENCES "roles"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "stacks" ADD CONSTRAINT "stacks_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "stack_authz_group_members" ADD CONSTRAINT "stack_authz_group_members_stackId_fkey" FOREIGN KEY ("stackId") REFERENCES "stacks"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "workspaces" ADD CONSTRAINT "workspaces_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "workspaces" ADD CONSTRAINT "workspaces_stackId_fkey" FOREIGN KEY ("stackId") REFERENCES "stacks"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "plans" ADD CONSTRAINT "plans_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "plans" ADD CONSTRAINT "plans_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "resource_changes" ADD CONSTRAINT "resource_changes_planId_fkey" FOREIGN KEY ("planId") REFERENCES "plans"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "approvals" ADD CONSTRAINT "approvals_planId_fkey" FOREIGN KEY ("planId") REFERENCES "plans"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "approvals" ADD CONSTRAINT "approvals_userId_fkey" FOREIGN KEY ("userId") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "resource_policies" ADD CONSTRAINT "resource_policies_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "resource_policy_workspaces" ADD CONSTRAINT "resource_policy_workspaces_policyId_fkey" FOREIGN KEY ("policyId") REFERENCES "resource_policies"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "resource_policy_workspaces" ADD CONSTRAINT "resource_policy_workspaces_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "resource_policy_assignments" ADD CONSTRAINT "resource_policy_assignments_policyId_fkey" FOREIGN KEY ("policyId") REFERENCES "resource_policies"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "resource_policy_assignments" ADD CONSTRAINT "resource_policy_assignments_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "policy_requirements" ADD CONSTRAINT "policy_requirements_policyId_fkey" FOREIGN KEY ("policyId") REFERENCES "resource_policies"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "policy_approvers" ADD CONSTRAINT "policy_approvers_requirementId_fkey" FOREIGN KEY ("requirementId") REFERENCES "policy_requirements"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "policy_approvers" ADD CONSTRAINT "policy_approvers_roleId_fkey" FOREIGN KEY ("roleId") REFERENCES "roles"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reservations" ADD CONSTRAINT "reservations_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reservations" ADD CONSTRAINT "reservations_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reservations" ADD CONSTRAINT "reservations_holderRoleId_fkey" FOREIGN KEY ("holderRoleId") REFERENCES "roles"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "virtual_keys" ADD CONSTRAINT "virtual_keys_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "virtual_keys" ADD CONSTRAINT "virtual_keys_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "connections" ADD CONSTRAINT "connections_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "connections" ADD CONSTRAINT "connections_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "approval_policies" ADD CONSTRAINT "approval_policies_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "approval_policies" ADD CONSTRAINT "approval_policies_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "approval_requests" ADD CONSTRAINT "approval_requests_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "approval_requests" ADD CONSTRAINT "approval_requests_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "votes" ADD CONSTRAINT "votes_requestId_fkey" FOREIGN KEY ("requestId") REFERENCES "approval_requests"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "votes" ADD CONSTRAINT "votes_userId_fkey" FOREIGN KEY ("userId") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "delivery_jobs" ADD CONSTRAINT "delivery_jobs_requestId_fkey" FOREIGN KEY ("requestId") REFERENCES "approval_requests"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- countersign:hand-written (below: SQL Prisma's schema cannot express)

-- Names compare byte-wise, so a prefix grant ('team-a-%') is one range scan on the
-- (orgId, name) index and list pages order the same way everywhere.
ALTER TABLE "stacks" ALTER COLUMN "name" TYPE TEXT COLLATE "C";
ALTER TABLE "workspaces" ALTER COLUMN "name" TYPE TEXT COLLATE "C";
ALTER TABLE "stack_authz_group_members" ALTER COLUMN "stackName" TYPE TEXT COLLATE "C";

-- Seed 004: an authz group is never on create, and never alongside a pattern.
ALTER TABLE "role_permissions" ADD CONSTRAINT "role_permissions_group_targeting"
  CHECK ("authzGroup" = '' OR ("action" NOT IN ('create', '*') AND "resourcePattern" = ''));

-- Seed 000: a count is 1, 2 or 3, or NULL for Auto. There is no count of zero.
ALTER TABLE "policy_requirements" ADD CONSTRAINT "policy_requirements_count"
  CHECK ("count" IS NULL OR "count" BETWEEN 1 AND 3);
ALTER TABLE "policy_approvers" ADD CONSTRAINT "policy_approvers_one_kind"
  CHECK (("userId" IS NULL) <> ("roleId" IS NULL));
ALTER TABLE "workspaces" ADD CONSTRAINT "workspaces_required_approvals"
  CHECK ("requiredApprovals" >= 0);

-- A reservation is held by exactly one person or one role; one active reservation per holder.
ALTER TABLE "reservations" ADD CONSTRAINT "reservations_one_holder"
  CHECK (("holderUserId" IS NULL) <> ("holderRoleId" IS NULL));
CREATE UNIQUE INDEX "reservations_active_user" ON "reservations" ("workspaceId", "holderUserId")
  WHERE "releasedAt" IS NULL AND "holderUserId" IS NOT NULL;
CREATE UNIQUE INDEX "reservations_active_role" ON "reservations" ("workspaceId", "holderRoleId")
  WHERE "releasedAt" IS NULL AND "holderRoleId" IS NOT NULL;

-- At most one plan applying per workspace, whatever races the application code loses.
CREATE UNIQUE INDEX "plans_one_applying" ON "plans" ("workspaceId") WHERE "status" = 'applying';

-- Gate status versions: monotonic across processes, so a client drops stale messages.
CREATE SEQUENCE "gate_version_seq";
