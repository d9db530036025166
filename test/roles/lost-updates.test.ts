// Whole-set replaces name the revision they read: stack labels, stack authz
// groups and the organization's protected label keys. Two editors who read the same revision
// and write concurrently: exactly one wins, the other gets ConflictError with the current
// revision, and nothing the winner wrote is lost.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";

let t: TestApp;
let org: OrgFixture;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
});
afterAll(() => t.close());

const UPDATE = `mutation($input: UpdateStackInput!) { updateStack(input: $input) {
  __typename ... on MutationUpdateStackSuccess { data { revision labels authzGroups } }
  ... on ConflictError { currentRevision } ... on ValidationError { issues { field code } } } }`;
const PROTECT = `mutation($keys: [String!]!, $revision: Int!) { setProtectedLabelKeys(keys: $keys, revision: $revision) {
  __typename ... on MutationSetProtectedLabelKeysSuccess { data } ... on ConflictError { currentRevision } } }`;

let n = 0;
async function stack() {
  const name = `lost-${process.pid}-${++n}`;
  const created = await t.gql(
    `mutation($input: CreateStackInput!) { createStack(input: $input) { __typename ... on MutationCreateStackSuccess { data { id revision } } } }`,
    { input: { name, labels: { team: "a" } } },
    org.adminToken,
  );
  return created.data.createStack.data as { id: string; revision: number };
}

describe("two concurrent editors of one whole set", () => {
  for (const [field, a, b] of [
    ["labels", { team: "a", env: "prod" }, { team: "a", owner: "sre" }],
    ["authzGroups", ["team-a"], ["team-b"]],
  ] as const) {
    it(`stack ${field}: one wins, the other gets ConflictError with the current revision`, async () => {
      const s = await stack();
      const [r1, r2] = await Promise.all([
        t.gql(UPDATE, { input: { id: s.id, [field]: a, revision: s.revision } }, org.adminToken),
        t.gql(UPDATE, { input: { id: s.id, [field]: b, revision: s.revision } }, org.adminToken),
      ]);
      const answers = [r1.data.updateStack, r2.data.updateStack];
      const won = answers.filter((x) => x.__typename === "MutationUpdateStackSuccess");
      const lost = answers.filter((x) => x.__typename === "ConflictError");
      expect(won).toHaveLength(1);
      expect(lost).toEqual([{ __typename: "ConflictError", currentRevision: s.revision + 1 }]);
      const stored = await t.db.prisma.stack.findUniqueOrThrow({ where: { id: s.id } });
      expect(stored.revision).toBe(s.revision + 1);
      expect((stored as any)[field]).toEqual(won[0].data[field]);
    });
  }

  it("a whole-set replace without a revision is a ValidationError naming input.revision; description alone needs none", async () => {
    const s = await stack();
    const res = await t.gql(UPDATE, { input: { id: s.id, labels: {} } }, org.adminToken);
    expect(res.data.updateStack).toEqual({ __typename: "ValidationError", issues: [{ field: "input.revision", code: "required" }] });
    const desc = await t.gql(UPDATE, { input: { id: s.id, description: "x" } }, org.adminToken);
    expect(desc.data.updateStack.__typename).toBe("MutationUpdateStackSuccess");
    const stale = await t.gql(UPDATE, { input: { id: s.id, labels: {}, revision: s.revision } }, org.adminToken);
    expect(stale.data.updateStack).toEqual({ __typename: "ConflictError", currentRevision: s.revision + 1 });
  });

  it("the protected-key set: one wins, the other gets ConflictError; the revision is readable", async () => {
    const rev = (await t.gql(`{ protectedLabelKeysRevision }`, {}, org.adminToken)).data.protectedLabelKeysRevision as number;
    const [r1, r2] = await Promise.all([
      t.gql(PROTECT, { keys: ["env"], revision: rev }, org.adminToken),
      t.gql(PROTECT, { keys: ["owner"], revision: rev }, org.adminToken),
    ]);
    const answers = [r1.data.setProtectedLabelKeys, r2.data.setProtectedLabelKeys];
    const won = answers.filter((x) => x.__typename === "MutationSetProtectedLabelKeysSuccess");
    expect(won).toHaveLength(1);
    expect(answers.filter((x) => x.__typename === "ConflictError")).toEqual([{ __typename: "ConflictError", currentRevision: rev + 1 }]);
    const read = await t.gql(`{ protectedLabelKeys protectedLabelKeysRevision }`, {}, org.adminToken);
    expect(read.data).toEqual({ protectedLabelKeys: won[0].data, protectedLabelKeysRevision: rev + 1 });
  });
});
