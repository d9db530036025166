// A blank id names no row: for EVERY mutation and EVERY ID input it takes (an argument, or a
// field at any depth of its input objects), generated from the live schema by introspection, ""
// (and "   ") gets a typed ValidationError naming that input — never success, never NotFound,
// and never read as "absent" (addMember(roleId: "") used to add a member with no role).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GraphQLSchema } from "graphql";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { fetchSchema, fieldOf, operationFor, slotsOf, variablesFor, type Slot } from "./generate.js";

let t: TestApp;
let org: OrgFixture;
let baseUrl: string;
let schema: GraphQLSchema;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  baseUrl = await t.listen();
  schema = await fetchSchema(baseUrl, org.adminToken);
});
afterAll(() => t?.close());

async function http(query: string, variables: Record<string, unknown>) {
  const res = await fetch(`${baseUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${org.adminToken}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as { data?: Record<string, any> | null; errors?: Array<{ message: string; extensions?: Record<string, unknown> }> };
}

const idSlots = (): Slot[] => slotsOf(schema, "mutation").filter((s) => s.scalar === "ID");

describe("a blank id is a ValidationError naming the field, on every mutation that takes an id", () => {
  it("the generated cases cover every mutation ID input (addMember's roleId among them)", () => {
    const slots = idSlots();
    expect(slots.length).toBeGreaterThan(40);
    expect(slots.map((s) => `${s.field}:${s.path}`)).toContain("addMember:input.roleId");
  });

  for (const [label, blank] of [["empty", ""], ["spaces only", "   "]] as const) {
    it(`an ${label} id, for every mutation ID input`, async () => {
      const members = await t.db.prisma.membership.count();
      for (const slot of idSlots()) {
        const vars = variablesFor(fieldOf(schema, "mutation", slot.field), slot, blank);
        const answer = await http(operationFor(schema, "mutation", slot.field, vars), vars);
        const where = `${slot.field} ${slot.path}: ${JSON.stringify(answer)}`;
        const payload = answer.data?.[slot.field];
        if (payload && typeof payload === "object" && "__typename" in payload && payload.__typename === "ValidationError") {
          expect(payload.issues, where).toContainEqual(expect.objectContaining({ field: slot.path, code: "blank" }));
        } else {
          // A mutation without a ValidationError in its union answers the same refusal as a top-level error.
          expect(answer.errors?.[0]?.extensions?.code, where).toBe("VALIDATION_FAILED");
          expect(answer.errors?.[0]?.message, where).toContain(`${slot.path}: must not be blank`);
        }
      }
      // Nothing was written by any of them (addMember's blank role never added a member).
      expect(await t.db.prisma.membership.count()).toBe(members);
    });
  }

  it("addMember(roleId: \"\") adds no member; an unknown role id stays NotFound", async () => {
    const ADD = `mutation($input: AddMemberInput!) { addMember(input: $input) { __typename ... on ValidationError { issues { field code } } ... on Error { code } } }`;
    const blank = await t.gql(ADD, { input: { email: "blank-role@test.local", name: "Blank", roleId: "" } }, org.adminToken);
    expect(blank.data.addMember).toEqual({ __typename: "ValidationError", code: "VALIDATION_FAILED", issues: [{ field: "input.roleId", code: "blank" }] });
    const unknown = await t.gql(ADD, { input: { email: "blank-role@test.local", name: "Blank", roleId: "no-such-role" } }, org.adminToken);
    expect(unknown.data.addMember.__typename).toBe("NotFoundError");
    expect(await t.db.prisma.user.count({ where: { email: "blank-role@test.local" } })).toBe(0);
  });
});
