import { isPrefixPattern, literalOf, patternGramRuns } from "../domain/catalog/pattern.js";
import type { ListScope } from "../domain/catalog/check.js";

/**
 * The SQL side of the seed's check for list endpoints: which names of an org's stacks (or
 * workspaces, or cloud integrations) a ListScope reaches, one ordered page at a time. Every arm is an index range
 * scan ordered by name with its own LIMIT, so a page costs O(arms × page size) whatever
 * the org's size (seed 004: "a group is a leading equality key in the list index"):
 *  - untargeted grant: the (orgId, name) index from the cursor on;
 *  - exact name: equality lookups on the same index;
 *  - prefix `team-a-%`: a range on the same index (names are COLLATE "C");
 *  - any other pattern with a literal run of 3 or more characters after its head (`%-00042%`,
 *    `%-0004242`, `team-a-%4242`): one of two arms, chosen per query by how many names the
 *    run's grams reach (gramGate below) — few: a bitmap scan of the name_grams GIN index
 *    (every 3- and 5-gram of each name), then the LIKE on those rows and a sort; many: the
 *    ordered index with the LIKE as a filter, which then fills a page after a short walk;
 *  - any other pattern: a filter over the ordered index (the slow shape the seed measured);
 *  - authz group: a range on stack_authz_group_members (orgId, groupName, stackName).
 * The in-memory check (src/domain/catalog/check.ts) follows the same semantics; both run
 * test/domain/authz-cases.ts.
 */
export interface PageQuery {
  text: string;
  params: unknown[];
}

/** Greater than every string that starts with the prefix (byte order, COLLATE "C"). */
const MAX_CHAR = "\u{10FFFF}";

const TABLES = { stack: "stacks", workspace: "workspaces", cloud_integration: "cloud_integrations" } as const;

/**
 * Above this many estimated candidates a gram arm walks the ordered index instead. A
 * candidate costs the bitmap arm a heap page (~2–3 µs on the 2-core bench machine under
 * load); an entry of the ordered walk costs ~0.2 µs, and a pattern reaching n of 1,000,000
 * names spread evenly fills a page of 51 after ~51,000,000/n entries, so the two meet near
 * 2,000 (~5 ms). Past the threshold the walk is cheaper when the matches are spread over the
 * name order and dearer when they are bunched far from the cursor; below it the bitmap arm's
 * cost is bounded whatever the order (docs/benchmarks.md).
 */
export const GRAM_SCAN_MAX_CANDIDATES = 2000;

/**
 * A gram in more than this share of the names is left out of the bitmap scan (unless it is
 * the rarest the pattern has): its posting list costs milliseconds to read (`team-` in 61%
 * of the bench's names) and narrows the candidates little. Leaving grams out never loses a
 * match; the LIKE still decides.
 */
const COMMON_GRAM_FREQUENCY = 0.05;

/**
 * Whether the gram arm's grams reach few names (`narrow`), and which of them the bitmap scan
 * asks the index for (`grams`). The estimate: the table's row count times, per literal
 * run, an estimate of the run's frequency, multiplied over runs. The frequencies are
 * ANALYZE's most-common-elements statistics of the GIN index's expression; a gram outside
 * that list is rarer than its last entry and counts half of it, as PostgreSQL's own
 * estimate does. The grams of one run overlap, so they are far from independent: a run
 * counts its rarest gram's frequency f1 times the square root of the next rarest f2 (between
 * f1, fully dependent, and f1·f2, independent). Without statistics (never analyzed) the
 * estimate is 0: the bitmap arm, whose cost is bounded by the names holding the grams.
 * Either arm returns exactly the names the LIKE matches; the gate only picks the faster.
 */
function gramGate(table: string, gramsParam: string, runsParam: string, maxCandidates: number): string {
  const bound = Number.isFinite(maxCandidates) ? String(maxCandidates) : "'Infinity'::float8";
  return `WITH per_gram AS (
        SELECT u.gram, u.run, c.reltuples AS rows,
               greatest(COALESCE(st.f[array_position(st.e, u.gram)], st.f[cardinality(st.e) + 1] / 2), 1e-12) AS freq
          FROM unnest(${gramsParam}::text[], ${runsParam}::int[]) AS u(gram, run),
               (SELECT most_common_elems::text::text[] AS e, most_common_elem_freqs AS f FROM pg_stats
                 WHERE schemaname = current_schema() AND tablename = '${table}_name_grams_idx' LIMIT 1) AS st,
               pg_class c
         WHERE c.oid = '${table}'::regclass),
      per_run AS (SELECT array_agg(freq ORDER BY freq) AS freqs, max(rows) AS rows FROM per_gram GROUP BY run)
    SELECT COALESCE((SELECT exp(sum(ln(freqs[1] * sqrt(COALESCE(freqs[2], 1))))) * max(rows) FROM per_run), 0) <= ${bound} AS narrow,
           COALESCE((SELECT array_agg(gram) FROM per_gram
                      WHERE freq <= ${COMMON_GRAM_FREQUENCY} OR freq = (SELECT min(freq) FROM per_gram)), ${gramsParam}::text[]) AS grams`;
}

