// The plan page's own work (beyond the gate, which app.ts renders): approve with an optional
// comment, apply, discard — the API's own mutations, so the same gate and permission checks —
// where it came from (CLI, API, HCP Terraform run, GitHub deployment) with the run's link, the apply's result message, the approvers' comments, the self-approval
// rule when the workspace has it, and what the plan changes (diff-view.ts). The buttons follow
// the viewer's permissions on the workspace (viewerCan); the server decides every action anyway.
//
// app.ts asks for `element(planId, gatePassed)` where the plan page's actions go, and calls
// `refresh(planId)` whenever it re-reads the plan; the element is kept across app.ts's re-renders,
// so a comment being typed survives a live update.
import {
  ApplyPlanDocument,
  ApprovePlanDocument,
  DiscardPlanDocument,
  PlanDiffDocument,
  PlanPageDocument,
  type PlanDiffQuery,
  type PlanPageQuery,
  type TypedDocumentString,
} from "../generated/graphql/graphql.js";
import { diffView } from "./diff-view.js";
import { ensureStylesheet, h, safeHref, time } from "./dom.js";

type Plan = NonNullable<PlanPageQuery["plan"]>;
type Changes = NonNullable<PlanDiffQuery["plan"]>;

export interface PlanPageDeps {
  request<TResult, TVariables>(document: TypedDocumentString<TResult, TVariables>, variables?: TVariables): Promise<TResult>;
  toast(message: string, kind?: "error" | "ok"): void;
  /** The signed-in user's id. */
  viewerId(): string | null;
  /** Something on the plan changed by an action here: re-read the plan and its workspace. */
  changed(workspaceId: string): Promise<void> | void;
  /**
   * Whether the viewer may approve plans of this workspace: (workspace, approve), or being a named
   * approver the gate still waits for (seed 000). Without it, (workspace, approve) alone.
   */
  mayApprove?(workspaceId: string): boolean;
}

export const MAX_COMMENT = 2000;

/** How the plan page names each origin (PlanOriginKind); a kind added to the API fails the type check here. */
const ORIGIN_LABELS: Record<Plan["origin"]["kind"], string> = {
  API: "the API",
  CLI: "the CLI",
  HCP_TERRAFORM_RUN: "an HCP Terraform run",
  GITHUB_DEPLOYMENT: "a GitHub deployment",
};

/** A mutation result union: the success's data, or its typed error's message thrown. */
function unwrap<T>(result: { __typename: string; data?: T; message?: string }): T {
  if (result.data !== undefined) return result.data;
  throw new Error(result.message ?? result.__typename);
}

