// Name patterns: the user-facing glob, its canonical SQL LIKE form, and an in-memory
// matcher with exactly PostgreSQL's `value LIKE pattern ESCAPE '\'` semantics.
// Seed: seeds/004 "Targeting → Name patterns".

/** The any-resource sentinel stored in role_permissions.resource_pattern. */
export const ANY_RESOURCE_PATTERN = "";

/**
 * Seed: "CompileResourcePattern(glob) turns a user-facing glob (* and ?) into the canonical
 * SQL LIKE pattern … Empty input and the literal * both canonicalise to ''". `*` matches any
 * run, `?` exactly one character; literal `%`, `_` and `\` are escaped with `\`, so
 * `prod_backend` becomes `prod\_backend` and matches only itself.
 *
 * The glob has no escape character of its own: a `\` in the glob is a literal backslash.
 *
 * Canonical means equivalent globs compile to the same string, so a role cannot hold the
 * same grant twice under two spellings: a run of wildcards becomes its `?`s as `_` followed
 * by one `%` if it had any `*` (`*?*` → `_%`), and a glob of only `*`s is the literal `*`.
 */
export function compileResourcePattern(glob: string): string {
  let out = "";
  let i = 0;
  while (i < glob.length) {
    const c = glob[i];
    if (c === "*" || c === "?") {
      let stars = 0;
      let ones = 0;
      while (i < glob.length && (glob[i] === "*" || glob[i] === "?")) {
        if (glob[i] === "*") stars++;
        else ones++;
        i++;
      }
      out += "_".repeat(ones) + (stars > 0 ? "%" : "");
      continue;
    }
    // Surrogate halves pass through untouched, so astral characters survive as pairs.
    out += c === "%" || c === "_" || c === "\\" ? `\\${c}` : c;
    i++;
  }
  return out === "%" ? ANY_RESOURCE_PATTERN : out;
}

/**
 * The inverse of compileResourcePattern: the user-facing glob a stored canonical LIKE pattern
 * was compiled from, so a role can be read and written back unchanged. `%` → `*`, `_` → `?`,
 * an escaped character is itself; the any-resource sentinel '' stays ''. For every glob g,
 * compileResourcePattern(resourcePatternToGlob(compileResourcePattern(g))) equals
 * compileResourcePattern(g) (test/domain/catalog/pattern.test.ts). A stored pattern that no
 * glob compiles to (a literal `*` or `?`, a trailing lone `\`) has no glob: null.
 */
export function resourcePatternToGlob(likePattern: string): string | null {
  let out = "";
  let escaping = false;
  for (const ch of likePattern) {
    if (escaping) {
      if (ch !== "%" && ch !== "_" && ch !== "\\") return null;
      out += ch;
      escaping = false;
    } else if (ch === "\\") escaping = true;
    else if (ch === "%") out += "*";
    else if (ch === "_") out += "?";
    else if (ch === "*" || ch === "?") return null;
    else out += ch;
  }
  return escaping ? null : out;
}

// ── Parsing a LIKE pattern ───────────────────────────────────────────────────────────

/** `_`: exactly one character. */
const ONE = Symbol("one");
type Token = string | typeof ONE;

/** The pattern split at each unescaped `%`: segments of literals and single-char wildcards. */
interface ParsedLike {
  readonly segments: readonly (readonly Token[])[];
  /** Ends in a lone escape. PostgreSQL raises "LIKE pattern must not end with escape character". */
  readonly malformed: boolean;
}

function parseLike(pattern: string): ParsedLike {
  const segments: Token[][] = [[]];
  let current = segments[0] as Token[];
  let escaping = false;
  // `for…of` walks code points, the unit PostgreSQL's `_` and escape operate on (UTF-8 text).
  for (const ch of pattern) {
    if (escaping) {
      current.push(ch);
      escaping = false;
    } else if (ch === "\\") {
      escaping = true;
    } else if (ch === "%") {
      current = [];
      segments.push(current);
    } else if (ch === "_") {
      current.push(ONE);
    } else {
      current.push(ch);
    }
  }
  return { segments, malformed: escaping };
}

/** The segment as plain text, or null when it contains a single-char wildcard. */
function literalText(segment: readonly Token[]): string | null {
  let text = "";
  for (const t of segment) {
    if (t === ONE) return null;
    text += t;
  }
  return text;
}

