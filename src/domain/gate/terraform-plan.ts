// Reading a plan's resource changes, the gate's input (seed, "Auditing the gate": "Each plan
// stores the resource changes it proposed, so the requirement that applied to it can be
// recomputed after the fact").
//
// Accepts either
//   - the JSON of `terraform show -json <planfile>`: `resource_changes[*].address` and
//     `resource_changes[*].change.actions`; every other key (`format_version`, `planned_values`,
//     `prior_state`, `configuration`, `output_changes`, `resource_drift`, ...) is tolerated and
//     ignored, as Terraform's format promise asks of consumers; or
//   - a plain list `[{ "address": ..., "action": "create" | "update" | "delete" | "replace" }]`;
// either as a parsed value or as the JSON text.
//
// All-or-nothing: every malformed piece gets an issue naming its JSON path
// (`resource_changes[3].change.actions`, `[2].address`, `$` for the document itself), and when
// there is any issue no changes are returned, so a half-read plan can never reach the gate.
//
// Decisions:
// - Terraform actions: ["create"], ["update"], ["delete"]; ["delete","create"] and
//   ["create","delete"] are both replace; ["no-op"] and ["read"] are not changes and are dropped.
//   ["forget"] (a `removed` block with destroy = false) is read as delete: the resource leaves
//   Terraform's management, and the gate should be at least as strict as for a delete. Any other
//   combination is an issue, so an action this parser does not know fails closed.
// - A deposed object (an entry with `deposed`, left by an interrupted create_before_destroy)
//   shares its resource's address. Its change folds into that address's change: equal actions
//   stay as they are, different ones (delete of the deposed object + create/update of the
//   current one) become replace. Two entries with the same address and the same `deposed` (or
//   both without) are a duplicate, which is an issue.
// - `errored: true` is an issue: Terraform says planning failed, so the plan cannot be applied.
// - `format_version` must have major version 0 or 1 when present ("Reject any input which
//   reports an unsupported major version").
// - Limits: at most 10,000 changes (after dropping no-op and read), at most 100,000
//   `resource_changes` entries (no-op entries included, since Terraform lists every resource),
//   addresses of 1 to 1,024 characters with no control characters or surrounding whitespace.
//   At most 100 issues are listed, then one saying how many more there were.
// - Terraform's JSON does not record `-target` addresses, so whether a plan was targeted cannot
//   be read from it; `complete` (newer Terraform versions report false when applying would
//   not converge) is passed through when present, with `format_version` and `terraform_version`.

import { CHANGE_ACTIONS, isChangeAction, type ChangeAction, type PlanChange } from "./types.js";
import { isStorableText } from "../text.js";

export const MAX_PLAN_CHANGES = 10_000;
export const MAX_RESOURCE_CHANGE_ENTRIES = 100_000;
export const MAX_ADDRESS_LENGTH = 1024;
export const MAX_PLAN_ISSUES = 100;

export interface PlanIssue {
  readonly path: string;
  readonly message: string;
}

export type PlanSource = "terraform-show-json" | "change-list";

export type ParsedPlanChanges =
  | {
      readonly ok: true;
      readonly source: PlanSource;
      /** Sorted by address; one change per address. */
      readonly changes: readonly PlanChange[];
      readonly formatVersion: string | null;
      readonly terraformVersion: string | null;
      readonly complete: boolean | null;
    }
  | { readonly ok: false; readonly issues: readonly PlanIssue[] };

/** Maps Terraform's `change.actions`: a ChangeAction, null for "not a change", undefined for unknown. */
export function mapTerraformActions(actions: readonly string[]): ChangeAction | null | undefined {
  const [first, second, ...rest] = actions;
  if (rest.length > 0 || first === undefined) return undefined;
  if (second === undefined) {
    switch (first) {
      case "create":
      case "update":
      case "delete":
        return first;
      case "forget":
        return "delete";
      case "no-op":
      case "read":
        return null;
      default:
        return undefined;
    }
  }
  if ((first === "delete" && second === "create") || (first === "create" && second === "delete")) return "replace";
  return undefined;
}