export function namePageQuery(
  family: "stack" | "workspace" | "cloud_integration",
  orgId: string,
  scope: ListScope,
  after: string | null,
  limit: number,
  /** Tests pin the gram arms' choice: -1 always walks the ordered index, Infinity never does. */
  options: { gramScanMaxCandidates?: number } = {},
): PageQuery | null {
  const maxCandidates = options.gramScanMaxCandidates ?? GRAM_SCAN_MAX_CANDIDATES;
  const params: unknown[] = [orgId, after ?? "", limit];
  const p = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  const table = TABLES[family];
  const arms: string[] = [];
  const gates: string[] = [];
  const base = `SELECT name FROM ${table} WHERE "orgId" = $1 AND name > $2`;
  if (scope.unrestricted) {
    arms.push(`${base} ORDER BY name LIMIT $3`);
  } else {
    const literals: string[] = [];
    for (const pattern of scope.patterns) {
      const literal = literalOf(pattern);
      if (literal !== null) {
        literals.push(literal);
        continue;
      }
      const prefix = isPrefixPattern(pattern);
      if (prefix !== null && prefix !== "") {
        arms.push(
          `${base} AND name >= ${p(prefix)} AND name < ${p(prefix + MAX_CHAR)} AND name LIKE ${p(pattern)} ORDER BY name LIMIT $3`,
        );
      } else {
        const runs = patternGramRuns(pattern);
        const like = p(pattern);
        if (runs === null) {
          arms.push(`${base} AND name LIKE ${like} ORDER BY name LIMIT $3`);
          continue;
        }
        const gate = `gram_gate_${gates.length + 1}`;
        const grams = p(runs.flat());
        gates.push(`${gate} AS (${gramGate(table, grams, p(runs.flatMap((run, i) => run.map(() => i))), maxCandidates)})`);
        // Exactly one of the two runs: the other's gate is a one-time filter that is false.
        arms.push(
          // OFFSET 0 keeps the org and cursor conditions out of the scan: otherwise the planner may
          // AND the GIN bitmap with a bitmap of the (orgId, name) range after the cursor, which
          // reads half the org's index entries on a deep page.
          `SELECT name FROM (SELECT "orgId", name FROM ${table} WHERE name_grams(name) @> (SELECT grams FROM ${gate}) AND (SELECT narrow FROM ${gate}) OFFSET 0) AS candidates
            WHERE "orgId" = $1 AND name > $2 AND name LIKE ${like} ORDER BY name LIMIT $3`,
          `${base} AND name LIKE ${like} AND NOT (SELECT narrow FROM ${gate}) ORDER BY name LIMIT $3`,
        );
      }
    }
    if (literals.length > 0) arms.push(`${base} AND name = ANY(${p(literals)}::text[]) ORDER BY name LIMIT $3`);
    for (const group of scope.groups) {
      arms.push(
        family === "stack"
          ? `SELECT "stackName" AS name FROM stack_authz_group_members
              WHERE "orgId" = $1 AND "groupName" = ${p(group)} AND "stackName" > $2 ORDER BY "stackName" LIMIT $3`
          : // A workspace and a cloud integration pass their stack's groups (seed 004).
            `SELECT w.name FROM ${table} w
              WHERE w."orgId" = $1 AND w.name > $2 AND w."stackId" IN (
                SELECT "stackId" FROM stack_authz_group_members WHERE "orgId" = $1 AND "groupName" = ${p(group)})
              ORDER BY w.name LIMIT $3`,
      );
    }
  }
  if (arms.length === 0) return null;
  const union = arms.map((a) => `(${a})`).join(" UNION ");
  return {
    text: `${gates.length > 0 ? `WITH ${gates.join(", ")} ` : ""}SELECT t.* FROM ${table} t WHERE t."orgId" = $1 AND t.name IN (
             SELECT name FROM (${union}) AS reachable ORDER BY name LIMIT $3)
           ORDER BY t.name`,
    params,
  };
}
