-- CreateTable
CREATE TABLE "slack_integrations" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "slackTeam" TEXT NOT NULL,
    "signingSecretSealed" TEXT NOT NULL,
    "configuredById" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "slack_integrations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "slack_user_links" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "integrationId" TEXT NOT NULL,
    "slackTeam" TEXT NOT NULL,
    "slackUser" TEXT NOT NULL,
    "userId" TEXT NOT NULL,
    "linkedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "unlinkedAt" TIMESTAMP(3),
    "unlinkedById" TEXT,

    CONSTRAINT "slack_user_links_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "slack_link_codes" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "integrationId" TEXT NOT NULL,
    "slackTeam" TEXT NOT NULL,
    "slackUser" TEXT NOT NULL,
    "codeHash" TEXT NOT NULL,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "usedAt" TIMESTAMP(3),
    "usedById" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "slack_link_codes_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "slack_seen_requests" (
    "digest" TEXT NOT NULL,
    "seenAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "slack_seen_requests_pkey" PRIMARY KEY ("digest")
);

-- CreateIndex
CREATE UNIQUE INDEX "slack_integrations_orgId_key" ON "slack_integrations"("orgId");

-- CreateIndex
CREATE INDEX "slack_user_links_userId_idx" ON "slack_user_links"("userId");

-- CreateIndex
CREATE INDEX "slack_user_links_orgId_slackTeam_slackUser_idx" ON "slack_user_links"("orgId", "slackTeam", "slackUser");

-- CreateIndex
CREATE UNIQUE INDEX "slack_link_codes_codeHash_key" ON "slack_link_codes"("codeHash");

-- CreateIndex
CREATE INDEX "slack_link_codes_integrationId_slackTeam_slackUser_idx" ON "slack_link_codes"("integrationId", "slackTeam", "slackUser");

-- CreateIndex
CREATE INDEX "slack_seen_requests_seenAt_idx" ON "slack_seen_requests"("seenAt");

-- AddForeignKey
ALTER TABLE "slack_integrations" ADD CONSTRAINT "slack_integrations_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "slack_integrations" ADD CONSTRAINT "slack_integrations_configuredById_fkey" FOREIGN KEY ("configuredById") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "slack_user_links" ADD CONSTRAINT "slack_user_links_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "slack_user_links" ADD CONSTRAINT "slack_user_links_integrationId_fkey" FOREIGN KEY ("integrationId") REFERENCES "slack_integrations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "slack_user_links" ADD CONSTRAINT "slack_user_links_userId_fkey" FOREIGN KEY ("userId") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "slack_user_links" ADD CONSTRAINT "slack_user_links_unlinkedById_fkey" FOREIGN KEY ("unlinkedById") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "slack_link_codes" ADD CONSTRAINT "slack_link_codes_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "slack_link_codes" ADD CONSTRAINT "slack_link_codes_integrationId_fkey" FOREIGN KEY ("integrationId") REFERENCES "slack_integrations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "slack_link_codes" ADD CONSTRAINT "slack_link_codes_usedById_fkey" FOREIGN KEY ("usedById") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- countersign:hand-written (below: SQL Prisma's schema cannot express)
-- One active link per Slack user in an organization; unlinked rows stay beside it.
CREATE UNIQUE INDEX "slack_user_links_active_key" ON "slack_user_links"("orgId", "slackTeam", "slackUser") WHERE "unlinkedAt" IS NULL;
