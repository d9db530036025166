import { isStorableText } from "../text.js";

// Terraform address globs — the one place the matching rule lives.
//
// Seed, "Scoping resources": "An address pattern is a glob over Terraform addresses where *
// matches any run of characters and everything else is literal ... Matching is exact against the
// whole address, so a root-level resource needs its own pattern rather than a leading *."
//
// So `*` matches any run (including none) of ANY characters — dots, brackets and quotes
// included — and there are no other metacharacters: `?`, `[`, `]`, `{`, `}` and `\` are literal.
// `module.prod_db.*` covers nested modules too (`module.prod_db.module.x.aws_y.z`), and
// `*.aws_db_instance.primary` does not cover the root-level `aws_db_instance.primary`.
//
// Matching never builds a RegExp: a pattern is split at `*` into literal pieces, which are
// checked with startsWith / endsWith / indexOf (leftmost-first is exact for `*`-only globs).
// That is linear in the address and immune to regex backtracking.

export const MAX_ADDRESS_PATTERN_LENGTH = 512;

export interface CompiledAddressPattern {
  readonly source: string;
  /** No `*`: the pattern matches exactly one address, itself. */
  readonly literal: boolean;
  /** The literal text before the first `*` (the whole pattern when literal). */
  readonly prefix: string;
  /** The longest literal run between stars (first one on ties); "" for a pattern of only stars. */
  readonly longestPiece: string;
  matches(address: string): boolean;
}

const CACHE_LIMIT = 10_000;
const cache = new Map<string, CompiledAddressPattern>();

/**
 * Compiles any string (validation is `validateAddressPattern`'s job, at write time; stored
 * patterns must never make the gate throw). Results are cached by source.
 */
export function compileAddressPattern(pattern: string): CompiledAddressPattern {
  const hit = cache.get(pattern);
  if (hit) return hit;
  const compiled = compileUncached(pattern);
  if (cache.size >= CACHE_LIMIT) {
    // Oldest first: Map iterates in insertion order.
    const oldest = cache.keys().next();
    if (!oldest.done) cache.delete(oldest.value);
  }
  cache.set(pattern, compiled);
  return compiled;
}

function compileUncached(source: string): CompiledAddressPattern {
  const parts = source.split("*");
  if (parts.length === 1) {
    return {
      source,
      literal: true,
      prefix: source,
      longestPiece: source,
      matches: (address) => address === source,
    };
  }
  const prefix = parts[0] ?? "";
  const suffix = parts[parts.length - 1] ?? "";
  const middle = parts.slice(1, -1).filter((part) => part.length > 0);
  const minLength = prefix.length + suffix.length + middle.reduce((n, part) => n + part.length, 0);

  const longestPiece = parts.reduce((best, part) => (part.length > best.length ? part : best), "");

  const matches = (address: string): boolean => {
    if (address.length < minLength) return false;
    if (!address.startsWith(prefix)) return false;
    if (!address.endsWith(suffix)) return false;
    const end = address.length - suffix.length;
    let position = prefix.length;
    for (const part of middle) {
      const found = address.indexOf(part, position);
      if (found === -1 || found + part.length > end) return false;
      position = found + part.length;
    }
    return true;
  };

  return {
    source,
    literal: false,
    prefix,
    longestPiece,
    matches,
  };
}

export function addressMatches(address: string, pattern: string): boolean {
  return compileAddressPattern(pattern).matches(address);
}

export type AddressPatternValidation =
  | { readonly ok: true; readonly pattern: string }
  | { readonly ok: false; readonly issues: readonly string[] };


/**
 * Write-time validation of a pattern (a policy's `addressPatterns` entry):
 * - a non-empty string of at most 512 characters;
 * - no control characters (an address never contains one; a pasted newline would be invisible);
 * - no leading or trailing whitespace (almost always a paste accident; inner spaces are allowed
 *   because instance keys may contain them: `aws_instance.x["my key"]`);
 * - no `**`: here a single `*` already crosses dots and brackets, and `**` suggests the
 *   recursive-glob meaning of other dialects that this one does not have.
 */
export function validateAddressPattern(pattern: unknown): AddressPatternValidation {
  if (typeof pattern !== "string") return { ok: false, issues: ["must be a string"] };
  const issues: string[] = [];
  if (pattern.length === 0) issues.push("must not be empty");
  if (pattern.length > MAX_ADDRESS_PATTERN_LENGTH) {
    issues.push(`must be at most ${MAX_ADDRESS_PATTERN_LENGTH} characters (got ${pattern.length})`);
  }
  if (!isStorableText(pattern, "identifier")) issues.push("must not contain control characters");
  if (pattern.length > 0 && pattern.trim() !== pattern) {
    issues.push("must not start or end with whitespace");
  }
  if (pattern.includes("**")) issues.push("use a single * (it already matches any run of characters)");
  return issues.length === 0 ? { ok: true, pattern } : { ok: false, issues };
}

