import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgres, type Database } from "../src/infra/db.js";
import { TEST_DATABASE_URL } from "./helpers/env.js";
import { newSchemaName } from "./helpers/harness.js";

// The raw SQL runner's `prepare` option (src/infra/db.ts): the live gate's hot reads are
// prepared once per connection. What must hold: the same rows as an unprepared query, one
// prepared statement per distinct text however often it runs, and a name per text, so two
// statements never collide on one connection.
describe("SqlRunner prepare", () => {
  let db: Database;
  let schema: string;
  beforeAll(async () => {
    schema = newSchemaName();
    db = await openPostgres(TEST_DATABASE_URL, schema);
    await db.sql.exec(`CREATE TABLE ${schema}.items (id int PRIMARY KEY, name text NOT NULL);
                       INSERT INTO ${schema}.items VALUES (1, 'one'), (2, 'two'), (3, 'three');`);
  });
  afterAll(async () => {
    await db.sql.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await db.close();
  });

  const BY_IDS = `SELECT id, name FROM items WHERE id = ANY($1::int[]) ORDER BY id`;
  const COUNT = `SELECT count(*)::int AS n FROM items WHERE id > $1`;

  it("returns what the unprepared query returns, for every parameter value", async () => {
    for (const ids of [[1], [2, 3], [], [1, 2, 3, 4]]) {
      expect(await db.sql.query(BY_IDS, [ids], { prepare: true })).toEqual(await db.sql.query(BY_IDS, [ids]));
    }
  });

  it("prepares each text once per connection and gives two texts two names", async () => {
    const prepared = await db.sql.withConnection(async (conn) => {
      for (let i = 0; i < 5; i++) {
        await conn.query(BY_IDS, [[i]], { prepare: true });
        await conn.query(COUNT, [i], { prepare: true });
      }
      await conn.query(`SELECT 1`); // unprepared: not listed
      return conn.query<{ name: string; statement: string }>(`SELECT name, statement FROM pg_prepared_statements ORDER BY statement`);
    });
    expect(prepared.map((p) => p.statement).sort()).toEqual([BY_IDS, COUNT].sort());
    expect(new Set(prepared.map((p) => p.name)).size).toBe(2);
  });
});
