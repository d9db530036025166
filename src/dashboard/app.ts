// The live gate dashboard (served at `/`, bundled for the browser by src/dashboard/http.ts).
// Workspaces, who each is reserved for, their open plans and each plan's gate with its
// explanation, kept live over graphql-ws (workspaceGates) with no reload; approve, reserve and
// release for the signed-in user. The token is entered once and kept in sessionStorage.
// Plain DOM, no framework; the same typed documents as the CLI (operations/*.graphql).
import { createClient, type Client } from "graphql-ws/client";
import {
  ApprovePlanDocument,
  PlanDetailDocument,
  VoteOnApprovalRequestDocument,
  WatchApprovalInboxDocument,
  WatchWorkspacesChangedDocument,
  WorkspaceHistoryDocument,
  type WorkspaceHistoryQuery,
  type ApprovalRequestFieldsFragment,
  WithdrawApprovalDocument,
  type PlanDetailQuery,
  ReleaseReservationDocument,
  ReserveWorkspaceDocument,
  ViewerDocument,
  WatchWorkspaceGatesDocument,
  WorkspaceDocument,
  WorkspacesDocument,
  type GateStatusFieldsFragment,
  type ReservationFieldsFragment,
  type TypedDocumentString,
  type ViewerQuery,
  type WorkspaceFieldsFragment,
  type WorkspacesQuery,
} from "../generated/graphql/graphql.js";
import { explainGate } from "../clients/explain.js";
import { coalesced } from "./coalesce.js";
import { createPlanPage } from "./plan-page.js";
import { createDecidedCalls } from "./decided-calls.js";

const TOKEN_KEY = "countersign.token";

interface State {
  token: string | null;
  viewer: ViewerQuery["viewer"] | null;
  workspaces: Map<string, WorkspaceFieldsFragment>;
  /** workspace id → the newest workspaceGates message's plans, by plan id. */
  gates: Map<string, { version: number; plans: Map<string, GateStatusFieldsFragment> }>;
  /** The role picked in each workspace's "reserve for role" select, kept across re-renders. */
  pickedRole: Map<string, string>;
  busy: Set<string>;
  live: "connecting" | "live" | "reconnecting" | "offline";
  /** The plan page (`#plan/<id>`): the plan and its gate, re-read on every change to its workspace. */
  detail: { planId: string; gate: PlanDetailQuery["gate"] | null; loaded: boolean } | null;
  /** A workspace's history (`#history/<id>`), re-read on every change to the workspace. */
  history: { workspaceId: string; workspace: WorkspaceHistoryQuery["workspace"] | null; loaded: boolean } | null;
  /** Held tool calls the viewer may decide now (the reviewer view: never the call's arguments); null until the first push. */
  inbox: ApprovalRequestFieldsFragment[] | null;
}

type PlanDetail = NonNullable<PlanDetailQuery["gate"]>;

const state: State = {
  token: null,
  viewer: null,
  workspaces: new Map(),
  gates: new Map(),
  pickedRole: new Map(),
  busy: new Set(),
  live: "connecting",
  detail: null,
  history: null,
  inbox: null,
};

let ws: Client | null = null;
const unsubscribers: Array<() => void> = [];

// The plan page's actions, run link and diff (plan-page.ts), and the inbox's decided calls (decided-calls.ts).
const planPage = createPlanPage({
  request,
  toast,
  viewerId: () => state.viewer?.id ?? null,
  changed: async (workspaceId) => {
    await refetchWorkspace(workspaceId).catch(() => {});
    if (state.detail) await refetchDetail(state.detail.planId).catch(() => {});
  },
});
const decidedCalls = createDecidedCalls({ request, toast });

// ---------------------------------------------------------------------------------------------
// Transport

