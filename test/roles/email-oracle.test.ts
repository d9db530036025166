// Nothing of one organization reaches another through a member's email.
// Organization B adding an email organization A already uses gets exactly what it gets for an
// email nobody uses: its own row, the name B supplied, an id A never sees.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";

let t: TestApp;
let a: OrgFixture;
let b: OrgFixture;

beforeAll(async () => {
  t = await startTestApp();
  [a, b] = [await createOrg(t.db), await createOrg(t.db)];
});
afterAll(() => t.close());

const ADD = `mutation($input: AddMemberInput!) { addMember(input: $input) {
  __typename ... on MutationAddMemberSuccess { data { user { id name email } } } ... on Error { code message } } }`;

describe("adding a member by email", () => {
  it("answers another organization's email exactly like an unused one: B's name, B's own id", async () => {
    const shared = `shared-${Date.now()}@example.com`;
    const inA = await t.gql(ADD, { input: { email: shared, name: "Alice of A" } }, a.adminToken);
    const aUser = inA.data.addMember.data.user;
    expect(aUser.name).toBe("Alice of A");

    const inB = await t.gql(ADD, { input: { email: shared, name: "Whoever B typed" } }, b.adminToken);
    const fresh = await t.gql(ADD, { input: { email: `fresh-${Date.now()}@example.com`, name: "Whoever B typed" } }, b.adminToken);
    const bUser = inB.data.addMember.data.user;
    expect(bUser).toEqual({ id: expect.any(String), name: "Whoever B typed", email: shared });
    expect(bUser.id).not.toBe(aUser.id);
    expect(JSON.stringify(inB)).not.toContain("Alice of A");
    // Same shape, same fields as for an email nobody uses: no oracle.
    expect(Object.keys(inB.data.addMember.data.user)).toEqual(Object.keys(fresh.data.addMember.data.user));

    // Neither org sees the other's row: A's member list and B's stay apart.
    const members = async (token: string) =>
      (await t.gql(`{ members { user { id name } } }`, {}, token)).data.members.map((m: any) => m.user);
    expect(await members(a.adminToken)).toContainEqual({ id: aUser.id, name: "Alice of A" });
    expect(await members(a.adminToken)).not.toContainEqual(expect.objectContaining({ id: bUser.id }));
    expect(await members(b.adminToken)).not.toContainEqual(expect.objectContaining({ id: aUser.id }));

    // A's row is untouched by B's add.
    expect((await t.db.prisma.user.findUniqueOrThrow({ where: { id: aUser.id } })).name).toBe("Alice of A");
  });

  it("the same email twice in one organization is a conflict (only that organization's members are looked at)", async () => {
    const email = `twice-${Date.now()}@example.com`;
    expect((await t.gql(ADD, { input: { email, name: "One" } }, b.adminToken)).data.addMember.__typename).toBe("MutationAddMemberSuccess");
    const again = await t.gql(ADD, { input: { email, name: "Two" } }, b.adminToken);
    expect(again.data.addMember).toMatchObject({ __typename: "ConflictError" });
  });
});
