import { randomBytes } from "node:crypto";
import { sha256Hex } from "../domain/canonical.js";

/**
 * Virtual keys: the agent's gateway credential. `vk_` + 32 random bytes (base64url). Only the
 * sha256 is stored; the plaintext is shown once at creation, and no component ever
 * reconstructs it — the delivery worker sends the hash to resume (seed 003, "Dispatch").
 */
export const VIRTUAL_KEY_PREFIX = "vk_";

export function generateVirtualKey(): string {
  return `${VIRTUAL_KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
}

export function hashVirtualKey(plaintext: string): string {
  return sha256Hex(plaintext);
}

/** The first characters, for recognising a key in a list (like API tokens' prefix). */
export function virtualKeyPrefix(plaintext: string): string {
  return plaintext.slice(0, 10);
}