/** Null when `address` is acceptable, else why not. */
export function resourceAddressProblem(address: unknown): string | null {
  if (typeof address !== "string") return "must be a string";
  if (address.length === 0) return "must not be empty";
  if (address.length > MAX_ADDRESS_LENGTH) return `must be at most ${MAX_ADDRESS_LENGTH} characters (got ${address.length})`;
  if (!isStorableText(address, "identifier")) return "must not contain control characters";
  if (address.trim() !== address) return "must not start or end with whitespace";
  return null;
}

class Issues {
  readonly list: PlanIssue[] = [];
  private dropped = 0;
  add(path: string, message: string): void {
    if (this.list.length < MAX_PLAN_ISSUES) this.list.push({ path, message });
    else this.dropped++;
  }
  get any(): boolean {
    return this.list.length > 0;
  }
  done(): PlanIssue[] {
    if (this.dropped > 0) this.list.push({ path: "$", message: `and ${this.dropped} more issues` });
    return this.list;
  }
}

type JsonObject = Record<string, unknown>;
const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const has = (object: JsonObject, key: string): boolean => Object.prototype.hasOwnProperty.call(object, key);

export function parsePlanChanges(input: unknown): ParsedPlanChanges {
  let document = input;
  if (typeof input === "string") {
    try {
      document = JSON.parse(input) as unknown;
    } catch (error) {
      return { ok: false, issues: [{ path: "$", message: `not valid JSON: ${(error as Error).message}` }] };
    }
  }
  if (Array.isArray(document)) return parseChangeList(document);
  if (isObject(document) && (has(document, "resource_changes") || has(document, "format_version") || has(document, "planned_values"))) {
    if (!has(document, "resource_changes") && !has(document, "planned_values") && has(document, "values")) {
      return fail("$", "this is the JSON of a state, not of a plan: run `terraform show -json <planfile>`");
    }
    return parseTerraformShowJson(document);
  }
  return fail(
    "$",
    "expected the JSON of `terraform show -json <planfile>` (an object with resource_changes) or a list of { address, action }",
  );
}

function fail(path: string, message: string): ParsedPlanChanges {
  return { ok: false, issues: [{ path, message }] };
}

function parseChangeList(list: readonly unknown[]): ParsedPlanChanges {
  const issues = new Issues();
  if (list.length > MAX_PLAN_CHANGES) {
    return fail("$", `at most ${MAX_PLAN_CHANGES} changes (got ${list.length})`);
  }
  const firstSeen = new Map<string, number>();
  const changes: PlanChange[] = [];
  list.forEach((entry, i) => {
    const path = `[${i}]`;
    if (!isObject(entry)) {
      issues.add(path, "must be an object { address, action }");
      return;
    }
    const addressProblem = resourceAddressProblem(entry["address"]);
    if (addressProblem) issues.add(`${path}.address`, addressProblem);
    const action = entry["action"];
    if (!isChangeAction(action)) {
      issues.add(`${path}.action`, `must be one of ${CHANGE_ACTIONS.join(", ")} (got ${describe(action)})`);
    }
    if (addressProblem || !isChangeAction(action)) return;
    const address = entry["address"] as string;
    const earlier = firstSeen.get(address);
    if (earlier !== undefined) {
      issues.add(`${path}.address`, `duplicates [${earlier}].address (${address})`);
      return;
    }
    firstSeen.set(address, i);
    changes.push({ address, action });
  });
  if (issues.any) return { ok: false, issues: issues.done() };
  return {
    ok: true,
    source: "change-list",
    changes: sortByAddress(changes),
    formatVersion: null,
    terraformVersion: null,
    complete: null,
  };
}

