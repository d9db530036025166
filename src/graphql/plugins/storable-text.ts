// One boundary for storable text: every String and ID argument of every field of an operation
// (the root field's and every nested field's), at any depth of its input objects and lists,
// whether it came as a variable or as an inline literal, over HTTP or graphql-ws. It reads the
// coerced arguments, so it sees exactly what a resolver would; it runs before the root resolver.
// JSON arguments are checked by the JSON scalar itself (builder.ts), with the same rule.
//
// A Pothos plugin listed after ErrorsPlugin: its ValidationError (naming the argument's path)
// becomes the mutation's typed `ValidationError` result; queries and subscriptions answer it
// as a top-level error with code VALIDATION_FAILED (app.ts keeps AppError codes). No resolver
// runs and nothing reaches PostgreSQL, so a NUL can no longer fail there as "Unexpected error".
import SchemaBuilder, { BasePlugin, type PothosOutputFieldConfig, type SchemaTypes } from "@pothos/core";
import {
  getArgumentValues,
  getNamedType,
  getNullableType,
  isInputObjectType,
  isInterfaceType,
  isListType,
  isObjectType,
  isScalarType,
  Kind,
  type GraphQLArgument,
  type GraphQLFieldResolver,
  type GraphQLInputType,
  type GraphQLNamedType,
  type GraphQLResolveInfo,
  type SelectionSetNode,
} from "graphql";
import { textProblem, type TextKind } from "../../domain/text.js";
import { ValidationError, type FieldIssue } from "../../errors.js";

/**
 * String inputs that are free text (tab and newlines allowed). Every other String, and every
 * ID, is an identifier: a new field is strict until it is listed here. `privateKey` is a PEM
 * file (a GitHub App's key), lines and all.
 */
export const FREE_TEXT_FIELDS: ReadonlySet<string> = new Set(["description", "comment", "message", "note", "policies", "privateKey"]);

/** The rule a String/ID input named `name` follows; null for other scalars (JSON checks itself). */
export function textKindOf(scalar: string, name: string): TextKind | null {
  if (scalar === "ID") return "identifier";
  if (scalar === "String") return FREE_TEXT_FIELDS.has(name) ? "text" : "identifier";
  return null;
}

/**
 * How to walk values of one input type, worked out once per type (the schema's types live as long
 * as the process): the check API's hundred input objects are then walked without asking graphql
 * what each type is, for every field of every object.
 */
type Walk =
  | { readonly kind: "list"; readonly item: Walk }
  | { readonly kind: "object"; readonly fields: readonly { readonly name: string; readonly walk: Walk }[] }
  | { readonly kind: "scalar"; readonly id: boolean; readonly text: TextKind | null }
  | { readonly kind: "other" };

const OTHER: Walk = { kind: "other" };
const plans = new WeakMap<GraphQLInputType, Map<string, Walk>>();

/** The walk of `type` for a value named `name` (a scalar's rule depends on its field's name). */
function planOf(type: GraphQLInputType, name: string): Walk {
  let byName = plans.get(type);
  if (!byName) plans.set(type, (byName = new Map()));
  let plan = byName.get(name);
  if (plan) return plan;
  const inner = getNullableType(type);
  if (isListType(inner)) {
    plan = { kind: "list", item: planOf(inner.ofType, name) };
  } else if (isInputObjectType(inner)) {
    // Set before the fields are planned: an input type may contain itself.
    const fields: { name: string; walk: Walk }[] = [];
    plan = { kind: "object", fields };
    byName.set(name, plan);
    for (const field of Object.values(inner.getFields())) fields.push({ name: field.name, walk: planOf(field.type, field.name) });
  } else if (isScalarType(inner)) {
    plan = { kind: "scalar", id: inner.name === "ID", text: textKindOf(inner.name, name) };
  } else {
    plan = OTHER;
  }
  byName.set(name, plan);
  return plan;
}

/** The dotted path of an issue, joined only when there is one. */
const pathOf = (prefix: string, segments: readonly (string | number)[]) => (segments.length ? `${prefix}.${segments.join(".")}` : prefix);

