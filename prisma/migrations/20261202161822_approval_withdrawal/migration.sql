-- DropIndex
DROP INDEX "approvals_planId_userId_key";

-- AlterTable
ALTER TABLE "approvals" ADD COLUMN     "withdrawnAt" TIMESTAMP(3),
ADD COLUMN     "withdrawnById" TEXT;

-- CreateIndex
CREATE INDEX "approvals_planId_userId_idx" ON "approvals"("planId", "userId");

-- AddForeignKey
ALTER TABLE "approvals" ADD CONSTRAINT "approvals_withdrawnById_fkey" FOREIGN KEY ("withdrawnById") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- countersign:hand-written (below: SQL Prisma's schema cannot express)

-- At most one active approval per (plan, user). A withdrawn approval keeps its row (approvals are
-- never deleted), so approving again after withdrawing adds a new row beside it.
CREATE UNIQUE INDEX "approvals_active_plan_user_key" ON "approvals"("planId", "userId") WHERE "withdrawnAt" IS NULL;

-- A withdrawal names who withdrew it and when, both or neither.
ALTER TABLE "approvals" ADD CONSTRAINT "approvals_withdrawal_attributed"
  CHECK (("withdrawnAt" IS NULL) = ("withdrawnById" IS NULL));
