// Seed 004 "Authz groups", speed and scale: with 1,000,000 stacks in one
// organization, a page of 50 for a principal whose only grant is one authz group, one exact
// name or a prefix pattern is an index range scan costing under 1 ms of database time at
// every selectivity; a permission check for a cached principal costs under 50 µs.
//
// Every figure stands beside hand-written raw SQL (or a bare lookup) run in the same
// process. docs/benchmarks.md explains each row and records the numbers of one run.

import type { Database } from "../src/infra/db.js";
import { namePageQuery, type PageQuery } from "../src/authz/list-filter.js";
import { loadPrincipal } from "../src/authz/principal.js";
import {
  checkPermission,
  compilePrincipal,
  compileResourcePattern,
  listScope,
  type ListScope,
  type Permission,
  type PrincipalGrants,
  type Target,
  grantSatisfies,
  validateCustomRolePermissions,
} from "../src/domain/catalog/index.js";
import { consume, log, nsPerOp, row, timeAsync, timed, withBenchSchema, type BenchRow } from "./lib.js";

const STACKS = Number(process.env.BENCH_STACKS ?? 1_000_000);
const PAGE = 50;
/** What listStacks asks for: the page plus one row that says whether a next page exists. */
const LIMIT = PAGE + 1;
const ORG_ID = "bench-org";
const DB_TARGET_MS = 1;
/** Goal: a name pattern with a literal run of 3+ characters. */
const PATTERN_TARGET_MS = 5;
const CHECK_TARGET_NS = 50_000;

// ── The data set ─────────────────────────────────────────────────────────────────────

/**
 * Name bands, in logical order: `team-a-0000000` … The fraction of the org a prefix grant
 * reaches is its band's share. The remainder are `svc-…` stacks no grant here reaches.
 */
const BANDS = [
  { prefix: "team-a-", share: 0.5 },
  { prefix: "team-b-", share: 0.1 },
  { prefix: "team-c-", share: 0.01 },
  { prefix: "team-d-", share: 0.001 },
  { prefix: "team-e-", share: 1 / STACKS }, // exactly one stack
] as const;

/**
 * Authz groups by logical stack number i (0 ≤ i < STACKS), spread evenly over every name
 * band, so a group's members are scattered through the name order like a real team's.
 */
const GROUPS = [
  { name: "grp-one", where: `i = ${Math.floor(STACKS * 0.123457)}` },
  { name: "grp-0.1pct", where: "i % 1000 = 7" },
  { name: "grp-1pct", where: "i % 100 = 3" },
  { name: "grp-10pct", where: "i % 10 = 5" },
  { name: "grp-50pct", where: "i % 2 = 0" },
] as const;

/** A multiplier coprime with 10^k: heap row k holds logical stack (k × P) mod STACKS, so the
 * heap is in no name order at all (stacks are created over time, not alphabetically). */
const SCATTER = 7919;

interface Band {
  prefix: string;
  start: number;
  count: number;
}

function bands(): Band[] {
  const out: Band[] = [];
  let start = 0;
  for (const b of BANDS) {
    const count = Math.max(1, Math.round(STACKS * b.share));
    out.push({ prefix: b.prefix, start, count });
    start += count;
  }
  out.push({ prefix: "svc-", start, count: STACKS - start });
  return out;
}

const nameOf = (band: Band, j: number) => `${band.prefix}${String(j).padStart(7, "0")}`;

/**
 * Drops a table set's keys, indexes and foreign keys (remembering their definitions from the
 * catalog, so the restored schema is exactly what the migration made), runs the load, then
 * rebuilds them: building a btree once over sorted input beats maintaining it row by row.
 */
async function withoutIndexes(db: Database, tables: string[], load: () => Promise<void>): Promise<void> {
  const regclasses = `ARRAY[${tables.map((t) => `'${t}'`).join(",")}]::regclass[]`;
  const fks = await db.sql.query<{ tbl: string; name: string; def: string }>(
    `SELECT conrelid::regclass::text AS tbl, conname AS name, pg_get_constraintdef(oid) AS def
       FROM pg_constraint WHERE contype = 'f' AND (conrelid = ANY(${regclasses}) OR confrelid = ANY(${regclasses}))`,
  );
  const keys = await db.sql.query<{ tbl: string; name: string; def: string }>(
    `SELECT conrelid::regclass::text AS tbl, conname AS name, pg_get_constraintdef(oid) AS def
       FROM pg_constraint WHERE contype IN ('p', 'u') AND conrelid = ANY(${regclasses})`,
  );
  const indexes = await db.sql.query<{ name: string; def: string }>(
    `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def
       FROM pg_index i
      WHERE i.indrelid = ANY(${regclasses})
        AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.contype IN ('p', 'u', 'x'))`,
  );
  for (const fk of fks) await db.sql.exec(`ALTER TABLE ${fk.tbl} DROP CONSTRAINT "${fk.name}"`);
  for (const key of keys) await db.sql.exec(`ALTER TABLE ${key.tbl} DROP CONSTRAINT "${key.name}"`);
  for (const index of indexes) await db.sql.exec(`DROP INDEX ${index.name}`);
  await load();
  await timed("rebuild keys and indexes", async () => {
    // Session settings for the bulk build only; the measured queries run on stock settings.
    await db.sql.withConnection(async (conn) => {
      await conn.exec(`SET maintenance_work_mem = '1GB'; SET max_parallel_maintenance_workers = 2`);
      for (const key of keys) await timed(`build ${key.name}`, () => conn.exec(`ALTER TABLE ${key.tbl} ADD CONSTRAINT "${key.name}" ${key.def}`));
      for (const index of indexes) {
        await conn.exec(index.def);
      }
      for (const fk of fks) await conn.exec(`ALTER TABLE ${fk.tbl} ADD CONSTRAINT "${fk.name}" ${fk.def}`);
      await conn.exec(`RESET maintenance_work_mem; RESET max_parallel_maintenance_workers`);
    });
  });
}

