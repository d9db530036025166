import { describe, expect, it } from "vitest";
import { Interned } from "../../src/domain/interned.js";

// A string's identity cannot be seen from JavaScript (=== compares text): the pool is read by
// what it holds.
describe("Interned", () => {
  it("holds one string for equal texts, and answers the text it was given", () => {
    const pool = new Interned();
    const text = "subscription { planGate }";
    expect(pool.of(text)).toBe(text);
    expect(pool.of(["subscription", "{", "planGate", "}"].join(" "))).toBe(text);
    expect(pool.size).toBe(1);
    pool.of("subscription { workspaceGates }");
    expect(pool.size).toBe(2);
  });

  it("holds at most maxEntries strings and maxChars characters: past either it starts over", () => {
    const pool = new Interned(2, 10);
    pool.of("aaaa");
    pool.of("bbbb");
    expect(pool.size).toBe(2);
    expect(pool.of("cccc")).toBe("cccc"); // a third entry: started over, holding only this one
    expect(pool.size).toBe(1);
    expect(pool.of("x".repeat(11))).toBe("x".repeat(11)); // longer than the pool holds: answered, not kept
    expect(pool.size).toBe(1);
    pool.of("123456"); // 4 + 6 characters: kept beside "cccc"
    expect(pool.size).toBe(2);
    const fresh = new Interned(10, 10);
    fresh.of("123456");
    fresh.of("12345"); // 6 + 5 > 10 characters: started over
    expect(fresh.size).toBe(1);
  });
});
