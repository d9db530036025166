-- AlterTable
ALTER TABLE "gateway_invocations" ADD COLUMN     "republishCount" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "republishedAt" TIMESTAMP(3),
ADD COLUMN     "ticket" TEXT;

-- CreateIndex
CREATE INDEX "gateway_invocations_state_createdAt_idx" ON "gateway_invocations"("state", "createdAt");

-- countersign:hand-written (below: SQL Prisma's schema cannot express)
