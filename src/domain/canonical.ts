import { createHash } from "node:crypto";

/**
 * Canonical JSON: the one byte string a JSON value hashes to.
 *
 * Object keys are sorted by UTF-16 code units (the order `Array.prototype.sort` gives, and the
 * order RFC 8785 uses), there is no whitespace, arrays keep their order, and numbers and
 * strings are written the way `JSON.stringify` writes them. Anything that is not a JSON value
 * is refused instead of being silently dropped or rewritten — `JSON.stringify` would turn
 * `{ a: undefined }` into `{}` and `NaN` into `null`, and two different argument objects would
 * then share an argument hash (seed 003, "Resuming from the agent side": the token binds the
 * canonical hash of the arguments).
 */
export class CanonicalJsonError extends Error {
  override readonly name = "CanonicalJsonError";
  constructor(
    /** Where the offending value sits, e.g. `$.items[2].amount`. */
    readonly path: string,
    readonly kind: "undefined" | "function" | "symbol" | "bigint" | "non_finite_number" | "non_plain_object" | "sparse_array" | "cycle",
  ) {
    super(`not a JSON value at ${path}: ${kind.replaceAll("_", " ")}`);
  }
}

export function canonicalJson(value: unknown): string {
  return write(value, "$", new Set());
}

/** sha256 (lowercase hex) of the canonical JSON of a tool call's arguments. */
export function argumentHash(args: unknown): string {
  return sha256Hex(canonicalJson(args));
}

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

function write(value: unknown, path: string, ancestors: Set<object>): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new CanonicalJsonError(path, "non_finite_number");
      // JSON.stringify writes -0 as "0": both parse back to the same JSON number.
      return JSON.stringify(value);
    case "undefined":
      throw new CanonicalJsonError(path, "undefined");
    case "function":
      throw new CanonicalJsonError(path, "function");
    case "symbol":
      throw new CanonicalJsonError(path, "symbol");
    case "bigint":
      throw new CanonicalJsonError(path, "bigint");
    case "object":
      break;
  }
  if (value === null) return "null";
  const object = value as object;
  if (ancestors.has(object)) throw new CanonicalJsonError(path, "cycle");
  ancestors.add(object);
  try {
    if (Array.isArray(object)) {
      const items: string[] = [];
      for (let i = 0; i < object.length; i++) {
        if (!(i in object)) throw new CanonicalJsonError(`${path}[${i}]`, "sparse_array");
        items.push(write(object[i], `${path}[${i}]`, ancestors));
      }
      return `[${items.join(",")}]`;
    }
    const proto: unknown = Object.getPrototypeOf(object);
    // Dates, Maps, class instances and boxed primitives have no single JSON meaning: refuse them.
    if (proto !== Object.prototype && proto !== null) throw new CanonicalJsonError(path, "non_plain_object");
    if (Object.getOwnPropertySymbols(object).length > 0) throw new CanonicalJsonError(path, "symbol");
    const record = object as Record<string, unknown>;
    const members = Object.keys(record)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${write(record[key], `${path}[${JSON.stringify(key)}]`, ancestors)}`);
    return `{${members.join(",")}}`;
  } finally {
    ancestors.delete(object);
  }
}
