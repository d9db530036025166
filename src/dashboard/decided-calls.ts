// The inbox's decided calls: held tool calls no longer waiting for a vote stay visible with their
// outcome (executed, failed, denied, expired, invalidated, or approved and under way) instead of
// vanishing once voted on. Rows are told apart by what a reviewer may see: the time it was held,
// the agent's key, the amount summary and the request id (never the call's arguments).
//
// app.ts places `element()` under the pending list and calls `refresh()` on every inbox push.
import { DecidedApprovalRequestsDocument, type DecidedApprovalRequestsQuery, type TypedDocumentString } from "../generated/graphql/graphql.js";
import { ensureStylesheet, h, time } from "./dom.js";

type Decided = DecidedApprovalRequestsQuery["decidedApprovalRequests"][number];

export interface DecidedCallsDeps {
  request<TResult, TVariables>(document: TypedDocumentString<TResult, TVariables>, variables?: TVariables): Promise<TResult>;
  toast(message: string): void;
}

const OUTCOME_TEXT: Record<string, string> = {
  EXECUTED: "executed",
  FAILED: "failed",
  DENIED: "denied",
  EXPIRED: "expired",
  INVALIDATED: "closed by a policy change",
  APPROVED: "approved, running",
  PENDING: "waiting",
};

function row(r: Decided): HTMLElement {
  const tool = r.logicalTool && r.logicalTool !== r.tool ? `${r.logicalTool} → ${r.tool}` : r.tool;
  const decidedBy = r.votes.map((v) => `${v.decision.toLowerCase()} by ${v.reviewer.name}${v.comment ? `: ${v.comment}` : ""}`).join(" · ");
  return h(
    "li",
    { class: `decided-call ${r.outcome.toLowerCase()}`, "data-request-id": r.id, "data-outcome": r.outcome },
    h(
      "div",
      {},
      h("code", {}, tool),
      " ",
      h("span", { class: `badge outcome ${r.outcome.toLowerCase()}`, "data-testid": "outcome" }, OUTCOME_TEXT[r.outcome] ?? r.outcome.toLowerCase()),
    ),
    h(
      "div",
      { class: "meta" },
      `held ${time(r.createdAt)}${r.decidedAt ? ` · decided ${time(r.decidedAt)}` : ""}${r.agentKeyName ? ` · agent ${r.agentKeyName}` : ""}` +
        `${r.amountUsd != null ? ` · $${r.amountUsd}` : ""}${r.workspaceName ? ` · ${r.workspaceName}` : ""} · id ${r.id.slice(0, 12)}`,
    ),
    decidedBy && h("div", { class: "meta" }, decidedBy),
  );
}

export function createDecidedCalls(deps: DecidedCallsDeps) {
  ensureStylesheet();
  const host = h("div", { id: "decided-calls" });
  let rows: Decided[] | null = null;
  let reading = false;
  let again = false;

  function render(): void {
    host.replaceChildren(
      h("h3", {}, "Decided recently"),
      rows === null
        ? h("p", { class: "none" }, "…")
        : rows.length
          ? h("ul", { class: "decided-calls" }, ...rows.map(row))
          : h("p", { class: "none" }, "No decided calls yet."),
    );
  }

  /** Re-read (coalesced: a push during a read gets one more read after it). */
  async function refresh(): Promise<void> {
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    try {
      do {
        again = false;
        rows = (await deps.request(DecidedApprovalRequestsDocument, { workspaceId: null, first: 20 })).decidedApprovalRequests;
        render();
      } while (again);
    } catch (error) {
      deps.toast((error as Error).message);
    } finally {
      reading = false;
    }
  }

  render();
  return { element: () => host, refresh };
}
