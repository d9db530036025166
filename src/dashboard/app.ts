// The live gate dashboard (served at `/`, bundled for the browser by src/dashboard/http.ts).
// Workspaces, who each is reserved for, their open plans and each plan's gate with its
// explanation, kept live over graphql-ws (workspaceGates) with no reload; approve, reserve and
// release for the signed-in user, each button shown only when the API says the viewer may.
// The token is entered once and kept in sessionStorage; a token the server stops accepting
// (revoked, expired) ends the session and says so on the sign-in form.
// Plain DOM, no framework; the same typed documents as the CLI (operations/*.graphql).
import { createClient, type Client } from "graphql-ws/client";
import {
  ApprovePlanDocument,
  PlanDetailDocument,
  VoteOnApprovalRequestDocument,
  WatchApprovalInboxDocument,
  WatchWorkspacesChangedDocument,
  WorkspaceHistoryDocument,
  VisibleStacksDocument,
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
  type VisibleStacksQuery,
  type WorkspaceFieldsFragment,
  type WorkspacesQuery,
} from "../generated/graphql/graphql.js";
import { explainGate } from "../clients/explain.js";
import { coalesced } from "./coalesce.js";
import { TOKEN_STORAGE_KEY as TOKEN_KEY } from "./session.js";
import { createPlanPage } from "./plan-page.js";
import { createDecidedCalls } from "./decided-calls.js";
import { h, time, type Child } from "./dom.js";

type Live = "connecting" | "live" | "reconnecting" | "resuming" | "offline";

interface State {
  token: string | null;
  viewer: ViewerQuery["viewer"] | null;
  workspaces: Map<string, WorkspaceFieldsFragment>;
  /** workspace id → the newest workspaceGates message's plans, by plan id. */
  gates: Map<string, { version: number; plans: Map<string, GateStatusFieldsFragment> }>;
  /** The role picked in each workspace's "reserve for role" select, kept across re-renders ("" until one is picked). */
  pickedRole: Map<string, string>;
  busy: Set<string>;
  /** The socket's state. */
  live: Exclude<Live, "resuming">;
  /** Subscriptions ended by an outage (SERVICE_UNAVAILABLE), waiting for their next attempt. */
  resuming: Set<string>;
  /** The plan page (`#plan/<id>`): the plan and its gate, re-read on every change to its workspace. */
  detail: { planId: string; gate: PlanDetailQuery["gate"] | null; loaded: boolean } | null;
  /** A workspace's history (`#history/<id>`), re-read on every change to the workspace. */
  history: { workspaceId: string; workspace: WorkspaceHistoryQuery["workspace"] | null; loaded: boolean } | null;
  /** Held tool calls the viewer may decide now (the reviewer view: never the call's arguments); null until the first push. */
  inbox: ApprovalRequestFieldsFragment[] | null;
  /** The stacks the viewer can read, named when no workspace is readable; null until read. */
  stacks: VisibleStacksQuery["stacks"] | null;
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
  resuming: new Set(),
  detail: null,
  history: null,
  inbox: null,
  stacks: null,
};

let ws: Client | null = null;
const unsubscribers: Array<() => void> = [];

// The plan page's actions, run link and diff (plan-page.ts), and the inbox's decided calls (decided-calls.ts).
const planPage = createPlanPage({
  request: sessionRequest,
  mayApprove: (workspaceId) => mayApprove(workspaceId, state.detail?.gate),
  toast: sessionToast,
  viewerId: () => state.viewer?.id ?? null,
  changed: async (workspaceId) => {
    await refetchWorkspace(workspaceId).catch(() => {});
    if (state.detail) await refetchDetail(state.detail.planId).catch(() => {});
  },
});
const decidedCalls = createDecidedCalls({ request: sessionRequest, toast: sessionToast });

/** The plan page's and decided calls' reads: a rejected token ends the session, like every other read. */
async function sessionRequest<TResult, TVariables>(document: TypedDocumentString<TResult, TVariables>, variables?: TVariables): Promise<TResult> {
  try {
    return await request(document, variables);
  } catch (error) {
    if ((error as ApiError).code === "UNAUTHENTICATED") endSession(TOKEN_ENDED);
    throw error;
  }
}

/** Their messages: none once signed out (the sign-in page says why, once). */
function sessionToast(message: string, kind?: "error" | "ok"): void {
  if (state.token) toast(message, kind);
}

// ---------------------------------------------------------------------------------------------
// Transport

