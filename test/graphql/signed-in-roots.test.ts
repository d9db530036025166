// Generated from the executable schema: every root field (query, mutation, subscription) called
// with no token. A field for a signed-in caller answers exactly one error, the same for all of
// them (code, message, path), before its resolver runs; only the public fields answer without one.
// The signed-in rule is declared once (helpers.ts, SIGNED_IN) and applied by t.withAuth, and this
// pins what it answers on every field it guards, whatever file declares the field.
import { readdirSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLObjectType,
} from "graphql";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { schema } from "./generate.js";

/** The root fields anyone may call: the catalog, which is the same for every organization. */
const PUBLIC = new Set(["Query.permissionCatalog", "Query.permissionTargeting"]);

/**
 * Subscriptions whose refusal reaches the client from their event stream rather than from
 * subscribe (the field's subscribe is a generator or a deferred stream): graphql-js reports such
 * an error without a path. As they answered before the signed-in rule was declared once.
 */
const REFUSED_BY_STREAM = new Set(["Subscription.authzChanged", "Subscription.planGate", "Subscription.workspaceGates", "Subscription.workspacesChanged"]);

const UNAUTHENTICATED = { message: "Send a valid token as `Authorization: Bearer <token>`", extensions: { code: "UNAUTHENTICATED" } };

/** A valid literal of an input type (required parts only): the arguments must pass validation to reach the field. */
function literal(type: GraphQLInputType): string {
  if (isNonNullType(type)) return literal(type.ofType);
  if (isListType(type)) return "[]";
  if (isEnumType(type)) return type.getValues()[0]!.name;
  if (isInputObjectType(type)) {
    const parts = Object.values(type.getFields())
      .filter((f) => isNonNullType(f.type) && f.defaultValue === undefined)
      .map((f) => `${f.name}: ${literal(f.type)}`);
    return `{ ${parts.join(", ")} }`;
  }
  switch (type.name) {
    case "Int":
    case "Float":
      return "1";
    case "Boolean":
      return "true";
    case "DateTime":
      return '"2026-01-01T00:00:00.000Z"';
    case "JSON":
      return "{}";
    default:
      return '"x"';
  }
}

function document(kind: "query" | "mutation" | "subscription", field: GraphQLField<unknown, unknown>): string {
  const args = field.args
    .filter((a) => isNonNullType(a.type) && a.defaultValue === undefined)
    .map((a) => `${a.name}: ${literal(a.type)}`);
  const selection = isLeafType(getNamedType(field.type)) ? "" : " { __typename }";
  return `${kind} { ${field.name}${args.length ? `(${args.join(", ")})` : ""}${selection} }`;
}

const roots: Array<["query" | "mutation" | "subscription", GraphQLObjectType]> = [
  ["query", schema.getQueryType()!],
  ["mutation", schema.getMutationType()!],
  ["subscription", schema.getSubscriptionType()!],
];

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
}, 60_000);
afterAll(() => t.close());

/** Runs one operation with no token; a subscription over HTTP (server-sent events), its first message. */
async function anonymous(kind: string, doc: string): Promise<{ data?: unknown; errors?: any[] }> {
  if (kind !== "subscription") return t.gql(doc, undefined, null);
  const response = await t.app.yoga.fetch("http://localhost/graphql", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ query: doc }),
  });
  const reader = response.body!.getReader();
  let text = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
      const line = text.split("\n").find((l) => l.startsWith("data: "));
      if (line) return JSON.parse(line.slice("data: ".length));
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  throw new Error(`no event in ${JSON.stringify(text)}`);
}

describe("with no token, a root field for a signed-in caller answers UNAUTHENTICATED, the same on every one", () => {
  for (const [kind, type] of roots) {
    for (const name of Object.keys(type.getFields()).sort()) {
      const coordinate = `${type.name}.${name}`;
      if (PUBLIC.has(coordinate)) continue;
      it(coordinate, async () => {
        const field = type.getFields()[name]!;
        const res = await anonymous(kind, document(kind, field));
        expect(res.errors?.map(({ message, extensions, path }) => ({ message, extensions, path }))).toEqual([
          { ...UNAUTHENTICATED, path: REFUSED_BY_STREAM.has(coordinate) ? undefined : [name] },
        ]);
        // Nothing of the field: null, or (a non-null field) no data at all.
        expect(res.data ?? null).toEqual(isNonNullType(field.type) ? null : { [name]: null });
      });
    }
  }
});

describe("the public root fields answer with no token", () => {
  for (const coordinate of PUBLIC) {
    it(coordinate, async () => {
      const [typeName, name] = coordinate.split(".") as [string, string];
      const field = (schema.getType(typeName) as GraphQLObjectType).getFields()[name]!;
      const res = await anonymous("query", document("query", field));
      expect(res.errors).toBeUndefined();
      expect((res.data as Record<string, unknown>)[name]).toBeTruthy();
    });
  }
});

/** Every line of the TypeScript files under `dir` (relative to src/) matching `pattern`, as `file:line: text`. */
function linesMatching(dir: string, pattern: RegExp): string[] {
  const root = new URL("../../src/", import.meta.url);
  const files = (readdirSync(new URL(dir, root), { recursive: true }) as string[]).filter((f) => f.endsWith(".ts"));
  return files.flatMap((f) =>
    readFileSync(new URL(`${dir}${f}`, root), "utf8")
      .split("\n")
      .flatMap((line, i) => (pattern.test(line) ? [`${dir}${f}:${i + 1}: ${line.trim()}`] : [])),
  );
}

describe("every root field for a signed-in caller declares it with t.withAuth(SIGNED_IN), and reads its viewer from the type", () => {
  it("no schema file copies the scope", () => {
    expect(linesMatching("graphql/schema/", /authenticated: true/)).toEqual([]);
  });
  it("no resolver or service asserts the viewer non-null (a SignedInContext or SignedInAuthz has it in the type)", () => {
    expect(linesMatching("", /viewer!/)).toEqual([]);
  });
  it("the schema's own root fields: each is public or guarded by exactly the signed-in scope", () => {
    const unguarded: string[] = [];
    for (const [, type] of roots) {
      for (const [name, field] of Object.entries(type.getFields())) {
        const scopes = (field.extensions as { pothosOptions?: { authScopes?: unknown } } | undefined)?.pothosOptions?.authScopes;
        const coordinate = `${type.name}.${name}`;
        if (PUBLIC.has(coordinate) ? scopes !== undefined : JSON.stringify(scopes) !== '{"authenticated":true}') unguarded.push(coordinate);
      }
    }
    expect(unguarded).toEqual([]);
  });
});
