// Every keyset-paged list pages the same way (src/graphql/keyset.ts): its cursor is the row's name
// (held calls: their creation time and id, test/approvals/paging.test.ts), opaque; `first` is held
// to 1..100; `hasPreviousPage` says whether `after` was given; a cursor this API did not issue is
// refused. The lists are generated from the schema: every Query field returning a connection is
// either keyset-paged by name (and seeded below) or named with its key and where it is tested.
import { isObjectType } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { schema } from "../../src/graphql/schema/index.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";

let t: TestApp;
let org: OrgFixture;
let stackId: string;

/** Each keyset-paged Query field: how to seed one row of it with a given name. */
const KEYSET: Record<string, (name: string) => Promise<unknown>> = {
  stacks: (name) => t.db.prisma.stack.create({ data: { orgId: org.orgId, name } }),
  workspaces: (name) => t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId, name } }),
  resourcePolicies: (name) => t.db.prisma.resourcePolicy.create({ data: { orgId: org.orgId, name } }),
  cloudIntegrations: (name) =>
    t.db.prisma.cloudIntegration.create({ data: { orgId: org.orgId, stackId, name, provider: "aws", identity: `arn:aws:iam::1:role/${name}` } }),
};
/** Keyset-paged Query connections whose key is not the name, and where they are tested. */
const OTHER_PAGING: Record<string, string> = {
  approvalInbox: "newest first by creation time, then id: test/approvals/paging.test.ts",
  approvalRequests: "newest first by creation time, then id: test/approvals/paging.test.ts",
};

const queryConnections = Object.values(schema.getQueryType()!.getFields())
  .filter((f) => {
    const type = schema.getType(String(f.type).replace(/[![\]]/g, ""));
    return isObjectType(type) && type.name.endsWith("Connection") && f.args.some((a) => a.name === "after");
  })
  .map((f) => f.name)
  .sort();

const cursorOf = (name: string) => Buffer.from(`k:${name}`, "utf8").toString("base64url");
const list = (field: string) =>
  `query($first: Int, $after: String) { ${field}(first: $first, after: $after) {
     edges { cursor node { name } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  stackId = (await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: "ks-home" } })).id;
});
afterAll(() => t.close());

describe("keyset-paged connections", () => {
  it("every Query connection is keyset-paged by name or named with its key", () => {
    expect(queryConnections.length).toBeGreaterThan(0);
    expect(queryConnections).toEqual(Object.keys({ ...KEYSET, ...OTHER_PAGING }).sort());
  });

  describe.each(Object.keys(KEYSET))("%s", (field) => {
    it("pages by name: each cursor is the name, a page of one at a time walks every row once, in order", async () => {
      for (const n of ["a", "b", "c"]) await KEYSET[field]!(`ks-${field}-${n}`);
      const seen: string[] = [];
      let after: string | null = null;
      for (let page = 0; page < 50; page++) {
        const res: any = await t.gql(list(field), { first: 1, after }, org.adminToken);
        expect(res.errors).toBeUndefined();
        const { edges, pageInfo } = res.data[field];
        expect(edges).toHaveLength(1);
        expect(edges[0].cursor).toBe(cursorOf(edges[0].node.name));
        expect(pageInfo).toMatchObject({ hasPreviousPage: after !== null, startCursor: edges[0].cursor, endCursor: edges[0].cursor });
        seen.push(edges[0].node.name);
        if (!pageInfo.hasNextPage) break;
        after = pageInfo.endCursor;
      }
      expect(seen).toEqual([...seen].sort());
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen).toEqual(expect.arrayContaining([`ks-${field}-a`, `ks-${field}-b`, `ks-${field}-c`]));
    });

    it("first is held to 1..100: 0 answers one row, 1000 at most a hundred", async () => {
      const none: any = await t.gql(list(field), { first: 0 }, org.adminToken);
      expect(none.data[field].edges).toHaveLength(1);
      for (let i = 0; i < 101; i++) await KEYSET[field]!(`ks-${field}-bulk-${String(i).padStart(3, "0")}`);
      const many: any = await t.gql(list(field), { first: 1000 }, org.adminToken);
      expect(many.data[field].edges).toHaveLength(100);
      expect(many.data[field].pageInfo.hasNextPage).toBe(true);
    });

    it("an empty page after the last row has no cursors", async () => {
      const res: any = await t.gql(list(field), { first: 1, after: cursorOf("zzzz") }, org.adminToken);
      expect(res.data[field]).toEqual({
        edges: [],
        pageInfo: { hasNextPage: false, hasPreviousPage: true, startCursor: null, endCursor: null },
      });
    });

    it("a cursor this API did not issue is refused as invalid_cursor on after", async () => {
      const res: any = await t.gql(list(field), { first: 1, after: Buffer.from("o:3").toString("base64url") }, org.adminToken);
      expect(res.data?.[field] ?? null).toBeNull();
      expect(JSON.stringify(res.errors)).toContain("This cursor was not issued by this API.");
    });
  });
});
