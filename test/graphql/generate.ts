// Operations generated from the executable schema (never listed by hand): every field reachable
// from a root field, and every path from a root field to a type. Used by every-field.test.ts and
// type-paths.test.ts.
import {
  getNamedType,
  isInterfaceType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  isUnionType,
  Lexer,
  Source,
  TokenKind,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLOutputType,
} from "graphql";
import { schema } from "../../src/graphql/schema/index.js";
import { OPERATION_LIMITS } from "../../src/app.js";
import { costLimitRule } from "@escape.tech/graphql-armor-cost-limit";
import { parse, validate } from "graphql";
import type { World } from "./world.js";

export { schema };

/** A literal for a required argument, or undefined when the world has nothing to give it. */
export type ArgFiller = (type: string, field: string, arg: string) => string | undefined;

/** The world's ids for required arguments, by argument name and the field it is on. */
export function argsFrom(w: World): ArgFiller {
  const q = (s: string) => JSON.stringify(s);
  return (type, field, arg) => {
    if (arg === "id") {
      const byField: Record<string, string> = {
        stack: w.ids.stack,
        workspace: w.ids.workspace,
        plan: w.ids.plan,
        resourcePolicy: w.ids.resourcePolicy,
        approvalRequest: w.ids.approvalRequest,
        approvalPolicy: w.ids.approvalPolicy,
        webhook: w.ids.webhook,
        cloudIntegration: w.ids.cloudIntegration,
        prPreview: w.ids.prPreview,
      };
      return type === "Query" && byField[field] ? q(byField[field]) : undefined;
    }
    const byArg: Record<string, string> = {
      workspaceId: q(w.ids.workspace),
      roleId: q(w.ids.role),
      planId: q(w.ids.plan),
      stackName: q(w.stackName),
      addresses: `[${q("aws_db_instance.ledger")}]`,
      requestId: q(w.ids.approvalRequest),
    };
    return byArg[arg];
  };
}

/** `(a: 1, b: 2)` for the field's required arguments, or null when one cannot be filled. */
function argsOf(parent: string, field: GraphQLField<unknown, unknown>, fill: ArgFiller): string | null {
  const parts: string[] = [];
  for (const arg of field.args) {
    if (!isNonNullType(arg.type) || arg.defaultValue !== undefined) continue;
    const value = fill(parent, field.name, arg.name);
    if (value === undefined) return null;
    parts.push(`${arg.name}: ${value}`);
  }
  return parts.length ? `(${parts.join(", ")})` : "";
}

/** The lexer's token count, as the maxTokens limit counts it. */
export function tokenCount(document: string): number {
  const lexer = new Lexer(new Source(document));
  let n = 0;
  while (lexer.advance().kind !== TokenKind.EOF) n += 1;
  return n;
}

const objectTypesOf = (type: GraphQLNamedType): GraphQLObjectType[] =>
  isObjectType(type) ? [type] : isUnionType(type) || isInterfaceType(type) ? [...schema.getPossibleTypes(type)] : [];

/**
 * Every field of `type` to `depth` levels, each type at most once on a path (the schema's cycles
 * end there), unions and interfaces through inline fragments on each member.
 */
export function fullSelection(type: GraphQLNamedType, depth: number, fill: ArgFiller, onPath: ReadonlySet<string> = new Set()): string {
  if (isLeafType(type)) return "";
  const members = objectTypesOf(type);
  const parts: string[] = ["__typename"];
  for (const member of members) {
    const fields: string[] = [];
    for (const field of Object.values(member.getFields())) {
      const named = getNamedType(field.type);
      const args = argsOf(member.name, field, fill);
      if (args === null) continue;
      if (isLeafType(named)) {
        fields.push(`${field.name}${args}`);
        continue;
      }
      if (depth <= 1 || onPath.has(named.name)) continue;
      fields.push(`${field.name}${args} { ${fullSelection(named, depth - 1, fill, new Set([...onPath, member.name]))} }`);
    }
    if (fields.length === 0) continue;
    parts.push(members.length === 1 && member === type ? fields.join(" ") : `... on ${member.name} { ${fields.join(" ")} }`);
  }
  return parts.join(" ");
}

export interface Operation {
  /** Root field, then the fields down to the node this operation selects in full. */
  path: string[];
  document: string;
}

const TOKEN_BUDGET = Math.floor(OPERATION_LIMITS.maxTokens * 0.8);
const COST_RULE = costLimitRule({ maxCost: Math.floor(OPERATION_LIMITS.maxCost * 0.9), ignoreIntrospection: true });

/** Within the server's token and cost limits (the cost computed by the server's own rule). */
export function fits(document: string): boolean {
  if (tokenCount(document) > TOKEN_BUDGET) return false;
  try {
    return validate(schema, parse(document), [COST_RULE]).length === 0;
  } catch {
    return false; // the rule throws its "limit exceeded" error
  }
}

