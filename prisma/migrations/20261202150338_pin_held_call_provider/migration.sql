-- AlterTable
ALTER TABLE "approval_requests" ADD COLUMN     "provider" TEXT;

-- AlterTable
ALTER TABLE "gateway_invocations" ADD COLUMN     "provider" TEXT;

-- countersign:hand-written (below: SQL Prisma's schema cannot express)

-- A concrete tool is `<provider>.<operation>` (providers carry no dot), so rows held before the
-- provider was recorded get exactly the provider their hold saw.
UPDATE "approval_requests" SET "provider" = split_part("tool", '.', 1) WHERE "provider" IS NULL;
UPDATE "gateway_invocations" SET "provider" = split_part("tool", '.', 1) WHERE "provider" IS NULL;