/**
 * The same rule as a SQL `LIKE ... ESCAPE '\'` operand, so a database filter and the in-memory
 * check agree: `%` and `_` and `\` are escaped, `*` becomes `%`.
 */
export function addressPatternToSqlLike(pattern: string): string {
  return pattern.replace(/[\\%_]/g, (c) => `\\${c}`).replace(/\*/g, "%");
}

// ---------------------------------------------------------------------------------------------
// Many patterns against many addresses

export interface AddressIndexEntry {
  /** Exact addresses (a policy's assigned resources). */
  readonly exact: readonly string[];
  readonly patterns: readonly string[];
}

export interface AddressIndex {
  /** Indices (into the entries given to `buildAddressIndex`) covering `address`, ascending, distinct. */
  lookup(address: string): number[];
}

interface WildcardGroup {
  readonly pattern: CompiledAddressPattern;
  /** Entries holding this pattern, ascending, distinct. */
  readonly entries: number[];
}

// A compiled index is about (total pattern length × distinct characters × 4) bytes; keep a few.
const INDEX_CACHE_LIMIT = 8;
const indexCache = new Map<string, AddressIndex>();

/**
 * Indexes entries so that a lookup costs one hash probe (exact addresses and literal patterns)
 * plus one pass over the address through an Aho–Corasick automaton of the wildcard patterns'
 * longest literal pieces. A wildcard pattern is only verified against addresses that contain
 * its longest piece, so the cost does not grow with changes × patterns. Identical patterns held
 * by several entries are verified once. Indices are cached by the entries' content, so
 * evaluating many plans under the same policies compiles them once.
 */
export function buildAddressIndex(entries: readonly AddressIndexEntry[]): AddressIndex {
  const key = JSON.stringify(entries.map((e) => [e.exact, e.patterns]));
  const hit = indexCache.get(key);
  if (hit) {
    indexCache.delete(key);
    indexCache.set(key, hit);
    return hit;
  }
  const built = buildUncachedIndex(entries);
  if (indexCache.size >= INDEX_CACHE_LIMIT) {
    const oldest = indexCache.keys().next();
    if (!oldest.done) indexCache.delete(oldest.value);
  }
  indexCache.set(key, built);
  return built;
}

function buildUncachedIndex(entries: readonly AddressIndexEntry[]): AddressIndex {
  const exact = new Map<string, number[]>();
  const groups = new Map<string, WildcardGroup>();
  const push = (list: number[], entry: number): void => {
    if (list[list.length - 1] !== entry) list.push(entry);
  };

  entries.forEach((entry, index) => {
    for (const address of entry.exact) {
      const list = exact.get(address);
      if (list) push(list, index);
      else exact.set(address, [index]);
    }
    for (const source of entry.patterns) {
      const pattern = compileAddressPattern(source);
      if (pattern.literal) {
        const list = exact.get(source);
        if (list) push(list, index);
        else exact.set(source, [index]);
        continue;
      }
      const group = groups.get(source);
      if (group) push(group.entries, index);
      else groups.set(source, { pattern, entries: [index] });
    }
  });

  // Patterns with no literal piece at all (`*`) match every address.
  const always: number[] = [];
  const byPiece = new Map<string, WildcardGroup[]>();
  for (const group of groups.values()) {
    const piece = group.pattern.longestPiece;
    if (piece === "") {
      always.push(...group.entries);
      continue;
    }
    const list = byPiece.get(piece);
    if (list) list.push(group);
    else byPiece.set(piece, [group]);
  }
  const pieces = [...byPiece.keys()];
  const groupsOfPiece = pieces.map((piece) => byPiece.get(piece) as WildcardGroup[]);
  const { delta, classes, charClass, outputs, outputLink } = buildAutomaton(pieces);
  // Per-lookup marks (a generation counter avoids clearing): pieces already verified, entries
  // already found.
  const pieceSeen = new Uint32Array(pieces.length);
  const entrySeen = new Uint32Array(entries.length);
  let generation = 0;

  return {
    lookup(address: string): number[] {
      generation = (generation + 1) >>> 0;
      if (generation === 0) {
        pieceSeen.fill(0);
        entrySeen.fill(0);
        generation = 1;
      }
      // No closures in here: lookup runs once per change, and some TypeScript runners wrap every
      // function they create in a naming helper that costs more than the lookup itself.
      const found: number[] = [];
      const exactHits = exact.get(address);
      if (exactHits) addUnseen(exactHits, found, entrySeen, generation);
      if (always.length > 0) addUnseen(always, found, entrySeen, generation);
      if (pieces.length > 0) {
        let state = 0;
        for (let i = 0; i < address.length; i++) {
          state = delta[state * classes + charClass(address.charCodeAt(i))] as number;
          for (let node = state; node > 0; node = outputLink[node] as number) {
            for (const pieceId of outputs[node] as number[]) {
              if (pieceSeen[pieceId] === generation) continue;
              pieceSeen[pieceId] = generation;
              for (const group of groupsOfPiece[pieceId] as WildcardGroup[]) {
                if (group.pattern.matches(address)) addUnseen(group.entries, found, entrySeen, generation);
              }
            }
          }
        }
      }
      // Insertion sort: the list is short (the entries covering one address) and nearly sorted.
      for (let i = 1; i < found.length; i++) {
        const value = found[i] as number;
        let j = i - 1;
        while (j >= 0 && (found[j] as number) > value) {
          found[j + 1] = found[j] as number;
          j--;
        }
        found[j + 1] = value;
      }
      return found;
    },
  };
}

