// Seed: seeds/004 "Targeting → Name patterns" and "CompileResourcePattern(glob)".
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  compileResourcePattern,
  isPrefixPattern,
  LIKE_MATCHER_CACHE_LIMIT,
  likeMatcherCacheSize,
  likeMatches,
  literalOf,
  nameGrams,
  NAME_END_MARK,
  patternGrams,
  resourcePatternToGlob,
} from "../../../src/domain/catalog/index.js";

// Independent reference matchers: textbook dynamic programming over code points, sharing no
// code with src/domain/catalog/pattern.ts, so a bug there makes the properties fail.

type Tok = { kind: "any" } | { kind: "one" } | { kind: "lit"; ch: string };

function matchTokens(value: string, tokens: readonly Tok[]): boolean {
  const v = Array.from(value);
  // dp[j] = tokens[0..i) match v[0..j)
  let dp: boolean[] = Array.from({ length: v.length + 1 }, (_, j) => j === 0);
  for (const t of tokens) {
    const next: boolean[] = new Array<boolean>(v.length + 1).fill(false);
    for (let j = 0; j <= v.length; j++) {
      if (t.kind === "any") next[j] = dp[j] === true || (j > 0 && next[j - 1] === true);
      else if (j > 0 && dp[j - 1] === true) next[j] = t.kind === "one" || t.ch === v[j - 1];
    }
    dp = next;
  }
  return dp[v.length] === true;
}

/** PostgreSQL `value LIKE pattern ESCAPE '\'`; a dangling escape matches nothing here. */
function referenceLike(value: string, pattern: string): boolean {
  const tokens: Tok[] = [];
  const p = Array.from(pattern);
  for (let i = 0; i < p.length; i++) {
    const c = p[i] as string;
    if (c === "\\") {
      const next = p[i + 1];
      if (next === undefined) return false;
      tokens.push({ kind: "lit", ch: next });
      i++;
    } else if (c === "%") tokens.push({ kind: "any" });
    else if (c === "_") tokens.push({ kind: "one" });
    else tokens.push({ kind: "lit", ch: c });
  }
  return matchTokens(value, tokens);
}

/** The user glob: `*` any run, `?` one character, everything else (`\` included) literal. */
function referenceGlob(value: string, glob: string): boolean {
  const tokens: Tok[] = Array.from(glob).map((c) =>
    c === "*" ? { kind: "any" } : c === "?" ? { kind: "one" } : { kind: "lit", ch: c },
  );
  return matchTokens(value, tokens);
}

// Alphabets rich in the characters that matter: LIKE and glob metacharacters, the escape,
// a newline, an accented letter and an astral character (a surrogate pair in UTF-16).
const CHARS = ["a", "b", "-", "_", "%", "\\", "*", "?", "é", "😀", "\n", "A"];
const nameChar = fc.constantFrom(...CHARS);
const anyString = fc.string({ unit: nameChar, maxLength: 12 });
const globString = fc.string({ unit: fc.constantFrom(...CHARS, "*", "?", "*"), maxLength: 10 });
const likeString = fc.string({ unit: fc.constantFrom(...CHARS, "%", "_", "\\"), maxLength: 10 });
const noWildcardString = fc.string({ unit: fc.constantFrom("a", "b", "-", "_", "%", "\\", "é", "😀", "\n"), maxLength: 12 });

/** A concrete name the glob must match: each `*` replaced by a run, each `?` by one character. */
function instantiate(glob: string, fills: readonly string[]): string {
  let k = 0;
  return Array.from(glob)
    .map((c) => {
      const fill = fills[k++ % Math.max(fills.length, 1)] ?? "";
      if (c === "*") return fill;
      if (c === "?") return Array.from(fill)[0] ?? "x";
      return c;
    })
    .join("");
}