/**
 * The literal the pattern matches when it has no wildcard at all, else null. Note that
 * `literalOf('') === ''`: as a LIKE pattern '' matches only the empty string; callers
 * holding a stored grant must treat '' as the any-resource sentinel before asking.
 */
export function literalOf(likePattern: string): string | null {
  const parsed = parseLike(likePattern);
  if (parsed.malformed || parsed.segments.length !== 1) return null;
  return literalText(parsed.segments[0] as readonly Token[]);
}

/**
 * The literal prefix when the pattern is `<literal>%` (trailing `%`s only, no `_`), else
 * null. A prefix grant can then be served as an index range scan instead of a filter.
 */
export function isPrefixPattern(likePattern: string): string | null {
  const parsed = parseLike(likePattern);
  const [first, ...rest] = parsed.segments;
  if (parsed.malformed || first === undefined || rest.length === 0) return null;
  if (rest.some((s) => s.length > 0)) return null;
  return literalText(first);
}

// ── Name grams: what the list index knows of a name ──────────────────────────────────

/**
 * Marks both ends of a name in its grams, so a pattern's literal head and tail select on the
 * name's first and last characters too (`team-a-%4242` reaches names that start `team-a-`
 * and end `4242`). U+0001 is a C0 control, which no stored name holds (docs/input.md); if
 * one ever did, the grams would select less, never wrongly.
 */
export const NAME_END_MARK = "\u0001";

/**
 * Every gram the list index (the name_gram_entries table) holds for a name: each distinct run
 * of 3 code points of `NAME_END_MARK + name + NAME_END_MARK`, in order of first appearance.
 * The SQL function name_trigrams (migration …_name_gram_entries) computes the same set;
 * test/authz-sql.test.ts holds them to each other.
 */
export function nameGrams(name: string): string[] {
  const out = new Set<string>();
  addTrigrams([NAME_END_MARK, ...name, NAME_END_MARK], out);
  return [...out];
}

/** Adds each run of 3 code points of `chars` to `out`. */
function addTrigrams(chars: readonly string[], out: Set<string>): void {
  for (let i = 0; i + 3 <= chars.length; i++) out.add(chars.slice(i, i + 3).join(""));
}

/**
 * The grams every name that matches the LIKE pattern holds: each distinct 3-gram of each
 * literal run of the pattern (a run at the pattern's start or end carries the end mark), or
 * null when no run is long enough to have one. Exact by construction: a matching name
 * contains every literal run as a substring, the first one right after its start and the
 * last one right before its end, so its grams include every gram of every run
 * (test/domain/catalog/pattern.test.ts checks it on random names and patterns). The list
 * query walks the index entries of the rarest of them in name order, the LIKE deciding.
 */
export function patternGrams(likePattern: string): string[] | null {
  const { segments, malformed } = parseLike(likePattern);
  if (malformed) return null;
  const out = new Set<string>();
  const last = segments.length - 1;
  segments.forEach((segment, s) => {
    // Literal runs: maximal stretches of literal tokens; `_` and `%` both end one.
    let run: string[] = [];
    let runStart = 0;
    const flush = (end: number) => {
      if (run.length === 0) return;
      addTrigrams([...(s === 0 && runStart === 0 ? [NAME_END_MARK] : []), ...run, ...(s === last && end === segment.length ? [NAME_END_MARK] : [])], out);
      run = [];
    };
    segment.forEach((token, i) => {
      if (token === ONE) {
        flush(i);
        return;
      }
      if (run.length === 0) runStart = i;
      run.push(token);
    });
    flush(segment.length);
  });
  return out.size > 0 ? [...out] : null;
}

// ── Matching ─────────────────────────────────────────────────────────────────────────

export type LikeMatcher = (value: string) => boolean;