async function seedStacks(db: Database): Promise<void> {
  const bandRows = bands()
    .map((b) => `('${b.prefix}', ${b.start}, ${b.count})`)
    .join(", ");
  const groupArray = `array_remove(ARRAY[${GROUPS.map((g) => `CASE WHEN ${g.where} THEN '${g.name}' END`).join(", ")}]::text[], NULL)`;
  await db.sql.exec(`INSERT INTO organizations (id, slug, name) VALUES ('${ORG_ID}', 'bench', 'Bench org')`);
  // The stacks' insert trigger writes name_gram_entries in the same statement (~13 rows a name).
  await withoutIndexes(db, ["stacks", "stack_authz_group_members", "name_gram_entries"], async () => {
    await timed(`insert ${STACKS.toLocaleString("en")} stacks`, () =>
      db.sql.exec(`
        INSERT INTO stacks (id, "orgId", name, labels, "authzGroups", "updatedAt")
        SELECT gen_random_uuid()::text, '${ORG_ID}', b.prefix || lpad((i - b.start)::text, 7, '0'),
               jsonb_build_object('tier', (i % 3)::text), ${groupArray}, now()
          FROM (SELECT (k::bigint * ${SCATTER}) % ${STACKS} AS i FROM generate_series(0, ${STACKS - 1}) AS k) AS n
          JOIN (VALUES ${bandRows}) AS b(prefix, start, count) ON n.i >= b.start AND n.i < b.start + b.count`),
    );
    await timed("insert group memberships", () =>
      db.sql.exec(`
        INSERT INTO stack_authz_group_members ("orgId", "groupName", "stackName", "stackId")
        SELECT s."orgId", g, s.name, s.id FROM stacks s, unnest(s."authzGroups") AS g`),
    );
  });
  // VACUUM sets the visibility map (index-only scans), ANALYZE the statistics: what
  // autovacuum would have done on a long-lived table.
  await timed("vacuum analyze", () => db.sql.exec(`VACUUM (ANALYZE) stacks, stack_authz_group_members, name_gram_entries`));
  // Flush the load's dirty pages now rather than in a checkpoint during the measurements.
  await db.sql.exec("CHECKPOINT").catch((error: Error) => log(`CHECKPOINT skipped: ${error.message}`));
}


// ── Measuring one page ───────────────────────────────────────────────────────────────

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}

interface ExplainJson {
  Plan: PlanNode;
  "Planning Time": number;
  "Execution Time": number;
}

/** The tables whose size grows with the org: reading either sequentially is the failure. */
const BIG_TABLES = new Set(["stacks", "stack_authz_group_members"]);

function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}

/** What a plan reads the big tables with: seq scans (must be none) and index scans by index. */
function planAccess(plan: PlanNode): { seqScans: string[]; indexScans: string[] } {
  const nodes = planNodes(plan);
  return {
    seqScans: nodes.filter((n) => n["Node Type"] === "Seq Scan" && BIG_TABLES.has(n["Relation Name"] ?? "")).map((n) => n["Relation Name"] as string),
    indexScans: nodes.filter((n) => n["Index Name"] !== undefined).map((n) => `${n["Node Type"]} on ${n["Index Name"]}`),
  };
}

async function explain(db: Database, query: PageQuery): Promise<ExplainJson> {
  const [result] = await db.sql.query<{ "QUERY PLAN": ExplainJson[] }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${query.text}`, query.params);
  return result!["QUERY PLAN"][0]!;
}

async function explainText(db: Database, query: PageQuery): Promise<string> {
  const rows = await db.sql.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${query.text}`, query.params);
  return rows.map((r) => r["QUERY PLAN"]).join("\n");
}

