-- This is an empty migration.

-- countersign:hand-written (below: SQL Prisma's schema cannot express)

-- Name patterns served from an index (docs/benchmarks.md, "Name patterns"): every 3-gram and
-- 5-gram of a name, with U+0001 marking its start and end, in a GIN index per list family.
-- src/authz/list-filter.ts queries it for a pattern with a literal run of 3 or more
-- characters; nameGrams in src/domain/catalog/pattern.ts computes the same array.
-- PARALLEL UNSAFE on purpose: a list page that names it is never planned with parallel
-- workers, whose start-up costs more than a page (milliseconds on a loaded machine).
-- No extension: the same SQL runs on PostgreSQL and on the embedded PGlite.
CREATE FUNCTION "name_grams"("name" TEXT) RETURNS TEXT[]
  LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE AS $$
DECLARE
  marked TEXT := chr(1) || "name" || chr(1);
  n INT := length(marked);
  grams TEXT[] := ARRAY[]::TEXT[];
BEGIN
  FOR i IN 1 .. n - 2 LOOP grams := grams || substr(marked, i, 3); END LOOP;
  FOR i IN 1 .. n - 4 LOOP grams := grams || substr(marked, i, 5); END LOOP;
  RETURN grams;
END
$$;

CREATE INDEX "stacks_name_grams_idx" ON "stacks" USING GIN ("name_grams"("name"));
CREATE INDEX "workspaces_name_grams_idx" ON "workspaces" USING GIN ("name_grams"("name"));
CREATE INDEX "cloud_integrations_name_grams_idx" ON "cloud_integrations" USING GIN ("name_grams"("name"));
