-- DropIndex
DROP INDEX "approval_requests_orgId_status_idx";

-- CreateIndex
CREATE INDEX "approval_requests_orgId_status_createdAt_id_idx" ON "approval_requests"("orgId", "status", "createdAt" DESC, "id");

-- CreateIndex
CREATE INDEX "approval_requests_workspaceId_createdAt_id_idx" ON "approval_requests"("workspaceId", "createdAt" DESC, "id");

-- countersign:hand-written (below: SQL Prisma's schema cannot express)