interface PageFigures {
  /** p50 of EXPLAIN ANALYZE "Execution Time", ms. */
  dbMs: number;
  planningMs: number;
  /** p50 / p99 of the query through pg in this process, ms. */
  wallMs: number;
  wallP99Ms: number;
  rows: number;
  plan: PlanNode;
}

/** Database time from EXPLAIN ANALYZE (median of several) and wall time through pg. */
async function measurePage(db: Database, query: PageQuery): Promise<PageFigures> {
  const once = process.hrtime.bigint();
  const rows = (await db.sql.query(query.text, query.params)).length;
  const firstMs = Number(process.hrtime.bigint() - once) / 1e6;
  // Slow shapes (the seed's filter) get fewer iterations so the bench stays within minutes.
  const iterations = Math.max(5, Math.min(200, Math.floor(1000 / Math.max(firstMs, 0.001))));
  const explains: ExplainJson[] = [];
  for (let i = 0; i < Math.min(15, Math.max(3, Math.floor(iterations / 10))); i++) explains.push(await explain(db, query));
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  const wall = await timeAsync(() => db.sql.query(query.text, query.params), { warmup: Math.min(20, iterations), iterations });
  return {
    dbMs: median(explains.map((e) => e["Execution Time"])),
    planningMs: median(explains.map((e) => e["Planning Time"])),
    wallMs: wall.p50,
    wallP99Ms: wall.p99,
    rows,
    plan: explains[0]!.Plan,
  };
}

// ── The list cases ───────────────────────────────────────────────────────────────────

type Shape = "authz group" | "exact name" | "prefix pattern" | "union of arms" | "untargeted" | "name pattern" | "other pattern";

interface ListCase {
  shape: Shape;
  /** e.g. "grp-1pct (1%)". */
  label: string;
  scope: ListScope;
  after: string | null;
  page: "first" | "deep";
  /** Hand-written raw SQL for the same page. */
  baseline: { name: string; query: PageQuery };
  /** The 1 ms goal applies (group, exact, prefix); other shapes are context. */
  goal: boolean;
  /** The goal's bound in ms of database time when it is not 1 ms (patterns: 5 ms). */
  maxMs?: number;
  /** Also compare the names themselves with the baseline's, not only their count. */
  sameNames?: boolean;
  /** Print this case's EXPLAIN (one case per shape). */
  showPlan?: boolean;
  /** Also compare against the seed's filter shape over these LIKE patterns. */
  versusSeed?: string[];
}

const STACK_COLUMNS = `id, "orgId", name, description, labels, "authzGroups", outputs, "createdAt", "updatedAt"`;

type StackReadGrant = { resourcePattern?: string; authzGroup?: string };

/** The scope a principal holding these (stack, read) grants lists stacks with: the product's path. */
function scopeOf(...grants: StackReadGrant[]): ListScope {
  const principal = compilePrincipal({
    isSuperAdmin: false,
    orgExists: true,
    orgDeleted: false,
    membershipActive: true,
    grants: grants.map((g) => ({ resourceType: "stack", action: "read", resourcePattern: g.resourcePattern ?? "", authzGroup: g.authzGroup ?? "" })),
  });
  return listScope(principal, "stack", "read");
}

const raw = {
  /** The seed's group shape: one ordered range on the membership index, joined to stacks. */
  group: (group: string, after: string | null): PageQuery => ({
    text: `SELECT s.* FROM stack_authz_group_members m JOIN stacks s ON s.id = m."stackId"
            WHERE m."orgId" = $1 AND m."groupName" = $2 AND m."stackName" > $3
            ORDER BY m."stackName" LIMIT $4`,
    params: [ORG_ID, group, after ?? "", LIMIT],
  }),
  exact: (name: string, after: string | null): PageQuery => ({
    text: `SELECT * FROM stacks WHERE "orgId" = $1 AND name = $2 AND name > $3 ORDER BY name LIMIT $4`,
    params: [ORG_ID, name, after ?? "", LIMIT],
  }),
  /** The straightforward query: PostgreSQL derives the index range from a C-collated LIKE. */
  like: (pattern: string, after: string | null): PageQuery => ({
    text: `SELECT * FROM stacks WHERE "orgId" = $1 AND name > $2 AND name LIKE $3 ORDER BY name LIMIT $4`,
    params: [ORG_ID, after ?? "", pattern, LIMIT],
  }),
  /** No filter at all: the floor for any page of this table. */
  plain: (after: string | null): PageQuery => ({
    text: `SELECT * FROM stacks WHERE "orgId" = $1 AND name > $2 ORDER BY name LIMIT $3`,
    params: [ORG_ID, after ?? "", LIMIT],
  }),
  /**
   * The seed's slow shape: the grants' patterns as a filter over the org's stacks, as the
   * seed's list repositories run it (an array of patterns, so PostgreSQL derives no index
   * range from them): rows ÷ matches index entries per page.
   */
  seedFilter: (patterns: string[], after: string | null): PageQuery => ({
    text: `SELECT * FROM stacks WHERE "orgId" = $1 AND name > $2 AND name LIKE ANY($3::text[]) ORDER BY name LIMIT $4`,
    params: [ORG_ID, after ?? "", patterns, LIMIT],
  }),
  /** The straightforward filter for patterns and groups together, on the stacks' own array. */
  patternsOrGroups: (patterns: string[], groups: string[], after: string | null): PageQuery => ({
    text: `SELECT * FROM stacks WHERE "orgId" = $1 AND name > $2
              AND (name LIKE ANY($3::text[]) OR "authzGroups" && $4::text[])
            ORDER BY name LIMIT $5`,
    params: [ORG_ID, after ?? "", patterns, groups, LIMIT],
  }),
};