class ApiError extends Error {
  code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

async function request<TResult, TVariables>(document: TypedDocumentString<TResult, TVariables>, variables?: TVariables): Promise<TResult> {
  const response = await fetch("/graphql", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${state.token ?? ""}` },
    body: JSON.stringify({ query: document.toString(), variables: variables ?? {} }),
  });
  const body = (await response.json()) as { data?: TResult; errors?: Array<{ message: string; extensions?: { code?: string } }> };
  if (body.errors?.length) {
    const first = body.errors[0]!;
    throw new ApiError(first.extensions?.code ?? "ERROR", body.errors.map((e) => e.message).join("; "));
  }
  return body.data as TResult;
}

/** A mutation result union: the success's data, or its typed error thrown as an ApiError. */
function unwrap<T>(result: { __typename: string; data?: T; code?: string; message?: string }): T {
  if (result.data !== undefined) return result.data;
  throw new ApiError(result.code ?? result.__typename, result.message ?? result.__typename);
}

function socket(): Client {
  if (ws) return ws;
  ws = createClient({
    url: `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/graphql`,
    connectionParams: () => ({ authorization: `Bearer ${state.token ?? ""}` }),
    retryAttempts: Infinity,
    shouldRetry: () => true,
    on: {
      connected: () => setLive("live"),
      closed: () => setLive(state.token ? "reconnecting" : "offline"),
    },
  });
  return ws;
}

// ---------------------------------------------------------------------------------------------
// Data

async function loadWorkspaces(): Promise<void> {
  const all: WorkspaceFieldsFragment[] = [];
  let after: string | null = null;
  for (;;) {
    const page: WorkspacesQuery["workspaces"] = (await request(WorkspacesDocument, { first: 100, after })).workspaces;
    all.push(...page.edges.map((e) => e.node));
    if (!page.pageInfo.hasNextPage || !page.pageInfo.endCursor) break;
    after = page.pageInfo.endCursor;
  }
  state.workspaces = new Map(all.map((w) => [w.id, w]));
}

/**
 * Re-read one workspace (reservations, open plans, what the viewer may do). A change that lands
 * while a read is in flight gets a read of its own after it (coalesce.ts), never the in-flight
 * one, which may have read before the change.
 */
const refetchWorkspace = coalesced(async (id: string) => {
  const { workspace } = await request(WorkspaceDocument, { id });
  if (workspace) state.workspaces.set(id, workspace);
  else state.workspaces.delete(id);
  renderWorkspace(id);
});

function watchWorkspace(id: string): void {
  const stop = socket().subscribe<{ workspaceGates: { workspaceId: string; version: number; plans: GateStatusFieldsFragment[] } }>(
    { query: WatchWorkspaceGatesDocument.toString(), variables: { workspaceId: id } },
    {
      next: (message) => {
        const update = message.data?.workspaceGates;
        if (!update) {
          if (message.errors?.length) toast(message.errors.map((e) => e.message).join("; "));
          return;
        }
        const known = state.gates.get(id);
        if (known && update.version <= known.version) return;
        state.gates.set(id, { version: update.version, plans: new Map(update.plans.map((p) => [p.planId, p])) });
        renderWorkspace(id);
        // Reservations and the open-plan list live on the workspace: re-read it on every change.
        void refetchWorkspace(id).catch((error: Error) => toast(error.message));
        if (state.detail?.gate?.workspaceId === id) void refetchDetail(state.detail.planId).catch((error: Error) => toast(error.message));
        if (state.history?.workspaceId === id) void refetchHistory(id).catch((error: Error) => toast(error.message));
      },
      error: (error) => toast(`Live updates for a workspace stopped: ${(error as Error).message ?? "connection error"}`),
      complete: () => {},
    },
  );
  unsubscribers.push(stop);
}

/** Re-read the open plan page (coalesced like the workspaces: a change mid-read gets its own read). */
const refetchDetail = coalesced(async (planId: string) => {
  const { gate } = await request(PlanDetailDocument, { planId });
  if (state.detail?.planId !== planId) return;
  state.detail = { planId, gate, loaded: true };
  renderDetail();
  void planPage.refresh(planId);
});

const refetchHistory = coalesced(async (workspaceId: string) => {
  const { workspace } = await request(WorkspaceHistoryDocument, { id: workspaceId, first: 50 });
  if (state.history?.workspaceId !== workspaceId) return;
  state.history = { workspaceId, workspace, loaded: true };
  renderDetail();
});

function openDetailFromHash(): void {
  const history = /^#history\/([^/]+)$/.exec(location.hash);
  if (history) {
    const workspaceId = decodeURIComponent(history[1]!);
    state.detail = null;
    if (state.history?.workspaceId !== workspaceId) state.history = { workspaceId, workspace: null, loaded: false };
    renderDetail();
    void refetchHistory(workspaceId).catch((error: Error) => toast(error.message));
    return;
  }
  state.history = null;
  const match = /^#plan\/([^/]+)$/.exec(location.hash);
  const planId = match ? decodeURIComponent(match[1]!) : null;
  if (!planId) {
    state.detail = null;
    renderDetail();
    return;
  }
  if (state.detail?.planId !== planId) state.detail = { planId, gate: null, loaded: false };
  renderDetail();
  void refetchDetail(planId).catch((error: Error) => toast(error.message));
}

/** Workspaces the page shows, each with its workspaceGates subscription (started once). */
const watched = new Set<string>();

function ensureWatched(id: string): void {
  if (watched.has(id) || !state.workspaces.has(id)) return;
  watched.add(id);
  watchWorkspace(id);
}

/**
 * New workspaces (and anything else changed on one) without a reload: an id the page does not
 * know is read and watched; no ids means permissions changed, so the whole list is re-read.
 */
function watchWorkspaceList(): void {
  const stop = socket().subscribe<{ workspacesChanged: { workspaceIds: string[]; reason: string } }>(
    { query: WatchWorkspacesChangedDocument.toString(), variables: {} },
    {
      next: (message) => {
        const update = message.data?.workspacesChanged;
        if (!update) return;
        if (update.workspaceIds.length === 0) {
          void reloadWorkspaceList().catch((error: Error) => toast(error.message));
          return;
        }
        for (const id of update.workspaceIds) {
          if (state.workspaces.has(id)) continue;
          void refetchWorkspace(id)
            .then(() => {
              dropEmptyNote();
              ensureWatched(id);
            })
            .catch((error: Error) => toast(error.message));
        }
      },
      error: (error) => toast(`Live updates for the workspace list stopped: ${(error as Error).message ?? "connection error"}`),
      complete: () => {},
    },
  );
  unsubscribers.push(stop);
}

async function reloadWorkspaceList(): Promise<void> {
  const before = new Set(state.workspaces.keys());
  await loadWorkspaces();
  for (const id of before) if (!state.workspaces.has(id)) renderWorkspace(id);
  dropEmptyNote();
  for (const id of state.workspaces.keys()) {
    renderWorkspace(id);
    ensureWatched(id);
  }
}

function dropEmptyNote(): void {
  document.querySelector("#workspaces > p.none")?.remove();
}

/** The held-tool-call inbox: the first push is the current inbox, then one per change to it. */
function watchInbox(): void {
  const stop = socket().subscribe<{ approvalInbox: { requests: ApprovalRequestFieldsFragment[] } }>(
    { query: WatchApprovalInboxDocument.toString(), variables: { workspaceId: null } },
    {
      next: (message) => {
        const update = message.data?.approvalInbox;
        if (!update) {
          if (message.errors?.length) toast(message.errors.map((e) => e.message).join("; "));
          return;
        }
        state.inbox = update.requests;
        renderInbox();
        void decidedCalls.refresh();
      },
      error: (error) => toast(`Live updates for the inbox stopped: ${(error as Error).message ?? "connection error"}`),
      complete: () => {},
    },
  );
  unsubscribers.push(stop);
}

// ---------------------------------------------------------------------------------------------
// Actions

async function act(key: string, action: () => Promise<unknown>, workspaceId: string, done: string): Promise<void> {
  if (state.busy.has(key)) return;
  state.busy.add(key);
  renderWorkspace(workspaceId);
  renderDetail();
  try {
    await action();
    toast(done, "ok");
  } catch (error) {
    toast((error as Error).message);
  } finally {
    state.busy.delete(key);
    await refetchWorkspace(workspaceId).catch(() => {});
    if (state.detail) await refetchDetail(state.detail.planId).catch(() => {});
  }
}

function approve(workspaceId: string, planId: string): Promise<void> {
  return act(`approve:${planId}`, async () => unwrap((await request(ApprovePlanDocument, { planId })).approvePlan), workspaceId, "Approved.");
}

async function vote(r: ApprovalRequestFieldsFragment, decision: "APPROVE" | "DENY"): Promise<void> {
  const key = `vote:${r.id}`;
  if (state.busy.has(key)) return;
  state.busy.add(key);
  renderInbox();
  try {
    unwrap(
      (await request(VoteOnApprovalRequestDocument, { input: { requestId: r.id, decision, expectedRevision: r.revision, comment: null } }))
        .voteOnApprovalRequest,
    );
    toast(decision === "APPROVE" ? "Approved." : "Denied.", "ok");
  } catch (error) {
    toast((error as Error).message);
  } finally {
    state.busy.delete(key);
    renderInbox();
  }
}

function withdraw(workspaceId: string, planId: string): Promise<void> {
  return act(
    `withdraw:${planId}`,
    async () => unwrap((await request(WithdrawApprovalDocument, { planId })).withdrawApproval),
    workspaceId,
    "Approval withdrawn.",
  );
}

function reserve(workspaceId: string, roleId: string | null): Promise<void> {
  return act(
    `reserve:${workspaceId}`,
    async () => unwrap((await request(ReserveWorkspaceDocument, { workspaceId, roleId })).reserveWorkspace),
    workspaceId,
    "Reserved.",
  );
}

function release(workspaceId: string, id: string): Promise<void> {
  return act(`release:${id}`, async () => unwrap((await request(ReleaseReservationDocument, { id })).releaseReservation), workspaceId, "Released.");
}

// ---------------------------------------------------------------------------------------------
// Rendering (DOM nodes only: every server string goes in as text, never as HTML)

type Child = Node | string | null | undefined | false;

function h(tag: string, attrs: Record<string, string | boolean | ((e: Event) => void)> = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else if (v === true) el.setAttribute(k, "");
    else if (v !== false) el.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

const $ = (id: string) => document.getElementById(id)!;

function time(iso: string): string {
  const d = new Date(iso);
  return d.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

function holder(r: Pick<ReservationFieldsFragment, "holderUser" | "holderRole">): string {
  return r.holderUser?.name ?? (r.holderRole ? `role ${r.holderRole.name}` : "?");
}

function toast(message: string, kind: "error" | "ok" = "error"): void {
  const el = h("div", { class: `toast ${kind}`, role: kind === "error" ? "alert" : "status" }, message);
  $("toasts").append(el);
  setTimeout(() => el.remove(), kind === "error" ? 8000 : 3000);
}

function setLive(live: State["live"]): void {
  state.live = live;
  const el = document.getElementById("live");
  if (el) {
    el.textContent = live === "live" ? "● live" : live === "connecting" ? "○ connecting" : live === "reconnecting" ? "○ reconnecting" : "○ offline";
    el.className = `live ${live}`;
    el.dataset.state = live;
  }
}

function renderHeader(): void {
  const who = $("who");
  who.replaceChildren();
  if (state.viewer) {
    who.append(
      h("span", { class: "org" }, state.viewer.organization.name),
      h("span", { class: "viewer", "data-testid": "viewer" }, state.viewer.name),
      h("span", { id: "live", class: `live ${state.live}`, "data-state": state.live }),
      h("a", { href: "/graphql", class: "link" }, "Explorer"),
      h("button", { type: "button", class: "link", onclick: signOut }, "Sign out"),
    );
    setLive(state.live);
  }
}

/** A gate's explanation as the CLI prints it (explainGate): one line each, what is missing marked. */
function explainList(lines: ReturnType<typeof explainGate>): HTMLElement {
  return h(
    "ul",
    { class: "explain" },
    ...lines.map((l) =>
      h(
        "li",
        { class: l.kind },
        h("span", { class: "mark" }, l.kind === "missing" ? "✗" : l.kind === "ok" ? "✓" : "·"),
        h("div", {}, l.text, l.from && l.from.length ? h("span", { class: "from" }, `from: ${l.from.join(", ")}`) : null),
      ),
    ),
  );
}

function gateView(workspace: WorkspaceFieldsFragment, gate: GateStatusFieldsFragment | undefined, planId: string): HTMLElement {
  const plan = workspace.openPlans.find((p) => p.id === planId);
  const status = gate?.planStatus ?? plan?.status ?? "PLANNED";
  const passed = gate?.passed ?? false;
  const approvedByMe = plan?.approvals.some((a) => a.user.id === state.viewer?.id && !a.withdrawnAt) ?? false;
  const busy = state.busy.has(`approve:${planId}`);
  const lines = gate ? explainGate(gate) : [];
  return h(
    "article",
    { class: `plan ${passed ? "passed" : "held"}`, "data-plan-id": planId, "data-version": String(gate?.version ?? "") },
    h(
      "header",
      {},
      h("a", { class: "plan-id", href: `#plan/${encodeURIComponent(planId)}`, title: planId, "data-action": "details" }, h("code", {}, planId.slice(0, 8))),
      h("span", { class: "status", "data-testid": "plan-status" }, status.toLowerCase()),
      plan && h("span", { class: "meta" }, `${plan.changeCount} change${plan.changeCount === 1 ? "" : "s"} · by ${plan.submittedBy.name} · ${time(plan.createdAt)}`),
      h("span", { class: `verdict ${passed ? "passed" : "held"}`, "data-testid": "gate-verdict" }, gate ? (passed ? "PASSED" : "NOT PASSED") : "…"),
    ),
    explainList(lines),
    status === "PLANNED" &&
      h(
        "div",
        { class: "actions" },
        approvedByMe
          ? h(
              "span",
              { class: "mine-actions" },
              h("span", { class: "mine" }, "You approved"),
              withdrawButton(workspace.id, planId),
            )
          : h("button", { type: "button", "data-action": "approve", disabled: busy, onclick: () => void approve(workspace.id, planId) }, busy ? "Approving…" : "Approve"),
      ),
  );
}

