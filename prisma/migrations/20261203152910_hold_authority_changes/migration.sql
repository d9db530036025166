-- CreateTable
CREATE TABLE "hold_authority_changes" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "before" JSONB NOT NULL,
    "after" JSONB NOT NULL,
    "actorUserId" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "hold_authority_changes_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "hold_authority_changes_workspaceId_createdAt_idx" ON "hold_authority_changes"("workspaceId", "createdAt");

-- CreateIndex
CREATE INDEX "hold_authority_changes_orgId_createdAt_idx" ON "hold_authority_changes"("orgId", "createdAt");

-- AddForeignKey
ALTER TABLE "hold_authority_changes" ADD CONSTRAINT "hold_authority_changes_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hold_authority_changes" ADD CONSTRAINT "hold_authority_changes_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "workspaces"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hold_authority_changes" ADD CONSTRAINT "hold_authority_changes_actorUserId_fkey" FOREIGN KEY ("actorUserId") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- countersign:hand-written (below: SQL Prisma's schema cannot express)

-- The record of hold-lifting changes is append-only: no UPDATE, no DELETE, whoever asks.
CREATE FUNCTION hold_authority_changes_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'hold_authority_changes is append-only' USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER hold_authority_changes_append_only
  BEFORE UPDATE OR DELETE ON "hold_authority_changes"
  FOR EACH ROW EXECUTE FUNCTION hold_authority_changes_append_only();