const percent = (count: number) => {
  const p = (100 * count) / STACKS;
  return count === 1 ? "1 stack" : `${p >= 1 ? p.toFixed(0) : p.toPrecision(1)}%`;
};

/** The name halfway through an ordered set, for the deep page's `after` cursor. */
async function midpoint(db: Database, text: string, params: unknown[], count: number): Promise<string> {
  const [r] = await db.sql.query<{ name: string }>(`${text} OFFSET ${Math.floor((count - 1) / 2)} LIMIT 1`, params);
  if (!r) throw new Error(`no midpoint for ${text}`);
  return r.name;
}

/**
 * The pattern goal rows, each with a literal run of 3+ characters, in the bench's names
 * (`team-a-0004242`, `svc-0388998`): `goal` ones carry the 5 ms target; the other is the
 * shape docs/benchmarks.md names as the walk's limit, measured so the limit shows.
 */
const NAME_PATTERNS: { kind: string; glob: string; goal: boolean; showPlan?: boolean }[] = [
  { kind: "suffix", glob: "*-0004242", goal: true, showPlan: true },
  { kind: "suffix", glob: "*4242", goal: true },
  { kind: "infix", glob: "*-00042*", goal: true, showPlan: true },
  { kind: "infix", glob: "*4242*", goal: true },
  { kind: "infix", glob: "*0042*", goal: true },
  { kind: "infix", glob: "*424*", goal: true },
  { kind: "infix", glob: "*000*", goal: true },
  { kind: "head+tail", glob: "team-a-*4242", goal: true },
  { kind: "head+infix", glob: "team-c-*42", goal: true },
  { kind: "multi", glob: "*-000*42", goal: true },
  { kind: "multi", glob: "team-?-*42*", goal: true },
  { kind: "bunched", glob: "*team*", goal: true },
  { kind: "bunched", glob: "*b-00*42?", goal: true },
  { kind: "bunched", glob: "*a-004*", goal: true },
  { kind: "weak runs", glob: "svc-*4?42", goal: true },
  { kind: "rare gram", glob: "*eam-e*", goal: true },
  // Every gram common, no name holding both runs: the walk reads all of team-b's `b-0` entries.
  { kind: "no match", glob: "*a-0*b-0*", goal: false },
];

