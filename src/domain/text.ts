/**
 * Storable text: the one rule for which characters a string may carry into the database,
 * whatever path it came by (GraphQL arguments, the JSON scalar, a Terraform plan file).
 *
 * Three kinds (docs/input.md):
 * - `identifier`: ids, names, keys, environments, patterns, emails, cursors, label keys.
 *   No control character at all: C0 (U+0000–U+001F, tab and newlines included), DEL,
 *   C1 (U+0080–U+009F), and the invisible line/paragraph separators U+2028/U+2029.
 * - `text`: free text (descriptions, vote comments). Tab, LF and CR are kept; every other
 *   C0/C1 control character and DEL are refused.
 * - `data`: string values inside a JSON value (a Terraform plan's attribute values, an
 *   output's value): arbitrary data, JSON-escaped wherever it is shown, so control
 *   characters are kept. Object keys inside JSON are identifiers.
 * All three refuse NUL (PostgreSQL text and jsonb cannot hold it) and unpaired UTF-16 surrogates
 * (not encodable as UTF-8).
 */
export type TextKind = "identifier" | "text" | "data";

export type TextProblemCode = "nul_character" | "unpaired_surrogate" | "control_character";

export interface TextProblem {
  readonly code: TextProblemCode;
  readonly message: string;
  /** UTF-16 index of the first offending unit. */
  readonly index: number;
}

const hex = (c: number) => `U+${c.toString(16).toUpperCase().padStart(4, "0")}`;

/** The first reason `value` cannot be stored as `kind`, or null when it can. */
export function textProblem(value: string, kind: TextKind): TextProblem | null {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c >= 0x20 && c < 0x7f) continue;
    if (c === 0) return { code: "nul_character", index: i, message: `must not contain a NUL character (at index ${i})` };
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      return { code: "unpaired_surrogate", index: i, message: `must not contain an unpaired surrogate (${hex(c)} at index ${i})` };
    }
    if (c >= 0xdc00 && c <= 0xdfff) {
      return { code: "unpaired_surrogate", index: i, message: `must not contain an unpaired surrogate (${hex(c)} at index ${i})` };
    }
    if (kind === "data") continue;
    const control = c < 0x20 || (c >= 0x7f && c <= 0x9f);
    const separator = c === 0x2028 || c === 0x2029;
    if (kind === "text" && (c === 0x09 || c === 0x0a || c === 0x0d)) continue;
    if (control || (kind === "identifier" && separator)) {
      return {
        code: "control_character",
        index: i,
        message:
          kind === "identifier"
            ? `must not contain control characters (${hex(c)} at index ${i})`
            : `must not contain control characters other than tab and newlines (${hex(c)} at index ${i})`,
      };
    }
  }
  return null;
}

/** True when `value` can be stored as `kind`. */
export function isStorableText(value: string, kind: TextKind): boolean {
  return textProblem(value, kind) === null;
}

/** Where `value` (any JSON) breaks the rule: string values as `data`, object keys as `identifier`. */
export function jsonTextProblem(value: unknown, path: readonly (string | number)[] = []): { path: (string | number)[]; problem: TextProblem } | null {
  if (typeof value === "string") {
    const problem = textProblem(value, "data");
    return problem ? { path: [...path], problem } : null;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = jsonTextProblem(value[i], [...path, i]);
      if (found) return found;
    }
    return null;
  }
  if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      const keyProblem = textProblem(key, "identifier");
      // The offending key is not put in the path: it would carry the very character refused.
      if (keyProblem) return { path: [...path], problem: { ...keyProblem, message: `an object key ${keyProblem.message}` } };
      const found = jsonTextProblem(item, [...path, key]);
      if (found) return found;
    }
  }
  return null;
}