function parseTerraformShowJson(plan: JsonObject): ParsedPlanChanges {
  const issues = new Issues();

  let formatVersion: string | null = null;
  if (has(plan, "format_version")) {
    const version = plan["format_version"];
    const match = typeof version === "string" ? /^(\d+)\.(\d+)$/.exec(version) : null;
    if (!match) issues.add("format_version", `must be a version string like "1.2" (got ${describe(version)})`);
    else if (match[1] !== "0" && match[1] !== "1") issues.add("format_version", `major version ${match[1]} is not supported (0.x and 1.x are)`);
    else formatVersion = version as string;
  }
  if (plan["errored"] === true) issues.add("errored", "Terraform reports that planning failed; an errored plan cannot be applied");
  const terraformVersion = typeof plan["terraform_version"] === "string" ? plan["terraform_version"] : null;
  const complete = typeof plan["complete"] === "boolean" ? plan["complete"] : null;

  const entries = plan["resource_changes"] ?? [];
  if (!Array.isArray(entries)) {
    issues.add("resource_changes", "must be a list");
    return { ok: false, issues: issues.done() };
  }
  if (entries.length > MAX_RESOURCE_CHANGE_ENTRIES) {
    issues.add("resource_changes", `at most ${MAX_RESOURCE_CHANGE_ENTRIES} entries (got ${entries.length})`);
    return { ok: false, issues: issues.done() };
  }

  // address + deposed key -> first index, to name duplicates.
  const firstSeen = new Map<string, number>();
  const byAddress = new Map<string, ChangeAction>();
  entries.forEach((entry: unknown, i) => {
    const path = `resource_changes[${i}]`;
    if (!isObject(entry)) {
      issues.add(path, "must be an object");
      return;
    }
    const address = entry["address"];
    const addressProblem = resourceAddressProblem(address);
    if (addressProblem) issues.add(`${path}.address`, addressProblem);

    const deposed = entry["deposed"];
    const deposedOk = deposed === undefined || deposed === null || (typeof deposed === "string" && deposed.length > 0);
    if (!deposedOk) issues.add(`${path}.deposed`, "must be a non-empty string when present");

    const change = entry["change"];
    let action: ChangeAction | null | undefined;
    if (!isObject(change)) {
      issues.add(`${path}.change`, "must be an object with actions");
    } else {
      const actions = change["actions"];
      if (!Array.isArray(actions) || actions.length === 0 || !actions.every((a) => typeof a === "string")) {
        issues.add(`${path}.change.actions`, `must be a non-empty list of action names (got ${describe(actions)})`);
      } else {
        action = mapTerraformActions(actions as string[]);
        if (action === undefined) issues.add(`${path}.change.actions`, `unknown actions ${JSON.stringify(actions)}`);
      }
    }

    if (addressProblem || !deposedOk) return;
    const key = `${address as string}\u0000${typeof deposed === "string" ? deposed : ""}`;
    const earlier = firstSeen.get(key);
    if (earlier !== undefined) {
      issues.add(`${path}.address`, `duplicates resource_changes[${earlier}].address (${address as string})`);
      return;
    }
    firstSeen.set(key, i);
    if (action === undefined || action === null) return;
    const folded = byAddress.get(address as string);
    byAddress.set(address as string, folded === undefined || folded === action ? action : "replace");
  });

  if (!issues.any && byAddress.size > MAX_PLAN_CHANGES) {
    issues.add("resource_changes", `at most ${MAX_PLAN_CHANGES} changes (got ${byAddress.size}, not counting no-op and read)`);
  }
  if (issues.any) return { ok: false, issues: issues.done() };
  const changes = sortByAddress([...byAddress].map(([address, action]) => ({ address, action })));
  return { ok: true, source: "terraform-show-json", changes, formatVersion, terraformVersion, complete };
}

function sortByAddress(changes: PlanChange[]): PlanChange[] {
  return changes.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}

function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