class ApiError extends Error {
  code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/** What the sign-in form says when the server stops accepting the token. */
const TOKEN_ENDED = "You were signed out: the server no longer accepts your token (it was revoked or has expired). Paste a new token to go on.";
/** graphql-ws close codes meaning "this token is not accepted": the server sends 4401; 4403 is the library's own. */
const AUTH_CLOSE_CODES = new Set([4401, 4403]);

const unreachable = () =>
  new ApiError("UNREACHABLE", `Countersign is not reachable at ${location.host}: the server may be down or restarting. Try again in a moment.`);

async function request<TResult, TVariables>(document: TypedDocumentString<TResult, TVariables>, variables?: TVariables): Promise<TResult> {
  let response: Response;
  try {
    response = await fetch("/graphql", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${state.token ?? ""}` },
      body: JSON.stringify({ query: document.toString(), variables: variables ?? {} }),
    });
  } catch {
    // fetch's own "Failed to fetch" says nothing a person can act on.
    throw unreachable();
  }
  let body: { data?: TResult; errors?: Array<{ message: string; extensions?: { code?: string } }> };
  try {
    body = await response.json();
  } catch {
    throw new ApiError("BAD_RESPONSE", `Countersign answered HTTP ${response.status} without a GraphQL response (is a proxy in the way?).`);
  }
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

/** An action's failure: a rejected token ends the session; anything else is shown. */
function failed(error: unknown): void {
  if ((error as ApiError).code === "UNAUTHENTICATED") endSession(TOKEN_ENDED);
  else toast((error as Error).message);
}

function isCloseEvent(value: unknown): value is { code: number; reason: string } {
  return typeof value === "object" && value !== null && typeof (value as { code?: unknown }).code === "number" && "reason" in value;
}

type GraphQLErrors = ReadonlyArray<{ message: string; extensions?: Record<string, unknown> }>;
const withCode = (errors: GraphQLErrors | undefined, code: string) => errors?.find((e) => e.extensions?.code === code);

/** The CLI's backoff (src/cli/api.ts): from 1 s, doubling, capped at 30 s, with jitter. */
function backoff(attempt: number): number {
  return Math.min(1000 * 2 ** attempt, 30_000) + Math.random() * 500;
}

function socket(): Client {
  if (ws) return ws;
  let connectedOnce = false;
  const client = createClient({
    url: `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/graphql`,
    connectionParams: () => ({ authorization: `Bearer ${state.token ?? ""}` }),
    retryAttempts: Infinity,
    retryWait: (retries) => new Promise((resolve) => setTimeout(resolve, backoff(retries))),
    // A token the server refused will be refused again: end the session instead.
    shouldRetry: (event) => !(isCloseEvent(event) && AUTH_CLOSE_CODES.has(event.code)),
    on: {
      connecting: (isRetry) => ws === client && setLive(isRetry ? "reconnecting" : "connecting"),
      connected: () => {
        if (ws !== client) return;
        setLive("live");
        // Changes to the list while the socket was down were not pushed: read it again.
        if (connectedOnce) void reloadWorkspaceList().catch(failed);
        connectedOnce = true;
      },
      closed: (event) => {
        if (ws !== client) return;
        if (isCloseEvent(event) && AUTH_CLOSE_CODES.has(event.code)) endSession(TOKEN_ENDED);
        else if (state.token) setLive("reconnecting");
      },
    },
  });
  ws = client;
  return client;
}

/**
 * One live subscription. Its data goes to `onData`; an outage that ends it (SERVICE_UNAVAILABLE,
 * as the server answers while a dependency is down) subscribes again with the CLI's backoff, no
 * sooner than the server's retryAfterSeconds; the first message after a resume is the current
 * state (or `onResume` re-reads it). A refused token ends the session. Returns its stop.
 */
function liveSubscription<T>(options: {
  key: string;
  what: string;
  query: string;
  variables: Record<string, unknown>;
  onData: (data: T) => void;
  onResume?: () => void;
}): () => void {
  let stop: (() => void) | null = null;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let stopped = false;
  let attempt = 0;
  let unavailable: { retryAfterSeconds?: number } | null = null;

  const resumeLater = () => {
    stop?.();
    stop = null;
    if (stopped) return;
    const floor = Number(unavailable?.retryAfterSeconds ?? 0) * 1000;
    const delay = Math.max(backoff(attempt++), floor);
    state.resuming.add(options.key);
    renderLive();
    timer = setTimeout(() => {
      timer = null;
      run(true);
    }, delay);
  };

  const run = (resumed: boolean) => {
    unavailable = null;
    if (stopped || !state.token) return;
    stop = socket().subscribe<T>(
      { query: options.query, variables: options.variables },
      {
        next: (message) => {
          const errors = message.errors as GraphQLErrors | undefined;
          const outage = withCode(errors, "SERVICE_UNAVAILABLE");
          if (outage) {
            unavailable = { retryAfterSeconds: outage.extensions?.retryAfterSeconds as number | undefined };
            return;
          }
          if (withCode(errors, "UNAUTHENTICATED")) return endSession(TOKEN_ENDED);
          if (errors?.length && !message.data) toast(errors.map((e) => e.message).join("; "));
          if (!message.data) return;
          attempt = 0;
          if (state.resuming.delete(options.key)) renderLive();
          options.onData(message.data as T);
        },
        error: (error) => {
          if (stopped || !state.token) return;
          if (Array.isArray(error)) {
            const errors = error as GraphQLErrors;
            const outage = withCode(errors, "SERVICE_UNAVAILABLE");
            if (outage) {
              unavailable = { retryAfterSeconds: outage.extensions?.retryAfterSeconds as number | undefined };
              return resumeLater();
            }
            if (withCode(errors, "UNAUTHENTICATED")) return endSession(TOKEN_ENDED);
            return toast(`Live updates for ${options.what} stopped: ${errors.map((e) => e.message).join("; ")}`);
          }
          // A refused token: the socket's closed handler has ended the session.
          if (isCloseEvent(error) && AUTH_CLOSE_CODES.has(error.code)) return;
          toast(`Live updates for ${options.what} stopped (${isCloseEvent(error) ? `${error.code} ${error.reason}` : "connection error"}); reload the page to try again.`);
        },
        complete: () => {
          if (unavailable) resumeLater();
        },
      },
    );
    if (resumed) options.onResume?.();
  };

  run(false);
  const cancel = () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    stop?.();
    if (state.resuming.delete(options.key)) renderLive();
  };
  unsubscribers.push(cancel);
  return cancel;
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

/** With no workspace to show, the stacks the viewer can read are named instead. */
async function loadStacksIfEmpty(): Promise<void> {
  if (state.workspaces.size || state.stacks) return;
  state.stacks = (await request(VisibleStacksDocument, { first: 50 })).stacks;
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
  updateTitle();
});

function watchWorkspace(id: string): void {
  liveSubscription<{ workspaceGates: { workspaceId: string; version: number; plans: GateStatusFieldsFragment[] } }>({
    key: `workspaceGates:${id}`,
    what: `workspace ${state.workspaces.get(id)?.name ?? id}`,
    query: WatchWorkspaceGatesDocument.toString(),
    variables: { workspaceId: id },
    onData: ({ workspaceGates: update }) => {
      const known = state.gates.get(id);
      if (known && update.version <= known.version) return;
      state.gates.set(id, { version: update.version, plans: new Map(update.plans.map((p) => [p.planId, p])) });
      if (known) announceGateChanges(known.plans, update.plans);
      renderWorkspace(id);
      updateTitle();
      // Reservations and the open-plan list live on the workspace: re-read it on every change.
      void refetchWorkspace(id).catch(failed);
      if (state.detail?.gate?.workspaceId === id) void refetchDetail(state.detail.planId).catch(failed);
      if (state.history?.workspaceId === id) void refetchHistory(id).catch(failed);
    },
  });
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

/** The view the address names: a plan page, a workspace's history, or the list. */
function openDetailFromHash(): void {
  const history = /^#history\/([^/]+)$/.exec(location.hash);
  if (history) {
    const workspaceId = decodeURIComponent(history[1]!);
    state.detail = null;
    if (state.history?.workspaceId !== workspaceId) state.history = { workspaceId, workspace: null, loaded: false };
    renderDetail();
    void refetchHistory(workspaceId).catch(failed);
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
  void refetchDetail(planId).catch(failed);
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
  liveSubscription<{ workspacesChanged: { workspaceIds: string[]; reason: string } }>({
    key: "workspacesChanged",
    what: "the workspace list",
    query: WatchWorkspacesChangedDocument.toString(),
    variables: {},
    onData: ({ workspacesChanged: update }) => {
      if (update.workspaceIds.length === 0) {
        void reloadWorkspaceList().catch(failed);
        return;
      }
      for (const id of update.workspaceIds) {
        if (state.workspaces.has(id)) continue;
        void refetchWorkspace(id)
          .then(() => {
            renderEmptyNote();
            ensureWatched(id);
            updateTitle();
          })
          .catch(failed);
      }
    },
    // Nothing is pushed for changes made while it was down: read the list again.
    onResume: () => void reloadWorkspaceList().catch(failed),
  });
}

async function reloadWorkspaceList(): Promise<void> {
  const before = new Set(state.workspaces.keys());
  await loadWorkspaces();
  await loadStacksIfEmpty();
  for (const id of before) if (!state.workspaces.has(id)) renderWorkspace(id);
  renderEmptyNote();
  for (const id of state.workspaces.keys()) {
    renderWorkspace(id);
    ensureWatched(id);
  }
  updateTitle();
}

/** The held-tool-call inbox: the first push is the current inbox, then one per change to it. */
function watchInbox(): void {
  liveSubscription<{ approvalInbox: { requests: ApprovalRequestFieldsFragment[] } }>({
    key: "approvalInbox",
    what: "the inbox",
    query: WatchApprovalInboxDocument.toString(),
    variables: { workspaceId: null },
    onData: ({ approvalInbox: update }) => {
      const before = state.inbox?.length ?? null;
      state.inbox = update.requests;
      if (before !== null && update.requests.length > before) announce(`${update.requests.length} held tool call${update.requests.length === 1 ? "" : "s"} wait for your decision.`);
      renderInbox();
      void decidedCalls.refresh();
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Permissions: what the viewer may do, from the API's own answers (never guessed)

function viewerId(): string | undefined {
  return state.viewer?.id;
}

/**
 * Approve is offered to a holder of (workspace, approve) (Workspace.viewerCanApprove) and to a
 * named approver the gate is still waiting for (seed 000: being named is itself the grant), and
 * only while the viewer has no active approval of their own.
 */
function mayApprove(workspaceId: string, gate: Pick<GateStatusFieldsFragment, "evaluation"> | undefined | null): boolean {
  if (state.workspaces.get(workspaceId)?.viewerCanApprove) return true;
  const me = viewerId();
  return Boolean(me && gate?.evaluation.requirements.some((r) => r.missingApprovers?.eligibleUsers.some((u) => u.id === me)));
}

/** Plans waiting for the viewer's approval: open, not passed, not approved by them, and theirs to approve. */
function plansWaitingForMe(): number {
  let n = 0;
  for (const [workspaceId, live] of state.gates) {
    const w = state.workspaces.get(workspaceId);
    if (!w) continue;
    for (const gate of live.plans.values()) {
      if (gate.passed || gate.planStatus !== "PLANNED") continue;
      const plan = w.openPlans.find((p) => p.id === gate.planId);
      const approved = plan?.approvals.some((a) => a.user.id === viewerId() && !a.withdrawnAt) ?? false;
      if (!approved && mayApprove(workspaceId, gate)) n++;
    }
  }
  return n;
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
    failed(error);
  } finally {
    state.busy.delete(key);
    if (state.token) {
      await refetchWorkspace(workspaceId).catch(() => {});
      if (state.detail) await refetchDetail(state.detail.planId).catch(() => {});
    }
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
    failed(error);
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

const $ = (id: string) => document.getElementById(id)!;

function holder(r: Pick<ReservationFieldsFragment, "holderUser" | "holderRole">): string {
  return r.holderUser?.name ?? (r.holderRole ? `role ${r.holderRole.name}` : "?");
}

function toast(message: string, kind: "error" | "ok" = "error"): void {
  const el = h("div", { class: `toast ${kind}`, role: kind === "error" ? "alert" : "status" }, message);
  $("toasts").append(el);
  setTimeout(() => el.remove(), kind === "error" ? 8000 : 3000);
}

/** Says `message` through the page's polite live region (gate changes, connection state). */
function announce(message: string): void {
  const region = document.getElementById("announcer");
  if (!region) return;
  // A new node each time, so the same words twice are announced twice.
  region.replaceChildren(h("p", {}, message));
}

const LIVE_TEXT: Record<Live, string> = {
  live: "● live",
  connecting: "○ connecting",
  reconnecting: "○ reconnecting",
  resuming: "○ resuming",
  offline: "○ offline",
};
const LIVE_ANNOUNCEMENT: Partial<Record<Live, string>> = {
  live: "Live updates connected.",
  reconnecting: "Connection to Countersign lost; reconnecting.",
  resuming: "Countersign is unavailable for the moment; live updates resume by themselves.",
};

/** The indicator last shown, so that only a change is announced. */
let shownLive: Live | null = null;

function setLive(live: State["live"]): void {
  state.live = live;
  renderLive();
}

/** The connection indicator: the socket's state, or "resuming" while a subscription waits to be retried. */
function renderLive(): void {
  const shown: Live = state.live === "live" && state.resuming.size ? "resuming" : state.live;
  const el = document.getElementById("live");
  if (el) {
    el.textContent = LIVE_TEXT[shown];
    el.className = `live ${shown}`;
    el.dataset.state = shown;
    el.title = LIVE_ANNOUNCEMENT[shown] ?? "";
  }
  if (shown !== shownLive) {
    if (shownLive !== null && state.token && LIVE_ANNOUNCEMENT[shown]) announce(LIVE_ANNOUNCEMENT[shown]!);
    shownLive = shown;
  }
}

/** Tells which plans' gates changed verdict in a workspaceGates message. */
function announceGateChanges(before: Map<string, GateStatusFieldsFragment>, after: GateStatusFieldsFragment[]): void {
  const changed = after.filter((g) => before.has(g.planId) && before.get(g.planId)!.passed !== g.passed);
  if (changed.length) {
    announce(changed.map((g) => `Plan ${g.planId.slice(0, 8)} on ${g.workspaceName}: gate ${g.passed ? "passed" : "no longer passes"}.`).join(" "));
  }
}

/** The tab's title: what is open, and how much waits for the viewer. */
function updateTitle(): void {
  let view = "Sign in";
  if (state.token && state.viewer) {
    const d = state.detail;
    const hist = state.history;
    if (d) view = d.gate ? `Plan ${d.planId.slice(0, 8)} on ${d.gate.plan.workspace.name}` : `Plan ${d.planId.slice(0, 8)}`;
    else if (hist) view = hist.workspace ? `History of ${hist.workspace.name}` : "History";
    else view = "Workspaces";
    const plans = plansWaitingForMe();
    const calls = state.inbox?.length ?? 0;
    const waiting = [plans ? `${plans} plan${plans === 1 ? "" : "s"}` : "", calls ? `${calls} held call${calls === 1 ? "" : "s"}` : ""].filter(Boolean);
    if (waiting.length) view += ` · ${waiting.join(", ")} waiting for you`;
  }
  document.title = `${view} · Countersign`;
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
      h("button", { type: "button", class: "link", "data-action": "sign-out", onclick: () => signOut() }, "Sign out"),
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
        h("span", { class: "mark", "aria-hidden": "true" }, l.kind === "missing" ? "✗" : l.kind === "ok" ? "✓" : "·"),
        h("div", {}, l.kind === "missing" ? h("span", { class: "sr-only" }, "Missing: ") : null, l.text, l.from && l.from.length ? h("span", { class: "from" }, `from: ${l.from.join(", ")}`) : null),
      ),
    ),
  );
}

function gateView(workspace: WorkspaceFieldsFragment, gate: GateStatusFieldsFragment | undefined, planId: string): HTMLElement {
  const plan = workspace.openPlans.find((p) => p.id === planId);
  const status = gate?.planStatus ?? plan?.status ?? "PLANNED";
  const passed = gate?.passed ?? false;
  const approvedByMe = plan?.approvals.some((a) => a.user.id === viewerId() && !a.withdrawnAt) ?? false;
  const lines = gate ? explainGate(gate) : [];
  return h(
    "article",
    { class: `plan ${passed ? "passed" : "held"}`, "data-plan-id": planId, "data-version": String(gate?.version ?? ""), "aria-label": `Plan ${planId.slice(0, 8)}` },
    h(
      "header",
      {},
      h("a", { class: "plan-id", href: `#plan/${encodeURIComponent(planId)}`, title: planId, "data-action": "details" }, h("code", {}, planId.slice(0, 8))),
      h("span", { class: "status", "data-testid": "plan-status" }, status.toLowerCase()),
      plan && h("span", { class: "meta" }, `${plan.changeCount} change${plan.changeCount === 1 ? "" : "s"} · by ${plan.submittedBy.name} · ${time(plan.createdAt)}`),
      h("span", { class: `verdict ${passed ? "passed" : "held"}`, "data-testid": "gate-verdict" }, gate ? (passed ? "PASSED" : "NOT PASSED") : "…"),
    ),
    explainList(lines),
    status === "PLANNED" && approvalActions(workspace.id, planId, approvedByMe, gate),
  );
}

/**
 * Approve / "You approved" + Withdraw, where the viewer may: the same on the list and the plan
 * page. A viewer who may not approve reads why instead of meeting a button that would refuse.
 */
function approvalActions(workspaceId: string, planId: string, approvedByMe: boolean, gate: Pick<GateStatusFieldsFragment, "evaluation"> | undefined | null): HTMLElement {
  const busy = state.busy.has(`approve:${planId}`);
  if (approvedByMe) {
    return h("div", { class: "actions" }, h("span", { class: "mine-actions" }, h("span", { class: "mine" }, "You approved"), withdrawButton(workspaceId, planId)));
  }
  if (!mayApprove(workspaceId, gate)) {
    const name = state.workspaces.get(workspaceId)?.name;
    return h(
      "div",
      { class: "actions" },
      h("p", { class: "meta", "data-testid": "cannot-approve" }, `Approving needs (workspace, approve${name ? `, ${name}` : ""}) or being a named approver on a policy governing the plan.`),
    );
  }
  return h(
    "div",
    { class: "actions" },
    h("button", { type: "button", "data-action": "approve", "data-plan-id": planId, disabled: busy, onclick: () => void approve(workspaceId, planId) }, busy ? "Approving…" : "Approve"),
  );
}

function withdrawButton(workspaceId: string, planId: string): HTMLElement {
  const busy = state.busy.has(`withdraw:${planId}`);
  return h(
    "button",
    { type: "button", class: "small", "data-action": "withdraw", "data-plan-id": planId, disabled: busy, onclick: () => void withdraw(workspaceId, planId) },
    busy ? "Withdrawing…" : "Withdraw",
  );
}

function countText(c: PlanDetail["evaluation"]["changes"][number]): string {
  return c.onBaseline ? `on the baseline (${c.effectiveCount})` : String(c.effectiveCount);
}

/** The link back to the list from a plan page or a history (Escape does the same). */
function closeLink(): HTMLElement {
  return h("a", { href: "#", class: "link back", "data-action": "close-detail" }, "← All workspaces");
}

/** A view's heading: where focus goes when the view opens. */
function viewHeading(text: string): HTMLElement {
  return h("h2", { id: "view-title", tabindex: "-1" }, text);
}

/** The plan page: its changes with what governs each, its approvals, its gate (live or stored). */
function detailView(planId: string, gate: PlanDetail | null, loaded: boolean): HTMLElement {
  if (!gate) {
    return h(
      "section",
      { id: "plan-detail", class: "detail", "data-plan-id": planId, "aria-labelledby": "view-title" },
      closeLink(),
      h("header", {}, viewHeading(`Plan ${planId.slice(0, 8)}`)),
      h("p", { class: "none" }, loaded ? "No such plan, or you cannot read it." : "Loading…"),
    );
  }
  const plan = gate.plan;
  return h(
    "section",
    { id: "plan-detail", class: `detail ${gate.passed ? "passed" : "held"}`, "data-plan-id": planId, "data-version": String(gate.version), "aria-labelledby": "view-title" },
    closeLink(),
    h(
      "header",
      {},
      viewHeading(`Plan ${planId.slice(0, 8)} on ${plan.workspace.name}`),
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
    planActionArea(gate),
    ...planBody(gate),
  );
}

/**
 * The plan page's action area, under its header: what the viewer may do to the plan now. Today
 * the approval (Approve, or "You approved" with Withdraw); further plan actions belong here.
 */
function planActionArea(gate: PlanDetail): HTMLElement | null {
  const plan = gate.plan;
  if (plan.status !== "PLANNED") return null;
  const mine = plan.approvals.some((a) => a.user.id === viewerId() && !a.withdrawnAt);
  // Approve itself, with its comment, is plan-page.ts's (with Apply and Discard, further down).
  if (!mine && mayApprove(plan.workspace.id, gate)) return null;
  const area = approvalActions(plan.workspace.id, plan.id, mine, gate);
  area.classList.add("plan-actions");
  area.setAttribute("data-testid", "plan-actions");
  return area;
}

/** The plan page's body: where its gate came from, its resource changes, its approvals, its gate. */
function planBody(gate: PlanDetail): HTMLElement[] {
  const plan = gate.plan;
  return [
    h(
      "p",
      { class: "source", "data-testid": "gate-source" },
      gate.source === "STORED"
        ? `Stored evaluation: what the gate required when the apply started (version ${gate.version}, ${time(gate.evaluatedAt)}).`
        : `Evaluated now (version ${gate.version}).`,
    ),
    h("h3", {}, `Resource changes (${gate.evaluation.changes.length})`),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "changes" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Address"), h("th", { scope: "col" }, "Action"), h("th", { scope: "col" }, "Governed by"), h("th", { scope: "col" }, "Approvals needed"))),
        h(
          "tbody",
          {},
          ...gate.evaluation.changes.map((c) =>
            h(
              "tr",
              { "data-address": c.address },
              h("td", { "data-label": "Address" }, h("code", {}, c.address)),
              h("td", { class: `action ${c.action.toLowerCase()}`, "data-label": "Action" }, c.action.toLowerCase()),
              h("td", { "data-label": "Governed by" }, c.governedBy.length ? c.governedBy.map((p) => `${p.policyName} (${p.auto ? "Auto" : p.count})`).join(", ") : "no policy"),
              h("td", { class: "count", "data-label": "Approvals needed" }, countText(c)),
            ),
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
            ),
          ),
        )
      : h("p", { class: "none" }, "None yet"),
    planPage.element(plan.id, gate.passed),
    h("h3", {}, "Gate"),
    explainList(explainGate(gate)),
  ];
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
  keepFocus(host, () =>
    host.replaceChildren(
      h("h2", { id: "inbox-title" }, requests?.length ? `Held tool calls waiting for you (${requests.length})` : "Held tool calls waiting for you"),
      requests === null
        ? h("p", { class: "none" }, "…")
        : requests.length
          ? h("ul", { class: "requests" }, ...requests.map(requestView))
          : h("p", { class: "none" }, "Nothing waits for your decision. A tool call an agent makes that needs your vote appears here as it is held."),
      decidedCalls.element(),
    ),
  );
  updateTitle();
}

type HistoryWorkspace = NonNullable<WorkspaceHistoryQuery["workspace"]>;

/** A workspace's history: its finished plans (who approved, who applied, how it ended) and released reservations. */
function historyView(workspaceId: string, w: HistoryWorkspace | null, loaded: boolean): HTMLElement {
  if (!w) {
    return h(
      "section",
      { id: "history", class: "detail history", "data-workspace-id": workspaceId, "aria-labelledby": "view-title" },
      closeLink(),
      h("header", {}, viewHeading("History")),
      h("p", { class: "none" }, loaded ? "No such workspace, or you cannot read it." : "Loading…"),
    );
  }
  const finished = w.plans.edges.map((e) => e.node).filter((p) => p.status !== "PLANNED" && p.status !== "APPLYING");
  const released = w.reservations.filter((r) => !r.active);
  return h(
    "section",
    { id: "history", class: "detail history", "data-workspace-id": workspaceId, "aria-labelledby": "view-title" },
    closeLink(),
    h("header", {}, viewHeading(`History of ${w.name}`)),
    h("h3", {}, `Finished plans (${finished.length})`),
    finished.length
      ? h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { class: "changes" },
            h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Plan"), h("th", { scope: "col" }, "Outcome"), h("th", { scope: "col" }, "Approved by"), h("th", { scope: "col" }, "Applied by"), h("th", { scope: "col" }, "Finished"))),
            h(
              "tbody",
              {},
              ...finished.map((p) => {
                const active = p.approvals.filter((a) => !a.withdrawnAt).map((a) => a.user.name);
                const withdrawn = p.approvals.filter((a) => a.withdrawnAt).map((a) => `${a.user.name} (withdrawn)`);
                return h(
                  "tr",
                  { "data-plan-id": p.id },
                  h("td", { "data-label": "Plan" }, h("a", { href: `#plan/${encodeURIComponent(p.id)}` }, h("code", {}, p.id.slice(0, 8))), h("span", { class: "meta" }, ` ${p.changeCount} change${p.changeCount === 1 ? "" : "s"}`)),
                  h("td", { class: `outcome ${p.status.toLowerCase()}`, "data-label": "Outcome" }, p.status.toLowerCase() + (p.discardReason ? ` (${p.discardReason})` : "")),
                  h("td", { class: "approved-by", "data-label": "Approved by" }, [...active, ...withdrawn].join(", ") || "nobody"),
                  h("td", { class: "applied-by", "data-label": "Applied by" }, p.applyStartedBy ? `${p.applyStartedBy.name}${p.applyStartedAt ? `, ${time(p.applyStartedAt)}` : ""}` : "—"),
                  h("td", { "data-label": "Finished" }, p.finishedAt ? time(p.finishedAt) : "—"),
                );
              }),
            ),
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

/**
 * Re-renders inside `host` keep the keyboard where it was: the focused element (by id, or by its
 * data-action within its plan or reservation) is focused again in the new nodes.
 */
function keepFocus(host: HTMLElement, render: () => void): void {
  const active = document.activeElement as HTMLElement | null;
  let selector: string | null = null;
  if (active && host.contains(active) && active !== host) {
    if (active.id) selector = `#${CSS.escape(active.id)}`;
    else if (active.dataset.action) {
      const scope = active.closest<HTMLElement>("[data-plan-id],[data-reservation-id],[data-request-id],[data-workspace]");
      const attr = scope ? ["data-plan-id", "data-reservation-id", "data-request-id", "data-workspace"].find((a) => scope.hasAttribute(a)) : null;
      selector = `${attr ? `[${attr}="${CSS.escape(scope!.getAttribute(attr)!)}"] ` : ""}[data-action="${CSS.escape(active.dataset.action)}"]`;
    }
  }
  render();
  if (selector) host.querySelector<HTMLElement>(selector)?.focus({ preventScroll: true });
}

/** Which view is open: its key changes when the person navigates, not when the data refreshes. */
let shownView = "";

function renderDetail(): void {
  const host = document.getElementById("detail");
  if (!host) return;
  const d = state.detail;
  const hist = state.history;
  keepFocus(host, () =>
    host.replaceChildren(...(d ? [detailView(d.planId, d.gate, d.loaded)] : hist ? [historyView(hist.workspaceId, hist.workspace, hist.loaded)] : [])),
  );
  host.hidden = !d && !hist;
  $("list").hidden = Boolean(d || hist);
  const view = d ? `plan:${d.planId}` : hist ? `history:${hist.workspaceId}` : "list";
  if (view !== shownView) {
    const first = shownView === "";
    shownView = view;
    // A new view takes the focus to its heading (not on the first render of the list).
    if (!first || view !== "list") (view === "list" ? $("list-title") : document.getElementById("view-title"))?.focus();
  }
  updateTitle();
}

function workspaceView(w: WorkspaceFieldsFragment): HTMLElement {
  const live = state.gates.get(w.id);
  const planIds = live ? [...live.plans.keys()] : w.openPlans.map((p) => p.id);
  const roles = w.reservableRoles;
  // The picker starts empty: reserving for a role is a choice, never a default.
  const picked = roles.some((r) => r.id === state.pickedRole.get(w.id)) ? state.pickedRole.get(w.id)! : "";
  const reserving = state.busy.has(`reserve:${w.id}`);
  const roleButton = h(
    "button",
    { type: "button", "data-action": "reserve-role", disabled: reserving || !picked, onclick: () => void reserve(w.id, (select as HTMLSelectElement).value || null) },
    "Reserve for role",
  ) as HTMLButtonElement;
  const select = h(
    "select",
    {
      "aria-label": `Role to reserve ${w.name} for`,
      "data-action": "pick-role",
      onchange: (e) => {
        const value = (e.target as HTMLSelectElement).value;
        state.pickedRole.set(w.id, value);
        roleButton.disabled = reserving || !value;
      },
    },
    h("option", { value: "" }, "Choose a role…"),
    ...roles.map((r) => {
      const option = h("option", { value: r.id }, r.name) as HTMLOptionElement;
      option.selected = r.id === picked;
      return option;
    }),
  );
  const canReserve = w.viewerCanReserveForSelf || roles.length > 0;
  return h(
    "section",
    { class: "workspace", id: `ws-${w.id}`, "data-workspace": w.name, "aria-labelledby": `ws-title-${w.id}` },
    h(
      "header",
      {},
      h("h2", { id: `ws-title-${w.id}` }, w.name),
      h("span", { class: `env env-${w.environment}` }, w.environment),
      h("span", { class: "meta" }, `${w.stack ? `stack ${w.stack.name} · ` : ""}baseline ${w.requiredApprovals}`),
      w.frozen && h("span", { class: "badge frozen" }, "frozen"),
      h("a", { href: `#history/${encodeURIComponent(w.id)}`, class: "history-link", "data-action": "history", "aria-label": `History of ${w.name}` }, "History"),
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
                r.viewerCanRelease &&
                  h(
                    "button",
                    {
                      type: "button",
                      class: "small",
                      "data-action": "release",
                      "aria-label": `Release the reservation for ${holder(r)}`,
                      disabled: state.busy.has(`release:${r.id}`),
                      onclick: () => void release(w.id, r.id),
                    },
                    "Release",
                  ),
              ),
            ),
          )
        : h("p", { class: "none" }, "Nobody"),
      canReserve &&
        h(
          "div",
          { class: "actions" },
          w.viewerCanReserveForSelf &&
            h("button", { type: "button", "data-action": "reserve-self", disabled: reserving, onclick: () => void reserve(w.id, null) }, "Reserve for me"),
          roles.length > 0 && h("span", { class: "reserve-role" }, select, roleButton),
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
  if (existing) {
    const list = $("workspaces");
    keepFocus(list, () => existing.replaceWith(view));
  } else $("workspaces").append(view);
}

/**
 * With no readable workspace, say why and what the viewer can see instead: the stacks they may
 * read, and the permission that shows workspaces.
 */
function renderEmptyNote(): void {
  document.getElementById("empty-note")?.remove();
  if (state.workspaces.size) return;
  const stacks = state.stacks?.edges.map((e) => e.node) ?? [];
  $("workspaces").append(
    h(
      "div",
      { id: "empty-note", class: "empty" },
      h("p", {}, h("strong", {}, "No workspaces you can read.")),
      h(
        "p",
        {},
        "A workspace shows here when one of your roles grants (workspace, read) on it; approving there needs (workspace, approve). Ask an admin of ",
        state.viewer?.organization.name ?? "your organization",
        " for a role that grants them.",
      ),
      stacks.length
        ? h(
            "div",
            { "data-testid": "visible-stacks" },
            h("p", {}, `You can read ${stacks.length === 1 ? "this stack" : `these ${stacks.length} stacks`}${state.stacks?.pageInfo.hasNextPage ? " (and more)" : ""}:`),
            h("ul", { class: "stacks" }, ...stacks.map((s) => h("li", {}, h("strong", {}, s.name), s.description ? h("span", { class: "meta" }, ` ${s.description}`) : null))),
            h("p", { class: "meta" }, "Their outputs and previews are in the explorer (Query.stacks) and the API."),
          )
        : h("p", { class: "meta" }, "You cannot read any stack either."),
    ),
  );
}

function renderAll(): void {
  renderHeader();
  const list = $("workspaces");
  list.replaceChildren();
  renderEmptyNote();
  for (const id of [...state.workspaces.keys()]) renderWorkspace(id);
  updateTitle();
}

// ---------------------------------------------------------------------------------------------
// Sign-in

function showSignIn(message?: string): void {
  $("signin").hidden = false;
  $("app").hidden = true;
  $("who").replaceChildren();
  const error = $("signin-error");
  error.textContent = message ?? "";
  error.hidden = !message;
  shownView = "";
  updateTitle();
  ($("token") as HTMLInputElement).focus();
}

/** Ends the session: subscriptions stopped, the socket closed, the token forgotten. */
function signOut(message?: string): void {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  state.viewer = null;
  for (const stop of unsubscribers.splice(0)) stop();
  const closing = ws;
  ws = null;
  void closing?.dispose();
  state.workspaces.clear();
  state.gates.clear();
  state.detail = null;
  state.history = null;
  state.inbox = null;
  state.stacks = null;
  state.resuming.clear();
  state.live = "connecting";
  shownLive = null;
  watched.clear();
  renderDetail();
  showSignIn(message);
}

/** The server stopped accepting the token: back to sign-in, saying why (once, however many parts noticed). */
function endSession(message: string): void {
  if (!state.token) return;
  signOut(message);
  announce(message);
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
  $("app").hidden = false;
  try {
    // Subscribed before the list is read, so a workspace created meanwhile is not missed.
    watchWorkspaceList();
    await loadWorkspaces();
    await loadStacksIfEmpty();
  } catch (error) {
    renderHeader();
    failed(error);
    return;
  }
  if (state.token !== token) return;
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
  // Escape closes the open plan page or history (back to the list), unless a control uses it.
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.defaultPrevented || !state.token || !(state.detail || state.history)) return;
    const target = event.target as HTMLElement | null;
    if (target && (target.tagName === "SELECT" || target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && (target as HTMLInputElement).type !== "button"))) return;
    event.preventDefault();
    history.pushState(null, "", location.pathname + location.search);
    openDetailFromHash();
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
