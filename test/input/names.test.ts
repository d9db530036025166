// Names, as a class: every String input of every mutation that is a name, title, environment,
// key or email (by its field name, generated from the live schema by introspection) refuses an
// empty value and a 10,000-character value with a ValidationError naming exactly that input,
// and nothing is written.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GraphQLSchema } from "graphql";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { fetchSchema, fieldOf, operationFor, slotsOf, variablesFor, type Slot } from "./generate.js";

let t: TestApp;
let org: OrgFixture;
let schema: GraphQLSchema;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  schema = await fetchSchema(await t.listen(), org.adminToken);
});
afterAll(() => t?.close());

const NAME_LIKE = /(name|title|environment|key|email)s?$/i;

function nameSlots(): Slot[] {
  return slotsOf(schema, "mutation").filter((s) => s.scalar === "String" && NAME_LIKE.test(s.leafName));
}

async function issuesFor(slot: Slot, value: string): Promise<string[] | string> {
  const vars = variablesFor(fieldOf(schema, "mutation", slot.field), slot, value);
  const res = await t.gql(operationFor(schema, "mutation", slot.field, vars), vars, org.adminToken);
  const payload = res.data?.[slot.field];
  if (payload?.__typename === "ValidationError") return payload.issues.map((i: { field: string }) => i.field);
  return JSON.stringify(res);
}

describe("every name, title, environment, key and email input of every mutation", () => {
  it("the generated cases cover the mutations that take names", () => {
    const fields = new Set(nameSlots().map((s) => s.field));
    for (const f of ["createStack", "createWorkspace", "createRole", "addMember", "createApiToken", "createApprovalPolicy", "createGroupBinding", "setProtectedLabelKeys"]) {
      expect(fields).toContain(f);
    }
  });

  for (const [label, value] of [
    ["empty", ""],
    ["blank", "   "],
    ["10,000 characters", "x".repeat(10_000)],
  ] as const) {
    it(`refuses a ${label} value with a ValidationError naming the field`, async () => {
      const failures: string[] = [];
      for (const slot of nameSlots()) {
        const issues = await issuesFor(slot, value);
        if (typeof issues === "string" || !issues.includes(slot.path)) failures.push(`${slot.field} ${slot.path}: ${typeof issues === "string" ? issues : issues.join(", ")}`);
      }
      expect(failures).toEqual([]);
    });
  }

  it("nothing was written by the refused calls", async () => {
    expect(await t.db.prisma.stack.count({ where: { orgId: org.orgId } })).toBe(0);
    expect(await t.db.prisma.apiToken.count({ where: { userId: org.adminId } })).toBe(1);
  });
});