async function listCases(db: Database): Promise<ListCase[]> {
  const cases: ListCase[] = [];
  /** The first page, whose plan is the one shown, and a deep page from the given cursor. */
  const both = async (
    make: (after: string | null, page: "first" | "deep") => ListCase,
    deepCursor: () => Promise<string>,
    showPlan = false,
  ) => {
    cases.push({ ...make(null, "first"), showPlan }, make(await deepCursor(), "deep"));
  };

  for (const g of GROUPS) {
    const [{ count }] = (await db.sql.query<{ count: number }>(
      `SELECT count(*)::int AS count FROM stack_authz_group_members WHERE "orgId" = $1 AND "groupName" = $2`,
      [ORG_ID, g.name],
    )) as [{ count: number }];
    const scope = scopeOf({ authzGroup: g.name });
    await both(
      (after, page) => ({
        shape: "authz group",
        label: `${g.name} (${percent(count)})`,
        scope,
        after,
        page,
        baseline: { name: "raw members⋈stacks", query: raw.group(g.name, after) },
        goal: true,
      }),
      () =>
        midpoint(
          db,
          `SELECT "stackName" AS name FROM stack_authz_group_members WHERE "orgId" = $1 AND "groupName" = $2 ORDER BY "stackName"`,
          [ORG_ID, g.name],
          count,
        ),
      g.name === "grp-10pct",
    );
  }

  const bandList = bands();
  const exactName = nameOf(bandList[2]!, Math.min(4242, bandList[2]!.count - 1)); // team-c-0004242
  await both(
    (after, page) => ({
      shape: "exact name",
      label: `${exactName} (1 stack)`,
      scope: scopeOf({ resourcePattern: compileResourcePattern(exactName) }),
      after,
      page,
      baseline: { name: "raw name =", query: raw.exact(exactName, after) },
      goal: true,
      ...(page === "first" ? { versusSeed: [compileResourcePattern(exactName)] } : {}),
    }),
    // Deep for one stack: the cursor just before it, the last page a client asks for.
    async () => exactName.slice(0, -1),
    true,
  );

  for (const band of bandList.filter((b) => b.prefix.startsWith("team-"))) {
    const glob = `${band.prefix}*`;
    const pattern = compileResourcePattern(glob);
    await both(
      (after, page) => ({
        shape: "prefix pattern",
        label: `${glob} (${percent(band.count)})`,
        scope: scopeOf({ resourcePattern: pattern }),
        after,
        page,
        baseline: { name: "raw name LIKE", query: raw.like(pattern, after) },
        goal: true,
      }),
      async () => nameOf(band, Math.floor((band.count - 1) / 2)),
      band.prefix === "team-b-",
    );
  }

  // Context: a role holding one of each; the page is the union of three ordered arms.
  const unionGrants = { prefix: "team-d-*", group: "grp-1pct", exact: exactName };
  const unionPatterns = [compileResourcePattern(unionGrants.prefix), compileResourcePattern(unionGrants.exact)];
  await both(
    (after, page) => ({
      shape: "union of arms",
      label: `${unionGrants.prefix} + ${unionGrants.group} + ${unionGrants.exact}`,
      scope: scopeOf(
        { resourcePattern: unionPatterns[0] },
        { authzGroup: unionGrants.group },
        { resourcePattern: unionPatterns[1] },
      ),
      after,
      page,
      baseline: { name: "raw LIKE ANY OR groups &&", query: raw.patternsOrGroups(unionPatterns, [unionGrants.group], after) },
      goal: false,
    }),
    async () => nameOf(bandList[0]!, 250_000),
    true,
  );

  // Context, not goals: the floor (no filter) and patterns only partly or not served by an index.
  await both(
    (after, page) => ({
      shape: "untargeted",
      label: "(stack, read) untargeted",
      scope: scopeOf({}),
      after,
      page,
      baseline: { name: "raw plain page", query: raw.plain(after) },
      goal: false,
    }),
    async () => nameOf(bandList[0]!, 250_000),
    true,
  );
  // Patterns with a literal run of 3+ characters anywhere, served from
  // name_gram_entries, walking the rarest gram's entries in name order (src/authz/
  // list-filter.ts). Baseline: the seed's filter shape, the query these patterns ran as before.
  for (const p of NAME_PATTERNS) {
    const like = compileResourcePattern(p.glob);
    const [{ count }] = (await db.sql.query<{ count: number }>(
      `SELECT count(*)::int AS count FROM stacks WHERE "orgId" = $1 AND name LIKE $2`,
      [ORG_ID, like],
    )) as [{ count: number }];
    await both(
      (after, page) => ({
        shape: p.goal ? "name pattern" : "other pattern",
        label: `${p.kind} ${p.glob} (${count === 1 ? "1 stack" : `${count.toLocaleString("en")} stacks`})`,
        scope: scopeOf({ resourcePattern: like }),
        after,
        page,
        baseline: { name: "seed filter shape", query: raw.seedFilter([like], after) },
        goal: p.goal,
        maxMs: PATTERN_TARGET_MS,
        sameNames: true,
      }),
      async () =>
        count > 1
          ? midpoint(db, `SELECT name FROM stacks WHERE "orgId" = $1 AND name LIKE $2 ORDER BY name`, [ORG_ID, like], count)
          : "",
      p.showPlan ?? false,
    );
  }
  return cases;
}

