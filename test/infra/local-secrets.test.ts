import { chmod, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/infra/config.js";
import { APPROVAL_SECRET_FILE, LocalSecretError, SERVICE_TOKEN_FILE, withLocalSecrets } from "../../src/infra/local-secrets.js";

// The embedded default's approval secret and gateway service token: made once, kept in the data
// folder (0600), the same after a restart; the environment wins; nothing made beside DATABASE_URL.

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});
async function dataDir(): Promise<string> {
  const dir = path.join(await mkdtemp(path.join(os.tmpdir(), "countersign-secrets-")), "nested", "data");
  dirs.push(path.dirname(path.dirname(dir)));
  return dir;
}
const embedded = (dir: string, extra: Record<string, string> = {}) => loadConfig({ COUNTERSIGN_DATA_DIR: dir, ...extra });

describe("the embedded default's secrets", () => {
  it("are generated on first start into the data folder, owner-only, and read back unchanged after", async () => {
    const dir = await dataDir();
    const first = await withLocalSecrets(embedded(dir));
    expect(first.generated.sort()).toEqual([path.join(dir, APPROVAL_SECRET_FILE), path.join(dir, SERVICE_TOKEN_FILE)].sort());
    expect(first.config.approvalSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(first.config.gatewayServiceToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(first.config.approvalSecret).not.toBe(first.config.gatewayServiceToken);
    for (const file of [APPROVAL_SECRET_FILE, SERVICE_TOKEN_FILE]) {
      expect((await stat(path.join(dir, file))).mode & 0o777).toBe(0o600);
    }
    expect((await readFile(path.join(dir, APPROVAL_SECRET_FILE), "utf8")).trim()).toBe(first.config.approvalSecret);

    const again = await withLocalSecrets(embedded(dir));
    expect(again.generated).toEqual([]);
    expect(again.config.approvalSecret).toBe(first.config.approvalSecret);
    expect(again.config.gatewayServiceToken).toBe(first.config.gatewayServiceToken);
  });

  it("the environment overrides the files, and none is written for what it sets", async () => {
    const dir = await dataDir();
    const secret = "s".repeat(40);
    const loaded = await withLocalSecrets(embedded(dir, { COUNTERSIGN_APPROVAL_SECRET: secret }));
    expect(loaded.config.approvalSecret).toBe(secret);
    expect(loaded.generated).toEqual([path.join(dir, SERVICE_TOKEN_FILE)]);
    await expect(stat(path.join(dir, APPROVAL_SECRET_FILE))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("a file someone loosened is made owner-only again; a file too short to be a secret stops the start", async () => {
    const dir = await dataDir();
    await withLocalSecrets(embedded(dir));
    await writeFile(path.join(dir, SERVICE_TOKEN_FILE), `${"t".repeat(43)}\n`, { mode: 0o644 });
    await chmod(path.join(dir, SERVICE_TOKEN_FILE), 0o644);
    expect((await withLocalSecrets(embedded(dir))).config.gatewayServiceToken).toBe("t".repeat(43));
    expect((await stat(path.join(dir, SERVICE_TOKEN_FILE))).mode & 0o777).toBe(0o600);
    await writeFile(path.join(dir, APPROVAL_SECRET_FILE), "short\n");
    await expect(withLocalSecrets(embedded(dir))).rejects.toBeInstanceOf(LocalSecretError);
  });

  it("with DATABASE_URL nothing is generated (processes sharing a database must share the secrets)", async () => {
    const dir = await dataDir();
    const loaded = await withLocalSecrets(embedded(dir, { DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/test" }));
    expect(loaded.generated).toEqual([]);
    expect(loaded.config.approvalSecret).toBeUndefined();
    expect(loaded.config.gatewayServiceToken).toBeUndefined();
    expect(loaded.config.gatewayEmbedded).toBe(false);
    expect(embedded(dir).gatewayEmbedded).toBe(true);
    expect(embedded(dir, { COUNTERSIGN_GATEWAY_EMBEDDED: "off" }).gatewayEmbedded).toBe(false);
  });
});
