// Address patterns (seed, "Scoping resources").
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  MAX_ADDRESS_PATTERN_LENGTH,
  addressMatches,
  addressPatternToSqlLike,
  buildAddressIndex,
  compileAddressPattern,
  validateAddressPattern,
} from "../../../src/domain/gate/index.js";

describe("address patterns", () => {
  it("* matches any run of characters and everything else is literal (the seed's three patterns)", () => {
    expect(addressMatches("module.prod_db.aws_db_instance.main", "module.prod_db.*")).toBe(true);
    expect(addressMatches('module.prod_db["eu"].aws_db_instance.main', "module.prod_db.*")).toBe(false);
    expect(addressMatches("module.prod_db.module.replica.aws_db_instance.r[0]", "module.prod_db.*")).toBe(true);
    expect(addressMatches("aws_db_instance.primary", "aws_db_instance.primary")).toBe(true);
    expect(addressMatches("module.cdn.aws_s3_bucket.assets", "*.aws_s3_bucket.*")).toBe(true);
    expect(addressMatches('module.x["a.b"].aws_s3_bucket.y["k"]', "*.aws_s3_bucket.*")).toBe(true);
  });

  it("matching is exact against the whole address: a root-level resource needs its own pattern", () => {
    expect(addressMatches("aws_s3_bucket.assets", "*.aws_s3_bucket.*")).toBe(false);
    expect(addressMatches("aws_db_instance.primary", "*.aws_db_instance.primary")).toBe(false);
    expect(addressMatches("aws_db_instance.primary_v2", "aws_db_instance.primary")).toBe(false);
    expect(addressMatches("xaws_db_instance.primary", "aws_db_instance.primary")).toBe(false);
    expect(addressMatches("module.prod_db", "module.prod_db.*")).toBe(false);
    expect(addressMatches("module.prod_db.", "module.prod_db.*")).toBe(true); // * may match nothing
  });

  it("no other character is special: ? [ ] { } \\ . + ( ) ^ $ are literal", () => {
    expect(addressMatches("aws_instance.web[0]", "aws_instance.web[0]")).toBe(true);
    expect(addressMatches("aws_instance.web0", "aws_instance.web[0]")).toBe(false);
    expect(addressMatches("aws_instance.webX", "aws_instance.web?")).toBe(false);
    expect(addressMatches("aws_instance.web?", "aws_instance.web?")).toBe(true);
    expect(addressMatches("awsXinstance.web", "aws.instance.web")).toBe(false);
    expect(addressMatches('a["(^$+)"].b', 'a["(^$+)"].*')).toBe(true);
  });

  it("a * in the middle needs its literal pieces in order without overlap", () => {
    expect(addressMatches("module.a.aws_db_instance.y", "module.*.y")).toBe(true);
    expect(addressMatches("ab", "a*b*")).toBe(true);
    expect(addressMatches("aba", "a*ba")).toBe(true);
    expect(addressMatches("aa", "a*a*a")).toBe(false);
    expect(addressMatches("a", "a*a")).toBe(false);
  });

  it("agrees with a reference regular expression on generated addresses", () => {
    const alphabet = fc.constantFrom("a", "b", ".", "[", "]", '"', "*", "_");
    const pattern = fc.array(alphabet, { maxLength: 8 }).map((cs) => cs.join(""));
    const address = fc.array(alphabet.filter((c) => c !== "*"), { maxLength: 10 }).map((cs) => cs.join(""));
    const reference = (a: string, p: string) =>
      new RegExp(`^${p.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`, "s").test(a);
    fc.assert(fc.property(address, pattern, (a, p) => addressMatches(a, p) === reference(a, p)), { numRuns: 3000 });
  });

  it("compiles once: the same pattern yields the cached compilation", () => {
    expect(compileAddressPattern("module.prod_db.*")).toBe(compileAddressPattern("module.prod_db.*"));
    expect(compileAddressPattern("aws_db_instance.primary").literal).toBe(true);
    expect(compileAddressPattern("module.*").prefix).toBe("module.");
  });

  it("validates at write time: non-empty, at most 512 characters, no control characters, no surrounding whitespace, no **", () => {
    expect(validateAddressPattern("module.prod_db.*")).toEqual({ ok: true, pattern: "module.prod_db.*" });
    expect(validateAddressPattern('aws_instance.x["my key"]').ok).toBe(true);
    expect(validateAddressPattern("*").ok).toBe(true);
    expect(validateAddressPattern("")).toEqual({ ok: false, issues: ["must not be empty"] });
    expect(validateAddressPattern(42)).toEqual({ ok: false, issues: ["must be a string"] });
    expect(validateAddressPattern("a".repeat(MAX_ADDRESS_PATTERN_LENGTH)).ok).toBe(true);
    expect(validateAddressPattern("a".repeat(MAX_ADDRESS_PATTERN_LENGTH + 1))).toEqual({
      ok: false,
      issues: ["must be at most 512 characters (got 513)"],
    });
    expect(validateAddressPattern("module.a\n.*")).toEqual({ ok: false, issues: ["must not contain control characters"] });
    expect(validateAddressPattern("module.a.\u0000")).toMatchObject({ ok: false });
    expect(validateAddressPattern(" module.a.*")).toEqual({ ok: false, issues: ["must not start or end with whitespace"] });
    expect(validateAddressPattern("module.**")).toEqual({
      ok: false,
      issues: ["use a single * (it already matches any run of characters)"],
    });
  });

  it("translates to SQL LIKE with the same meaning", () => {
    expect(addressPatternToSqlLike("module.prod_db.*")).toBe("module.prod\\_db.%");
    expect(addressPatternToSqlLike("*.aws_s3_bucket.*")).toBe("%.aws\\_s3\\_bucket.%");
    expect(addressPatternToSqlLike("a%b\\c")).toBe("a\\%b\\\\c");
  });

  it("the SQL LIKE form matches exactly what the in-memory check matches", () => {
    // A reference LIKE ... ESCAPE '\\' over the whole string: % any run, _ one character.
    const like = (value: string, operand: string): boolean => {
      let source = "";
      for (let i = 0; i < operand.length; i++) {
        const c = operand.charAt(i);
        if (c === "\\") source += operand.charAt(++i).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
        else if (c === "%") source += ".*";
        else if (c === "_") source += ".";
        else source += c.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      }
      return new RegExp(`^${source}$`, "s").test(value);
    };
    const alphabet = fc.constantFrom("a", "_", "%", "\\", ".", "*", "[");
    const text = (withStar: boolean) =>
      fc.array(withStar ? alphabet : alphabet.filter((c) => c !== "*"), { maxLength: 8 }).map((cs) => cs.join(""));
    fc.assert(
      fc.property(text(false), text(true), (a, p) => like(a, addressPatternToSqlLike(p)) === addressMatches(a, p)),
      { numRuns: 3000 },
    );
  });
});

describe("address index", () => {
  it("finds exactly the entries a pattern-by-pattern check finds", () => {
    const piece = fc.constantFrom("module.", "a", "b", ".", "x", "[0]", "aws_s3_bucket", "é", "😀", "*");
    const pattern = fc.array(piece, { minLength: 1, maxLength: 5 }).map((ps) => ps.join(""));
    const address = fc.array(piece.filter((p) => p !== "*"), { minLength: 1, maxLength: 6 }).map((ps) => ps.join(""));
    const entry = fc.record({ exact: fc.array(address, { maxLength: 2 }), patterns: fc.array(pattern, { maxLength: 4 }) });
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 6 }), fc.array(address, { maxLength: 8 }), (entries, addresses) => {
        const index = buildAddressIndex(entries);
        for (const a of addresses) {
          const naive = entries.flatMap((e, i) => (e.exact.includes(a) || e.patterns.some((p) => addressMatches(a, p)) ? [i] : []));
          expect(index.lookup(a)).toEqual(naive);
        }
      }),
      { numRuns: 1000 },
    );
  });
});
