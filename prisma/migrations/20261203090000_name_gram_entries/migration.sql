-- This is an empty migration.

-- countersign:hand-written (below: SQL Prisma's schema cannot express)

-- Name patterns served in name order from an index (docs/benchmarks.md, "Name patterns"):
-- name_gram_entries holds, per list family, one row for every distinct 3-gram of every name
-- (U+0001 marking its start and end), keyed (orgId, family, gram, name). A page for a pattern
-- with a literal run of 3 or more characters walks the entries of its rarest gram from the
-- cursor in name order, the LIKE deciding on the index tuple (src/authz/list-filter.ts).
-- It replaces the name_grams GIN index, whose bitmap scans paid a heap page per candidate and
-- came back in no order. Statement-level triggers keep it, so every write path does (the
-- product's, the demo seed's, raw SQL); no extension, so PGlite runs the same SQL.

DROP INDEX "stacks_name_grams_idx";
DROP INDEX "workspaces_name_grams_idx";
DROP INDEX "cloud_integrations_name_grams_idx";
DROP FUNCTION "name_grams"(TEXT);

-- nameGrams in src/domain/catalog/pattern.ts computes the same set.
CREATE FUNCTION "name_trigrams"("name" TEXT) RETURNS SETOF TEXT
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT DISTINCT substr(chr(1) || "name" || chr(1), i, 3) FROM generate_series(1, length("name")) AS i
$$;

CREATE TABLE "name_gram_entries" (
  "orgId"  TEXT NOT NULL,
  -- stack | workspace | cloud_integration: the list family (TABLES in list-filter.ts).
  "family" TEXT NOT NULL,
  "gram"   TEXT COLLATE "C" NOT NULL,
  "name"   TEXT COLLATE "C" NOT NULL,
  CONSTRAINT "name_gram_entries_pkey" PRIMARY KEY ("orgId", "family", "gram", "name")
);
-- The query picks the rarest gram by these statistics: a gram outside the most-common list
-- counts as rarer than all in it, so a longer list tells more grams apart (2,000 holds every
-- gram of the bench's 1M names; each page query reads the list, ~0.2 ms).
ALTER TABLE "name_gram_entries" ALTER COLUMN "gram" SET STATISTICS 2000;

-- TG_ARGV[0] is the family. UPDATE compares old and new rows by id: only a changed name or
-- organization rewrites entries (a label change writes none).
CREATE FUNCTION "name_gram_entries_sync"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO "name_gram_entries" ("orgId", "family", "gram", "name")
      SELECT n."orgId", TG_ARGV[0], g, n."name" FROM "new_rows" n, "name_trigrams"(n."name") AS g
      ON CONFLICT DO NOTHING;
  ELSIF TG_OP = 'DELETE' THEN
    DELETE FROM "name_gram_entries" e USING "old_rows" o, "name_trigrams"(o."name") AS g("gram")
     WHERE e."orgId" = o."orgId" AND e."family" = TG_ARGV[0] AND e."gram" = g."gram" AND e."name" = o."name";
  ELSE
    DELETE FROM "name_gram_entries" e
     USING "old_rows" o JOIN "new_rows" n ON n."id" = o."id", "name_trigrams"(o."name") AS g("gram")
     WHERE (o."orgId", o."name") IS DISTINCT FROM (n."orgId", n."name")
       AND e."orgId" = o."orgId" AND e."family" = TG_ARGV[0] AND e."gram" = g."gram" AND e."name" = o."name";
    INSERT INTO "name_gram_entries" ("orgId", "family", "gram", "name")
      SELECT n."orgId", TG_ARGV[0], g, n."name"
        FROM "old_rows" o JOIN "new_rows" n ON n."id" = o."id", "name_trigrams"(n."name") AS g
       WHERE (o."orgId", o."name") IS DISTINCT FROM (n."orgId", n."name")
      ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END
$$;

-- <table>_name_grams_insert, _update and _delete on each list family's table.
DO $$
DECLARE
  f RECORD;
BEGIN
  FOR f IN SELECT * FROM (VALUES ('stacks', 'stack'), ('workspaces', 'workspace'), ('cloud_integrations', 'cloud_integration')) AS v(tbl, family) LOOP
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS "new_rows"
                      FOR EACH STATEMENT EXECUTE FUNCTION "name_gram_entries_sync"(%L)', f.tbl || '_name_grams_insert', f.tbl, f.family);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING OLD TABLE AS "old_rows" NEW TABLE AS "new_rows"
                      FOR EACH STATEMENT EXECUTE FUNCTION "name_gram_entries_sync"(%L)', f.tbl || '_name_grams_update', f.tbl, f.family);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS "old_rows"
                      FOR EACH STATEMENT EXECUTE FUNCTION "name_gram_entries_sync"(%L)', f.tbl || '_name_grams_delete', f.tbl, f.family);
  END LOOP;
END
$$;

INSERT INTO "name_gram_entries" ("orgId", "family", "gram", "name")
  SELECT s."orgId", 'stack', g, s."name" FROM "stacks" s, "name_trigrams"(s."name") AS g
  UNION ALL SELECT w."orgId", 'workspace', g, w."name" FROM "workspaces" w, "name_trigrams"(w."name") AS g
  UNION ALL SELECT c."orgId", 'cloud_integration', g, c."name" FROM "cloud_integrations" c, "name_trigrams"(c."name") AS g;
