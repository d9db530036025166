// The migration that gave skipped deliveries their own status: rows written before it, closed
// `failed` with "skipped: <reason>", become `skipped` with the reason alone; real failures stay.

import { cp, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { afterAll, expect, it } from "vitest";
import { openPostgres } from "../../src/infra/db.js";
import { migrate, MIGRATIONS_DIR, readMigrations } from "../../src/infra/migrate.js";
import { TEST_DATABASE_URL } from "../helpers/env.js";
import { newSchemaName } from "../helpers/harness.js";

const MIGRATION = "20261204032500_webhook_delivery_skipped";
const schema = newSchemaName();
const db = await openPostgres(TEST_DATABASE_URL, schema);
afterAll(async () => {
  await db.sql.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await db.close();
});

it("turns the old skipped rows into skipped ones and leaves real failures failed", async () => {
  const names = (await readMigrations()).map((m) => m.name);
  expect(names).toContain(MIGRATION);
  const before = await mkdtemp(path.join(os.tmpdir(), "cs-before-skipped-"));
  for (const name of names.slice(0, names.indexOf(MIGRATION))) await cp(path.join(MIGRATIONS_DIR, name), path.join(before, name), { recursive: true });
  await migrate(db.sql, before);
  await rm(before, { recursive: true, force: true });

  const orgId = randomUUID();
  const userId = randomUUID();
  const webhookId = randomUUID();
  await db.sql.query(`INSERT INTO organizations (id, slug, name) VALUES ($1, $2, 'Org')`, [orgId, `org-${orgId.slice(0, 8)}`]);
  await db.sql.query(`INSERT INTO users (id, email, name) VALUES ($1, $2, 'Owner')`, [userId, `${userId}@example.test`]);
  await db.sql.query(
    `INSERT INTO webhooks (id, "orgId", url, events, format, "secretSealed", "createdById", "updatedAt") VALUES ($1, $2, 'https://example.test/hook', ARRAY['plan.applied'], 'json', 'v1.x', $3, now())`,
    [webhookId, orgId, userId],
  );
  const row = async (status: string, lastError: string | null) => {
    const id = randomUUID();
    await db.sql.query(
      `INSERT INTO webhook_deliveries (id, "orgId", "webhookId", "eventId", "eventType", payload, status, "lastError", "updatedAt")
       VALUES ($1, $2, $3, $4, 'plan.applied', '{}'::jsonb, $5, $6, now())`,
      [id, orgId, webhookId, randomUUID(), status, lastError],
    );
    return id;
  };
  const skipped = await row("failed", "skipped: the webhook's owner may not read this event: it needs (workspace, read) on its workspace");
  const failed = await row("failed", "the receiver answered 500");
  const delivered = await row("delivered", null);

  expect((await migrate(db.sql)).applied).toEqual(names.slice(names.indexOf(MIGRATION)));
  const after = new Map(
    (await db.sql.query<{ id: string; status: string; lastError: string | null }>(`SELECT id, status, "lastError" FROM webhook_deliveries`)).map((r) => [r.id, r]),
  );
  expect(after.get(skipped)).toMatchObject({ status: "skipped", lastError: "the webhook's owner may not read this event: it needs (workspace, read) on its workspace" });
  expect(after.get(failed)).toMatchObject({ status: "failed", lastError: "the receiver answered 500" });
  expect(after.get(delivered)).toMatchObject({ status: "delivered", lastError: null });
  await expect(db.sql.query(`UPDATE webhook_deliveries SET status = 'lost' WHERE id = $1`, [failed])).rejects.toThrow(/webhook_deliveries_status_check/);
});
