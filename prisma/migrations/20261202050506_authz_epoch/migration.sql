-- CreateTable
CREATE TABLE "authz_epoch" (
    "id" INTEGER NOT NULL,
    "epoch" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "authz_epoch_pkey" PRIMARY KEY ("id")
);

-- countersign:hand-written (below: SQL Prisma's schema cannot express)

-- The one row.
ALTER TABLE "authz_epoch" ADD CONSTRAINT "authz_epoch_one_row" CHECK ("id" = 1);
INSERT INTO "authz_epoch" ("id", "epoch") VALUES (1, 0);

-- Bumps the epoch once per transaction, at its commit. Deferred to the commit so that the row
-- lock on authz_epoch is the last lock the transaction takes: two transactions changing authz
-- rows in different orders can never deadlock on it, and epochs are in commit order (the next
-- bump waits for the previous one's commit), so a reader that sees epoch E sees every change
-- committed with an epoch up to E. The schema is the changed table's own (tests run one schema
-- per file).
CREATE FUNCTION "bump_authz_epoch"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('countersign.authz_epoch_bumped', true) IS DISTINCT FROM txid_current()::text THEN
    PERFORM set_config('countersign.authz_epoch_bumped', txid_current()::text, true);
    EXECUTE format('UPDATE %I."authz_epoch" SET "epoch" = "epoch" + 1 WHERE "id" = 1', TG_TABLE_SCHEMA);
  END IF;
  RETURN NULL;
END
$$;

-- Every table loadPrincipal reads (src/authz/principal.ts); identity_sources, whose deletion
-- removes bindings and synced groups; and users, whose rows (names) the live gate keeps beside
-- principals. A table added to a principal must be added here.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['organizations', 'memberships', 'roles', 'role_permissions', 'role_assignments',
                           'identity_sources', 'user_identity_groups', 'identity_group_bindings',
                           'identity_group_binding_roles', 'users'] LOOP
    EXECUTE format('CREATE CONSTRAINT TRIGGER %I AFTER INSERT OR UPDATE OR DELETE ON %I
                      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "bump_authz_epoch"()',
                   t || '_authz_epoch', t);
  END LOOP;
END
$$;