async function listRows(db: Database): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const seqScansByShape = new Map<Shape, { plans: number; seqScans: string[] }>();
  const explains: string[] = [];

  for (const c of await listCases(db)) {
    const query = namePageQuery("stack", ORG_ID, c.scope, c.after, LIMIT);
    if (!query) throw new Error(`${c.label}: namePageQuery returned nothing to run`);
    const ours = await measurePage(db, query);
    const base = await measurePage(db, c.baseline.query);
    if (ours.rows !== base.rows) {
      throw new Error(`${c.label} ${c.page}: namePageQuery returned ${ours.rows} rows, the raw baseline ${base.rows}`);
    }
    if (c.sameNames) {
      const [a, b] = [await db.sql.query<{ name: string }>(query.text, query.params), await db.sql.query<{ name: string }>(c.baseline.query.text, c.baseline.query.params)];
      if (a.map((r) => r.name).join("\n") !== b.map((r) => r.name).join("\n")) {
        throw new Error(`${c.label} ${c.page}: namePageQuery and the baseline returned different names`);
      }
    }
    const access = planAccess(ours.plan);
    const tally = seqScansByShape.get(c.shape) ?? { plans: 0, seqScans: [] };
    tally.plans++;
    tally.seqScans.push(...access.seqScans);
    seqScansByShape.set(c.shape, tally);
    log(
      `${c.shape} ${c.label} ${c.page}: ${ours.rows} rows, db ${ours.dbMs.toFixed(3)} ms (+${ours.planningMs.toFixed(3)} planning), ` +
        `wall p50 ${ours.wallMs.toFixed(3)} p99 ${ours.wallP99Ms.toFixed(3)} ms | ${c.baseline.name}: db ${base.dbMs.toFixed(3)}, ` +
        `wall p50 ${base.wallMs.toFixed(3)} p99 ${base.wallP99Ms.toFixed(3)} | ${access.indexScans.join(", ")}`,
    );

    const name = `list ${c.shape} ${c.label} ${c.page} page`;
    rows.push(
      row(`${name}: db`, ours.dbMs, "ms", {
        baseline: { name: c.baseline.name, value: base.dbMs },
        ...(c.goal ? { max: c.maxMs ?? DB_TARGET_MS } : {}),
      }),
      row(`${name}: wall`, ours.wallMs, "ms", { baseline: { name: c.baseline.name, value: base.wallMs } }),
    );

    if (c.versusSeed) {
      // The seed's measured slow case: a one-stack name pattern as a filter (55 ms and growing).
      const seedQuery = raw.seedFilter(c.versusSeed, c.after);
      const seed = await measurePage(db, seedQuery);
      log(`seed filter shape, ${c.label}: db ${seed.dbMs.toFixed(3)} ms, wall p50 ${seed.wallMs.toFixed(3)} ms`);
      rows.push(row(`${name} vs seed: db`, ours.dbMs, "ms", { baseline: { name: "seed filter shape", value: seed.dbMs } }));
      explains.push(`-- baseline: the seed's filter shape, ${c.label}\n${seedQuery.text}\n-- params: ${JSON.stringify(seedQuery.params)}\n${await explainText(db, seedQuery)}`);
    }
    if (c.showPlan) {
      explains.push(`-- ${c.shape}: ${c.label}, ${c.page} page\n${query.text}\n-- params: ${JSON.stringify(query.params)}\n${await explainText(db, query)}`);
    }
  }

  for (const [shape, tally] of seqScansByShape) {
    const goal = shape === "authz group" || shape === "exact name" || shape === "prefix pattern" || shape === "name pattern";
    rows.push(
      row(`plan ${shape}: seq scans on stacks/members (${tally.plans} plans)`, tally.seqScans.length, "scans", {
        target: goal ? "0" : undefined,
        pass: goal ? tally.seqScans.length === 0 : undefined,
      }),
    );
  }
  console.log(`\n── stacks: EXPLAIN (ANALYZE, BUFFERS) of each shape ──\n\n${explains.join("\n\n")}\n`);
  return rows;
}

// ── What name_gram_entries costs a write ─────────────────────────────────────────────

/**
 * Single-row stack inserts (each its own statement, as createStack runs them) in a
 * transaction that is rolled back, with the trigger that writes the name's gram entries and
 * again with it disabled inside the transaction: the entries' share of a write, side by side
 * in the same minutes.
 */
async function insertCostRows(db: Database): Promise<BenchRow[]> {
  const N = 300;
  const run = (tag: string, withoutEntries: boolean) =>
    db.sql.withConnection(async (conn) => {
      await conn.exec("BEGIN");
      try {
        if (withoutEntries) await conn.exec("ALTER TABLE stacks DISABLE TRIGGER stacks_name_grams_insert");
        let i = 0;
        return await timeAsync(
          () =>
            conn.query(`INSERT INTO stacks (id, "orgId", name, "updatedAt") VALUES (gen_random_uuid()::text, $1, $2, now())`, [
              ORG_ID,
              `bench-insert-${tag}-${String(i++).padStart(7, "0")}`,
            ]),
          { warmup: 20, iterations: N },
        );
      } finally {
        await conn.exec("ROLLBACK");
      }
    });
  // Alternated, best p50 of two each: the first transaction of a run pays for warming up.
  const withRuns = [await run("grams-1", false)];
  const withoutRuns = [await run("nograms-1", true)];
  withRuns.push(await run("grams-2", false));
  withoutRuns.push(await run("nograms-2", true));
  const best = (runs: { p50: number }[]) => runs.reduce((a, b) => (a.p50 <= b.p50 ? a : b));
  const withEntries = best(withRuns);
  const without = best(withoutRuns);
  log(`insert one stack: p50 ${withEntries.p50.toFixed(3)} ms with its gram entries, ${without.p50.toFixed(3)} ms without`);
  return [
    row("write: insert one stack, p50 (with its name_gram_entries rows)", withEntries.p50, "ms", {
      baseline: { name: "same insert without them", value: without.p50 },
    }),
  ];
}

