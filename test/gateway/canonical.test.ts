import { createHash, randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { argumentHash, canonicalJson, CanonicalJsonError } from "../../src/gateway/index.js";

/** Rebuilds every object with its keys in a seeded random order. */
function reorderKeys(value: unknown, seed: number): unknown {
  let state = seed >>> 0 || 1;
  const next = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0);
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== "object") return v;
    const entries = Object.entries(v).map(([k, x]) => [k, walk(x)] as const);
    for (let i = entries.length - 1; i > 0; i--) {
      const j = next() % (i + 1);
      [entries[i], entries[j]] = [entries[j]!, entries[i]!];
    }
    const out: Record<string, unknown> = {};
    for (const [k, x] of entries) Object.defineProperty(out, k, { value: x, enumerable: true, writable: true, configurable: true });
    return out;
  };
  return walk(value);
}

/** JSON's own notion of sameness (-0 and 0 are one JSON number). */
const sameJson = (a: unknown, b: unknown) => isDeepStrictEqual(JSON.parse(JSON.stringify(a)), JSON.parse(JSON.stringify(b)));

describe("canonical JSON", () => {
  it("sorts keys, drops whitespace and keeps array order", () => {
    expect(canonicalJson({ b: [3, 1, 2], a: { d: null, c: "x y" } })).toBe('{"a":{"c":"x y","d":null},"b":[3,1,2]}');
    expect(canonicalJson([2, 1])).not.toBe(canonicalJson([1, 2]));
  });

  it("key order never changes the hash", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer(), (value, seed) => {
        expect(argumentHash(reorderKeys(value, seed))).toBe(argumentHash(value));
      }),
      { numRuns: 300 },
    );
  });

  it("distinct values give distinct canonical strings", () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.jsonValue(), { comparator: sameJson, minLength: 2, maxLength: 8 }), (values) => {
        expect(new Set(values.map(canonicalJson)).size).toBe(values.length);
      }),
      { numRuns: 200 },
    );
  });

  it("the canonical string parses back to the same value", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(sameJson(JSON.parse(canonicalJson(value)), value)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it.each([
    ["undefined", { a: undefined }, "undefined", '$["a"]'],
    ["a function", { f: () => 1 }, "function", '$["f"]'],
    ["NaN", [1, Number.NaN], "non_finite_number", "$[1]"],
    ["Infinity", { n: Number.POSITIVE_INFINITY }, "non_finite_number", '$["n"]'],
    ["-Infinity", Number.NEGATIVE_INFINITY, "non_finite_number", "$"],
    ["a bigint", { n: 1n }, "bigint", '$["n"]'],
    ["a symbol", Symbol("s"), "symbol", "$"],
    ["a Date", { at: new Date(0) }, "non_plain_object", '$["at"]'],
    ["a Map", new Map(), "non_plain_object", "$"],
    ["a sparse array", [1, , 3], "sparse_array", "$[1]"],
  ])("rejects %s with a typed error", (_label, value, kind, path) => {
    try {
      canonicalJson(value);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(CanonicalJsonError);
      expect(error).toMatchObject({ kind, path });
    }
  });

  it("rejects a cycle", () => {
    const cyclic: Record<string, unknown> = {};
    cyclic["self"] = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(CanonicalJsonError);
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
  });

  it("argumentHash is the sha256 hex of the canonical JSON", () => {
    const args = { repo: "acme/api", force: true, id: randomUUID() };
    expect(argumentHash(args)).toBe(createHash("sha256").update(canonicalJson(args)).digest("hex"));
    expect(argumentHash(args)).toMatch(/^[0-9a-f]{64}$/);
  });

  it("keeps an own __proto__ key as data", () => {
    const parsed: unknown = JSON.parse('{"__proto__":{"admin":true},"a":1}');
    expect(canonicalJson(parsed)).toBe('{"__proto__":{"admin":true},"a":1}');
  });
});
