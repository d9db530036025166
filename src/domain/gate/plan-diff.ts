// What a plan changes, attribute by attribute, read from `terraform show -json` (Terraform's JSON
// output format, "Change Representation"): per resource change, `before` and `after`, with
// `before_sensitive` / `after_sensitive` (the same shape as the values, `true` where a value is
// sensitive — a whole subtree when `true` sits above it) and `after_unknown` (`true` where the
// value is known only after apply).
//
// Made ONCE, when the plan is submitted, and stored (docs/apply-gate.md, "What changes"):
// - Sensitive values are masked HERE, before anything is written: the stored diff never holds a
//   sensitive value, only the fact that there is one (Terraform prints "(sensitive value)").
//   Whether a sensitive attribute changed is decided on the raw values, as Terraform does.
// - Unknown-after-apply values have no `after`; the attribute says so (Terraform: "(known after
//   apply)").
// - Only changed attributes are listed (Terraform hides unchanged ones): an attribute whose
//   before and after are equal, with the same sensitivity and known after apply, is left out.
//   So a create lists every attribute it sets and a delete every attribute it had.
// - Paths: `tags.Name`, `ingress[0].from_port`, `tags["kubernetes.io/role"]`.
// - Values are JSON text (`"t3.micro"`, `8080`, `["a","b"]`), clipped to MAX_VALUE_CHARS.
// - Bounds: at most MAX_ATTRIBUTES_PER_RESOURCE attributes per resource (the rest counted in
//   `clipped`), nesting followed to MAX_DEPTH (deeper values shown whole), and the whole diff at
//   most MAX_PLAN_DIFF_BYTES of JSON: resources past the bound are left out and `truncated` says
//   how many. No-op and read entries are not changes and are left out, as the gate leaves them.
//
// Pure: no database, no clock.

import { mapTerraformActions } from "./terraform-plan.js";
import type { ChangeAction } from "./types.js";

export const PLAN_DIFF_VERSION = 1;
export const MAX_PLAN_DIFF_BYTES = 1_048_576;
export const MAX_ATTRIBUTES_PER_RESOURCE = 1_000;
export const MAX_VALUE_CHARS = 2_048;
export const MAX_DEPTH = 32;

/** One changed attribute, as stored (short keys: the diff is kept per plan). */
export interface StoredAttribute {
  /** Path. */
  readonly p: string;
  /** Before, as JSON text; absent when null/absent or sensitive. */
  readonly b?: string;
  /** After, as JSON text; absent when null/absent, sensitive or unknown. */
  readonly a?: string;
  /** Before was sensitive. */
  readonly bs?: true;
  /** After is sensitive. */
  readonly as?: true;
  /** After is known only after apply. */
  readonly u?: true;
}

export interface StoredResourceDiff {
  readonly address: string;
  /** Terraform's `change.actions`, as given. */
  readonly actions: readonly string[];
  readonly action: ChangeAction;
  /** The deposed object's key, for an entry about a deposed object. */
  readonly deposed?: string;
  readonly attributes: readonly StoredAttribute[];
  /** Attributes left out past MAX_ATTRIBUTES_PER_RESOURCE. */
  readonly clipped: number;
}

export interface StoredPlanDiff {
  readonly version: typeof PLAN_DIFF_VERSION;
  /** Sorted by address, then deposed key. */
  readonly resources: readonly StoredResourceDiff[];
  /** Resource changes left out to keep the diff within MAX_PLAN_DIFF_BYTES. */
  readonly truncated: number;
}

/** A readable attribute: what GraphQL serves. */
export interface AttributeDiff {
  readonly path: string;
  readonly before: string | null;
  readonly after: string | null;
  readonly beforeSensitive: boolean;
  readonly afterSensitive: boolean;
  readonly afterUnknown: boolean;
}

export function readAttribute(a: StoredAttribute): AttributeDiff {
  return {
    path: a.p,
    before: a.b ?? null,
    after: a.a ?? null,
    beforeSensitive: a.bs === true,
    afterSensitive: a.as === true,
    afterUnknown: a.u === true,
  };
}

