import pg from "pg";
import { Redis } from "ioredis";
import { TEST_DATABASE_URL, TEST_REDIS_URL } from "./helpers/env.js";

/** Tests talk to the real PostgreSQL and Redis; fail fast, with the fix, when one is down. */
export default async function setup() {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(`PostgreSQL at ${TEST_DATABASE_URL} is not reachable (${(error as Error).message}). Start it, or set TEST_DATABASE_URL.`);
  }
  // Each test file migrates its own schema t_<created>_<random>; drop what interrupted runs
  // left behind over two hours ago, never a schema another run on this machine is using now.
  const schemas = await client.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 't\\_%'`);
  const cutoff = Date.now() / 1000 - 2 * 3600;
  for (const { nspname } of schemas.rows) {
    const parts = nspname.split("_");
    const created = parts.length === 3 ? parseInt(parts[1]!, 36) : Number.NaN;
    if (Number.isNaN(created) || created < cutoff) await client.query(`DROP SCHEMA "${nspname}" CASCADE`);
  }
  await client.end();
  const redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    throw new Error(`Redis at ${TEST_REDIS_URL} is not reachable (${(error as Error).message}). Start it, or set TEST_REDIS_URL.`);
  } finally {
    redis.disconnect();
  }
}