function addUnseen(list: readonly number[], found: number[], seen: Uint32Array, generation: number): void {
  for (const entry of list) {
    if (seen[entry] === generation) continue;
    seen[entry] = generation;
    found.push(entry);
  }
}

interface Automaton {
  /** Transition table: `delta[state * classes + class]`. */
  readonly delta: Int32Array;
  readonly classes: number;
  charClass(code: number): number;
  /** Piece ids ending exactly at each node. */
  readonly outputs: readonly (readonly number[])[];
  /** The nearest failure ancestor with outputs, or -1 (0, the root, never has any). */
  readonly outputLink: Int32Array;
}

function buildAutomaton(pieces: readonly string[]): Automaton {
  const classOf = new Map<number, number>();
  for (const piece of pieces) {
    for (let i = 0; i < piece.length; i++) {
      const code = piece.charCodeAt(i);
      if (!classOf.has(code)) classOf.set(code, classOf.size + 1);
    }
  }
  const classes = classOf.size + 1;
  const ascii = new Int32Array(128);
  for (const [code, cls] of classOf) if (code < 128) ascii[code] = cls;
  const charClass = (code: number): number => (code < 128 ? (ascii[code] as number) : (classOf.get(code) ?? 0));

  // The trie, in the transition table itself (-1 for "no child"); the number of nodes is at most
  // one more than the pieces' total length, so one allocation suffices.
  const maxNodes = pieces.reduce((n, piece) => n + piece.length, 1);
  const delta = new Int32Array(maxNodes * classes).fill(-1);
  const outputs: number[][] = [[]];
  pieces.forEach((piece, id) => {
    let node = 0;
    for (let i = 0; i < piece.length; i++) {
      const slot = node * classes + charClass(piece.charCodeAt(i));
      let next = delta[slot] as number;
      if (next === -1) {
        next = outputs.length;
        delta[slot] = next;
        outputs.push([]);
      }
      node = next;
    }
    (outputs[node] as number[]).push(id);
  });

  // Breadth-first, completing the table in place: a missing child becomes the failure node's
  // transition, whose row is already complete because it is shallower. Output links point at
  // the nearest failure ancestor that ends a piece, so a scan never walks failure chains.
  const nodes = outputs.length;
  const fail = new Int32Array(nodes);
  const outputLink = new Int32Array(nodes).fill(-1);
  const queue: number[] = [];
  for (let cls = 0; cls < classes; cls++) {
    const child = delta[cls] as number;
    if (child === -1) delta[cls] = 0;
    else queue.push(child); // fail[child] = 0
  }
  for (let head = 0; head < queue.length; head++) {
    const node = queue[head] as number;
    const failNode = fail[node] as number;
    outputLink[node] = (outputs[failNode] as number[]).length > 0 ? failNode : (outputLink[failNode] as number);
    for (let cls = 0; cls < classes; cls++) {
      const slot = node * classes + cls;
      const child = delta[slot] as number;
      const viaFail = delta[failNode * classes + cls] as number;
      if (child === -1) delta[slot] = viaFail;
      else {
        fail[child] = viaFail;
        queue.push(child);
      }
    }
  }

  return { delta, classes, charClass, outputs, outputLink };
}
