import { isPrefixPattern, literalOf, patternGrams } from "../domain/catalog/pattern.js";
import type { ListScope } from "../domain/catalog/check.js";

/**
 * The SQL side of the seed's check for list endpoints: which names of an org's stacks (or
 * workspaces, or cloud integrations) a ListScope reaches, one ordered page at a time. Every arm is an index range
 * scan ordered by name with its own LIMIT, so a page costs O(arms × page size) whatever
 * the org's size (seed 004: "a group is a leading equality key in the list index"):
 *  - untargeted grant: the (orgId, name) index from the cursor on;
 *  - exact name: equality lookups on the same index;
 *  - prefix `team-a-%`: a range on the same index (names are COLLATE "C");
 *  - any other pattern with a literal run of 3 or more characters (`%-00042%`, `%-0004242`,
 *    `team-a-%4242`): a range on name_gram_entries (orgId, family, gram, name) for the
 *    pattern's rarest gram (rarestGram below), from the cursor in name order, the LIKE
 *    deciding on the index entry — every matching name holds every gram of the pattern;
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
 * The rarest of a pattern's grams, by ANALYZE's most-common-values statistics of
 * name_gram_entries.gram (`pg_stats`, ~0.3 ms): a gram outside the list counts as rarer than
 * any in it, and ties go to the pattern's order. Walking a gram's entries fills a page after
 * about page ÷ (share of that gram's names the pattern matches) entries, and every match holds
 * every gram, so the rarest gram is the shortest walk. Without statistics (never analyzed, or
 * a role that may not read them) the first gram is walked: the same names, maybe a longer walk.
 */
function rarestGram(gramsParam: string): string {
  return `SELECT u.gram FROM unnest(${gramsParam}::text[]) WITH ORDINALITY AS u(gram, i) LEFT JOIN ${GRAM_STATS} AS st ON true
     ORDER BY COALESCE(st.f[array_position(st.v, u.gram)], 0), u.i LIMIT 1`;
}

/** The statistics rarestGram reads: one CTE, read once however many pattern grants a scope has. */
const GRAM_STATS = "gram_stats";
const GRAM_STATS_CTE = `${GRAM_STATS} AS (SELECT most_common_vals::text::text[] AS v, most_common_freqs AS f FROM pg_stats
    WHERE schemaname = current_schema() AND tablename = 'name_gram_entries' AND attname = 'gram' LIMIT 1)`;

export function namePageQuery(
  family: "stack" | "workspace" | "cloud_integration",
  orgId: string,
  scope: ListScope,
  after: string | null,
  limit: number,
  /** Tests pin the walked gram: its index in patternGrams' list (modulo its length), not the rarest. */
  options: { gram?: number } = {},
): PageQuery | null {
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
        const grams = patternGrams(pattern);
        const like = p(pattern);
        if (grams === null) {
          arms.push(`${base} AND name LIKE ${like} ORDER BY name LIMIT $3`);
          continue;
        }
        let walked: string;
        if (options.gram === undefined) {
          if (gates.length === 0) gates.push(GRAM_STATS_CTE);
          const gate = `rarest_gram_${gates.length}`;
          gates.push(`${gate} AS (${rarestGram(p(grams))})`);
          walked = `(SELECT gram FROM ${gate})`;
        } else {
          walked = p(grams[options.gram % grams.length]);
        }
        arms.push(
          `SELECT name FROM name_gram_entries WHERE "orgId" = $1 AND family = '${family}' AND gram = ${walked}
              AND name > $2 AND name LIKE ${like} ORDER BY name LIMIT $3`,
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
