// simulateGatewayCall reveals more than the policy set it needs: the connection, the approval
// policies' rules, roles and people. Each is authorized as its own type. Generated from the result
// type in the schema: every field reachable from GatewaySimulation must be classified in
// SIMULATION_FIELDS (a new field fails here until it is), and for every family a field reveals, a
// caller who may simulate but not read that family gets every such field null.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getNamedType, isObjectType, type GraphQLObjectType } from "graphql";
import { createWorld, type World } from "../approvals/world.js";
import { addMember } from "../helpers/fixtures.js";
import { schema } from "../../src/graphql/schema/index.js";
import { SIMULATION_FIELDS } from "../../src/graphql/schema/gateway-policies.js";

let w: World;
beforeAll(async () => {
  w = await createWorld();
});
afterAll(() => w.close());

interface Field {
  key: string;
  path: string[];
}

/** Every field reachable from the type, with its response path, and the selection that asks for all of them. */
function walk(type: GraphQLObjectType, path: string[] = []): { selection: string; fields: Field[] } {
  const fields: Field[] = [];
  const parts: string[] = [];
  for (const [name, field] of Object.entries(type.getFields())) {
    fields.push({ key: `${type.name}.${name}`, path: [...path, name] });
    const inner = getNamedType(field.type);
    if (isObjectType(inner)) {
      const sub = walk(inner, [...path, name]);
      fields.push(...sub.fields);
      parts.push(`${name} { ${sub.selection} }`);
    } else parts.push(name);
  }
  return { selection: parts.join(" "), fields };
}

/** The values at `path` (lists flattened); a null or absent parent yields nothing. */
function at(data: unknown, path: string[]): unknown[] {
  let level: unknown[] = [data];
  for (const key of path) {
    level = level.flatMap((v) => (v == null ? [] : Array.isArray(v) ? v : [v])).map((v) => (v as Record<string, unknown>)[key]);
  }
  return level;
}

const root = schema.getType("GatewaySimulation") as GraphQLObjectType;
const { selection, fields } = walk(root);
const QUERY = `query($input: SimulateGatewayCallInput!) { simulateGatewayCall(input: $input) {
  __typename ... on QuerySimulateGatewayCallSuccess { data { ${selection} } } ... on Error { code message } } }`;

const FAMILIES = [...new Set(Object.values(SIMULATION_FIELDS))].filter((f) => f !== "simulation");
const READ = (resourceType: string) => ({ resourceType, action: "read" }) as never;

async function simulateAs(grants: string[]) {
  const caller = await addMember(w.db, w.org.orgId, { grants: [READ("gateway_policy"), ...grants.map(READ)] });
  const res = await w.t.gql(QUERY, { input: { workspaceId: w.workspace.id, tool: "github.delete_repo", destructive: true } }, caller.token);
  expect(res.errors).toBeUndefined();
  expect(res.data.simulateGatewayCall.__typename).toBe("QuerySimulateGatewayCallSuccess");
  return res.data.simulateGatewayCall.data;
}

describe("simulateGatewayCall authorizes what it reveals as its own type", () => {
  it("every field of the result type is classified, and nothing classified is missing from the schema", () => {
    expect([...new Set(fields.map((f) => f.key))].sort()).toEqual(Object.keys(SIMULATION_FIELDS).sort());
    expect(FAMILIES.sort()).toEqual(["approval_policy", "connection", "member", "role"]);
  });

  it("a caller holding every family sees every revealing field (the scenario reveals each of them)", async () => {
    const data = await simulateAs(FAMILIES);
    expect(data.decision).toBe("APPROVAL_REQUIRED");
    for (const f of fields.filter((f) => SIMULATION_FIELDS[f.key] !== "simulation")) {
      const values = at(data, f.path);
      expect(values.length, f.key).toBeGreaterThan(0);
      for (const v of values) expect(v, f.key).not.toBeNull();
    }
  });

  for (const family of FAMILIES) {
    it(`a caller who may simulate but not read ${family} sees every field revealing it null`, async () => {
      const data = await simulateAs(FAMILIES.filter((f) => f !== family));
      expect(data.decision).toBe("APPROVAL_REQUIRED");
      const guarded = fields.filter((f) => SIMULATION_FIELDS[f.key] === family);
      expect(guarded.length).toBeGreaterThan(0);
      for (const f of guarded) for (const v of at(data, f.path)) expect(v, f.key).toBeNull();
      // And the ids themselves appear nowhere in the answer.
      const text = JSON.stringify(data);
      if (family === "connection") expect(text).not.toContain(w.connection.id);
      if (family === "approval_policy") expect(text).not.toContain(w.policy.id), expect(text).not.toContain(w.policy.name);
      if (family === "member") for (const r of w.reviewers) expect(text).not.toContain(r.userId);
    });
  }
});
