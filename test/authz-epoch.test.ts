// The authz epoch (migration authz_epoch): it grows by one at the commit of every transaction
// that changes what a principal is made of, and at no other time. The live gate keeps
// principals across events under it (EpochCache), so a change it missed would leave a
// removed member receiving gate status: each table gets its own case.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "./helpers/fixtures.js";
import { AUTHZ_EPOCH_SQL, EpochCache, loadPrincipal } from "../src/authz/principal.js";
import type { SqlRunner } from "../src/infra/db.js";

let t: TestApp;
let org: OrgFixture;
beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
});
afterAll(() => t.close());

const epoch = async () => Number((await t.db.sql.query<{ e: number }>(`SELECT ${AUTHZ_EPOCH_SQL} AS e`))[0]!.e);

/** Runs `statements` in one transaction on one connection; rolls back instead when asked. */
async function inTransaction(statements: (c: SqlRunner) => Promise<unknown>, options: { rollback?: boolean } = {}) {
  await t.db.sql.withConnection(async (c) => {
    await c.query("BEGIN");
    try {
      await statements(c);
      await c.query(options.rollback ? "ROLLBACK" : "COMMIT");
    } catch (error) {
      await c.query("ROLLBACK");
      throw error;
    }
  });
}

async function bumpsOnce(change: (c: SqlRunner) => Promise<unknown>) {
  const before = await epoch();
  await inTransaction(change);
  expect(await epoch()).toBe(before + 1);
}

describe("every table a principal is made of bumps the epoch once, at commit", () => {
  it("organizations, memberships, role_assignments", async () => {
    const m = await addMember(t.db, org.orgId, { role: "workspace-reader" });
    await bumpsOnce((c) => c.query(`UPDATE organizations SET "deletedAt" = NULL WHERE id = $1`, [org.orgId]));
    await bumpsOnce((c) => c.query(`UPDATE memberships SET "deactivatedAt" = now() WHERE "orgId" = $1 AND "userId" = $2`, [org.orgId, m.userId]));
    await bumpsOnce((c) => c.query(`DELETE FROM role_assignments WHERE "orgId" = $1 AND "userId" = $2`, [org.orgId, m.userId]));
  });

  it("roles and role_permissions", async () => {
    const role = await t.db.prisma.role.create({ data: { orgId: org.orgId, key: `k-${Date.now()}`, name: `R ${Date.now()}` } });
    await bumpsOnce((c) => c.query(`INSERT INTO role_permissions (id, "roleId", "resourceType", action, "resourcePattern", "authzGroup") VALUES (gen_random_uuid(), $1, 'workspace', 'read', '', '')`, [role.id]));
    await bumpsOnce((c) => c.query(`DELETE FROM role_permissions WHERE "roleId" = $1`, [role.id]));
    await bumpsOnce((c) => c.query(`UPDATE roles SET "deletedAt" = now() WHERE id = $1`, [role.id]));
  });

  it("users (the live gate keeps their names beside principals)", async () => {
    const m = await addMember(t.db, org.orgId, {});
    await bumpsOnce((c) => c.query(`UPDATE users SET name = 'Renamed' WHERE id = $1`, [m.userId]));
  });

  it("identity sources, bindings, their roles and users' synced groups", async () => {
    const m = await addMember(t.db, org.orgId, {});
    const role = await t.db.prisma.role.create({ data: { orgId: org.orgId, key: `b-${Date.now()}`, name: `B ${Date.now()}` } });
    const source = await t.db.prisma.identitySource.create({ data: { orgId: org.orgId, name: `okta-${Date.now()}` } });
    const binding = await t.db.prisma.identityGroupBinding.create({ data: { orgId: org.orgId, identitySourceId: source.id, groupKey: "eng" } });
    await bumpsOnce((c) => c.query(`INSERT INTO identity_group_binding_roles ("bindingId", "roleId") VALUES ($1, $2)`, [binding.id, role.id]));
    await bumpsOnce((c) => c.query(`INSERT INTO user_identity_groups ("identitySourceId", "userId", "groupKey") VALUES ($1, $2, 'eng')`, [source.id, m.userId]));
    await bumpsOnce((c) => c.query(`UPDATE identity_group_bindings SET "groupKey" = 'platform' WHERE id = $1`, [binding.id]));
    await bumpsOnce((c) => c.query(`UPDATE identity_sources SET name = $2 WHERE id = $1`, [source.id, `renamed-${Date.now()}`]));
  });
});