/** A stored diff, or null for anything else (a plan submitted as a list has none). */
export function storedPlanDiffOf(value: unknown): StoredPlanDiff | null {
  const v = value as Partial<StoredPlanDiff> | null;
  return v && typeof v === "object" && v.version === PLAN_DIFF_VERSION && Array.isArray(v.resources) ? (v as StoredPlanDiff) : null;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const IDENT = /^[A-Za-z_][A-Za-z0-9_-]*$/;

function childPath(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  if (IDENT.test(key)) return path === "" ? key : `${path}.${key}`;
  return `${path}[${JSON.stringify(key)}]`;
}

function jsonText(value: unknown): string {
  const text = JSON.stringify(value) ?? "null";
  return text.length <= MAX_VALUE_CHARS ? text : `${text.slice(0, MAX_VALUE_CHARS)}… (${text.length} characters)`;
}

/** A marker's child: `true` above covers everything below. */
function markerAt(marker: unknown, key: string | number): unknown {
  if (marker === true) return true;
  if (Array.isArray(marker) && typeof key === "number") return marker[key];
  if (isObject(marker) && typeof key === "string") return marker[key];
  return undefined;
}

interface Walk {
  out: StoredAttribute[];
  clipped: number;
}

function leaf(w: Walk, path: string, before: unknown, after: unknown, bs: boolean, as: boolean, unknown: boolean): void {
  const b = before ?? null;
  const a = after ?? null;
  const same = b === a || (typeof b === "object" && typeof a === "object" && JSON.stringify(b) === JSON.stringify(a));
  const changed = unknown || bs !== as || !same;
  if (!changed) return;
  if (w.out.length >= MAX_ATTRIBUTES_PER_RESOURCE) {
    w.clipped++;
    return;
  }
  const attr: { -readonly [K in keyof StoredAttribute]: StoredAttribute[K] } = { p: path === "" ? "(value)" : path };
  if (bs) attr.bs = true;
  else if (b !== null) attr.b = jsonText(b);
  if (as) attr.as = true;
  if (unknown) attr.u = true;
  else if (!as && a !== null) attr.a = jsonText(a);
  w.out.push(attr);
}

function walk(w: Walk, path: string, before: unknown, after: unknown, bSens: unknown, aSens: unknown, unknown: unknown, depth: number): void {
  const bs = bSens === true;
  const as = aSens === true;
  const u = unknown === true;
  const b = before ?? null;
  const a = after ?? null;
  // A marker of `true` makes this whole value one attribute; so do scalars and the depth bound.
  const container = (x: unknown) => isObject(x) || Array.isArray(x);
  const descend = !bs && !as && !u && depth < MAX_DEPTH && (container(b) || container(a) || container(unknown) || container(aSens) || container(bSens));
  if (!descend || (b !== null && a !== null && isObject(b) !== isObject(a))) {
    leaf(w, path, b, u ? null : a, bs, as, u);
    return;
  }
  if (Array.isArray(b) || Array.isArray(a) || Array.isArray(unknown)) {
    const bl = Array.isArray(b) ? b : [];
    const al = Array.isArray(a) ? a : [];
    const ul = Array.isArray(unknown) ? unknown : [];
    const n = Math.max(bl.length, al.length, ul.length);
    for (let i = 0; i < n; i++) {
      walk(w, childPath(path, i), bl[i], al[i], markerAt(bSens, i), markerAt(aSens, i), markerAt(unknown, i), depth + 1);
    }
    return;
  }
  const bo = isObject(b) ? b : {};
  const ao = isObject(a) ? a : {};
  const uo = isObject(unknown) ? unknown : {};
  const keys = [...new Set([...Object.keys(bo), ...Object.keys(ao), ...Object.keys(uo)])].sort();
  for (const key of keys) {
    walk(w, childPath(path, key), bo[key], ao[key], markerAt(bSens, key), markerAt(aSens, key), markerAt(unknown, key), depth + 1);
  }
}

/** The attribute diff of one `resource_changes[*].change`. */
export function diffChange(change: Record<string, unknown>): { attributes: StoredAttribute[]; clipped: number } {
  const w: Walk = { out: [], clipped: 0 };
  walk(w, "", change["before"], change["after"], change["before_sensitive"], change["after_sensitive"], change["after_unknown"], 0);
  return { attributes: w.out, clipped: w.clipped };
}

/**
 * The stored diff of a `terraform show -json` document that parsePlanChanges accepted (as a value
 * or its text); null for anything that is not such a document (a plain change list).
 */
export function planDiffOf(document: unknown): { diff: StoredPlanDiff; bytes: number } | null {
  let doc = document;
  if (typeof doc === "string") {
    try {
      doc = JSON.parse(doc);
    } catch {
      return null;
    }
  }
  if (!isObject(doc) || !Array.isArray(doc["resource_changes"])) return null;
  type Entry = { address: string; deposed: string | undefined; actions: string[]; action: ChangeAction; change: Record<string, unknown> };
  const entries: Entry[] = [];
  for (const entry of doc["resource_changes"] as unknown[]) {
    if (!isObject(entry) || !isObject(entry["change"]) || typeof entry["address"] !== "string") continue;
    const change = entry["change"];
    const actions = Array.isArray(change["actions"]) ? change["actions"].filter((x): x is string => typeof x === "string") : [];
    const action = mapTerraformActions(actions);
    if (!action) continue;
    entries.push({ address: entry["address"], deposed: typeof entry["deposed"] === "string" ? entry["deposed"] : undefined, actions, action, change });
  }
  entries.sort((x, y) => (x.address < y.address ? -1 : x.address > y.address ? 1 : (x.deposed ?? "") < (y.deposed ?? "") ? -1 : 1));
  // Whole resources, in order, while the JSON stays within the bound; the rest are only counted.
  const resources: StoredResourceDiff[] = [];
  let bytes = 64; // the envelope
  for (const e of entries) {
    const { attributes, clipped } = diffChange(e.change);
    const r: StoredResourceDiff = { address: e.address, actions: e.actions, action: e.action, ...(e.deposed !== undefined ? { deposed: e.deposed } : {}), attributes, clipped };
    const size = Buffer.byteLength(JSON.stringify(r)) + 1;
    if (bytes + size > MAX_PLAN_DIFF_BYTES) break;
    bytes += size;
    resources.push(r);
  }
  const diff: StoredPlanDiff = { version: PLAN_DIFF_VERSION, resources, truncated: entries.length - resources.length };
  return { diff, bytes: Buffer.byteLength(JSON.stringify(diff)) };
}
