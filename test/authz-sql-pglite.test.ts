import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compilePrincipal, compileResourcePattern, likeMatches, listScope, nameGrams } from "../src/domain/catalog/index.js";
import { namePageQuery, type PageQuery } from "../src/authz/list-filter.js";
import { openPglite, type Database } from "../src/infra/db.js";
import { migrate } from "../src/infra/migrate.js";

// The embedded default (PGlite) runs the same migration as PostgreSQL: the name_gram_entries
// table, its statement triggers with transition tables, and the list query that walks it.

let dir: string;
let db: Database;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "countersign-grams-"));
  db = await openPglite(dir);
  await migrate(db.sql);
}, 120_000);

afterAll(async () => {
  await db?.close();
  await rm(dir, { recursive: true, force: true });
});

const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

describe("name patterns on PGlite", () => {
  it("keeps the entries through writes and serves every pattern's pages from them, exactly", async () => {
    const org = await db.prisma.organization.create({ data: { slug: "grams", name: "grams" } });
    const names = Array.from({ length: 3000 }, (_, i) => `${["team-a-", "team-b-", "svc-"][i % 3]}${String((i * 7919) % 100_000).padStart(5, "0")}`);
    await db.sql.query(
      `INSERT INTO stacks (id, "orgId", name, "updatedAt") SELECT gen_random_uuid()::text, $1, n, now() FROM unnest($2::text[]) AS n`,
      [org.id, names],
    );
    // A rename, a delete, and an update that keeps the name.
    const renamed = await db.prisma.stack.update({ where: { orgId_name: { orgId: org.id, name: names[0]! } }, data: { name: "payments-0004242" } });
    await db.prisma.stack.delete({ where: { orgId_name: { orgId: org.id, name: names[1]! } } });
    await db.prisma.stack.update({ where: { id: renamed.id }, data: { description: "kept" } });
    const live = ["payments-0004242", ...names.slice(2)].sort(byCodeUnit);

    const stored = await db.sql.query<{ name: string; gram: string }>(
      `SELECT name, gram FROM name_gram_entries WHERE "orgId" = $1 AND family = 'stack'`,
      [org.id],
    );
    expect(stored.map((r) => `${r.name} ${r.gram}`).sort(byCodeUnit)).toEqual(
      live.flatMap((n) => nameGrams(n).map((g) => `${n} ${g}`)).sort(byCodeUnit),
    );

    await db.sql.exec("ANALYZE name_gram_entries");
    for (const glob of ["*4242", "*-000*", "team-a-*42", "*b-0*9?", "*ents-*", "*zzz*"]) {
      const pattern = compileResourcePattern(glob);
      const principal = compilePrincipal({
        orgExists: true, orgDeleted: false, membershipActive: true, isSuperAdmin: false,
        grants: [{ resourceType: "stack", action: "read", resourcePattern: pattern, authzGroup: "" }],
      });
      const scope = listScope(principal, "stack", "read");
      const seen: string[] = [];
      let after: string | null = null;
      for (;;) {
        const query: PageQuery = namePageQuery("stack", org.id, scope, after, 25)!;
        const rows: { name: string }[] = await db.sql.query<{ name: string }>(query.text, query.params);
        seen.push(...rows.map((r) => r.name));
        if (rows.length < 25) break;
        after = rows.at(-1)!.name;
      }
      expect(seen, glob).toEqual(live.filter((n) => likeMatches(n, pattern)));
      const query = namePageQuery("stack", org.id, scope, null, 25)!;
      const plan = await db.sql.query<Record<string, string>>(`EXPLAIN ${query.text}`, query.params);
      expect(plan.map((r) => Object.values(r)[0]).join("\n"), glob).toContain("name_gram_entries_pkey");
    }
  }, 120_000);
});
