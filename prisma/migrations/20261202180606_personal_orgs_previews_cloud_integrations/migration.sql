-- CreateEnum
CREATE TYPE "PrPlanMode" AS ENUM ('manual', 'auto');

-- CreateEnum
CREATE TYPE "PrPreviewStatus" AS ENUM ('awaiting_confirmation', 'confirmed');

-- CreateEnum
CREATE TYPE "CloudProvider" AS ENUM ('aws', 'gcp', 'azure');

-- AlterTable
ALTER TABLE "organizations" ADD COLUMN     "personal" BOOLEAN NOT NULL DEFAULT false;

-- AlterTable
ALTER TABLE "stacks" ADD COLUMN     "prPlanMode" "PrPlanMode" NOT NULL DEFAULT 'manual';

-- CreateTable
CREATE TABLE "pr_previews" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "stackId" TEXT NOT NULL,
    "pullRequest" INTEGER NOT NULL,
    "commitSha" TEXT NOT NULL,
    "status" "PrPreviewStatus" NOT NULL,
    "autoConfirmed" BOOLEAN NOT NULL DEFAULT false,
    "requestedById" TEXT NOT NULL,
    "confirmedById" TEXT,
    "confirmedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "pr_previews_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "cloud_integrations" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "stackId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "provider" "CloudProvider" NOT NULL,
    "identity" TEXT NOT NULL,
    "revision" INTEGER NOT NULL DEFAULT 1,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "cloud_integrations_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "pr_previews_stackId_pullRequest_commitSha_key" ON "pr_previews"("stackId", "pullRequest", "commitSha");

-- CreateIndex
CREATE INDEX "cloud_integrations_stackId_idx" ON "cloud_integrations"("stackId");

-- CreateIndex
CREATE UNIQUE INDEX "cloud_integrations_orgId_name_key" ON "cloud_integrations"("orgId", "name");

-- AddForeignKey
ALTER TABLE "pr_previews" ADD CONSTRAINT "pr_previews_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "pr_previews" ADD CONSTRAINT "pr_previews_stackId_fkey" FOREIGN KEY ("stackId") REFERENCES "stacks"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "cloud_integrations" ADD CONSTRAINT "cloud_integrations_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "cloud_integrations" ADD CONSTRAINT "cloud_integrations_stackId_fkey" FOREIGN KEY ("stackId") REFERENCES "stacks"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- countersign:hand-written (below: SQL Prisma's schema cannot express)

-- Organizations that already have an owner are personal ones (seed 004: owner_user_id IS NOT NULL).
UPDATE "organizations" SET "personal" = true WHERE "ownerUserId" IS NOT NULL;
-- The flag and the owner stay together: deleting the owner (ON DELETE SET NULL) is refused rather
-- than quietly turning a personal organization into an ordinary one.
ALTER TABLE "organizations" ADD CONSTRAINT "organizations_personal_owner_check"
  CHECK ("personal" = ("ownerUserId" IS NOT NULL));

-- Seed 004, Notes: a personal organization rejects manual role assignments, group bindings and
-- custom roles. The services answer with a typed error first; these triggers make sure no
-- other writer (the admin CLI, a script, a race) can put one there.
CREATE FUNCTION "countersign_reject_in_personal_org"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  personal boolean;
BEGIN
  IF NEW."orgId" IS NULL THEN RETURN NEW; END IF;
  -- Qualified by the trigger's own schema, as bump_authz_epoch is (one schema per test file).
  EXECUTE format('SELECT "personal" FROM %I."organizations" WHERE id = $1', TG_TABLE_SCHEMA) INTO personal USING NEW."orgId";
  IF personal THEN
    RAISE EXCEPTION 'A personal organization has no %: its owner is admin implicitly.', TG_ARGV[0]
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER "role_assignments_not_in_personal_org" BEFORE INSERT OR UPDATE ON "role_assignments"
  FOR EACH ROW EXECUTE FUNCTION "countersign_reject_in_personal_org"('manual role assignments');
CREATE TRIGGER "identity_group_bindings_not_in_personal_org" BEFORE INSERT OR UPDATE ON "identity_group_bindings"
  FOR EACH ROW EXECUTE FUNCTION "countersign_reject_in_personal_org"('group bindings');
CREATE TRIGGER "roles_not_in_personal_org" BEFORE INSERT OR UPDATE ON "roles"
  FOR EACH ROW EXECUTE FUNCTION "countersign_reject_in_personal_org"('custom roles');

-- Names are matched by patterns and served in pages by prefix ranges, as stacks' are.
ALTER TABLE "cloud_integrations" ALTER COLUMN "name" TYPE TEXT COLLATE "C";

ALTER TABLE "pr_previews" ADD CONSTRAINT "pr_previews_pull_request_check" CHECK ("pullRequest" > 0);
ALTER TABLE "pr_previews" ADD CONSTRAINT "pr_previews_commit_sha_check" CHECK ("commitSha" ~ '^[0-9a-f]{7,64}$');
ALTER TABLE "pr_previews" ADD CONSTRAINT "pr_previews_confirmed_check"
  CHECK (("status" = 'confirmed') = ("confirmedAt" IS NOT NULL));