function withdrawButton(workspaceId: string, planId: string): HTMLElement {
  const busy = state.busy.has(`withdraw:${planId}`);
  return h(
    "button",
    { type: "button", class: "small", "data-action": "withdraw", disabled: busy, onclick: () => void withdraw(workspaceId, planId) },
    busy ? "Withdrawing…" : "Withdraw",
  );
}

function countText(c: PlanDetail["evaluation"]["changes"][number]): string {
  return c.onBaseline ? `on the baseline (${c.effectiveCount})` : String(c.effectiveCount);
}

/** The plan page: its changes with what governs each, its approvals, its gate (live or stored). */
function detailView(planId: string, gate: PlanDetail | null, loaded: boolean): HTMLElement {
  const close = h("a", { href: "#", class: "link", "data-action": "close-detail" }, "← All workspaces");
  if (!gate) {
    return h("section", { id: "plan-detail", class: "detail", "data-plan-id": planId }, close, h("p", { class: "none" }, loaded ? "No such plan, or you cannot read it." : "Loading…"));
  }
  const plan = gate.plan;
  const lines = explainGate(gate);
  const mine = plan.approvals.find((a) => a.user.id === state.viewer?.id && !a.withdrawnAt);
  const planned = plan.status === "PLANNED";
  return h(
    "section",
    { id: "plan-detail", class: `detail ${gate.passed ? "passed" : "held"}`, "data-plan-id": planId, "data-version": String(gate.version) },
    close,
    h(
      "header",
      {},
      h("h2", {}, `Plan ${planId.slice(0, 8)} on ${plan.workspace.name}`),
      h("span", { class: "status", "data-testid": "plan-status" }, plan.status.toLowerCase()),
      h("span", { class: `verdict ${gate.passed ? "passed" : "held"}`, "data-testid": "gate-verdict" }, gate.passed ? "PASSED" : "NOT PASSED"),
    ),
    h(
      "p",
      { class: "meta" },
      `Submitted by ${plan.submittedBy.name}, ${time(plan.createdAt)}`,
      plan.targeted ? " · targeted" : "",
      plan.applyStartedBy && plan.applyStartedAt ? ` · apply started by ${plan.applyStartedBy.name}, ${time(plan.applyStartedAt)}` : "",
      plan.finishedAt ? ` · finished ${time(plan.finishedAt)}` : "",
      plan.discardReason ? ` · ${plan.discardReason}` : "",
    ),
    h(
      "p",
      { class: "source", "data-testid": "gate-source" },
      gate.source === "STORED"
        ? `Stored evaluation: what the gate required when the apply started (version ${gate.version}, ${time(gate.evaluatedAt)}).`
        : `Evaluated now (version ${gate.version}).`,
    ),
    h("h3", {}, `Resource changes (${gate.evaluation.changes.length})`),
    h(
      "table",
      { class: "changes" },
      h("thead", {}, h("tr", {}, h("th", {}, "Address"), h("th", {}, "Action"), h("th", {}, "Governed by"), h("th", {}, "Approvals needed"))),
      h(
        "tbody",
        {},
        ...gate.evaluation.changes.map((c) =>
          h(
            "tr",
            { "data-address": c.address },
            h("td", {}, h("code", {}, c.address)),
            h("td", { class: `action ${c.action.toLowerCase()}` }, c.action.toLowerCase()),
            h("td", {}, c.governedBy.length ? c.governedBy.map((p) => `${p.policyName} (${p.auto ? "Auto" : p.count})`).join(", ") : "no policy"),
            h("td", { class: "count" }, countText(c)),
          ),
        ),
      ),
    ),
    h("h3", {}, "Approvals"),
    plan.approvals.length
      ? h(
          "ul",
          { class: "approvals" },
          ...plan.approvals.map((a) =>
            h(
              "li",
              { "data-approval-id": a.id, class: a.withdrawnAt ? "withdrawn" : "active" },
              h("strong", {}, a.user.name),
              h("span", { class: "meta" }, ` approved ${time(a.approvedAt)}`),
              a.withdrawnAt ? h("span", { class: "badge withdrawn" }, ` withdrawn ${time(a.withdrawnAt)}${a.withdrawnBy ? ` by ${a.withdrawnBy.name}` : ""}`) : null,
              planned && mine?.id === a.id ? withdrawButton(plan.workspace.id, planId) : null,
            ),
          ),
        )
      : h("p", { class: "none" }, "None yet"),
    planPage.element(planId, gate.passed),
    h("h3", {}, "Gate"),
    explainList(lines),
  );
}

