// Request signatures (src/domain/signing.ts): the HMACs against RFC 4231's published vectors, the
// constant-time compare at its edges, and the class: no other file of src/ computes an HMAC or
// compares a secret by hand, so a verifier cannot be written without the length check again.

import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { hmacHex, sameSecret, sha256Signature } from "../../src/domain/signing.js";

// RFC 4231, test case 2 (key "Jefe"): the RFC's digests, not ones computed here.
const KEY = "Jefe";
const DATA = "what do ya want for nothing?";
const SHA256 = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
const SHA512 = "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737";

describe("the HMACs", () => {
  it("match RFC 4231's vectors, whole or fed in parts, as text or bytes", () => {
    expect(hmacHex("sha256", KEY, DATA)).toBe(SHA256);
    expect(hmacHex("sha512", KEY, DATA)).toBe(SHA512);
    expect(hmacHex("sha256", KEY, "what do ya ", Buffer.from("want for nothing?"))).toBe(SHA256);
    expect(sha256Signature(KEY, Buffer.from(DATA))).toBe(`sha256=${SHA256}`);
  });
});

describe("the compare", () => {
  it("is true only for the same bytes", () => {
    expect(sameSecret(`sha256=${SHA256}`, sha256Signature(KEY, DATA))).toBe(true);
    expect(sameSecret(Buffer.from("abc"), "abc")).toBe(true);
    expect(sameSecret(`sha256=${SHA256.slice(0, -1)}0`, sha256Signature(KEY, DATA))).toBe(false);
    // Shorter, longer, empty, and a prefix of the real one: not the signature, and no throw.
    for (const given of ["", "sha256=", `sha256=${SHA256}0`, `sha256=${SHA256.slice(0, 32)}`, `SHA256=${SHA256}`]) {
      expect(sameSecret(given, sha256Signature(KEY, DATA))).toBe(false);
    }
  });
});

describe("the class", () => {
  it("no file of src/ but signing.ts computes an HMAC or compares bytes in constant time", () => {
    const root = join(import.meta.dirname, "../../src");
    const files = (function walk(dir: string): string[] {
      return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? (e.name === "generated" ? [] : walk(join(dir, e.name))) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
      );
    })(root);
    expect(files.length).toBeGreaterThan(50);
    const offenders = files
      .filter((f) => /\b(createHmac|timingSafeEqual)\b/.test(readFileSync(f, "utf8")))
      .map((f) => relative(root, f));
    expect(offenders).toEqual(["domain/signing.ts"]);
  });
});
