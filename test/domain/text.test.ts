import { describe, expect, it } from "vitest";
import { isStorableText, jsonTextProblem, textProblem } from "../../src/domain/text.js";

describe("storable text (src/domain/text.ts)", () => {
  it("every kind refuses NUL and unpaired surrogates, and keeps paired ones (astral characters)", () => {
    for (const kind of ["identifier", "text", "data"] as const) {
      expect(textProblem("a\u0000b", kind)).toMatchObject({ code: "nul_character", index: 1 });
      expect(textProblem("a\ud800b", kind)).toMatchObject({ code: "unpaired_surrogate", index: 1 });
      expect(textProblem("a\udc00", kind)).toMatchObject({ code: "unpaired_surrogate", index: 1 });
      expect(textProblem("\ud800", kind)).toMatchObject({ code: "unpaired_surrogate" });
      expect(isStorableText("deploy 🚀 prod — ünïcode", kind)).toBe(true);
    }
  });

  it("identifiers refuse every C0 and C1 control, DEL and the line separators, tab and newlines included", () => {
    for (const c of ["\t", "\n", "\r", "\u001b", "\u007f", "\u0085", "\u009b", "\u2028", "\u2029"]) {
      expect(textProblem(`a${c}b`, "identifier"), JSON.stringify(c)).toMatchObject({ code: "control_character", index: 1 });
    }
    expect(isStorableText("team-a/prod_1.x *? [0]", "identifier")).toBe(true);
  });

  it("free text keeps tab, LF and CR and refuses the other controls", () => {
    expect(isStorableText("line one\n\tline two\r\n", "text")).toBe(true);
    for (const c of ["\u0001", "\u001b", "\u007f", "\u009b"]) expect(textProblem(`a${c}`, "text")?.code).toBe("control_character");
  });

  it("JSON: string values are data (controls kept), object keys are identifiers, paths name the place", () => {
    expect(jsonTextProblem({ a: ["x", "file\u001bcontents"] })).toBeNull();
    expect(jsonTextProblem({ a: ["x", "y\u0000"] })).toMatchObject({ path: ["a", 1], problem: { code: "nul_character" } });
    expect(jsonTextProblem({ a: { "k\u001b": 1 } })).toMatchObject({ path: ["a"], problem: { code: "control_character" } });
    expect(jsonTextProblem([1, true, null, 2.5])).toBeNull();
  });
});
