// Storable text, as a class: for EVERY root Query, Mutation and Subscription field and EVERY
// String, ID or JSON input it takes (an argument, or a field at any depth of its input objects),
// generated from the live schema by introspection, a NUL, an ESC or an unpaired surrogate gets a
// typed refusal naming that input, over HTTP (variables and inline literals) and over
// graphql-ws, and never "Unexpected error".
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";
import type { GraphQLSchema } from "graphql";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { fetchSchema, fieldOf, inlineOperationFor, operationFor, slotsOf, variablesFor, type Slot } from "./generate.js";

let t: TestApp;
let org: OrgFixture;
let baseUrl: string;
let schema: GraphQLSchema;
let ws: Client;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  baseUrl = await t.listen();
  schema = await fetchSchema(baseUrl, org.adminToken);
  ws = createClient({
    url: `${baseUrl.replace(/^http/, "ws")}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${org.adminToken}` },
    retryAttempts: 0,
    lazy: false,
  });
});
afterAll(async () => {
  await ws?.dispose();
  await t?.close();
});

interface Answer {
  data?: Record<string, any> | null;
  errors?: Array<{ message: string; extensions?: Record<string, unknown> }>;
}

async function http(query: string, variables: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${baseUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${org.adminToken}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as Answer;
}

/**
 * The first result of an operation over graphql-ws. A refused operation (even a subscription)
 * answers one result and completes; one still open after 5 s is reported as such.
 */
function overWs(query: string, variables: Record<string, unknown>): Promise<Answer> {
  return new Promise((resolve) => {
    let first: Answer | null = null;
    const timer = setTimeout(() => {
      dispose();
      resolve(first ?? { errors: [{ message: "no answer within 5 s" }] });
    }, 5000);
    const finish = (answer: Answer) => {
      clearTimeout(timer);
      resolve(answer);
    };
    const dispose = ws.subscribe(
      { query, variables },
      {
        next: (result) => {
          first ??= result as Answer;
        },
        error: (error) => finish({ errors: Array.isArray(error) ? error : [{ message: String((error as Error)?.message ?? error) }] }),
        complete: () => finish(first ?? { errors: [{ message: "completed without a result" }] }),
      },
    );
  });
}

const BAD: Record<string, string> = { NUL: "a\u0000b", ESC: "a\u001b[31mb", "unpaired surrogate": "a\ud800b" };

/** What a slot receives: the bad text itself, or for JSON a value that carries it where it is refused. */
function leafFor(slot: Slot, bad: string): unknown {
  if (slot.scalar !== "JSON") return bad;
  // Inside JSON, string values are data (control characters kept) and keys are identifiers.
  return bad.includes("\u001b") ? { [bad]: "v" } : { k: [bad] };
}

function expectTypedRefusal(answer: Answer, slot: Slot, how: string): void {
  const where = `${slot.root} ${slot.field} ${slot.path} (${how}): ${JSON.stringify(answer)}`;
  for (const error of answer.errors ?? []) {
    expect(error.message, where).not.toMatch(/Unexpected error/);
    expect(error.extensions?.code, where).not.toBe("INTERNAL_SERVER_ERROR");
  }
  if (slot.scalar === "JSON") {
    // The JSON scalar refuses it while the variables or literals are coerced.
    expect(answer.errors?.[0]?.extensions?.code, where).toBe("BAD_USER_INPUT");
    return;
  }
  const payload = answer.data?.[slot.field];
  if (payload && payload.__typename === "ValidationError") {
    expect(payload.issues.map((i: { field: string }) => i.field), where).toContain(slot.path);
    return;
  }
  expect(answer.errors?.[0]?.extensions?.code, where).toBe("VALIDATION_FAILED");
  expect(answer.errors?.[0]?.message, where).toContain(`${slot.path}: must not contain`);
}

describe("every String, ID and JSON input refuses unstorable text with a typed error naming it", () => {
  it("the generated cases cover every root field that takes text (43 mutations and workspace, plan, gate among them)", () => {
    const fields = new Set(["query", "mutation", "subscription"].flatMap((r) => slotsOf(schema, r as Slot["root"]).map((s) => `${s.root}.${s.field}`)));
    expect(fields.size).toBeGreaterThan(60);
    for (const f of ["query.workspace", "query.plan", "query.gate", "mutation.createStack", "subscription.planGate"]) expect(fields).toContain(f);
    expect([...fields].filter((f) => f.startsWith("mutation.")).length).toBeGreaterThanOrEqual(43);
  });

  for (const [label, bad] of Object.entries(BAD)) {
    it(`${label} over HTTP as a variable, for every query and mutation input`, async () => {
      const slots = [...slotsOf(schema, "query"), ...slotsOf(schema, "mutation")];
      expect(slots.length).toBeGreaterThan(100);
      for (const slot of slots) {
        const vars = variablesFor(fieldOf(schema, slot.root, slot.field), slot, leafFor(slot, bad));
        expectTypedRefusal(await http(operationFor(schema, slot.root, slot.field, vars), vars), slot, "HTTP variable");
      }
    });

    it(`${label} over graphql-ws as a variable, for every query, mutation and subscription input`, async () => {
      const slots = [...slotsOf(schema, "query"), ...slotsOf(schema, "mutation"), ...slotsOf(schema, "subscription")];
      for (const slot of slots) {
        const vars = variablesFor(fieldOf(schema, slot.root, slot.field), slot, leafFor(slot, bad));
        expectTypedRefusal(await overWs(operationFor(schema, slot.root, slot.field, vars), vars), slot, "WebSocket variable");
      }
    });
  }

  // GraphQL string literals cannot spell an unpaired surrogate (a syntax error already).
  for (const label of ["NUL", "ESC"]) {
    it(`${label} written inline as a literal, over HTTP and graphql-ws`, async () => {
      const bad = BAD[label]!;
      for (const root of ["query", "mutation", "subscription"] as const) {
        for (const slot of slotsOf(schema, root)) {
          if (slot.scalar === "JSON" && label === "ESC") continue; // a bad key is not a GraphQL name
          const vars = variablesFor(fieldOf(schema, slot.root, slot.field), slot, leafFor(slot, bad));
          const query = inlineOperationFor(schema, slot.root, slot.field, vars);
          if (root !== "subscription") expectTypedRefusal(await http(query, {}), slot, "HTTP literal");
          expectTypedRefusal(await overWs(query, {}), slot, "WebSocket literal");
        }
      }
    });
  }

  it("a field argument below the root is checked too (Workspace.plans(after:))", async () => {
    const ws1 = await t.gql(`mutation { createStack(input: { name: "text-rule" }) { ... on MutationCreateStackSuccess { data { id } } } }`, {}, org.adminToken);
    const stackId = ws1.data.createStack.data.id;
    const created = await t.gql(
      `mutation($s: ID!) { createWorkspace(input: { name: "text-rule", stackId: $s }) { ... on MutationCreateWorkspaceSuccess { data { id } } } }`,
      { s: stackId },
      org.adminToken,
    );
    const id = created.data.createWorkspace.data.id;
    const res = await t.gql(`query($id: ID!, $a: String) { workspace(id: $id) { plans(after: $a) { edges { cursor } } } }`, { id, a: "\u0000" }, org.adminToken);
    expect(res.errors?.[0]).toMatchObject({ extensions: { code: "VALIDATION_FAILED" } });
    expect(res.errors?.[0]?.message).toMatch(/^workspace\.plans\.after: must not contain a NUL/);
  });
});

describe("free text keeps tab and newlines; identifiers do not", () => {
  it("a description with newlines and a tab is stored; a name with a newline is a ValidationError naming input.name", async () => {
    const ok = await t.gql(
      `mutation($i: CreateStackInput!) { createStack(input: $i) { __typename ... on MutationCreateStackSuccess { data { description } } } }`,
      { i: { name: "described", description: "line one\n\tline two\r\n" } },
      org.adminToken,
    );
    expect(ok.data.createStack).toEqual({ __typename: "MutationCreateStackSuccess", data: { description: "line one\n\tline two\r\n" } });
    const bad = await t.gql(
      `mutation($i: CreateStackInput!) { createStack(input: $i) { __typename ... on ValidationError { issues { field code } } } }`,
      { i: { name: "two\nlines" } },
      org.adminToken,
    );
    expect(bad.data.createStack).toEqual({ __typename: "ValidationError", issues: [{ field: "input.name", code: "control_character" }] });
  });

  it("JSON values keep control characters (data); a control character in a JSON key is refused", async () => {
    const ok = await t.gql(
      `mutation($i: CreateStackInput!) { createStack(input: $i) { __typename } }`,
      { i: { name: "json-data", labels: { team: "a" } } },
      org.adminToken,
    );
    expect(ok.data.createStack.__typename).toBe("MutationCreateStackSuccess");
    const bad = await t.gql(`mutation($i: CreateStackInput!) { createStack(input: $i) { __typename } }`, { i: { name: "json-key", labels: { "te\u001bam": "a" } } }, org.adminToken);
    expect(bad.errors?.[0]?.extensions?.code).toBe("BAD_USER_INPUT");
    expect(await t.db.prisma.stack.count({ where: { name: "json-key" } })).toBe(0);
  });
});
