// Rows of a Prisma model read by raw SQL as `to_json(row)`, made what Prisma Client returns for
// that model: a hot read can be one statement without Prisma's query compiler and result mapping,
// and still hand GraphQL the rows its types expect. The columns are the model's own field names
// (no @map on these models' fields); DateTime columns are `timestamp(3)` without a zone, which
// Prisma reads as UTC and to_json writes without one. test/workspace-list-rows.test.ts compares
// such rows with Prisma's own, field by field.
import { getDatamodel } from "../generated/pothos-types.js";

const datamodel = getDatamodel().datamodel.models;

/** The model's DateTime fields; a model with a column type this file does not turn back (BigInt, Decimal, Bytes) is refused. */
function dateFieldsOf(model: string): readonly string[] {
  const fields = datamodel[model]?.fields;
  if (!fields) throw new Error(`no model ${model}`);
  const unsupported = fields.find((f) => f.kind === "scalar" && (f.type === "BigInt" || f.type === "Decimal" || f.type === "Bytes"));
  if (unsupported) throw new Error(`${model}.${unsupported.name} is ${unsupported.type}: not read back from JSON here`);
  return fields.filter((f) => f.kind === "scalar" && f.type === "DateTime").map((f) => f.name);
}

const dateFields = new Map<string, readonly string[]>();

/**
 * `json` (to_json of one row of the model's table, already parsed by the driver) as Prisma's row:
 * its DateTime fields become Dates (read as UTC, as Prisma reads them). Changes `json` in place.
 */
export function modelRow<T>(model: string, json: Record<string, unknown>): T {
  let fields = dateFields.get(model);
  if (!fields) dateFields.set(model, (fields = dateFieldsOf(model)));
  for (const field of fields) {
    const value = json[field];
    if (typeof value === "string") json[field] = new Date(`${value}Z`);
  }
  return json as T;
}
