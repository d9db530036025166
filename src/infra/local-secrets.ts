import { randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Config } from "./config.js";

/**
 * The embedded default's secrets (no DATABASE_URL: one process on PGlite): the approval secret
 * (HS256 approval tokens, sealed held tickets) and the gateway service token (resume) are
 * generated on first start and kept in the data folder, readable by the owner only (0600), so a
 * restart on the same folder keeps verifying the tokens and opening the tickets it issued.
 * COUNTERSIGN_APPROVAL_SECRET and COUNTERSIGN_GATEWAY_SERVICE_TOKEN still win when set.
 *
 * With DATABASE_URL nothing is generated: several processes share those secrets, and a secret
 * made up by one of them would be a secret the others do not hold.
 */

export const APPROVAL_SECRET_FILE = "approval-secret";
export const SERVICE_TOKEN_FILE = "gateway-service-token";

export type LocalSecrets = { approvalSecret?: string; gatewayServiceToken?: string; generated: string[] };

export class LocalSecretError extends Error {
  override readonly name = "LocalSecretError";
}

/** Reads (or makes, once) one secret file: 32 random bytes, base64url (43 characters). */
async function secretFile(dir: string, name: string, minLength: number): Promise<{ value: string; generated: boolean }> {
  const file = path.join(dir, name);
  try {
    const value = (await readFile(file, "utf8")).trim();
    if (value.length < minLength) throw new LocalSecretError(`${file} holds fewer than ${minLength} characters: delete it to have a new one generated, or set the variable`);
    await chmod(file, 0o600); // owner only, even if something loosened it
    return { value, generated: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const value = randomBytes(32).toString("base64url");
  try {
    // `wx`: never overwrite — a second process starting at the same instant reads the first's.
    await writeFile(file, `${value}\n`, { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return secretFile(dir, name, minLength);
    throw error;
  }
  return { value, generated: true };
}

export async function loadLocalSecrets(config: Pick<Config, "database" | "dataDir" | "approvalSecret" | "gatewayServiceToken">): Promise<LocalSecrets> {
  const out: LocalSecrets = { generated: [] };
  if (config.database.kind !== "pglite") return out;
  if (!config.approvalSecret) {
    const s = await secretFile(config.dataDir, APPROVAL_SECRET_FILE, 32);
    out.approvalSecret = s.value;
    if (s.generated) out.generated.push(path.join(config.dataDir, APPROVAL_SECRET_FILE));
  }
  if (!config.gatewayServiceToken) {
    const s = await secretFile(config.dataDir, SERVICE_TOKEN_FILE, 16);
    out.gatewayServiceToken = s.value;
    if (s.generated) out.generated.push(path.join(config.dataDir, SERVICE_TOKEN_FILE));
  }
  return out;
}

/** The config with the data folder's secrets filled in where the environment left them out. */
export async function withLocalSecrets<C extends Config>(config: C): Promise<{ config: C; generated: string[] }> {
  const secrets = await loadLocalSecrets(config);
  return {
    config: {
      ...config,
      approvalSecret: config.approvalSecret ?? secrets.approvalSecret,
      gatewayServiceToken: config.gatewayServiceToken ?? secrets.gatewayServiceToken,
    },
    generated: secrets.generated,
  };
}
