import { ValidationError } from "../../errors.js";

/** Opaque keyset cursors: the row's sort key, base64url. */
export const encodeCursor = (key: string) => Buffer.from(`k:${key}`, "utf8").toString("base64url");

export function decodeCursor(cursor: string, field = "after"): string {
  const decoded = Buffer.from(cursor, "base64url").toString("utf8");
  if (!decoded.startsWith("k:")) throw ValidationError.field(field, "invalid_cursor", "This cursor was not issued by this API.");
  return decoded.slice(2);
}