describe("CompileResourcePattern", () => {
  it("escapes the underscore, so a stack named prod_backend matches the pattern prod_backend exactly", () => {
    expect(compileResourcePattern("prod_backend")).toBe("prod\\_backend");
    expect(likeMatches("prod_backend", compileResourcePattern("prod_backend"))).toBe(true);
    expect(likeMatches("prodXbackend", compileResourcePattern("prod_backend"))).toBe(false);
  });

  it("escapes literal %, _ and \\ in the input", () => {
    expect(compileResourcePattern("100%")).toBe("100\\%");
    expect(compileResourcePattern("a\\b")).toBe("a\\\\b");
    expect(compileResourcePattern("%_\\")).toBe("\\%\\_\\\\");
  });

  it("turns * into % (any sequence) and ? into _ (exactly one character)", () => {
    expect(compileResourcePattern("team-a-*")).toBe("team-a-%");
    expect(compileResourcePattern("api-?")).toBe("api-_");
    expect(compileResourcePattern("*-prod-?")).toBe("%-prod-_");
  });

  it("canonicalises empty input and the literal * to '' (the any-resource sentinel)", () => {
    expect(compileResourcePattern("")).toBe("");
    expect(compileResourcePattern("*")).toBe("");
  });

  it("canonicalises equivalent globs to one pattern (** is *, *? is ?*)", () => {
    expect(compileResourcePattern("**")).toBe("");
    expect(compileResourcePattern("team-**")).toBe("team-%");
    expect(compileResourcePattern("a*?*b")).toBe(compileResourcePattern("a?*b"));
    expect(compileResourcePattern("a*?*b")).toBe("a_%b");
    expect(compileResourcePattern("??")).toBe("__");
  });

  it("keeps astral characters intact", () => {
    expect(compileResourcePattern("😀-*")).toBe("😀-%");
  });

  it("property: a compiled glob matches exactly what the glob matches", () => {
    fc.assert(
      fc.property(globString, anyString, (glob, value) => {
        const like = compileResourcePattern(glob);
        if (like === "") return /^\**$/.test(glob); // only '' and all-* globs mean "any"
        return likeMatches(value, like) === referenceGlob(value, glob);
      }),
      { numRuns: 3000 },
    );
  });

  it("property: every instance of a glob matches its compiled pattern", () => {
    fc.assert(
      fc.property(globString, fc.array(anyString, { minLength: 1, maxLength: 4 }), (glob, fills) => {
        const like = compileResourcePattern(glob);
        fc.pre(like !== "");
        return likeMatches(instantiate(glob, fills), like);
      }),
      { numRuns: 2000 },
    );
  });

  it("property: round trip — a name without * or ? compiles to a literal matching only itself", () => {
    fc.assert(
      fc.property(noWildcardString.filter((s) => s !== ""), anyString, (name, other) => {
        const like = compileResourcePattern(name);
        expect(literalOf(like)).toBe(name);
        expect(likeMatches(name, like)).toBe(true);
        expect(likeMatches(other, like)).toBe(other === name);
      }),
      { numRuns: 2000 },
    );
  });

  it("property: round trip — escapeGlob(s) (each * and ? as ?) always matches s", () => {
    const escapeGlob = (s: string) => s.replace(/[*?]/g, "?");
    fc.assert(
      fc.property(anyString.filter((s) => s !== ""), (s) => likeMatches(s, compileResourcePattern(escapeGlob(s)))),
      { numRuns: 2000 },
    );
  });

  it("property: wildcard order inside a run does not change the compiled pattern", () => {
    fc.assert(
      fc.property(noWildcardString, fc.array(fc.constantFrom("*", "?"), { maxLength: 5 }), noWildcardString, (a, run, b) => {
        const sorted = [...run].sort().join("");
        const reversed = [...run].sort().reverse().join("");
        expect(compileResourcePattern(a + sorted + b)).toBe(compileResourcePattern(a + reversed + b));
      }),
    );
  });
});