function requestView(r: ApprovalRequestFieldsFragment): HTMLElement {
  const tool = r.logicalTool && r.logicalTool !== r.tool ? `${r.logicalTool} → ${r.tool}` : r.tool;
  const tallies = r.quorum.rules.map((q) => `${q.approvals}/${q.count}`).join(", ");
  const busy = state.busy.has(`vote:${r.id}`);
  return h(
    "li",
    { class: "request", "data-request-id": r.id },
    h("div", {}, h("code", {}, tool), h("span", { class: "meta" }, ` ${r.environment}${r.workspaceName ? ` on ${r.workspaceName}` : ""}`)),
    h(
      "div",
      { class: "meta" },
      `${r.agentKeyName ? `agent ${r.agentKeyName} · ` : ""}${r.connectionName ? `connection ${r.connectionName} · ` : ""}quorum ${r.quorum.state.toLowerCase()}${tallies ? ` (${tallies})` : ""} · expires ${time(r.expiresAt)}${r.amountUsd != null ? ` · $${r.amountUsd}` : ""}`,
    ),
    ...r.votes.map((v) => h("div", { class: "meta" }, `${v.decision.toLowerCase()} by ${v.reviewer.name}${v.comment ? `: ${v.comment}` : ""}`)),
    r.viewerCanVote &&
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", "data-action": "vote-approve", disabled: busy, onclick: () => void vote(r, "APPROVE") }, "Approve"),
        h("button", { type: "button", "data-action": "vote-deny", class: "deny", disabled: busy, onclick: () => void vote(r, "DENY") }, "Deny"),
      ),
  );
}