function walk(value: unknown, plan: Walk, prefix: string, segments: (string | number)[], issues: FieldIssue[]): void {
  if (value === null || value === undefined) return;
  switch (plan.kind) {
    case "list":
      if (!Array.isArray(value)) return walk(value, plan.item, prefix, segments, issues);
      for (let i = 0; i < value.length; i++) {
        segments.push(i);
        walk(value[i], plan.item, prefix, segments, issues);
        segments.pop();
      }
      return;
    case "object":
      if (typeof value !== "object") return;
      for (const field of plan.fields) {
        const inner = (value as Record<string, unknown>)[field.name];
        if (inner === null || inner === undefined) continue;
        segments.push(field.name);
        walk(inner, field.walk, prefix, segments, issues);
        segments.pop();
      }
      return;
    case "scalar": {
      if (typeof value !== "string") return;
      // An ID names a row: a blank one names none. Refused here, once for every ID input, so no
      // service can read "" as "absent" (an optional role id skipped, a member added with no role).
      if (plan.id && value.trim() === "") {
        issues.push({ field: pathOf(prefix, segments), code: "blank", message: "must not be blank: send an id, or leave the field out" });
        return;
      }
      const problem = plan.text && textProblem(value, plan.text);
      if (problem) issues.push({ field: pathOf(prefix, segments), code: problem.code, message: problem.message });
      return;
    }
    default:
      return;
  }
}

/** Every storable-text issue in a field's coerced arguments, each naming its dotted path. */
export function argumentTextIssues(args: readonly GraphQLArgument[], values: Record<string, unknown>, prefix = ""): FieldIssue[] {
  const issues: FieldIssue[] = [];
  for (const arg of args) walk(values[arg.name], planOf(arg.type, arg.name), `${prefix}${arg.name}`, [], issues);
  return issues;
}

/**
 * The arguments of the root field and of every field selected below it (through fragments),
 * checked before the root resolver runs: nested arguments (a relation's `after` cursor) are
 * read by the root resolver when it plans its query, and a mutation must refuse before it
 * writes. Nested paths start at the root field's response key: `workspace.plans.after`.
 */
function operationFieldIssues(args: Record<string, unknown>, info: GraphQLResolveInfo): FieldIssue[] {
  const definition = info.parentType.getFields()[info.fieldName];
  if (!definition) return [];
  const issues = argumentTextIssues(definition.args, args);
  for (const node of info.fieldNodes) {
    if (node.selectionSet) visitSelections(info, issues, getNamedType(definition.type), node.selectionSet, `${(node.alias ?? node.name).value}.`);
  }
  return issues;
}

/** The arguments' text issues of every field under a selection set, into `issues`. */
function visitSelections(info: GraphQLResolveInfo, issues: FieldIssue[], parent: GraphQLNamedType | undefined, selectionSet: SelectionSetNode, prefix: string): void {
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      if (!parent || !(isObjectType(parent) || isInterfaceType(parent))) continue;
      const field = parent.getFields()[selection.name.value];
      if (!field) continue;
      const key = `${prefix}${(selection.alias ?? selection.name).value}.`;
      if (field.args.length > 0) {
        let values: Record<string, unknown> | null = null;
        try {
          values = getArgumentValues(field, selection, info.variableValues);
        } catch {
          // Not coercible: execution answers that itself when it reaches the field.
        }
        if (values) issues.push(...argumentTextIssues(field.args, values, key));
      }
      if (selection.selectionSet) visitSelections(info, issues, getNamedType(field.type), selection.selectionSet, key);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      const type = selection.typeCondition ? info.schema.getType(selection.typeCondition.name.value) : parent;
      visitSelections(info, issues, type ?? undefined, selection.selectionSet, prefix);
    } else {
      const fragment = info.fragments[selection.name.value];
      if (fragment) visitSelections(info, issues, info.schema.getType(fragment.typeCondition.name.value) ?? undefined, fragment.selectionSet, prefix);
    }
  }
}

function check(args: Record<string, unknown>, info: GraphQLResolveInfo): void {
  const issues = operationFieldIssues(args, info);
  if (issues.length > 0) throw new ValidationError(issues);
}

const ROOT_KINDS = new Set(["Query", "Mutation", "Subscription"]);

export class StorableTextPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  override wrapResolve(
    resolver: GraphQLFieldResolver<unknown, Types["Context"], object>,
    fieldConfig: PothosOutputFieldConfig<Types>,
  ): GraphQLFieldResolver<unknown, Types["Context"], object> {
    // Root fields check their whole operation subtree; a subscription's once, at subscribe
    // (below), not on every event.
    if (fieldConfig.kind !== "Query" && fieldConfig.kind !== "Mutation") return resolver;
    return (parent, args, context, info) => {
      check(args as Record<string, unknown>, info);
      return resolver(parent, args, context, info);
    };
  }

  override wrapSubscribe(
    subscribe: GraphQLFieldResolver<unknown, Types["Context"], object> | undefined,
    fieldConfig: PothosOutputFieldConfig<Types>,
  ): GraphQLFieldResolver<unknown, Types["Context"], object> | undefined {
    if (!subscribe || !ROOT_KINDS.has(fieldConfig.kind)) return subscribe;
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