describe("likeMatches (PostgreSQL LIKE … ESCAPE '\\')", () => {
  it.each([
    ["abc", "abc", true],
    ["abc", "ABC", false],
    ["abc", "ab", false],
    ["abc", "a%", true],
    ["abc", "%c", true],
    ["abc", "%b%", true],
    ["abc", "a_c", true],
    ["ac", "a_c", false],
    ["abc", "%", true],
    ["", "%", true],
    ["", "", true],
    ["a", "", false],
    ["a\nb", "a_b", true],
    ["a\nb", "a%", true],
    ["a%", "a\\%", true],
    ["ab", "a\\%", false],
    ["a_", "a\\_", true],
    ["ax", "a\\_", false],
    ["a\\", "a\\\\", true],
    ["ax", "a\\x", true], // an escape before an ordinary character makes it literal
    ["😀", "_", true],
    ["😀", "__", false],
    ["a", "a\\", false], // dangling escape: PostgreSQL errors, we match nothing
    ["aXbXc", "a%b%c", true],
    ["abab", "%ab%ab", true],
    ["aab", "%ab", true],
    ["ab", "%ab%ab", false],
  ])("%j LIKE %j is %s", (value, pattern, expected) => {
    expect(likeMatches(value, pattern)).toBe(expected);
  });

  it("property: agrees with a reference LIKE implementation on any pattern", () => {
    fc.assert(
      fc.property(likeString, anyString, (pattern, value) => likeMatches(value, pattern) === referenceLike(value, pattern)),
      { numRuns: 5000 },
    );
  });

  it("property: random globs never crash it, whatever the value", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 20 }), fc.string({ unit: "binary", maxLength: 20 }), (glob, value) => {
        const result = likeMatches(value, compileResourcePattern(glob));
        return typeof result === "boolean";
      }),
    );
  });

  it("property: lone surrogates are single characters, as in the reference", () => {
    const unit = fc.constantFrom("a", "\uD83D", "\uDE00", "😀", "%", "_", "\\");
    fc.assert(
      fc.property(fc.string({ unit, maxLength: 8 }), fc.string({ unit, maxLength: 8 }), (pattern, value) =>
        likeMatches(value, pattern) === referenceLike(value, pattern),
      ),
      { numRuns: 3000 },
    );
  });

  it("stays fast on a hostile pattern that would make a backtracking matcher exponential", () => {
    const pattern = "%a".repeat(30) + "%b";
    const value = "a".repeat(200);
    const start = performance.now();
    expect(likeMatches(value, pattern)).toBe(false);
    // A ReDoS guard, not a speed goal: a backtracking matcher would take years here.
    expect(performance.now() - start).toBeLessThan(5_000);
  });

  it("keeps its compiled-pattern cache bounded", () => {
    for (let i = 0; i < LIKE_MATCHER_CACHE_LIMIT + 100; i++) likeMatches("x", `p-${i}-%`);
    expect(likeMatcherCacheSize()).toBeLessThanOrEqual(LIKE_MATCHER_CACHE_LIMIT);
  });
});

describe("isPrefixPattern and literalOf", () => {
  it("returns the literal prefix of <literal>%", () => {
    expect(isPrefixPattern("team-a-%")).toBe("team-a-");
    expect(isPrefixPattern("prod\\_%")).toBe("prod_");
    expect(isPrefixPattern("%")).toBe("");
  });

  it("returns null for anything else", () => {
    expect(isPrefixPattern("team-a")).toBeNull();
    expect(isPrefixPattern("team-_-%")).toBeNull();
    expect(isPrefixPattern("%-prod")).toBeNull();
    expect(isPrefixPattern("a%b%")).toBeNull();
    expect(isPrefixPattern("a\\%")).toBeNull();
  });

  it("literalOf returns the unescaped literal of a wildcard-free pattern", () => {
    expect(literalOf("prod\\_backend")).toBe("prod_backend");
    expect(literalOf("100\\%")).toBe("100%");
    expect(literalOf("a\\\\b")).toBe("a\\b");
    expect(literalOf("prod_backend")).toBeNull();
    expect(literalOf("prod%")).toBeNull();
    expect(literalOf("a\\")).toBeNull();
  });

  it("property: a prefix pattern matches exactly the names starting with its prefix", () => {
    fc.assert(
      fc.property(noWildcardString, anyString, (prefix, value) => {
        const like = compileResourcePattern(`${prefix}*`);
        fc.pre(like !== "");
        expect(isPrefixPattern(like)).toBe(prefix);
        expect(likeMatches(value, like)).toBe(Array.from(value).slice(0, Array.from(prefix).length).join("") === prefix);
      }),
      { numRuns: 2000 },
    );
  });

  it("property: literalOf(p) is non-null exactly when p matches one string, and that string", () => {
    fc.assert(
      fc.property(likeString, anyString, (pattern, value) => {
        const literal = literalOf(pattern);
        if (literal !== null) expect(likeMatches(value, pattern)).toBe(value === literal);
      }),
      { numRuns: 3000 },
    );
  });
});

