// Operations generated from the live schema (introspection over HTTP): for each root field, one
// call per String/ID/JSON "slot" (an argument, or a field at any depth of its input objects),
// with every other required input filled with a harmless value.
import {
  buildClientSchema,
  getIntrospectionQuery,
  getNamedType,
  getNullableType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
  isLeafType,
  isUnionType,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLSchema,
  type IntrospectionQuery,
} from "graphql";

export type RootKind = "query" | "mutation" | "subscription";

export interface Slot {
  root: RootKind;
  field: string;
  /** Dotted path as the server names it: `input.rules.0.environments.0`. */
  path: string;
  /** The leaf's scalar: String, ID or JSON. */
  scalar: string;
  /** The leaf's own name (the input field or argument), e.g. `environments`. */
  leafName: string;
}

export async function fetchSchema(baseUrl: string, token: string): Promise<GraphQLSchema> {
  const res = await fetch(`${baseUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: getIntrospectionQuery() }),
  });
  const body = (await res.json()) as { data: IntrospectionQuery };
  return buildClientSchema(body.data);
}

const TEXT_SCALARS = new Set(["String", "ID", "JSON"]);

function rootType(schema: GraphQLSchema, root: RootKind) {
  return root === "query" ? schema.getQueryType() : root === "mutation" ? schema.getMutationType() : schema.getSubscriptionType();
}

/** Every String/ID/JSON leaf reachable from the field's arguments (one list item deep per list). */
export function slotsOf(schema: GraphQLSchema, root: RootKind): Slot[] {
  const slots: Slot[] = [];
  const type = rootType(schema, root);
  if (!type) return slots;
  for (const field of Object.values(type.getFields())) {
    const visit = (t: GraphQLInputType, path: string, leafName: string, seen: Set<string>) => {
      const inner = getNullableType(t);
      if (isListType(inner)) return visit(inner.ofType, `${path}.0`, leafName, seen);
      if (isInputObjectType(inner)) {
        if (seen.has(inner.name)) return;
        for (const f of Object.values(inner.getFields())) visit(f.type, `${path}.${f.name}`, f.name, new Set([...seen, inner.name]));
        return;
      }
      if (isScalarType(inner) && TEXT_SCALARS.has(inner.name)) slots.push({ root, field: field.name, path, scalar: inner.name, leafName });
    };
    for (const arg of field.args) visit(arg.type, arg.name, arg.name, new Set());
  }
  return slots;
}

function defaultLeaf(t: GraphQLInputType): unknown {
  const named = getNamedType(t);
  if (isEnumType(named)) return named.getValues()[0]!.value;
  switch (named.name) {
    case "Int":
      return 1;
    case "Float":
      return 1;
    case "Boolean":
      return false;
    case "DateTime":
      return new Date(Date.now() + 3_600_000).toISOString();
    case "JSON":
      return {};
    default:
      return "x";
  }
}

/** A value of `t` with every required field filled, and `leaf` placed at `rest` (a dotted path). */
function build(t: GraphQLInputType, rest: string[] | null, leaf: unknown): unknown {
  const inner = getNullableType(t);
  if (rest && rest.length === 0) return leaf;
  if (isListType(inner)) {
    // The path's list index (always 0) is consumed here.
    return [build(inner.ofType, rest ? rest.slice(1) : null, leaf)];
  }
  if (isInputObjectType(inner)) {
    const out: Record<string, unknown> = {};
    for (const f of Object.values(inner.getFields())) {
      const onPath = rest && rest[0] === f.name;
      if (onPath) out[f.name] = build(f.type, rest!.slice(1), leaf);
      else if (isNonNullType(f.type) && f.defaultValue === undefined) out[f.name] = build(f.type, null, leaf);
    }
    return out;
  }
  return defaultLeaf(inner);
}

/** Variables for `field` with `leaf` at `slot.path` (or none placed, when slot is null). */
export function variablesFor(field: GraphQLField<unknown, unknown>, slot: Pick<Slot, "path"> | null, leaf: unknown): Record<string, unknown> {
  const segments = slot ? slot.path.split(".") : null;
  const vars: Record<string, unknown> = {};
  for (const arg of field.args) {
    const onPath = segments && segments[0] === arg.name;
    if (onPath) vars[arg.name] = build(arg.type, segments!.slice(1), leaf);
    else if (isNonNullType(arg.type) && arg.defaultValue === undefined) vars[arg.name] = build(arg.type, null, leaf);
  }
  return vars;
}

function selectionFor(field: GraphQLField<unknown, unknown>): string {
  const named = getNamedType(field.type);
  if (isLeafType(named)) return "";
  if (isUnionType(named) && named.getTypes().some((t) => t.name === "ValidationError")) {
    return "{ __typename ... on Error { code message } ... on ValidationError { issues { field code message } } }";
  }
  return "{ __typename }";
}

/** The operation text with one variable per argument present in `vars`. */
export function operationFor(schema: GraphQLSchema, root: RootKind, fieldName: string, vars: Record<string, unknown>): string {
  const field = rootType(schema, root)!.getFields()[fieldName]!;
  const used = field.args.filter((a) => a.name in vars);
  const defs = used.map((a) => `$${a.name}: ${String(a.type)}`).join(", ");
  const call = used.map((a) => `${a.name}: $${a.name}`).join(", ");
  return `${root}${defs ? `(${defs})` : ""} { ${fieldName}${call ? `(${call})` : ""} ${selectionFor(field)} }`;
}

/** The same operation with every argument written inline as a GraphQL literal. */
export function inlineOperationFor(schema: GraphQLSchema, root: RootKind, fieldName: string, vars: Record<string, unknown>): string {
  const field = rootType(schema, root)!.getFields()[fieldName]!;
  const literal = (value: unknown, t: GraphQLInputType): string => {
    const inner = getNullableType(t);
    if (value === null || value === undefined) return "null";
    if (isListType(inner)) return `[${(value as unknown[]).map((v) => literal(v, inner.ofType)).join(", ")}]`;
    if (isInputObjectType(inner)) {
      const fields = inner.getFields();
      return `{ ${Object.entries(value as Record<string, unknown>).map(([k, v]) => `${k}: ${literal(v, fields[k]!.type)}`).join(", ")} }`;
    }
    if (isEnumType(inner)) return String(value);
    if (isScalarType(inner) && inner.name === "JSON") return jsonLiteral(value);
    return JSON.stringify(value);
  };
  const args = field.args.filter((a) => a.name in vars).map((a) => `${a.name}: ${literal(vars[a.name], a.type)}`);
  return `${root} { ${fieldName}${args.length ? `(${args.join(", ")})` : ""} ${selectionFor(field)} }`;
}

function jsonLiteral(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(jsonLiteral).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    // A GraphQL object literal's keys are names: JSON keys that are not names cannot be inline.
    return `{ ${Object.entries(value).map(([k, v]) => `${k}: ${jsonLiteral(v)}`).join(", ")} }`;
  }
  return JSON.stringify(value);
}

export function fieldOf(schema: GraphQLSchema, root: RootKind, name: string): GraphQLField<unknown, unknown> {
  return rootType(schema, root)!.getFields()[name]!;
}