function renderInbox(): void {
  const host = document.getElementById("inbox");
  if (!host) return;
  const requests = state.inbox;
  host.replaceChildren(
    h("h3", {}, requests?.length ? `Held tool calls waiting for you (${requests.length})` : "Held tool calls waiting for you"),
    requests === null
      ? h("p", { class: "none" }, "…")
      : requests.length
        ? h("ul", { class: "requests" }, ...requests.map(requestView))
        : h("p", { class: "none" }, "Nothing waits for your decision."),
    decidedCalls.element(),
  );
}

type HistoryWorkspace = NonNullable<WorkspaceHistoryQuery["workspace"]>;

/** A workspace's history: its finished plans (who approved, who applied, how it ended) and released reservations. */
function historyView(workspaceId: string, w: HistoryWorkspace | null, loaded: boolean): HTMLElement {
  const close = h("a", { href: "#", class: "link", "data-action": "close-detail" }, "← All workspaces");
  if (!w) {
    return h("section", { id: "history", class: "detail", "data-workspace-id": workspaceId }, close, h("p", { class: "none" }, loaded ? "No such workspace, or you cannot read it." : "Loading…"));
  }
  const finished = w.plans.edges.map((e) => e.node).filter((p) => p.status !== "PLANNED" && p.status !== "APPLYING");
  const released = w.reservations.filter((r) => !r.active);
  return h(
    "section",
    { id: "history", class: "detail history", "data-workspace-id": workspaceId },
    close,
    h("header", {}, h("h2", {}, `History of ${w.name}`)),
    h("h3", {}, `Finished plans (${finished.length})`),
    finished.length
      ? h(
          "table",
          { class: "changes" },
          h("thead", {}, h("tr", {}, h("th", {}, "Plan"), h("th", {}, "Outcome"), h("th", {}, "Approved by"), h("th", {}, "Applied by"), h("th", {}, "Finished"))),
          h(
            "tbody",
            {},
            ...finished.map((p) => {
              const active = p.approvals.filter((a) => !a.withdrawnAt).map((a) => a.user.name);
              const withdrawn = p.approvals.filter((a) => a.withdrawnAt).map((a) => `${a.user.name} (withdrawn)`);
              return h(
                "tr",
                { "data-plan-id": p.id },
                h("td", {}, h("a", { href: `#plan/${encodeURIComponent(p.id)}` }, h("code", {}, p.id.slice(0, 8))), h("span", { class: "meta" }, ` ${p.changeCount} change${p.changeCount === 1 ? "" : "s"}`)),
                h("td", { class: `outcome ${p.status.toLowerCase()}` }, p.status.toLowerCase() + (p.discardReason ? ` (${p.discardReason})` : "")),
                h("td", { class: "approved-by" }, [...active, ...withdrawn].join(", ") || "nobody"),
                h("td", { class: "applied-by" }, p.applyStartedBy ? `${p.applyStartedBy.name}${p.applyStartedAt ? `, ${time(p.applyStartedAt)}` : ""}` : "—"),
                h("td", {}, p.finishedAt ? time(p.finishedAt) : "—"),
              );
            }),
          ),
        )
      : h("p", { class: "none" }, "None yet"),
    h("h3", {}, `Released reservations (${released.length})`),
    released.length
      ? h(
          "ul",
          { class: "released" },
          ...released.map((r) =>
            h(
              "li",
              { "data-reservation-id": r.id },
              h("strong", {}, holder(r)),
              h(
                "span",
                { class: "meta" },
                ` placed by ${r.placedBy.name}, ${time(r.placedAt)} · released${r.releasedBy ? ` by ${r.releasedBy.name}` : ""}${r.releasedAt ? `, ${time(r.releasedAt)}` : ""}${r.releaseReason ? ` (${r.releaseReason})` : ""}`,
              ),
            ),
          ),
        )
      : h("p", { class: "none" }, "None"),
  );
}

