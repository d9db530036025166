import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, newSchemaName, type TestApp } from "./helpers/harness.js";
import { addMember, createOrg, type OrgFixture } from "./helpers/fixtures.js";
import { prepareDatabase } from "../src/services/startup.js";
import { openPostgres } from "../src/infra/db.js";
import { loadConfig } from "../src/infra/config.js";
import { createLogger } from "../src/infra/logger.js";
import { TEST_DATABASE_URL } from "./helpers/env.js";
import { OPERATION_LIMITS } from "../src/app.js";

let t: TestApp;
let org: OrgFixture;
beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
});
afterAll(() => t.close());

describe("operation limits", () => {
  it(`rejects a query deeper than ${OPERATION_LIMITS.maxDepth}`, async () => {
    expect((await t.gql("{ viewer { organization { name } } }", {}, org.adminToken)).errors).toBeUndefined();
    let nested = "name";
    for (let i = 0; i < OPERATION_LIMITS.maxDepth; i++) nested = `viewer { user { ${nested} } }`.replace("viewer { user {", "stacks { edges { node {") + "}";
    const res = await t.gql(`{ ${nested} }`, {}, org.adminToken);
    expect(res.errors?.[0]?.message).toMatch(/depth/i);
  });

  it(`rejects more than ${OPERATION_LIMITS.maxAliases} aliases`, async () => {
    const aliases = Array.from({ length: OPERATION_LIMITS.maxAliases + 1 }, (_, i) => `a${i}: permissionCatalog { resourceType }`).join(" ");
    const res = await t.gql(`{ ${aliases} }`, {}, org.adminToken);
    expect(res.errors?.[0]?.message).toMatch(/alias/i);
  });

  it(`rejects an operation of more than ${OPERATION_LIMITS.maxTokens} tokens`, async () => {
    const fields = Array.from({ length: OPERATION_LIMITS.maxTokens }, () => "__typename").join(" ");
    const res = await t.gql(`{ ${fields} }`, {}, org.adminToken);
    expect(res.errors?.[0]?.message).toMatch(/token/i);
  });
});

describe("authentication", () => {
  it("an unknown token is unauthenticated, with the fix in the message", async () => {
    const res = await t.gql(`{ viewer { id } }`, {}, "cs_not-a-token");
    expect(res.errors![0]).toMatchObject({ extensions: { code: "UNAUTHENTICATED" } });
    expect(res.errors![0].message).toContain("Authorization: Bearer");
  });

  it("COUNTERSIGN_BOOTSTRAP_TOKEN creates an admin in a new organization holding exactly that token, once", async () => {
    const schema = newSchemaName();
    const db = await openPostgres(TEST_DATABASE_URL, schema);
    try {
      const token = "cs_bootstrap-token-for-ci-0123456789";
      const config = loadConfig({ DATABASE_URL: TEST_DATABASE_URL, COUNTERSIGN_BOOTSTRAP_TOKEN: token });
      await prepareDatabase(db, config, createLogger("silent"));
      await prepareDatabase(db, config, createLogger("silent"));
      expect(await db.prisma.user.count()).toBe(1);
      const viewer = await (await import("../src/auth/authenticate.js")).authenticate(db.sql, token);
      expect(viewer?.email).toBe("admin@countersign.local");
      const membership = await db.prisma.membership.findFirstOrThrow({ where: { userId: viewer!.userId } });
      expect(membership.isSuperAdmin).toBe(true);
    } finally {
      await db.sql.query(`DROP SCHEMA ${schema} CASCADE`);
      await db.close();
    }
  });
});

describe("field-level authorization", () => {
  it("unmaskedOutputs is null under (stack, read) and the values under (stack, read_data)", async () => {
    await t.db.prisma.stack.create({
      data: { orgId: org.orgId, name: "outputs-stack", outputs: [{ name: "token", value: "t0p", sensitive: true }] },
    });
    const q = `{ stacks { edges { node { name unmaskedOutputs { name value } } } } }`;
    const reader = await addMember(t.db, org.orgId, { role: "stack-reader" });
    const masked = await t.gql(q, {}, reader.token);
    expect(masked.data.stacks.edges[0].node.unmaskedOutputs).toBeNull();
    const res = await t.gql(q, {}, org.adminToken);
    expect(res.data.stacks.edges[0].node.unmaskedOutputs).toEqual([{ name: "token", value: "t0p" }]);
  });
});

describe("health", () => {
  it("/healthz and /readyz answer over HTTP", async () => {
    const base = await t.listen();
    expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ status: "ok" });
    expect(await (await fetch(`${base}/readyz`)).json()).toEqual({ status: "ready", database: true, eventBus: true });
  });
});
