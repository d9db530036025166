import type { z } from "zod";
import { ValidationError } from "../errors.js";

/** Parses input with zod, turning issues into a ValidationError naming each field under `prefix`. */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, prefix = "input"): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new ValidationError(
    result.error.issues.map((issue) => ({
      field: [...(prefix ? [prefix] : []), ...issue.path.map(String)].join("."),
      code: issue.code,
      message: issue.message,
    })),
  );
}
