-- AlterEnum
ALTER TYPE "ApprovalRequestStatus" ADD VALUE 'withdrawn';

-- countersign:hand-written (below: SQL Prisma's schema cannot express)
