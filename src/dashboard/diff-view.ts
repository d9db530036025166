// What a plan changes: Terraform's summary line and, per resource, the changed attributes
// before → after, sensitive values shown as Terraform shows them ("(sensitive value)"), values
// known only after apply as "(known after apply)". Pure rendering of Plan.changeSummary and
// Plan.diff (docs/apply-gate.md, "What changes").
import type { PlanDiffQuery } from "../generated/graphql/graphql.js";
import { h } from "./dom.js";

type Plan = NonNullable<PlanDiffQuery["plan"]>;
type Resource = NonNullable<Plan["diff"]>["resources"][number];
type Attribute = Resource["attributes"][number];

const SYMBOL: Record<string, string> = { CREATE: "+", UPDATE: "~", DELETE: "-", REPLACE: "-/+" };

export function summaryLine(s: Plan["changeSummary"]): string {
  return `Plan: ${s.add} to add, ${s.change} to change, ${s.destroy} to destroy.`;
}

function beforeText(a: Attribute): string {
  return a.beforeSensitive ? "(sensitive value)" : (a.before ?? "null");
}

function afterText(a: Attribute): string {
  if (a.afterUnknown) return "(known after apply)";
  return a.afterSensitive ? "(sensitive value)" : (a.after ?? "null");
}

function attributeRow(r: Resource, a: Attribute): HTMLElement {
  const created = r.action === "CREATE" || (a.before === null && !a.beforeSensitive);
  const deleted = r.action === "DELETE";
  return h(
    "tr",
    { "data-path": a.path },
    h("td", {}, h("code", {}, a.path)),
    h("td", { class: `before${a.beforeSensitive ? " sensitive" : ""}` }, created ? "" : beforeText(a)),
    h("td", { class: "arrow", "aria-hidden": "true" }, created || deleted ? "" : "→"),
    h("td", { class: `after${a.afterSensitive ? " sensitive" : ""}${a.afterUnknown ? " unknown" : ""}` }, deleted ? "" : afterText(a)),
  );
}

function resourceView(r: Resource): HTMLElement {
  const label = `${SYMBOL[r.action] ?? "?"} ${r.address}${r.deposed ? ` (deposed ${r.deposed})` : ""}`;
  return h(
    "details",
    { class: `resource ${r.action.toLowerCase()}`, "data-address": r.address, open: r.attributes.length <= 20 },
    h("summary", {}, h("code", {}, label), ` ${r.action.toLowerCase()}`),
    r.attributes.length
      ? h(
          "table",
          { class: "attributes" },
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Attribute"), h("th", { scope: "col" }, "Before"), h("th", { scope: "col" }, h("span", { class: "sr-only" }, "to")), h("th", { scope: "col" }, "After"))),
          h("tbody", {}, ...r.attributes.map((a) => attributeRow(r, a))),
        )
      : h("p", { class: "none" }, "No attribute changes listed."),
    r.attributesClipped > 0 && h("p", { class: "meta" }, `${r.attributesClipped} more changed attributes not shown.`),
  );
}

/** The "What changes" section of the plan page. */
export function diffView(plan: Plan): HTMLElement {
  return h(
    "section",
    { class: "diff", "data-testid": "diff", "aria-labelledby": "diff-heading" },
    h("h3", { id: "diff-heading" }, "What changes"),
    h("p", { class: "summary", "data-testid": "change-summary" }, summaryLine(plan.changeSummary)),
    plan.diff
      ? h(
          "div",
          { class: "resources" },
          ...plan.diff.resources.map(resourceView),
          plan.diff.truncated > 0 && h("p", { class: "meta" }, `${plan.diff.truncated} more resource changes are not kept with the plan (the diff is bounded).`),
        )
      : h("p", { class: "none" }, "The plan was submitted as a list of changes, so there is no attribute diff. Submit terraform show -json output to see one."),
  );
}
