import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { InvalidStateError } from "../errors.js";

/**
 * AES-256-GCM under a key derived (HKDF-SHA256) from a configured secret and a purpose, so a row
 * never holds a secret or a held call's arguments in a form a reader of the database can see.
 * Each purpose ("held-ticket-seal-v1", "webhook-secret-seal-v1") gets its own key.
 * Format: `v1.<base64url(iv ‖ tag ‖ ciphertext)>`.
 */
const SEAL_VERSION = "v1";

const sealKey = (secret: string, purpose: string) => Buffer.from(hkdfSync("sha256", secret, "countersign", purpose, 32));

export function seal(purpose: string, secret: string, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", sealKey(secret, purpose), iv);
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return `${SEAL_VERSION}.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64url")}`;
}

/** The plaintext, or null when it was sealed under another secret or purpose (or altered). */
export function unseal(purpose: string, secret: string, sealed: string): string | null {
  const [version, data] = sealed.split(".");
  if (version !== SEAL_VERSION || !data) return null;
  try {
    const raw = Buffer.from(data, "base64url");
    const decipher = createDecipheriv("aes-256-gcm", sealKey(secret, purpose), raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8");
  } catch {
    return null;
  }
}

/**
 * The secret a configured credential (a webhook's signing secret, a Slack app's, a GitHub App's
 * key) is sealed under: COUNTERSIGN_WEBHOOK_SECRET_KEY, or COUNTERSIGN_APPROVAL_SECRET. Without
 * one nothing is stored: `entity` (the GraphQL type being configured) names what cannot be.
 */
export function sealingKeyFor(config: { webhooks: { secretKey?: string | null } }, entity: string): string {
  const key = config.webhooks.secretKey;
  if (!key) {
    throw new InvalidStateError(
      entity,
      "unconfigured",
      `${entity} needs COUNTERSIGN_WEBHOOK_SECRET_KEY (or COUNTERSIGN_APPROVAL_SECRET) to seal its secrets.`,
    );
  }
  return key;
}
