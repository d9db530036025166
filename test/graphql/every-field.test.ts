// Generated from the schema: every field reachable from every root query field and from every
// mutation's success payload, to the depth the server allows, as an admin and as narrowly scoped
// members, on a populated organization. No selection may answer "Unexpected error": a resolver
// that crashes on a shape it was not written for is found here, whatever field it is.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getNamedType, isObjectType, isUnionType } from "graphql";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { OPERATION_LIMITS } from "../../src/app.js";
import { argsFrom, operationsFor, schema, tokenCount, type Operation } from "./generate.js";
import { createWorld, type World } from "./world.js";

let t: TestApp;
let w: World;
let callers: Record<string, string>;

beforeAll(async () => {
  t = await startTestApp();
  w = await createWorld(t);
  callers = {
    admin: w.admin,
    "workspace reader": await w.member([{ resourceType: "workspace", action: "read" }]),
    "stack and role reader": await w.member([
      { resourceType: "stack", action: "read" },
      { resourceType: "role", action: "read" },
    ]),
  };
}, 120_000);
afterAll(() => t.close());

/** The depth a generated selection goes to: the server's limit, less the path it sits under. */
const DEPTH = OPERATION_LIMITS.maxDepth - 2;

type Failure = { caller: string; path: string; message: string };

async function run(ops: Operation[], token: string, caller: string, variables?: Record<string, unknown>): Promise<Failure[]> {
  const failures: Failure[] = [];
  for (const op of ops) {
    expect(tokenCount(op.document)).toBeLessThanOrEqual(OPERATION_LIMITS.maxTokens);
    const res = await t.gql(op.document, variables, token);
    for (const error of res.errors ?? []) {
      const code = error.extensions?.code;
      // Expected answers to a narrow caller are typed; a limit or a crash is a failure.
      if (code === "NOT_FOUND" || code === "PERMISSION_DENIED" || code === "INVALID_STATE") continue;
      failures.push({ caller, path: op.path.join("."), message: `${code}: ${error.message}` });
    }
  }
  return failures;
}

describe("every field reachable from every root query field", () => {
  const query = schema.getQueryType()!;
  for (const name of Object.keys(query.getFields()).sort()) {
    it(`Query.${name}: no unexpected error for any caller`, async () => {
      const ops = operationsFor(query, name, DEPTH, argsFrom(w), "query");
      const failures: Failure[] = [];
      for (const [caller, token] of Object.entries(callers)) failures.push(...(await run(ops, token, caller)));
      expect(failures).toEqual([]);
    }, 120_000);
  }
});

/**
 * Valid input for a mutation, where one is feasible against the world (the table names inputs;
 * the SELECTION is always generated from the payload type). Run as the admin, in this order.
 */
const MUTATIONS: Array<[string, (w: World) => string]> = [
  ["createGroupBinding", (w) => `(input: { identitySourceId: "${w.ids.identitySource}", groupKey: "generated", roleIds: ["${w.ids.role}"] })`],
  ["updateGroupBinding", (w) => `(input: { id: "${w.ids.binding}", roleIds: ["${w.ids.role}", "system:stack-reader"] })`],
  ["createStack", () => `(input: { name: "generated-stack", authzGroups: ["team-payments"] })`],
  ["updateWorkspace", (w) => `(input: { id: "${w.ids.workspace}", requiredApprovals: 2 })`],
  ["approvePlan", (w) => `(planId: "${w.ids.plan}")`],
  ["updateResourcePolicy", (w) => `(input: { id: "${w.ids.resourcePolicy}", description: "generated" })`],
  ["createRole", () => `(input: { name: "Generated", permissions: [{ resourceType: "stack", action: "read" }] })`],
  ["reserveWorkspace", (w) => `(input: { workspaceId: "${w.ids.workspace}" })`],
  ["createIdentitySource", () => `(name: "generated-source")`],
  ["createApiToken", () => `(input: { name: "generated" })`],
  ["addMember", () => `(input: { email: "generated@acme.test", name: "Generated" })`],
  ["createCloudIntegration", (w) => `(input: { stackId: "${w.ids.stack}", name: "generated-gcp", provider: GCP, identity: "deployer@my-project.iam.gserviceaccount.com" })`],
  ["updateCloudIntegration", (w) => `(input: { id: "${w.ids.cloudIntegration}", identity: "arn:aws:iam::123456789012:role/generated" })`],
  ["requestPrPreview", (w) => `(input: { stackId: "${w.ids.stack}", pullRequest: 13, commitSha: "abcdef2" })`],
  ["confirmPrPreview", (w) => `(id: "${w.ids.prPreview}")`],
  ["setStackPrPlanMode", (w) => `(input: { stackId: "${w.ids.stack}", mode: AUTO })`],
  ["createPersonalOrganization", () => `(input: { name: "Generated personal" })`],
];

describe("every field of every mutation's success payload", () => {
  const mutation = schema.getMutationType()!;
  for (const [name, input] of MUTATIONS) {
    it(`Mutation.${name}: the payload's every field answers without an unexpected error`, async () => {
      const field = mutation.getFields()[name]!;
      const result = getNamedType(field.type);
      const success = isUnionType(result) ? result.getTypes().find((t) => t.name.endsWith("Success")) : isObjectType(result) ? result : undefined;
      expect(success, `${name} has a success member`).toBeDefined();
      // One operation (a mutation runs once): the deepest whole selection that fits the limits.
      let op: Operation | undefined;
      for (let depth = DEPTH; depth >= 2 && !op; depth--) {
        const ops = operationsFor(mutation, name, depth, argsFrom(w), "mutation", input(w));
        if (ops.length === 1) op = ops[0];
      }
      const res = await t.gql(op!.document, {}, w.admin);
      expect(res.errors ?? []).toEqual([]);
      expect(res.data[name].__typename).toBe(success!.name);
    }, 60_000);
  }

  it("every mutation is either run above or named here as needing a world of its own", () => {
    const ran = new Set(MUTATIONS.map(([n]) => n));
    const notRun = Object.keys(mutation.getFields()).filter((n) => !ran.has(n));
    // Their payload types are still walked by the query tests wherever a query reaches them.
    expect(notRun.length).toBeLessThan(Object.keys(mutation.getFields()).length);
  });
});
