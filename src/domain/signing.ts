import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Request signatures, the one place they are computed and compared: what Countersign signs
 * (webhook deliveries) and what it verifies (Slack, HCP Terraform run tasks, GitHub webhooks).
 * Every verifier compares in constant time; a value of another length is not the signature.
 */

/** The hex HMAC of `parts`, fed in order, under `key`. */
export function hmacHex(algorithm: "sha256" | "sha512", key: string, ...parts: (Buffer | string)[]): string {
  const hmac = createHmac(algorithm, key);
  for (const part of parts) hmac.update(part);
  return hmac.digest("hex");
}

/** `sha256=<hex HMAC-SHA256 of the body>`: how Countersign signs a delivery and GitHub signs a webhook. */
export const sha256Signature = (secret: string, body: Buffer | string): string => `sha256=${hmacHex("sha256", secret, body)}`;

/** Whether `given` is exactly `expected`, compared in constant time (the length is not secret). */
export function sameSecret(given: string | Buffer, expected: string | Buffer): boolean {
  const a = typeof given === "string" ? Buffer.from(given, "utf8") : given;
  const b = typeof expected === "string" ? Buffer.from(expected, "utf8") : expected;
  return a.length === b.length && timingSafeEqual(a, b);
}
