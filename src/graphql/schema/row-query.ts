/**
 * A prismaField's `query`, ready to spread into a Prisma call. When the selection beneath the field
 * reads nothing of the row (only `__typename`, or a result union's member name), the plugin hands
 * over `select: {}`, which Prisma refuses ("must not be empty"): the row is then read whole.
 */
export function rowQuery<Q extends object>(query: Q): Q {
  const select = (query as { select?: object }).select;
  if (select !== undefined && Object.keys(select).length === 0) {
    const { select: _empty, ...rest } = query as Q & { select: object };
    return rest as Q;
  }
  return query;
}

/** `loaded` (read back with a field's query) in the order of `found`. */
export function inOrder<T extends { id: string }>(found: readonly { id: string }[], loaded: readonly T[]): T[] {
  const byId = new Map(loaded.map((row) => [row.id, row]));
  return found.map((row) => byId.get(row.id)).filter((row): row is T => row !== undefined);
}