describe("resourcePatternToGlob, the inverse of CompileResourcePattern", () => {
  it("gives back a glob that compiles to the same stored pattern, for every glob", () => {
    fc.assert(
      fc.property(globString, (glob) => {
        const stored = compileResourcePattern(glob);
        const read = resourcePatternToGlob(stored);
        expect(read).not.toBeNull();
        expect(compileResourcePattern(read!)).toBe(stored);
        // Reading the written-back pattern again is stable (a fixed point after one trip).
        expect(resourcePatternToGlob(compileResourcePattern(read!))).toBe(read);
      }),
      { numRuns: 3000 },
    );
  });

  it("reads the literal LIKE metacharacters back as themselves and wildcards as * and ?", () => {
    expect(resourcePatternToGlob("team-a-%")).toBe("team-a-*");
    expect(resourcePatternToGlob("prod\\_backend")).toBe("prod_backend");
    expect(resourcePatternToGlob("a\\%b\\\\c_")).toBe("a%b\\c?");
    expect(resourcePatternToGlob("")).toBe("");
  });

  it("answers null for a stored pattern no glob compiles to", () => {
    for (const bad of ["a*", "a?", "a\\", "a\\b"]) expect(resourcePatternToGlob(bad)).toBeNull();
  });
});

describe("patternGrams: the grams the list index must find in every matching name", () => {
  const escapeLike = (ch: string) => (ch === "%" || ch === "_" || ch === "\\" ? `\\${ch}` : ch);
  /** A pattern the value matches: each code point kept (escaped), replaced by `_`, or swallowed into a `%`. */
  const matchingPattern = fc
    .tuple(anyString, fc.array(fc.constantFrom("keep", "keep", "keep", "one", "any", "any-empty"), { minLength: 13, maxLength: 13 }))
    .map(([value, moves]) => {
      let pattern = "";
      let inAny = false;
      Array.from(value).forEach((ch, i) => {
        const move = moves[i] as string;
        if (move === "any") {
          if (!inAny) pattern += "%";
          inAny = true;
          return;
        }
        pattern += move === "one" ? "_" : move === "keep" ? escapeLike(ch) : `${escapeLike(ch)}%`;
        inAny = move === "any-empty";
      });
      if (moves[12] === "any") pattern = `%${pattern}`;
      return { value, pattern };
    });

  it("property: every gram of a pattern is among the grams of every name it matches", () => {
    fc.assert(
      fc.property(matchingPattern, ({ value, pattern }) => {
        expect(likeMatches(value, pattern)).toBe(true);
        const have = new Set(nameGrams(value));
        for (const gram of patternGrams(pattern) ?? []) expect(have.has(gram), `${JSON.stringify(pattern)} on ${JSON.stringify(value)}: ${JSON.stringify(gram)}`).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });

  it("property: the same on any pattern and value that happen to match", () => {
    fc.assert(
      fc.property(likeString, anyString, (pattern, value) => {
        if (!likeMatches(value, pattern)) return;
        const have = new Set(nameGrams(value));
        for (const gram of patternGrams(pattern) ?? []) expect(have.has(gram)).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });

  it("marks a literal head and tail with the end mark and takes every 3-gram of every run once", () => {
    const m = NAME_END_MARK;
    expect(patternGrams("%-00042%")).toEqual(["-00", "000", "004", "042"]);
    expect(patternGrams("%-0004242")).toEqual(["-00", "000", "004", "042", "424", "242", `42${m}`]);
    expect(patternGrams("team-a-%4242")).toEqual([`${m}te`, "tea", "eam", "am-", "m-a", "-a-", "424", "242", `42${m}`]);
    expect(patternGrams("%424%")).toEqual(["424"]);
    expect(patternGrams("%ab%")).toBeNull();
    expect(patternGrams("%ab")).toEqual(["ab" + m]);
    expect(patternGrams("a_b%")).toBeNull();
    expect(patternGrams("%4_42")).toEqual(["42" + m]);
    expect(patternGrams("%a\\%\\_b%")).toEqual(["a%_", "%_b"]);
    expect(patternGrams("%abc\\")).toBeNull();
    expect(patternGrams("%aaaa%aaa%")).toEqual(["aaa"]);
  });

  it("nameGrams: every distinct 3-gram of the marked name, by code point, in order", () => {
    const m = NAME_END_MARK;
    expect(nameGrams("")).toEqual([]);
    expect(nameGrams("a")).toEqual([`${m}a${m}`]);
    expect(nameGrams("ab")).toEqual([`${m}ab`, `ab${m}`]);
    expect(nameGrams("x😀y")).toEqual([`${m}x😀`, "x😀y", `😀y${m}`]);
    expect(nameGrams("aaaa")).toEqual([`${m}aa`, "aaa", `aa${m}`]);
  });
});