const NEVER: LikeMatcher = () => false;
const ALWAYS: LikeMatcher = () => true;
/** In `u` mode a surrogate range only matches a lone surrogate, not half of a pair. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

function regexSource(segment: readonly Token[]): string {
  let source = "";
  for (const t of segment) {
    if (t === ONE) source += ".";
    else if (/^[A-Za-z0-9]$/.test(t)) source += t;
    // Everything else as a code-point escape: no regex metacharacter survives, and two
    // lone surrogates from separate tokens can never fuse into a pair.
    else source += `\\u{${(t.codePointAt(0) as number).toString(16)}}`;
  }
  return source;
}

function compileLike(pattern: string): LikeMatcher {
  const { segments, malformed } = parseLike(pattern);
  // Fail closed: a stored pattern always comes from compileResourcePattern and is never
  // malformed; if one ever is, it grants nothing rather than throwing in the hot path.
  if (malformed) return NEVER;

  const texts = segments.map(literalText);
  // Checked per token: two lone surrogates from separate tokens fuse into a pair once the
  // literal text is concatenated, so the joined text cannot tell.
  const plain =
    texts.every((t) => t !== null) && segments.every((seg) => seg.every((tok) => tok === ONE || !LONE_SURROGATE.test(tok)));
  const [t0, t1, t2] = texts;
  // Fast paths for the common shapes. Only for well-formed literals: with a lone surrogate,
  // code-unit equality, startsWith or endsWith would disagree with code-point matching
  // (an escaped lone low surrogate after a lone high one would fuse into a pair).
  if (plain) {
    if (segments.length === 1 && t0 != null) return (v) => v === t0;
    if (texts.every((t) => t === "")) return ALWAYS;
    if (segments.length === 2 && t0 != null && t1 === "") return (v) => v.startsWith(t0);
    if (segments.length === 2 && t0 === "" && t1 != null) return (v) => v.endsWith(t1);
    if (segments.length === 3 && t0 === "" && t1 != null && t2 === "") return (v) => v.includes(t1);
  }

  const first = segments[0] as readonly Token[];
  if (segments.length === 1) {
    const re = new RegExp(`^${regexSource(first)}$`, "su");
    return (v) => re.test(v);
  }
  // `^S0 % S1 % … % Sn$`. Each middle segment is committed at its leftmost match: the
  // lookahead is atomic and the backreference consumes what it matched, so the engine never
  // backtracks into an earlier segment. That is correct (every later segment is preceded by
  // a `%`, so an earlier placement never loses a match) and keeps matching polynomial
  // instead of exponential on hostile patterns such as `%a%a%a%a%a%b`.
  let source = `^${regexSource(first)}`;
  let group = 0;
  for (const segment of segments.slice(1, -1)) {
    if (segment.length === 0) continue;
    group++;
    source += `(?=(.*?${regexSource(segment)}))\\${group}`;
  }
  source += `.*${regexSource(segments[segments.length - 1] as readonly Token[])}$`;
  const re = new RegExp(source, "su");
  return (v) => re.test(v);
}

/** Bounded so a stream of distinct patterns cannot grow memory without limit. */
const MATCHER_CACHE_LIMIT = 4096;
const matcherCache = new Map<string, LikeMatcher>();

/** The compiled matcher for a LIKE pattern, built once and cached. */
export function likeMatcher(likePattern: string): LikeMatcher {
  let matcher = matcherCache.get(likePattern);
  if (matcher === undefined) {
    matcher = compileLike(likePattern);
    // Evict in insertion order: cheap, and the hot path (compiled principals) holds its
    // matchers directly, so an evicted entry costs one recompile at worst.
    if (matcherCache.size >= MATCHER_CACHE_LIMIT) {
      const oldest = matcherCache.keys().next();
      if (oldest.done !== true) matcherCache.delete(oldest.value);
    }
    matcherCache.set(likePattern, matcher);
  }
  return matcher;
}

/**
 * PostgreSQL `value LIKE likePattern ESCAPE '\'`: case-sensitive, whole string, `%` any run
 * (newlines included), `_` exactly one character (code point), `\x` the literal x. A pattern
 * ending in a lone `\` (an error in PostgreSQL) matches nothing.
 */
export function likeMatches(value: string, likePattern: string): boolean {
  return likeMatcher(likePattern)(value);
}

/** Size of the matcher cache; exported for tests of the bound. */
export function likeMatcherCacheSize(): number {
  return matcherCache.size;
}

export const LIKE_MATCHER_CACHE_LIMIT = MATCHER_CACHE_LIMIT;
