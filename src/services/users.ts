import type { Database } from "../infra/db.js";
import { modelRow } from "../infra/model-rows.js";
import type { User } from "../generated/prisma/client.js";

/** The people of one batch, as Prisma reads a User (src/infra/model-rows.ts): one prepared statement, no query compiler. */
const USERS_SQL = `SELECT to_json(u) AS u FROM users u WHERE u.id = ANY($1::text[])`;

/** Users by id (those that exist), for a batch that names them; the caller decides who may see them. */
export async function usersByIds(db: Pick<Database, "sql">, ids: readonly string[]): Promise<Map<string, User>> {
  const rows = await db.sql.query<{ u: Record<string, unknown> }>(USERS_SQL, [ids], { prepare: true });
  return new Map(rows.map((r) => modelRow<User>("User", r.u)).map((u) => [u.id, u]));
}
