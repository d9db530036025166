-- CreateEnum
CREATE TYPE "PlanOriginKind" AS ENUM ('api', 'cli', 'hcp_terraform_run', 'github_deployment');

-- AlterTable
ALTER TABLE "plans" ADD COLUMN     "originKind" "PlanOriginKind" NOT NULL DEFAULT 'api';

-- countersign:hand-written (below: SQL Prisma's schema cannot express)
