/** A key that may carry null or undefined. */
type Nullish<T, K extends keyof T> = null extends T[K] ? K : undefined extends T[K] ? K : never;

/** Required fields stay required; nullable ones become optional and never null. */
export type WithoutNulls<T> = { [K in keyof T as K extends Nullish<T, K> ? never : K]: T[K] } & {
  [K in keyof T as Nullish<T, K>]?: NonNullable<T[K]>;
};

/**
 * GraphQL sends null for omitted optional input fields; the services' zod schemas want them
 * absent. The one place that translates between the two.
 */
export const clean = <T extends object>(o: T) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v != null)) as WithoutNulls<T>;

/**
 * `clean`, except that the named fields keep an explicit null: for updates where null means
 * "remove it" (an omitted field is absent either way).
 */
export const cleanKeepingNull = <T extends object, K extends keyof T>(o: T, keep: readonly K[]) =>
  Object.fromEntries(Object.entries(o).filter(([k, v]) => v != null || (v === null && keep.includes(k as K)))) as WithoutNulls<Omit<T, K>> & Partial<Pick<T, K>>;
