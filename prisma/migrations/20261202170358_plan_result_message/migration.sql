-- AlterTable
ALTER TABLE "plans" ADD COLUMN     "resultMessage" TEXT;

-- countersign:hand-written (below: SQL Prisma's schema cannot express)
