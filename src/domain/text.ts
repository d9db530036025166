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

/**
 * How deep a JSON value may nest (arrays and objects inside one another). Far above anything the
 * product stores (a Terraform plan's attribute values, a tool call's arguments), and low enough
 * that every walk over an accepted value — ours, a library's, JSON.stringify's, all recursive —
 * stays far from the call stack's limit.
 */
export const MAX_JSON_DEPTH = 64;

export type JsonProblemCode = TextProblemCode | "too_deep";

export interface JsonProblem {
  readonly code: JsonProblemCode;
  readonly message: string;
}

/**
 * Where `value` (any JSON) breaks the rule: string values as `data`, object keys as `identifier`,
 * and no more than `maxDepth` arrays or objects nested in one another. The first problem in
 * document order. Walked with an explicit stack, never by recursion: a request body nested
 * 20,000 deep is an answer ("too_deep"), not a stack overflow.
 */
export function jsonTextProblem(
  value: unknown,
  path: readonly (string | number)[] = [],
  maxDepth: number = MAX_JSON_DEPTH,
): { path: (string | number)[]; problem: JsonProblem } | null {
  if (typeof value === "string") {
    const problem = textProblem(value, "data");
    return problem ? { path: [...path], problem } : null;
  }
  if (value === null || typeof value !== "object") return null;
  if (maxDepth < 1) return { path: [...path], problem: tooDeep(maxDepth) };
  /** An array or object being walked: its items, its keys (objects), the next item, and where it sits in its parent. */
  interface Frame {
    items: unknown[];
    keys: string[] | null;
    next: number;
    at: string | number;
  }
  const open = (container: object, at: string | number): Frame => {
    if (Array.isArray(container)) return { items: container, keys: null, next: 0, at };
    const keys = Object.keys(container);
    return { items: keys.map((k) => (container as Record<string, unknown>)[k]), keys, next: 0, at };
  };
  const stack: Frame[] = [open(value, "")];
  // The path of the innermost open container (the root's own `at` is not part of it).
  const pathHere = (): (string | number)[] => [...path, ...stack.slice(1).map((f) => f.at)];
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    if (frame.next >= frame.items.length) {
      stack.pop();
      continue;
    }
    const i = frame.next++;
    const key = frame.keys ? frame.keys[i]! : i;
    if (frame.keys) {
      const keyProblem = textProblem(key as string, "identifier");
      // The offending key is not put in the path: it would carry the very character refused.
      if (keyProblem) return { path: pathHere(), problem: { ...keyProblem, message: `an object key ${keyProblem.message}` } };
    }
    const item = frame.items[i];
    if (typeof item === "string") {
      const problem = textProblem(item, "data");
      if (problem) return { path: [...pathHere(), key], problem };
    } else if (item !== null && typeof item === "object") {
      if (stack.length >= maxDepth) return { path: [...pathHere(), key], problem: tooDeep(maxDepth) };
      stack.push(open(item, key));
    }
  }
  return null;
}

function tooDeep(maxDepth: number): JsonProblem {
  return { code: "too_deep", message: `must not nest arrays and objects more than ${maxDepth} levels deep` };
}