function renderDetail(): void {
  const host = document.getElementById("detail");
  if (!host) return;
  const d = state.detail;
  const hist = state.history;
  host.replaceChildren(...(d ? [detailView(d.planId, d.gate, d.loaded)] : hist ? [historyView(hist.workspaceId, hist.workspace, hist.loaded)] : []));
  host.hidden = !d && !hist;
  $("workspaces").hidden = Boolean(d || hist);
}

function workspaceView(w: WorkspaceFieldsFragment): HTMLElement {
  const live = state.gates.get(w.id);
  const planIds = live ? [...live.plans.keys()] : w.openPlans.map((p) => p.id);
  const roles = w.reservableRoles;
  const picked = state.pickedRole.get(w.id) ?? roles[0]?.id ?? "";
  const reserving = state.busy.has(`reserve:${w.id}`);
  const select = h(
    "select",
    { "aria-label": "Role to reserve for", onchange: (e) => state.pickedRole.set(w.id, (e.target as HTMLSelectElement).value) },
    ...roles.map((r) => {
      const option = h("option", { value: r.id }, r.name) as HTMLOptionElement;
      option.selected = r.id === picked;
      return option;
    }),
  );
  return h(
    "section",
    { class: "workspace", id: `ws-${w.id}`, "data-workspace": w.name },
    h(
      "header",
      {},
      h("h2", {}, w.name),
      h("span", { class: `env env-${w.environment}` }, w.environment),
      h("span", { class: "meta" }, `${w.stack ? `stack ${w.stack.name} · ` : ""}baseline ${w.requiredApprovals}`),
      w.frozen && h("span", { class: "badge frozen" }, "frozen"),
      h("a", { href: `#history/${encodeURIComponent(w.id)}`, class: "history-link", "data-action": "history" }, "History"),
    ),
    h(
      "div",
      { class: "reservations" },
      h("h3", {}, "Reserved for"),
      w.reservations.length
        ? h(
            "ul",
            {},
            ...w.reservations.map((r) =>
              h(
                "li",
                { "data-reservation-id": r.id },
                h("strong", {}, holder(r)),
                h("span", { class: "meta" }, ` placed by ${r.placedBy.name}, ${time(r.placedAt)}`),
                h(
                  "button",
                  { type: "button", class: "small", "data-action": "release", disabled: state.busy.has(`release:${r.id}`), onclick: () => void release(w.id, r.id) },
                  "Release",
                ),
              ),
            ),
          )
        : h("p", { class: "none" }, "Nobody"),
      h(
        "div",
        { class: "actions" },
        w.viewerCanReserveForSelf &&
          h("button", { type: "button", "data-action": "reserve-self", disabled: reserving, onclick: () => void reserve(w.id, null) }, "Reserve for me"),
        roles.length > 0 &&
          h(
            "span",
            { class: "reserve-role" },
            select,
            h(
              "button",
              { type: "button", "data-action": "reserve-role", disabled: reserving, onclick: () => void reserve(w.id, (select as HTMLSelectElement).value || null) },
              "Reserve for role",
            ),
          ),
      ),
    ),
    h(
      "div",
      { class: "plans" },
      h("h3", {}, planIds.length ? `Open plans (${planIds.length})` : "Open plans"),
      planIds.length ? null : h("p", { class: "none" }, "None"),
      ...planIds.map((id) => gateView(w, live?.plans.get(id), id)),
    ),
  );
}

