-- DropIndex
DROP INDEX "users_email_key";

-- AlterTable
ALTER TABLE "organizations" ADD COLUMN     "protectedLabelKeysRevision" INTEGER NOT NULL DEFAULT 1;

-- AlterTable
ALTER TABLE "users" ADD COLUMN     "orgId" TEXT;

-- AlterTable
ALTER TABLE "stacks" ADD COLUMN     "revision" INTEGER NOT NULL DEFAULT 1;

-- AlterTable
ALTER TABLE "resource_policies" ADD COLUMN     "changeNote" TEXT NOT NULL DEFAULT '',
ADD COLUMN     "updatedById" TEXT;

-- CreateIndex
CREATE INDEX "users_email_idx" ON "users"("email");

-- CreateIndex
CREATE UNIQUE INDEX "users_orgId_email_key" ON "users"("orgId", "email");

-- countersign:hand-written (below: SQL Prisma's schema cannot express)
-- A user row belongs to the organization that added it. Rows from before with exactly one
-- membership belong to that organization; a row shared by several keeps NULL (see
-- docs/permissions.md, "Users belong to one organization").
UPDATE "users" u SET "orgId" = m."orgId"
  FROM (SELECT "userId", min("orgId") AS "orgId" FROM "memberships" GROUP BY "userId" HAVING count(*) = 1) m
 WHERE m."userId" = u.id AND u."orgId" IS NULL;
