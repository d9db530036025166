-- AlterTable
ALTER TABLE "workspaces" ADD COLUMN     "production" BOOLEAN NOT NULL DEFAULT false;

-- AlterTable
ALTER TABLE "connections" ADD COLUMN     "credentialSealed" TEXT,
ADD COLUMN     "timeoutMs" INTEGER,
ADD COLUMN     "url" TEXT;

-- AlterTable
ALTER TABLE "gateway_invocations" ADD COLUMN     "upstreamUrl" TEXT;

-- CreateTable
CREATE TABLE "connection_tool_overrides" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "connectionId" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "destructive" BOOLEAN NOT NULL,
    "updatedById" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "connection_tool_overrides_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "gateway_policy_versions" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "policies" TEXT NOT NULL,
    "authorId" TEXT NOT NULL,
    "note" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "gateway_policy_versions_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "connection_tool_overrides_connectionId_tool_key" ON "connection_tool_overrides"("connectionId", "tool");

-- CreateIndex
CREATE UNIQUE INDEX "gateway_policy_versions_workspaceId_version_key" ON "gateway_policy_versions"("workspaceId", "version");

-- AddForeignKey
ALTER TABLE "connection_tool_overrides" ADD CONSTRAINT "connection_tool_overrides_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "connection_tool_overrides" ADD CONSTRAINT "connection_tool_overrides_connectionId_fkey" FOREIGN KEY ("connectionId") REFERENCES "connections"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "gateway_policy_versions" ADD CONSTRAINT "gateway_policy_versions_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "gateway_policy_versions" ADD CONSTRAINT "gateway_policy_versions_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "gateway_policy_versions" ADD CONSTRAINT "gateway_policy_versions_authorId_fkey" FOREIGN KEY ("authorId") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- countersign:hand-written (below: SQL Prisma's schema cannot express)

-- The tier is explicit from now on; workspaces named production by their environment's spelling
-- before it existed keep holding destructive calls.
UPDATE "workspaces" SET "production" = true WHERE lower("environment") IN ('prod', 'production');

ALTER TABLE "gateway_policy_versions" ADD CONSTRAINT "gateway_policy_versions_version_positive" CHECK ("version" >= 1);
ALTER TABLE "connections" ADD CONSTRAINT "connections_timeout_ms_range" CHECK ("timeoutMs" IS NULL OR "timeoutMs" BETWEEN 100 AND 300000);