export function createPlanPage(deps: PlanPageDeps) {
  ensureStylesheet();
  let current: { planId: string; plan: Plan | null; changes: Changes | null; loaded: boolean; gatePassed: boolean } | null = null;
  let host: HTMLElement | null = null;
  let busy: string | null = null;
  let confirmingDiscard = false;
  let comment: HTMLTextAreaElement | null = null;

  function render(): void {
    if (!host || !current) return;
    const { plan, changes, loaded, gatePassed } = current;
    if (!plan) {
      host.replaceChildren(loaded ? h("p", { class: "none" }, "") : h("p", { class: "none" }, "Loading the plan's changes…"));
      return;
    }
    const parts = [runAndResult(plan), selfApprovalNote(plan), actions(plan, gatePassed), comments(plan), changes ? diffView(changes) : null];
    host.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
  }

  function runAndResult(plan: Plan): HTMLElement {
    return h(
      "div",
      { class: "run" },
      originLine(plan),
      plan.resultMessage &&
        h(
          "p",
          { class: `result ${plan.status.toLowerCase()}`, "data-testid": "result-message", role: "status" },
          h("strong", {}, plan.status === "FAILED" ? "Apply failed: " : "Apply result: "),
          plan.resultMessage,
          plan.finishedAt ? h("span", { class: "meta" }, ` (${time(plan.finishedAt)})`) : null,
        ),
    );
  }

  /** Where the plan came from, with its link: "From the CLI: <run>", "From an HCP Terraform run: <run>". */
  function originLine(plan: Plan): HTMLElement {
    const href = plan.origin.url ? safeHref(plan.origin.url) : null;
    const label = ORIGIN_LABELS[plan.origin.kind];
    return h(
      "p",
      { class: "meta", "data-testid": "origin" },
      `From ${label}`,
      href ? ": " : null,
      href ? h("a", { href, target: "_blank", rel: "noopener noreferrer", class: "link", "data-testid": "run-link" }, href) : null,
    );
  }

  function selfApprovalNote(plan: Plan): HTMLElement | null {
    if (!plan.workspace.preventSelfApproval) return null;
    return h(
      "p",
      { class: "meta", "data-testid": "self-approval" },
      `${plan.workspace.name} prevents self-approval: ${plan.submittedBy.name}, who submitted this plan, cannot count toward its approvals.`,
    );
  }

  function button(action: string, label: string, busyLabel: string, onclick: () => void, cls = ""): HTMLElement {
    return h("button", { type: "button", "data-action": action, class: cls, disabled: busy !== null, onclick }, busy === action ? busyLabel : label);
  }

  function actions(plan: Plan, gatePassed: boolean): HTMLElement | null {
    if (plan.status !== "PLANNED") return null;
    const me = deps.viewerId();
    const approved = plan.approvals.some((a) => a.user.id === me && !a.withdrawnAt);
    const can = plan.workspace.viewerCan;
    const parts: HTMLElement[] = [];
    const mayApprove = deps.mayApprove ? deps.mayApprove(plan.workspace.id) : can.approve;
    if (mayApprove && !approved) {
      if (!comment) {
        comment = h("textarea", { id: "approve-comment", name: "comment", rows: "2", maxlength: String(MAX_COMMENT), placeholder: "What you checked (optional)" }) as HTMLTextAreaElement;
      }
      parts.push(
        h(
          "div",
          { class: "approve" },
          h("label", { for: "approve-comment" }, "Comment with your approval (optional, at most 2,000 characters)"),
          comment,
          button("approve", "Approve", "Approving…", () => void approve(plan)),
        ),
      );
    }
    const row: HTMLElement[] = [];
    // The API's rule: a plan whose gate passed may be applied by whoever may approve or read it.
    if (gatePassed) row.push(button("apply", "Apply", "Starting the apply…", () => void apply(plan)));
    if (can.plan || can.approve) {
      row.push(
        confirmingDiscard
          ? h(
              "span",
              { class: "confirm" },
              "Discard this plan? It can never apply. ",
              button("discard-confirm", "Discard", "Discarding…", () => void discard(plan), "deny"),
              button("discard-cancel", "Keep it", "Keep it", () => {
                confirmingDiscard = false;
                render();
              }),
            )
          : button("discard", "Discard…", "Discarding…", () => {
              confirmingDiscard = true;
              render();
            }),
      );
    }
    if (row.length) parts.push(h("div", { class: "actions" }, ...row));
    return parts.length ? h("div", { class: "plan-actions", "data-testid": "plan-actions" }, ...parts) : null;
  }

  function comments(plan: Plan): HTMLElement | null {
    const said = plan.approvals.filter((a) => a.comment);
    if (!said.length) return null;
    return h(
      "div",
      { class: "comments" },
      h("h3", {}, "Approval comments"),
      h("ul", {}, ...said.map((a) => h("li", { "data-approval-id": a.id, class: a.withdrawnAt ? "withdrawn" : "" }, h("strong", {}, a.user.name), ": ", a.comment ?? ""))),
    );
  }

  async function run(action: string, plan: Plan, work: () => Promise<string>): Promise<void> {
    if (busy) return;
    busy = action;
    render();
    try {
      deps.toast(await work(), "ok");
    } catch (error) {
      deps.toast((error as Error).message);
    } finally {
      busy = null;
      confirmingDiscard = false;
      await deps.changed(plan.workspace.id);
      await refresh(plan.id);
    }
  }

  const approve = (plan: Plan) =>
    run("approve", plan, async () => {
      const text = comment?.value ?? "";
      unwrap((await deps.request(ApprovePlanDocument, { planId: plan.id, comment: text.trim() ? text : null })).approvePlan);
      if (comment) comment.value = "";
      return "Approved.";
    });

  const apply = (plan: Plan) =>
    run("apply", plan, async () => {
      const result = (await deps.request(ApplyPlanDocument, { planId: plan.id })).applyPlan;
      if (result.__typename === "GateNotPassedError") throw new Error("The gate has not passed: the apply was refused.");
      unwrap(result as { __typename: string; data?: unknown; message?: string });
      return "Apply started.";
    });

  const discard = (plan: Plan) =>
    run("discard-confirm", plan, async () => {
      unwrap((await deps.request(DiscardPlanDocument, { planId: plan.id })).discardPlan);
      return "Plan discarded.";
    });

  async function refresh(planId: string): Promise<void> {
    if (current?.planId !== planId) return;
    // The diff never changes once submitted: read it once per plan.
    const [{ plan }, changes] = await Promise.all([
      deps.request(PlanPageDocument, { planId }),
      current.changes ? Promise.resolve(current.changes) : deps.request(PlanDiffDocument, { planId }).then((r) => r.plan),
    ]);
    if (current?.planId !== planId) return;
    current.plan = plan;
    current.changes = changes;
    current.loaded = true;
    render();
  }

  return {
    /** The plan page's section for `planId` (the same element across re-renders of that plan). */
    element(planId: string, gatePassed: boolean): HTMLElement {
      if (current?.planId !== planId) {
        current = { planId, plan: null, changes: null, loaded: false, gatePassed };
        host = h("div", { id: "plan-page", "data-plan-id": planId });
        comment = null;
        confirmingDiscard = false;
        void refresh(planId).catch((error: Error) => deps.toast(error.message));
      } else if (current.gatePassed !== gatePassed) {
        current.gatePassed = gatePassed;
      }
      render();
      return host!;
    },
    refresh: (planId: string) => refresh(planId).catch((error: Error) => deps.toast(error.message)),
  };
}
