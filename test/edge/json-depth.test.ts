import { describe, expect, it } from "vitest";
import { jsonTextProblem, MAX_JSON_DEPTH } from "../../src/domain/text.js";

/** `levels` arrays nested in one another around `inner`. */
const nestedArrays = (levels: number, inner: unknown = 1): unknown => {
  let v = inner;
  for (let i = 0; i < levels; i++) v = [v];
  return v;
};
const nestedObjects = (levels: number, inner: unknown = 1): unknown => {
  let v = inner;
  for (let i = 0; i < levels; i++) v = { a: v };
  return v;
};

describe("the JSON walk is iterative and bounded (src/domain/text.ts)", () => {
  it("64 nested arrays or objects are accepted; 65 are refused as too_deep, never a stack overflow", () => {
    expect(MAX_JSON_DEPTH).toBe(64);
    expect(jsonTextProblem(nestedArrays(64))).toBeNull();
    expect(jsonTextProblem(nestedObjects(64))).toBeNull();
    expect(jsonTextProblem(nestedArrays(65))).toMatchObject({ problem: { code: "too_deep" } });
    expect(jsonTextProblem(nestedObjects(65))).toMatchObject({ problem: { code: "too_deep" } });
    // The path names the container that would open one level too many.
    expect(jsonTextProblem(nestedObjects(65))!.path).toEqual(Array(64).fill("a"));
  });

  it("a body nested 20,000 and 200,000 deep (what JSON.parse accepts) is answered, not a RangeError", () => {
    for (const levels of [20_000, 200_000]) {
      const parsed = JSON.parse("[".repeat(levels) + "]".repeat(levels)) as unknown;
      expect(jsonTextProblem(parsed)).toMatchObject({ problem: { code: "too_deep" } });
      const objects = JSON.parse('{"k":'.repeat(levels) + "1" + "}".repeat(levels)) as unknown;
      expect(jsonTextProblem(objects)).toMatchObject({ problem: { code: "too_deep" } });
    }
  });

  it("the depth counts containers, not width: 500,000 siblings at depth 1 and a wide tree at depth 64 pass", () => {
    expect(jsonTextProblem(new Array(500_000).fill(0).map((_, i) => (i % 2 ? "x" : { n: i })))).toBeNull();
    const wide = nestedArrays(63, new Array(10_000).fill("ok"));
    expect(jsonTextProblem(wide)).toBeNull();
    // One bad string at the end of the widest list is still found, with its path.
    const last = new Array(10_000).fill("ok");
    last[9_999] = "bad\u0000";
    expect(jsonTextProblem(nestedArrays(3, last))).toMatchObject({ path: [0, 0, 0, 9_999], problem: { code: "nul_character" } });
  });

  it("the first problem in document order wins, as the recursive walk answered; a caller's own limit applies", () => {
    expect(jsonTextProblem({ a: ["ok", { b: "x\u0000" }], c: "y\u0000" })).toMatchObject({ path: ["a", 1, "b"], problem: { code: "nul_character" } });
    expect(jsonTextProblem([nestedArrays(70), "z\u0000"])).toMatchObject({ problem: { code: "too_deep" } });
    expect(jsonTextProblem(["z\u0000", nestedArrays(70)])).toMatchObject({ path: [0], problem: { code: "nul_character" } });
    expect(jsonTextProblem({ "bad\u001bkey": 1 })).toMatchObject({ path: [], problem: { code: "control_character" } });
    expect(jsonTextProblem(nestedArrays(3), [], 2)).toMatchObject({ problem: { code: "too_deep" } });
    expect(jsonTextProblem(nestedArrays(2), [], 2)).toBeNull();
    expect(jsonTextProblem([], [], 0)).toMatchObject({ problem: { code: "too_deep" } });
    // Scalars at the top: nothing to nest.
    for (const scalar of [1, true, null, "fine", 2.5]) expect(jsonTextProblem(scalar)).toBeNull();
    expect(jsonTextProblem("x\u0000", ["arg"])).toMatchObject({ path: ["arg"] });
  });
});
