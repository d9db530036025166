-- AlterTable
ALTER TABLE "delivery_jobs" ADD COLUMN     "traceparent" TEXT;

-- AlterTable
ALTER TABLE "webhook_deliveries" ADD COLUMN     "traceparent" TEXT;

-- countersign:hand-written (below: SQL Prisma's schema cannot express)