function renderWorkspace(id: string): void {
  const w = state.workspaces.get(id);
  const existing = document.getElementById(`ws-${id}`);
  if (!w) {
    existing?.remove();
    return;
  }
  const view = workspaceView(w);
  if (existing) existing.replaceWith(view);
  else $("workspaces").append(view);
}

function renderAll(): void {
  renderHeader();
  const list = $("workspaces");
  list.replaceChildren();
  if (!state.workspaces.size) list.append(h("p", { class: "none" }, "No workspaces you can read."));
  for (const id of [...state.workspaces.keys()]) renderWorkspace(id);
}

// ---------------------------------------------------------------------------------------------
// Sign-in

function showSignIn(message?: string): void {
  $("signin").hidden = false;
  $("main").hidden = true;
  $("who").replaceChildren();
  const error = $("signin-error");
  error.textContent = message ?? "";
  error.hidden = !message;
  ($("token") as HTMLInputElement).focus();
}

function signOut(): void {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  for (const stop of unsubscribers.splice(0)) stop();
  void ws?.dispose();
  ws = null;
  state.workspaces.clear();
  state.gates.clear();
  state.detail = null;
  state.history = null;
  state.inbox = null;
  watched.clear();
  renderDetail();
  showSignIn();
}

async function start(token: string): Promise<void> {
  state.token = token;
  try {
    state.viewer = (await request(ViewerDocument, {})).viewer;
  } catch (error) {
    state.token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    const code = (error as ApiError).code;
    showSignIn(code === "UNAUTHENTICATED" ? "That token was not accepted (unknown, revoked or expired)." : (error as Error).message);
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("signin").hidden = true;
  $("main").hidden = false;
  // Subscribed before the list is read, so a workspace created meanwhile is not missed.
  watchWorkspaceList();
  await loadWorkspaces();
  renderAll();
  for (const id of state.workspaces.keys()) ensureWatched(id);
  renderInbox();
  watchInbox();
  openDetailFromHash();
}

function init(): void {
  window.addEventListener("hashchange", () => {
    if (state.token) openDetailFromHash();
  });
  const form = $("signin-form") as HTMLFormElement;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = ($("token") as HTMLInputElement).value.trim().replace(/^Bearer\s+/i, "");
    if (value) void start(value);
  });
  // A token in the URL (?token=…) signs in once and is then dropped from the address bar.
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get("token");
  if (fromUrl) {
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  const token = fromUrl ?? sessionStorage.getItem(TOKEN_KEY);
  if (token) void start(token);
  else showSignIn();
}

init();
