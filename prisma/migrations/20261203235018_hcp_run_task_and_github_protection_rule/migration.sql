-- CreateTable
CREATE TABLE "hcp_run_tasks" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "hmacKeySealed" TEXT NOT NULL,
    "configuredById" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "hcp_run_tasks_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "hcp_workspace_mappings" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "runTaskId" TEXT NOT NULL,
    "hcpOrganization" TEXT NOT NULL,
    "hcpWorkspace" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "createdById" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "hcp_workspace_mappings_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "hcp_run_task_requests" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "runTaskId" TEXT NOT NULL,
    "taskResultId" TEXT NOT NULL,
    "runId" TEXT NOT NULL,
    "runUrl" TEXT,
    "stage" TEXT NOT NULL,
    "hcpOrganization" TEXT NOT NULL,
    "hcpWorkspaceName" TEXT NOT NULL,
    "hcpWorkspaceId" TEXT NOT NULL,
    "workspaceId" TEXT,
    "planId" TEXT,
    "planJsonUrl" TEXT,
    "callbackUrl" TEXT NOT NULL,
    "accessTokenSealed" TEXT,
    "state" TEXT NOT NULL DEFAULT 'received',
    "decidedStatus" TEXT,
    "decidedMessage" TEXT,
    "sentStatus" TEXT,
    "sentMessage" TEXT,
    "sentAt" TIMESTAMP(3),
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "fence" INTEGER NOT NULL DEFAULT 0,
    "leaseOwner" TEXT,
    "leaseExpiresAt" TIMESTAMP(3),
    "nextRunAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deadlineAt" TIMESTAMP(3) NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "hcp_run_task_requests_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "hcp_callback_attempts" (
    "id" TEXT NOT NULL,
    "requestId" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "message" TEXT NOT NULL,
    "ok" BOOLEAN NOT NULL,
    "responseCode" INTEGER,
    "error" TEXT,
    "at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "hcp_callback_attempts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "github_integrations" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "appId" TEXT NOT NULL,
    "privateKeySealed" TEXT NOT NULL,
    "webhookSecretSealed" TEXT NOT NULL,
    "configuredById" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "github_integrations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "github_environment_mappings" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "integrationId" TEXT NOT NULL,
    "repository" TEXT NOT NULL,
    "environment" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "createdById" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "github_environment_mappings_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "github_protection_requests" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "integrationId" TEXT NOT NULL,
    "bodyDigest" TEXT NOT NULL,
    "deliveryId" TEXT,
    "installationId" TEXT NOT NULL,
    "repository" TEXT NOT NULL,
    "environment" TEXT NOT NULL,
    "runId" TEXT NOT NULL,
    "callbackUrl" TEXT NOT NULL,
    "runPageUrl" TEXT NOT NULL,
    "workspaceId" TEXT,
    "planId" TEXT,
    "status" TEXT NOT NULL DEFAULT 'waiting',
    "state" TEXT,
    "comment" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "fence" INTEGER NOT NULL DEFAULT 0,
    "nextRunAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "leaseOwner" TEXT,
    "leaseExpiresAt" TIMESTAMP(3),
    "responseCode" INTEGER,
    "lastError" TEXT,
    "decidedAt" TIMESTAMP(3),
    "deliveredAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "github_protection_requests_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "github_callback_attempts" (
    "id" TEXT NOT NULL,
    "requestId" TEXT NOT NULL,
    "attempt" INTEGER NOT NULL,
    "state" TEXT NOT NULL,
    "responseCode" INTEGER,
    "error" TEXT,
    "at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "github_callback_attempts_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "hcp_run_tasks_orgId_key" ON "hcp_run_tasks"("orgId");

-- CreateIndex
CREATE INDEX "hcp_workspace_mappings_workspaceId_idx" ON "hcp_workspace_mappings"("workspaceId");

-- CreateIndex
CREATE UNIQUE INDEX "hcp_workspace_mappings_runTaskId_hcpOrganization_hcpWorkspa_key" ON "hcp_workspace_mappings"("runTaskId", "hcpOrganization", "hcpWorkspace");

-- CreateIndex
CREATE INDEX "hcp_run_task_requests_state_nextRunAt_idx" ON "hcp_run_task_requests"("state", "nextRunAt");

-- CreateIndex
CREATE INDEX "hcp_run_task_requests_planId_idx" ON "hcp_run_task_requests"("planId");

-- CreateIndex
CREATE UNIQUE INDEX "hcp_run_task_requests_runTaskId_taskResultId_key" ON "hcp_run_task_requests"("runTaskId", "taskResultId");

-- CreateIndex
CREATE INDEX "hcp_callback_attempts_requestId_at_idx" ON "hcp_callback_attempts"("requestId", "at");

-- CreateIndex
CREATE UNIQUE INDEX "github_integrations_orgId_key" ON "github_integrations"("orgId");

-- CreateIndex
CREATE UNIQUE INDEX "github_environment_mappings_integrationId_repository_enviro_key" ON "github_environment_mappings"("integrationId", "repository", "environment");

-- CreateIndex
CREATE INDEX "github_protection_requests_status_nextRunAt_idx" ON "github_protection_requests"("status", "nextRunAt");

-- CreateIndex
CREATE INDEX "github_protection_requests_workspaceId_status_idx" ON "github_protection_requests"("workspaceId", "status");

-- CreateIndex
CREATE UNIQUE INDEX "github_protection_requests_integrationId_bodyDigest_key" ON "github_protection_requests"("integrationId", "bodyDigest");

-- CreateIndex
CREATE INDEX "github_callback_attempts_requestId_attempt_idx" ON "github_callback_attempts"("requestId", "attempt");

-- AddForeignKey
ALTER TABLE "hcp_run_tasks" ADD CONSTRAINT "hcp_run_tasks_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hcp_run_tasks" ADD CONSTRAINT "hcp_run_tasks_configuredById_fkey" FOREIGN KEY ("configuredById") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hcp_workspace_mappings" ADD CONSTRAINT "hcp_workspace_mappings_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hcp_workspace_mappings" ADD CONSTRAINT "hcp_workspace_mappings_runTaskId_fkey" FOREIGN KEY ("runTaskId") REFERENCES "hcp_run_tasks"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hcp_workspace_mappings" ADD CONSTRAINT "hcp_workspace_mappings_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hcp_workspace_mappings" ADD CONSTRAINT "hcp_workspace_mappings_createdById_fkey" FOREIGN KEY ("createdById") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hcp_run_task_requests" ADD CONSTRAINT "hcp_run_task_requests_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hcp_run_task_requests" ADD CONSTRAINT "hcp_run_task_requests_runTaskId_fkey" FOREIGN KEY ("runTaskId") REFERENCES "hcp_run_tasks"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hcp_run_task_requests" ADD CONSTRAINT "hcp_run_task_requests_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hcp_run_task_requests" ADD CONSTRAINT "hcp_run_task_requests_planId_fkey" FOREIGN KEY ("planId") REFERENCES "plans"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hcp_callback_attempts" ADD CONSTRAINT "hcp_callback_attempts_requestId_fkey" FOREIGN KEY ("requestId") REFERENCES "hcp_run_task_requests"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "github_integrations" ADD CONSTRAINT "github_integrations_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "github_integrations" ADD CONSTRAINT "github_integrations_configuredById_fkey" FOREIGN KEY ("configuredById") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "github_environment_mappings" ADD CONSTRAINT "github_environment_mappings_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "github_environment_mappings" ADD CONSTRAINT "github_environment_mappings_integrationId_fkey" FOREIGN KEY ("integrationId") REFERENCES "github_integrations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "github_environment_mappings" ADD CONSTRAINT "github_environment_mappings_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "github_environment_mappings" ADD CONSTRAINT "github_environment_mappings_createdById_fkey" FOREIGN KEY ("createdById") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "github_protection_requests" ADD CONSTRAINT "github_protection_requests_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "github_protection_requests" ADD CONSTRAINT "github_protection_requests_integrationId_fkey" FOREIGN KEY ("integrationId") REFERENCES "github_integrations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "github_protection_requests" ADD CONSTRAINT "github_protection_requests_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "github_protection_requests" ADD CONSTRAINT "github_protection_requests_planId_fkey" FOREIGN KEY ("planId") REFERENCES "plans"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "github_callback_attempts" ADD CONSTRAINT "github_callback_attempts_requestId_fkey" FOREIGN KEY ("requestId") REFERENCES "github_protection_requests"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- countersign:hand-written (below: SQL Prisma's schema cannot express)
