/** Prisma's unique-constraint violation (P2002), through either driver adapter. */
export function uniqueViolation(error: unknown): boolean {
  const e = error as { code?: string; cause?: { code?: string }; meta?: { driverAdapterError?: { cause?: { kind?: string } } } };
  return (
    e?.code === "P2002" ||
    e?.code === "23505" ||
    e?.meta?.driverAdapterError?.cause?.kind === "UniqueConstraintViolation"
  );
}