/**
 * Operations that together select every field reachable from `root.<field>` down to `depth`
 * levels: one operation when it fits the token limit, else one per child subtree (the prefix
 * down to it is the path), recursively.
 */
export function operationsFor(rootType: GraphQLObjectType, fieldName: string, depth: number, fill: ArgFiller, opKind: "query" | "mutation", rootArgs?: string): Operation[] {
  const field = rootType.getFields()[fieldName]!;
  const args = rootArgs ?? argsOf(rootType.name, field, fill);
  if (args === null) return [];
  const out: Operation[] = [];
  const wrap = (prefix: string[], inner: string) => {
    let doc = inner;
    for (let i = prefix.length - 1; i >= 0; i--) doc = `${prefix[i]} { ${doc} }`;
    return `${opKind} { ${doc} }`;
  };
  const walk = (type: GraphQLNamedType, prefix: string[], names: string[], levels: number, onPath: Set<string>) => {
    if (isLeafType(type)) {
      // A leaf at the root: the field itself, no selection.
      out.push({ path: names, document: `${opKind} { ${prefix.join(" { ")} ${" }".repeat(prefix.length - 1)} }` });
      return;
    }
    const whole = wrap(prefix, fullSelection(type, levels, fill, onPath));
    if (levels <= 1 || fits(whole)) {
      out.push({ path: names, document: whole });
      return;
    }
    // Too large: the leaves here, and each object child as its own operation(s).
    out.push({ path: names, document: wrap(prefix, fullSelection(type, 1, fill, onPath)) });
    for (const member of objectTypesOf(type)) {
      for (const child of Object.values(member.getFields())) {
        const named = getNamedType(child.type);
        if (isLeafType(named) || onPath.has(named.name)) continue;
        const childArgs = argsOf(member.name, child, fill);
        if (childArgs === null) continue;
        // Through a union member: `... on Member { child`, closed by balance() below.
        const step = member !== type ? `... on ${member.name} { ${child.name}${childArgs}` : `${child.name}${childArgs}`;
        walk(named, [...prefix, step], [...names, child.name], levels - 1, new Set([...onPath, member.name]));
      }
    }
  };
  walk(getNamedType(field.type), [`${fieldName}${args}`], [fieldName], depth, new Set());
  // Inline fragments opened in a prefix need their own closing brace: balance them.
  return out.map((o) => ({ ...o, document: balance(o.document) }));
}

function balance(document: string): string {
  let open = 0;
  for (const ch of document) open += ch === "{" ? 1 : ch === "}" ? -1 : 0;
  return open > 0 ? document + " }".repeat(open) : document;
}

/** Every path from a Query root field to `target`, at most `hops` object hops, each type once. */
export function pathsTo(target: string, hops: number, fill: ArgFiller): string[][] {
  const query = schema.getQueryType()!;
  const paths: string[][] = [];
  const walk = (type: GraphQLObjectType, steps: string[], seen: Set<string>) => {
    if (steps.length > hops) return;
    for (const field of Object.values(type.getFields())) {
      const named = getNamedType(field.type);
      if (!isObjectType(named)) continue;
      const args = argsOf(type.name, field, fill);
      if (args === null) continue;
      const step = `${field.name}${args}`;
      if (named.name === target) paths.push([...steps, step]);
      else if (!seen.has(named.name)) walk(named, [...steps, step], new Set([...seen, named.name]));
    }
  };
  walk(query, [], new Set(["Query"]));
  return paths;
}

/** The query for a path, selecting `leaf` on the last step. */
export function pathQuery(path: string[], leaf: string): string {
  let doc = leaf;
  for (let i = path.length - 1; i >= 0; i--) doc = `${path[i]} { ${doc} }`;
  return `query { ${doc} }`;
}

/** The field names of a path step (`workspace(id: "x")` → `workspace`). */
export const stepName = (step: string) => step.replace(/\(.*$/, "");

/** Every value at the end of `path` in `data` (lists flattened, nulls dropped). */
export function valuesAt(data: unknown, names: string[]): unknown[] {
  let current: unknown[] = [data];
  for (const name of names) {
    const next: unknown[] = [];
    for (const value of current) {
      if (value === null || value === undefined) continue;
      const child = (value as Record<string, unknown>)[name];
      if (Array.isArray(child)) next.push(...child.filter((c) => c !== null && c !== undefined));
      else if (child !== null && child !== undefined) next.push(child);
    }
    current = next;
  }
  return current;
}

/** The type a field returns, unwrapped. */
export const namedTypeOf = (type: GraphQLOutputType) => getNamedType(type);
export { isListType };
