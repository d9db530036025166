-- AlterTable
ALTER TABLE "workspaces" ADD COLUMN     "preventSelfApproval" BOOLEAN NOT NULL DEFAULT false;

-- AlterTable
ALTER TABLE "plans" ADD COLUMN     "runUrl" TEXT;

-- AlterTable
ALTER TABLE "approvals" ADD COLUMN     "comment" TEXT;

-- CreateTable
CREATE TABLE "plan_diffs" (
    "planId" TEXT NOT NULL,
    "diff" JSONB NOT NULL,
    "bytes" INTEGER NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "plan_diffs_pkey" PRIMARY KEY ("planId")
);

-- AddForeignKey
ALTER TABLE "plan_diffs" ADD CONSTRAINT "plan_diffs_planId_fkey" FOREIGN KEY ("planId") REFERENCES "plans"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- countersign:hand-written (below: SQL Prisma's schema cannot express)
-- The bounds the services enforce, kept by the database too.
ALTER TABLE "approvals" ADD CONSTRAINT "approvals_comment_length" CHECK ("comment" IS NULL OR char_length("comment") <= 2000);
ALTER TABLE "plans" ADD CONSTRAINT "plans_run_url_form" CHECK ("runUrl" IS NULL OR (char_length("runUrl") <= 2048 AND "runUrl" ~ '^https?://'));
ALTER TABLE "plan_diffs" ADD CONSTRAINT "plan_diffs_bytes_bound" CHECK ("bytes" >= 0 AND "bytes" <= 4194304);
