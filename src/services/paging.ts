// What keyset paging needs below the API: the refusal of a cursor the API did not issue, and the
// key of a list ordered newest first (creation time descending, then id ascending), with the
// filter and order that continue such a list after a key. src/graphql/keyset.ts makes the cursors.
import { ValidationError } from "../errors.js";

export const invalidCursor = (field = "after") => ValidationError.field(field, "invalid_cursor", "This cursor was not issued by this API.");

export interface NewestFirstKey {
  createdAt: Date;
  id: string;
}

export const newestFirstKeyOf = (row: NewestFirstKey): string => `${row.createdAt.toISOString()}|${row.id}`;

/** A newest-first key back from its string (newestFirstKeyOf's; null for none); anything else is `invalid_cursor`. */
export function parseNewestFirstKey(key: string | null, field = "after"): NewestFirstKey | null {
  if (key === null) return null;
  const bar = key.indexOf("|");
  if (bar < 0) throw invalidCursor(field);
  const createdAt = new Date(key.slice(0, bar));
  const id = key.slice(bar + 1);
  if (Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== key.slice(0, bar) || id === "") throw invalidCursor(field);
  return { createdAt, id };
}

/**
 * Prisma's filter for the rows after `after` in newest-first order (every row when null). The
 * redundant bound on createdAt lets an index on (…, createdAt DESC, id) start at the cursor
 * instead of filtering every newer row on the way to it.
 */
export function afterNewestFirst(after: NewestFirstKey | null) {
  if (!after) return {};
  return { createdAt: { lte: after.createdAt }, OR: [{ createdAt: { lt: after.createdAt } }, { createdAt: after.createdAt, id: { gt: after.id } }] };
}

/** Newest-first order for Prisma: the order afterNewestFirst continues. */
export const NEWEST_FIRST = [{ createdAt: "desc" as const }, { id: "asc" as const }];
