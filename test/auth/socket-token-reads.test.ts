// Sockets read their tokens batched (SocketTokenReads, src/auth/authenticate.ts) and principals
// being loaded at one authz epoch are shared (EpochCache.loadAt, src/authz/principal.ts): fewer
// statements when many subscriptions open at once, and never an answer older than the request.
// A read shares only a statement not yet sent: a token revoked before a read was asked fails
// that read even while an earlier read of the same token is still in flight.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { SocketTokenReads } from "../../src/auth/authenticate.js";
import { hashToken } from "../../src/auth/tokens.js";
import { EpochCache } from "../../src/authz/principal.js";
import type { SqlRunner } from "../../src/infra/db.js";

let t: TestApp;
let org: OrgFixture;
beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
});
afterAll(() => t.close());

const member = () => addMember(t.db, org.orgId, { grants: [{ resourceType: "workspace", action: "read" }] });

/** A runner whose answers are held until `release()`: its statements are sent (and read their snapshot) at once. */
function heldRunner(sql: SqlRunner) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const runner: SqlRunner = {
    ...sql,
    async query<T>(text: string, params?: unknown[], options?: Parameters<SqlRunner["query"]>[2]) {
      const rows = await sql.query<T>(text, params, options);
      await gate;
      return rows;
    },
  };
  return { runner, release };
}

describe("socket token reads", () => {
  it("reads asked in one turn go out as one statement, each answered for its own token", async () => {
    const [m1, m2] = [await member(), await member()];
    const reads = new SocketTokenReads(t.db.sql);
    // First use writes lastUsedAt (one UPDATE for the batch); the count below is of a warm read.
    await Promise.all([reads.read(hashToken(m1.token)), reads.read(hashToken(m2.token))]);
    const before = t.db.statementCount();
    const [a, b, again, unknown, none] = await Promise.all([
      reads.read(hashToken(m1.token)),
      reads.read(hashToken(m2.token)),
      reads.read(hashToken(m1.token)),
      reads.read(hashToken("not-a-token")),
      reads.read(null),
    ]);
    expect(t.db.statementCount() - before).toBe(1);
    expect(a?.viewer.userId).toBe(m1.userId);
    expect(again?.viewer.userId).toBe(m1.userId);
    expect(b?.viewer.userId).toBe(m2.userId);
    expect([a?.live, b?.live]).toEqual([true, true]);
    expect(typeof a?.authzEpoch).toBe("number");
    expect(unknown).toBeNull();
    expect(none).toBeNull();
  });

  it("a token revoked before a read was asked fails it, though a read of the same token sent earlier is still in flight", async () => {
    const m = await member();
    const hash = hashToken(m.token);
    const held = heldRunner(t.db.sql);
    const reads = new SocketTokenReads(held.runner);
    const earlier = reads.read(hash);
    // The earlier read's statement is sent after this turn; let it go out, then revoke.
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setTimeout(r, 50));
    await t.db.sql.query(`UPDATE api_tokens SET "revokedAt" = now() WHERE "tokenHash" = $1`, [hash]);
    const later = reads.read(hash);
    held.release();
    expect((await earlier)?.viewer.userId).toBe(m.userId);
    expect(await later).toBeNull();
  });

  it("a member no longer active reads as not live, in the same statement", async () => {
    const m = await member();
    await t.db.sql.query(`UPDATE memberships SET "deactivatedAt" = now() WHERE "userId" = $1`, [m.userId]);
    const read = await new SocketTokenReads(t.db.sql).read(hashToken(m.token));
    expect(read?.viewer.userId).toBe(m.userId);
    expect(read?.live).toBe(false);
  });
});

describe("principals loaded at one epoch", () => {
  it("callers at the same epoch share one load; a kept row answers without one; another epoch loads anew", async () => {
    const cache = new EpochCache<{ n: number }>();
    let loads = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const load = async () => (await gate, { n: ++loads });
    const together = [cache.loadAt(1, "u", load), cache.loadAt(1, "u", load), cache.loadAt(1, "u", load)];
    release();
    const values = await Promise.all(together);
    expect(loads).toBe(1);
    expect(new Set(values).size).toBe(1);
    expect(await cache.loadAt(1, "u", load)).toBe(values[0]);
    expect(loads).toBe(1);
    expect((await cache.loadAt(2, "u", async () => ({ n: ++loads }))).n).toBe(2);
  });

  it("a load under way at an older epoch is not shared with a caller at the new one", async () => {
    const cache = new EpochCache<string>();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const old = cache.loadAt(1, "u", async () => (await gate, "old"));
    const fresh = cache.loadAt(2, "u", async () => "new");
    release();
    expect(await old).toBe("old");
    expect(await fresh).toBe("new");
    // The old load resolving later does not overwrite what the new epoch kept.
    expect(cache.at(2).get("u")).toBe("new");
  });

  it("a failed load is not kept: the next caller loads again", async () => {
    const cache = new EpochCache<string>();
    await expect(cache.loadAt(1, "u", async () => Promise.reject(new Error("down")))).rejects.toThrow("down");
    expect(await cache.loadAt(1, "u", async () => "up")).toBe("up");
  });
});
