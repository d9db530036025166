import { createHash, randomBytes } from "node:crypto";

/** `cs_` + 32 random bytes, base64url: recognisable in logs and secret scanners. */
export function generateToken(): string {
  return `cs_${randomBytes(32).toString("base64url")}`;
}

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

export function tokenPrefix(token: string): string {
  return token.slice(0, 10);
}

export function bearerFrom(header: string | null | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}