// ── Permission checks ────────────────────────────────────────────────────────────────

/** A realistic custom-role union: 20 tuples, patterns and groups among them (user globs). */
export const REALISTIC_GRANTS = [
  { resourceType: "stack", action: "read", resourcePattern: "team-a-*" },
  { resourceType: "stack", action: "deploy", resourcePattern: "team-a-*" },
  { resourceType: "stack", action: "preview", resourcePattern: "team-a-*" },
  { resourceType: "stack", action: "read", authzGroup: "env-staging" },
  { resourceType: "stack", action: "deploy", authzGroup: "env-staging" },
  { resourceType: "stack", action: "read_logs", authzGroup: "tier-1" },
  { resourceType: "stack", action: "read_logs", resourcePattern: "*-payments-*" },
  { resourceType: "stack", action: "update", resourcePattern: "prod_backend" },
  { resourceType: "stack", action: "confirm", resourcePattern: "team-b-api" },
  { resourceType: "stack", action: "*", resourcePattern: "sandbox-*" },
  { resourceType: "cloud_integration", action: "read", authzGroup: "env-staging" },
  { resourceType: "runner_group", action: "read" },
  { resourceType: "label", action: "read" },
  { resourceType: "label", action: "update", resourcePattern: "team/*" },
  { resourceType: "stack_authz_group", action: "assign", resourcePattern: "team-a-*" },
  { resourceType: "role", action: "read" },
  { resourceType: "member", action: "read" },
  { resourceType: "workspace", action: "read", authzGroup: "env-staging" },
  { resourceType: "workspace", action: "approve", resourcePattern: "team-a-*-prod" },
  { resourceType: "approval_request", action: "decide", authzGroup: "tier-1" },
] as const;

export function realisticGrants(): Permission[] {
  const result = validateCustomRolePermissions(REALISTIC_GRANTS);
  if (!result.ok) throw new Error(`bench grants are invalid: ${JSON.stringify(result.issues)}`);
  return [...result.permissions];
}

/** A mix of allowed and denied questions, each through a different arm of the check. */
const CHECK_TARGETS: Target[] = [
  { resourceType: "stack", action: "read", matchValue: "team-a-0042", groups: ["env-prod"] }, // prefix
  { resourceType: "stack", action: "deploy", matchValue: "svc-0000042", groups: ["env-staging", "tier-2"] }, // group
  { resourceType: "stack", action: "update", matchValue: "prod_backend", groups: [] }, // literal
  { resourceType: "stack", action: "read_logs", matchValue: "core-payments-api", groups: ["tier-3"] }, // infix
  { resourceType: "stack", action: "delete", matchValue: "sandbox-17", groups: [] }, // '*' action
  { resourceType: "stack", action: "deploy", matchValue: "svc-0000043", groups: ["env-prod", "tier-1"] }, // denied
  { resourceType: "runner_group", action: "read", matchValue: "default", groups: null }, // untargeted
  { resourceType: "workspace", action: "approve", matchValue: "team-a-42-dev", groups: ["env-prod"] }, // denied
];

async function checkRows(db: Database): Promise<BenchRow[]> {
  const grants = realisticGrants();
  const principal: PrincipalGrants = { isSuperAdmin: false, orgExists: true, orgDeleted: false, membershipActive: true, grants };
  const compiled = compilePrincipal(principal);
  const n = CHECK_TARGETS.length;
  const targets = CHECK_TARGETS;
  // Same answers both ways, or the comparison means nothing.
  for (const t of targets) {
    if (checkPermission(compiled, t).allowed !== checkPermission(principal, t).allowed) {
      throw new Error(`compiled and uncompiled checks disagree on ${JSON.stringify(t)}`);
    }
  }
  const iterations = { perBatch: 20_000, batches: 25 }; // 5e5 timed calls each
  const cached = nsPerOp((i) => checkPermission(compiled, targets[i % n]!).allowed, iterations);
  const uncompiled = nsPerOp((i) => checkPermission(principal, targets[i % n]!).allowed, iterations);
  // The index lookup alone, without checkPermission's gates and result object.
  const index = compiled.index;
  const find = nsPerOp((i) => index.find(targets[i % n]!) !== undefined, iterations);
  const scan = nsPerOp((i) => grants.some((g) => grantSatisfies(g, targets[i % n]!)), iterations);
  const keys = targets.map((t) => `${t.resourceType}:${t.action}:${t.matchValue}`);
  const set = new Set(keys.filter((_, i) => i % 2 === 0));
  const setLookup = nsPerOp((i) => set.has(keys[i % n]!), iterations);
  const compile = nsPerOp(() => compilePrincipal(principal), { perBatch: 200, batches: 15, warmupCalls: 500 });
  log(`check: compiled p50 ${cached.p50.toFixed(0)} ns (p99 batch ${cached.p99.toFixed(0)}), uncompiled ${uncompiled.p50.toFixed(0)} ns, find ${find.p50.toFixed(0)} ns, scan ${scan.p50.toFixed(0)} ns, Set.has ${setLookup.p50.toFixed(1)} ns, compile ${(compile.p50 / 1000).toFixed(1)} µs`);

  const loaded = await loadPrincipalRows(db, grants);
  return [
    row(`check: cached principal (${grants.length} grants), ${n} mixed targets`, cached.p50, "ns/op", {
      baseline: { name: "uncompiled checkPermission", value: uncompiled.p50 },
      max: CHECK_TARGET_NS,
      target: "< 50 µs",
    }),
    row(`check: cached principal vs a bare Set lookup`, cached.p50, "ns/op", {
      baseline: { name: "Set.has", value: setLookup.p50 },
    }),
    row(`check: GrantIndex.find alone (no gates, no result object)`, find.p50, "ns/op", {
      baseline: { name: "grants.some(grantSatisfies)", value: scan.p50 },
    }),
    row(`check: compilePrincipal (${grants.length} grants, once per cache fill)`, compile.p50 / 1000, "µs/op"),
    ...loaded,
  ];
}