describe("and at no other time", () => {
  it("a transaction changing many rows of several tables bumps it once", async () => {
    const members = await Promise.all([1, 2, 3].map(() => addMember(t.db, org.orgId, { role: "workspace-reader" })));
    await bumpsOnce(async (c) => {
      for (const m of members) await c.query(`UPDATE memberships SET "isSuperAdmin" = true WHERE "orgId" = $1 AND "userId" = $2`, [org.orgId, m.userId]);
      await c.query(`DELETE FROM role_assignments WHERE "orgId" = $1 AND "userId" = ANY($2::text[])`, [org.orgId, members.map((m) => m.userId)]);
    });
  });

  it("a rolled-back transaction, an uncommitted one, and changes to other tables leave it alone", async () => {
    const m = await addMember(t.db, org.orgId, { role: "workspace-reader" });
    const before = await epoch();
    await inTransaction((c) => c.query(`UPDATE memberships SET "deactivatedAt" = now() WHERE "orgId" = $1 AND "userId" = $2`, [org.orgId, m.userId]), { rollback: true });
    await inTransaction(async (c) => {
      await c.query(`UPDATE memberships SET "isSuperAdmin" = true WHERE "orgId" = $1 AND "userId" = $2`, [org.orgId, m.userId]);
      expect(await epoch()).toBe(before); // read from another connection, before the commit
    }, { rollback: true });
    await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: `s-${Date.now()}` } });
    await t.db.prisma.apiToken.updateMany({ where: { userId: m.userId }, data: { name: "renamed token" } });
    expect(await epoch()).toBe(before);
  });

  it("authz transactions committing at once all commit, one bump each, in commit order", async () => {
    const members = await Promise.all(Array.from({ length: 8 }, () => addMember(t.db, org.orgId, { role: "workspace-reader" })));
    const before = await epoch();
    await Promise.all(
      members.map((m) =>
        inTransaction(async (c) => {
          await c.query(`UPDATE memberships SET "isSuperAdmin" = true WHERE "orgId" = $1 AND "userId" = $2`, [org.orgId, m.userId]);
          await c.query(`SELECT pg_sleep(0.05)`); // all eight hold their row locks at once
          await c.query(`DELETE FROM role_assignments WHERE "orgId" = $1 AND "userId" = $2`, [org.orgId, m.userId]);
        }),
      ),
    );
    expect(await epoch()).toBe(before + 8);
  });
});

describe("EpochCache", () => {
  it("keeps principals only under the epoch they were loaded after, and forgets them all when it moves", async () => {
    const m = await addMember(t.db, org.orgId, { role: "workspace-reader" });
    const cache = new EpochCache<Awaited<ReturnType<typeof loadPrincipal>>>();
    const e1 = await epoch();
    expect(cache.at(e1).size).toBe(0);
    cache.keep(e1, new Map([[m.userId, await loadPrincipal(t.db.sql, org.orgId, m.userId)]]));
    expect(cache.at(e1).get(m.userId)?.membershipActive).toBe(true);
    cache.keep(e1 - 1, new Map([["someone", await loadPrincipal(t.db.sql, org.orgId, m.userId)]])); // loaded under an older epoch: dropped
    expect(cache.at(e1).has("someone")).toBe(false);

    await t.db.prisma.membership.updateMany({ where: { orgId: org.orgId, userId: m.userId }, data: { deactivatedAt: new Date() } });
    const e2 = await epoch();
    expect(e2).toBe(e1 + 1);
    expect(cache.at(e2).size).toBe(0);
  });

  it("holds at most maxEntries rows", async () => {
    const m = await addMember(t.db, org.orgId, {});
    const p = await loadPrincipal(t.db.sql, org.orgId, m.userId);
    const cache = new EpochCache<Awaited<ReturnType<typeof loadPrincipal>>>(2);
    cache.at(7);
    cache.keep(7, new Map(["a", "b", "c"].map((id) => [id, p])));
    expect([...cache.at(7).keys()]).toEqual(["a", "b"]);
  });
});
