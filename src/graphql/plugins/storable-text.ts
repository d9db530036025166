// One boundary for storable text: every String and ID argument of every field, at any depth of
// its input objects and lists, whether it came as a variable or as an inline literal, over HTTP
// or graphql-ws. It runs on the coerced arguments, so it sees exactly what a resolver would.
// JSON arguments are checked by the JSON scalar itself (builder.ts), with the same rule.
//
// A Pothos plugin listed after ErrorsPlugin: its ValidationError (naming the argument's path)
// becomes the mutation's typed `ValidationError` result; queries and subscriptions answer it
// as a top-level error with code VALIDATION_FAILED (app.ts keeps AppError codes). Never a
// resolver, never PostgreSQL: a NUL cannot reach the database to fail as "Unexpected error".
import SchemaBuilder, { BasePlugin, type PothosOutputFieldConfig, type SchemaTypes } from "@pothos/core";
import {
  getNullableType,
  isInputObjectType,
  isListType,
  isScalarType,
  type GraphQLArgument,
  type GraphQLFieldResolver,
  type GraphQLInputType,
  type GraphQLResolveInfo,
} from "graphql";
import { textProblem, type TextKind } from "../../domain/text.js";
import { ValidationError, type FieldIssue } from "../../errors.js";

/**
 * String inputs that are free text (tab and newlines allowed). Every other String, and every
 * ID, is an identifier: a new field is strict until it is listed here.
 */
export const FREE_TEXT_FIELDS: ReadonlySet<string> = new Set(["description", "comment"]);

/** The rule a String/ID input named `name` follows; null for other scalars (JSON checks itself). */
export function textKindOf(scalar: string, name: string): TextKind | null {
  if (scalar === "ID") return "identifier";
  if (scalar === "String") return FREE_TEXT_FIELDS.has(name) ? "text" : "identifier";
  return null;
}

function walk(value: unknown, type: GraphQLInputType, name: string, path: string, issues: FieldIssue[]): void {
  if (value === null || value === undefined) return;
  const inner = getNullableType(type);
  if (isListType(inner)) {
    if (!Array.isArray(value)) return walk(value, inner.ofType, name, path, issues);
    value.forEach((item, i) => walk(item, inner.ofType, name, `${path}.${i}`, issues));
    return;
  }
  if (isInputObjectType(inner)) {
    if (typeof value !== "object") return;
    for (const field of Object.values(inner.getFields())) {
      walk((value as Record<string, unknown>)[field.name], field.type, field.name, `${path}.${field.name}`, issues);
    }
    return;
  }
  if (isScalarType(inner) && typeof value === "string") {
    const kind = textKindOf(inner.name, name);
    const problem = kind && textProblem(value, kind);
    if (problem) issues.push({ field: path, code: problem.code, message: problem.message });
  }
}

/** Every storable-text issue in a field's coerced arguments, each naming its dotted path. */
export function argumentTextIssues(args: readonly GraphQLArgument[], values: Record<string, unknown>): FieldIssue[] {
  const issues: FieldIssue[] = [];
  for (const arg of args) walk(values[arg.name], arg.type, arg.name, arg.name, issues);
  return issues;
}

function check(args: Record<string, unknown>, info: GraphQLResolveInfo): void {
  const definition = info.parentType.getFields()[info.fieldName];
  if (!definition || definition.args.length === 0) return;
  const issues = argumentTextIssues(definition.args, args);
  if (issues.length > 0) throw new ValidationError(issues);
}

const hasTextArgs = <Types extends SchemaTypes>(fieldConfig: PothosOutputFieldConfig<Types>) =>
  Object.keys(fieldConfig.args).length > 0;

export class StorableTextPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  override wrapResolve(
    resolver: GraphQLFieldResolver<unknown, Types["Context"], object>,
    fieldConfig: PothosOutputFieldConfig<Types>,
  ): GraphQLFieldResolver<unknown, Types["Context"], object> {
    // A subscription's arguments are checked once, at subscribe (below), not on every event.
    if (fieldConfig.kind === "Subscription" || !hasTextArgs(fieldConfig)) return resolver;
    return (parent, args, context, info) => {
      check(args as Record<string, unknown>, info);
      return resolver(parent, args, context, info);
    };
  }

  override wrapSubscribe(
    subscribe: GraphQLFieldResolver<unknown, Types["Context"], object> | undefined,
    fieldConfig: PothosOutputFieldConfig<Types>,
  ): GraphQLFieldResolver<unknown, Types["Context"], object> | undefined {
    if (!subscribe || !hasTextArgs(fieldConfig)) return subscribe;
    return (parent, args, context, info) => {
      check(args as Record<string, unknown>, info);
      return subscribe(parent, args, context, info);
    };
  }
}

const pluginName = "storableText";

declare global {
  export namespace PothosSchemaTypes {
    export interface Plugins<Types extends SchemaTypes> {
      storableText: StorableTextPlugin<Types>;
    }
  }
}

SchemaBuilder.registerPlugin(pluginName, StorableTextPlugin);

export default pluginName;