/** The uncached path: one user's principal loaded from the database (one round trip). */
async function loadPrincipalRows(db: Database, grants: Permission[]): Promise<BenchRow[]> {
  const { prisma } = db;
  const user = await prisma.user.create({ data: { email: "bench@bench.local", name: "Bench" } });
  await prisma.membership.create({ data: { orgId: ORG_ID, userId: user.id } });
  const role = async (key: string, permissions: Permission[]) =>
    prisma.role.create({ data: { orgId: ORG_ID, key, name: key, permissions: { create: permissions } } });
  const half = Math.ceil(grants.length / 2);
  const direct = await role("bench-direct", grants.slice(0, half));
  await prisma.roleAssignment.create({ data: { orgId: ORG_ID, userId: user.id, roleId: direct.id } });
  // The other half through an SSO binding with two roles: the union path of the check.
  const sso1 = await role("bench-sso-1", grants.slice(half, half + 5));
  const sso2 = await role("bench-sso-2", grants.slice(half + 5));
  const source = await prisma.identitySource.create({ data: { orgId: ORG_ID, name: "okta" } });
  const binding = await prisma.identityGroupBinding.create({
    data: { orgId: ORG_ID, identitySourceId: source.id, groupKey: "platform", roles: { create: [{ roleId: sso1.id }, { roleId: sso2.id }] } },
  });
  await prisma.userIdentityGroup.create({ data: { identitySourceId: source.id, userId: user.id, groupKey: binding.groupKey } });
  await db.sql.exec("ANALYZE");

  const loaded = await loadPrincipal(db.sql, ORG_ID, user.id);
  if (loaded.grants.length !== grants.length) {
    throw new Error(`loadPrincipal returned ${loaded.grants.length} grants, expected ${grants.length}`);
  }
  const load = await timeAsync(() => loadPrincipal(db.sql, ORG_ID, user.id), { warmup: 50, iterations: 500 });
  const ping = await timeAsync(() => db.sql.query("SELECT 1"), { warmup: 50, iterations: 500 });
  log(`loadPrincipal p50 ${load.p50.toFixed(3)} ms p99 ${load.p99.toFixed(3)} ms; SELECT 1 p50 ${ping.p50.toFixed(3)} ms`);
  return [
    row(`check: loadPrincipal round trip (uncached; direct role + SSO binding, ${grants.length} grants) p50`, load.p50, "ms", {
      baseline: { name: "SELECT 1", value: ping.p50 },
    }),
    row(`check: loadPrincipal round trip p99`, load.p99, "ms", { baseline: { name: "SELECT 1 p99", value: ping.p99 } }),
  ];
}

// ── The module ───────────────────────────────────────────────────────────────────────

export async function run(): Promise<BenchRow[]> {
  return withBenchSchema(async (db) => {
    const start = process.hrtime.bigint();
    await timed(`seed ${STACKS.toLocaleString("en")} stacks in one org`, () => seedStacks(db));
    const seedS = Number(process.hrtime.bigint() - start) / 1e9;
    const lists = await timed("list pages", () => listRows(db));
    const writes = await timed("insert cost", () => insertCostRows(db));
    const checks = await timed("permission checks", () => checkRows(db));
    consume(lists.length + checks.length + writes.length);
    return [
      // The seed builds ~13M name_gram_entries too (about half of it): 99-123 s on 2026-12-03.
      row(`seed: ${STACKS.toLocaleString("en")} stacks + group memberships + name grams, indexes, VACUUM ANALYZE`, seedS, "s", {
        max: 180,
        target: "< 3 min",
      }),
      ...lists,
      ...writes,
      ...checks,
    ];
  });
}
