-- This is an empty migration.

-- countersign:hand-written (below: SQL Prisma's schema cannot express)

-- A delivery not sent because the webhook's owner may not read the event is `skipped`, not `failed`.
ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_status_check";
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_status_check"
  CHECK ("status" IN ('queued', 'delivering', 'delivered', 'failed', 'skipped'));
UPDATE "webhook_deliveries" SET "status" = 'skipped', "lastError" = substr("lastError", 10)
 WHERE "status" = 'failed' AND "lastError" LIKE 'skipped: %';
