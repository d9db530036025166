// The chatops CLI: `npm run cli -- <command>` or `npx countersign <command>`, against
// COUNTERSIGN_URL (default http://localhost:4000) with COUNTERSIGN_TOKEN. Built only on the
// public GraphQL API, through the typed documents in operations/ (docs/clients.md).
//
// Exit codes a script can branch on: 0 success / gate passed, 3 gate not passed (or a watched
// plan ended without reaching the state waited for, or the wait timed out), 1 error, 2 usage.
import { readFile } from "node:fs/promises";
import { parseArgs, type ParseArgsConfig } from "node:util";
import {
  GatewayPolicySetDocument,
  SaveGatewayPolicySetDocument,
  SimulateGatewayCallDocument,
  ApplyPlanDocument,
  ApprovalInboxDocument,
  ApprovalRequestDocument,
  ApprovePlanDocument,
  DiscardPlanDocument,
  PlanFateDocument,
  WithdrawApprovalDocument,
  PlanGateDocument,
  ReleaseReservationDocument,
  ReportPlanResultDocument,
  SubmitPlanDocument,
  ReserveWorkspaceDocument,
  ViewerDocument,
  VoteOnApprovalRequestDocument,
  WatchPlanGateDocument,
  WatchWorkspaceGatesDocument,
  WorkspacesDocument,
  type ApprovalInboxQuery,
  type ApprovalRequestFieldsFragment,
  type GateStatusFieldsFragment,
  type ReservationFieldsFragment,
  type WorkspaceFieldsFragment,
  type WorkspacesQuery,
} from "../generated/graphql/graphql.js";
import { Api, CliError, fromMutationError, type MutationError } from "./api.js";
import { gateText } from "../clients/explain.js";
import { terminalSafe } from "./terminal.js";

export const EXIT = { ok: 0, error: 1, usage: 2, gateNotPassed: 3 } as const;

export const USAGE = `countersign — Countersign from the terminal (and from chatops bots)

Usage: npm run cli -- <command> [options]      (or: npx countersign <command>)

  whoami                                   who COUNTERSIGN_TOKEN belongs to
  workspaces [--all]                       workspaces, who each is reserved for, open plans
  workspace <workspace>                    one workspace (name or id)
  gate <planId>                            the plan's gate: what is missing, from whom
  approve <planId> [--comment <text>]      approve the plan, then show its gate
  withdraw <planId>                        withdraw your approval of the plan, then show its gate
  reserve <workspace> [--role <role>]      reserve for yourself, or for a role you belong to
  release <reservationId>                  release a reservation
  release <workspace> [--role <role>]      release your (or the role's) reservation there
  apply <planId>                           start the apply (refused unless the gate passes)
  plan submit --workspace <workspace> [--target <address>]… [--run-url <url>] <file|->
                                           submit terraform show -json output (or a list of
                                           { address, action }); prints the plan id;
                                           --run-url links the CI run on the plan page
  plan wait <planId> [--until passed|applying|applied|finished] [--timeout <duration>]
                                           wait live (default: until passed), printing what is
                                           still missing; exits 3 if the plan can no longer
                                           get there (superseded, discarded, failed, timed out)
  plan apply <planId>                      the same as apply
  plan report <planId> applied|failed [--message <text>]
                                           the runner reports how terraform apply went
  plan discard <planId>                    discard a planned plan
  watch <planId> [--until <state>] [--timeout <duration>]
                                           print each gate change as it arrives; exits when
                                           the plan applies (or reaches --until)
  watch --workspace <workspace> [--until <state>]
                                           every open plan's gate on the workspace
  inbox [--workspace <workspace>]          held tool calls you may decide now
  vote <requestId> approve|deny [--comment <text>]
  policies <workspace>                     the gateway policy set in force, each policy classified
  policies save <workspace> <file|-> [--note <text>]
                                           save the next version (owner-only); Cedar text
  policies simulate <workspace> <tool> [--args <json>] [--file <draft.cedar>]
                                           what the gateway would do with the call now
  admin …                                  organizations, users, tokens (direct database access)

States for --until: passed, applying, applied, failed, discarded, finished (any of the last three).

Durations for --timeout: 90 (seconds), 30s, 10m, 2h.

Options: --json (machine-readable output; watch and wait print one JSON object per line), --url <url>.
Environment: COUNTERSIGN_URL (default http://localhost:4000), COUNTERSIGN_TOKEN (a cs_… token).
Exit codes: 0 success / gate passed / state reached · 3 gate not passed, or the plan can no longer
reach the state waited for · 1 error · 2 usage.`;

const OPTIONS = {
  json: { type: "boolean", default: false },
  url: { type: "string" },
  all: { type: "boolean", default: false },
  role: { type: "string" },
  workspace: { type: "string" },
  until: { type: "string" },
  comment: { type: "string" },
  message: { type: "string" },
  note: { type: "string" },
  args: { type: "string" },
  file: { type: "string" },
  target: { type: "string", multiple: true },
  "run-url": { type: "string" },
  timeout: { type: "string" },
  help: { type: "boolean", short: "h", default: false },
} as const satisfies ParseArgsConfig["options"];

type Options = { json: boolean; url?: string; all: boolean; role?: string; workspace?: string; until?: string; comment?: string; message?: string; note?: string; args?: string; file?: string; target?: string[]; "run-url"?: string; timeout?: string; help: boolean };

class UsageError extends Error {
  override readonly name = "UsageError";
}

const UNTIL_STATES = ["passed", "applying", "applied", "failed", "discarded", "finished"] as const;
type UntilState = (typeof UNTIL_STATES)[number];
const TERMINAL = new Set(["APPLIED", "FAILED", "DISCARDED"]);

interface Io {
  out(text: string): void;
  err(text: string): void;
}

const stdio: Io = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
};

export async function run(argv: string[], rawIo: Io = stdio, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  // The output layer: every line written, data and errors alike, is made terminal-safe.
  const io: Io = { out: (text) => rawIo.out(terminalSafe(text)), err: (text) => rawIo.err(terminalSafe(text)) };
  let positionals: string[];
  let options: Options;
  try {
    const parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
    positionals = parsed.positionals;
    options = parsed.values as Options;
  } catch (error) {
    io.err(`${(error as Error).message}\n\n${USAGE}`);
    return EXIT.usage;
  }
  const [command = "help", ...args] = positionals;
  if (command === "help" || options.help) {
    io.out(USAGE);
    return EXIT.ok;
  }
  const handler = COMMANDS[command];
  if (!handler) {
    io.err(`Unknown command: ${command}\n\n${USAGE}`);
    return EXIT.usage;
  }
  let api: Api | null = null;
  try {
    api = new Api({ url: options.url ?? env.COUNTERSIGN_URL, token: env.COUNTERSIGN_TOKEN });
    return await handler({ api, args, options, io });
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`${error.message}\n\nRun \`countersign help\` for usage.`);
      return EXIT.usage;
    }
    if (error instanceof CliError) {
      if (options.json) io.out(JSON.stringify({ error: { code: error.code, message: error.message, hint: error.hint ?? null, details: error.details ?? null } }));
      io.err(`Error: ${error.message}${error.hint ? `\n${error.hint}` : ""}`);
      return EXIT.error;
    }
    io.err(`Unexpected error: ${(error as Error).stack ?? String(error)}`);
    return EXIT.error;
  } finally {
    await api?.close();
  }
}

interface CommandContext {
  api: Api;
  args: string[];
  options: Options;
  io: Io;
}

type Command = (ctx: CommandContext) => Promise<number>;

function arg(args: string[], index: number, what: string): string {
  const value = args[index];
  if (!value) throw new UsageError(`Missing ${what}.`);
  return value;
}

function noMoreArgs(args: string[], count: number): void {
  if (args.length > count) throw new UsageError(`Unexpected argument: ${args[count]}`);
}

function json(io: Io, value: unknown): void {
  io.out(JSON.stringify(value, null, 2));
}

/** A mutation result: the success's data, or the typed error as a CliError. */
function unwrap<T>(result: { __typename: string; data?: T } & Partial<MutationError>): T {
  if ("data" in result && result.data !== undefined) return result.data;
  throw fromMutationError(result as MutationError);
}

// -------------------------------------------------------------------------------------------
// Lookups

async function allWorkspaces(api: Api, includeArchived = false): Promise<WorkspaceFieldsFragment[]> {
  const out: WorkspaceFieldsFragment[] = [];
  let after: string | null = null;
  for (;;) {
    const page: WorkspacesQuery["workspaces"] = (await api.request(WorkspacesDocument, { first: 100, after, includeArchived })).workspaces;
    out.push(...page.edges.map((e) => e.node));
    if (!page.pageInfo.hasNextPage || !page.pageInfo.endCursor) return out;
    after = page.pageInfo.endCursor;
  }
}

/** A workspace by name or id. */
async function findWorkspace(api: Api, nameOrId: string): Promise<WorkspaceFieldsFragment> {
  const all = await allWorkspaces(api, true);
  const found = all.find((w) => w.name === nameOrId) ?? all.find((w) => w.id === nameOrId);
  if (!found) {
    throw new CliError("not_found", `No workspace "${nameOrId}" that you can read.`, {
      hint: all.length ? `You can see: ${all.map((w) => w.name).join(", ")}.` : "You can read no workspace: ask an admin for (workspace, read).",
    });
  }
  return found;
}

async function loadGate(api: Api, planId: string) {
  const gate = (await api.request(PlanGateDocument, { planId })).gate;
  if (!gate) throw new CliError("not_found", `No plan ${planId} that you can read.`, { hint: "`countersign workspaces` lists each workspace's open plans." });
  return gate;
}

// -------------------------------------------------------------------------------------------
// Formatting

function when(iso: string): string {
  return iso.replace("T", " ").replace(/:\d\d(\.\d+)?Z$/, "Z");
}

function holderName(r: Pick<ReservationFieldsFragment, "holderUser" | "holderRole">): string {
  return r.holderUser ? r.holderUser.name : r.holderRole ? `role ${r.holderRole.name}` : "?";
}

function reservationLine(r: ReservationFieldsFragment): string {
  return `${holderName(r)} (placed by ${r.placedBy.name}, ${when(r.placedAt)}; id ${r.id})`;
}

function workspaceText(w: WorkspaceFieldsFragment): string {
  const flags = [w.environment, w.stack ? `stack ${w.stack.name}` : "", `baseline ${w.requiredApprovals}`, w.frozen ? "FROZEN" : "", w.archived ? "archived" : ""].filter(Boolean);
  const lines = [`${w.name}  (${flags.join(", ")})`];
  lines.push(w.reservations.length ? `  reserved for: ${w.reservations.map(reservationLine).join("; ")}` : "  reserved for: nobody");
  if (!w.openPlans.length) lines.push("  open plans: none");
  for (const p of w.openPlans) {
    const active = p.approvals.filter((a) => !a.withdrawnAt);
    const approvals = active.length ? `approved by ${active.map((a) => a.user.name).join(", ")}` : "no approvals";
    lines.push(`  plan ${p.id}  ${p.status.toLowerCase()}  ${p.changeCount} change${p.changeCount === 1 ? "" : "s"}  by ${p.submittedBy.name}  ${approvals}`);
  }
  const can = [w.viewerCanApprove ? "approve" : "", w.viewerCanReserveForSelf ? "reserve" : ""].filter(Boolean);
  const roles = w.reservableRoles.map((r) => r.key);
  const rolesText = roles.length > 6 ? `${roles.slice(0, 6).join(", ")} and ${roles.length - 6} more` : roles.join(", ");
  if (can.length) lines.push(`  you can: ${can.join(", ")}${roles.length ? ` (--role: ${rolesText})` : ""}`);
  return lines.join("\n");
}

function stamp(): string {
  return new Date().toISOString().slice(11, 19);
}

// -------------------------------------------------------------------------------------------
// Commands

const whoami: Command = async ({ api, args, options, io }) => {
  noMoreArgs(args, 0);
  const { viewer } = await api.request(ViewerDocument, {});
  if (options.json) json(io, viewer);
  else io.out(`${viewer.name} <${viewer.email}> in ${viewer.organization.name} (${viewer.organization.slug})${viewer.isSuperAdmin ? ", super admin" : ""}`);
  return EXIT.ok;
};

const workspaces: Command = async ({ api, args, options, io }) => {
  noMoreArgs(args, 0);
  const list = await allWorkspaces(api, options.all);
  if (options.json) json(io, list);
  else io.out(list.length ? list.map(workspaceText).join("\n\n") : "No workspaces you can read.");
  return EXIT.ok;
};

const workspace: Command = async ({ api, args, options, io }) => {
  const name = arg(args, 0, "<workspace> (a name or id)");
  noMoreArgs(args, 1);
  // findWorkspace's page already carries the whole WorkspaceFields of the match.
  const w = await findWorkspace(api, name);
  if (options.json) json(io, w);
  else io.out(workspaceText(w));
  return EXIT.ok;
};

const gate: Command = async ({ api, args, options, io }) => {
  const planId = arg(args, 0, "<planId>");
  noMoreArgs(args, 1);
  const status = await loadGate(api, planId);
  if (options.json) json(io, status);
  else io.out(gateText(status));
  return status.passed ? EXIT.ok : EXIT.gateNotPassed;
};

const approve: Command = async ({ api, args, options, io }) => {
  const planId = arg(args, 0, "<planId>");
  noMoreArgs(args, 1);
  const approval = unwrap((await api.request(ApprovePlanDocument, { planId, comment: options.comment ?? null })).approvePlan);
  const status = await loadGate(api, planId);
  if (options.json) json(io, { approval, gate: status });
  else io.out(`Approved plan ${planId} as ${approval.user.name} (${when(approval.approvedAt)}).\n${gateText(status)}`);
  return EXIT.ok;
};

const withdraw: Command = async ({ api, args, options, io }) => {
  const planId = arg(args, 0, "<planId>");
  noMoreArgs(args, 1);
  const approval = unwrap((await api.request(WithdrawApprovalDocument, { planId })).withdrawApproval);
  const status = await loadGate(api, planId);
  if (options.json) json(io, { approval, gate: status });
  else io.out(`Withdrew ${approval.user.name}'s approval of plan ${planId} (${when(approval.withdrawnAt!)}).\n${gateText(status)}`);
  return EXIT.ok;
};

async function roleFor(api: Api, w: WorkspaceFieldsFragment, role: string): Promise<string> {
  const match = w.reservableRoles.find((r) => r.id === role || r.key === role || r.name.toLowerCase() === role.toLowerCase());
  if (match) return match.id;
  throw new CliError("not_reservable", `You cannot reserve ${w.name} for role "${role}".`, {
    hint: w.reservableRoles.length
      ? `Roles you may reserve it for: ${w.reservableRoles.map((r) => `${r.name} (${r.key})`).join(", ")}.`
      : "You may reserve it for your own roles when you hold (workspace, approve) there; a super_admin for any role.",
  });
}

const reserve: Command = async ({ api, args, options, io }) => {
  const name = arg(args, 0, "<workspace> (a name or id)");
  noMoreArgs(args, 1);
  const w = await findWorkspace(api, name);
  const roleId = options.role ? await roleFor(api, w, options.role) : null;
  const reservation = unwrap((await api.request(ReserveWorkspaceDocument, { workspaceId: w.id, roleId })).reserveWorkspace);
  if (options.json) json(io, reservation);
  else io.out(`Reserved ${reservation.workspace.name} for ${holderName(reservation)} (reservation ${reservation.id}).\nEvery plan on it now also needs an approval from ${holderName(reservation)}.`);
  return EXIT.ok;
};

const release: Command = async ({ api, args, options, io }) => {
  const target = arg(args, 0, "<reservationId> or <workspace>");
  noMoreArgs(args, 1);
  let reservationId = target;
  const all = await allWorkspaces(api, true);
  const w = all.find((x) => x.name === target) ?? all.find((x) => x.id === target);
  if (w) {
    const { viewer } = await api.request(ViewerDocument, {});
    const role = options.role?.toLowerCase();
    const mine = w.reservations.filter((r) =>
      role ? [r.holderRole?.id, r.holderRole?.key, r.holderRole?.name.toLowerCase()].includes(role) : r.holderUser?.id === viewer.id,
    );
    if (mine.length !== 1) {
      throw new CliError("not_found", `${w.name} has no active reservation held by ${options.role ? `role "${options.role}"` : "you"}.`, {
        hint: w.reservations.length
          ? `Its reservations: ${w.reservations.map(reservationLine).join("; ")}. Release one by id: countersign release <id>.`
          : "It is reserved for nobody.",
      });
    }
    reservationId = mine[0]!.id;
  } else if (options.role) {
    throw new UsageError("--role goes with a workspace: countersign release <workspace> --role <role>.");
  }
  const released = unwrap((await api.request(ReleaseReservationDocument, { id: reservationId })).releaseReservation);
  if (options.json) json(io, released);
  else io.out(`Released the reservation of ${released.workspace.name} for ${holderName(released)}.`);
  return EXIT.ok;
};

const apply: Command = async ({ api, args, options, io }) => {
  const planId = arg(args, 0, "<planId>");
  noMoreArgs(args, 1);
  const result = (await api.request(ApplyPlanDocument, { planId })).applyPlan;
  if (result.__typename === "GateNotPassedError" && "gate" in result) {
    if (options.json) json(io, { applied: false, error: { code: result.code, message: result.message }, gate: result.gate });
    else io.out(`Not applied: the gate has not passed.\n${gateText(result.gate)}`);
    return EXIT.gateNotPassed;
  }
  const plan = unwrap(result);
  if (options.json) json(io, { applied: true, plan });
  else io.out(`Plan ${plan.id} is ${plan.status.toLowerCase()}: the runner may run terraform apply now.`);
  return EXIT.ok;
};

function parseUntil(value: string | undefined, fallback: UntilState | null): UntilState | null {
  if (value === undefined) return fallback;
  const v = value.toLowerCase() as UntilState;
  if (!UNTIL_STATES.includes(v)) throw new UsageError(`--until takes one of: ${UNTIL_STATES.join(", ")} (got "${value}").`);
  return v;
}

/** Whether a plan status / gate reaches the state waited for. */
function reached(until: UntilState, planStatus: string, passed: boolean): boolean {
  switch (until) {
    case "passed":
      return passed || planStatus === "APPLYING" || planStatus === "APPLIED";
    case "applying":
      return planStatus === "APPLYING" || planStatus === "APPLIED";
    case "finished":
      return TERMINAL.has(planStatus);
    default:
      return planStatus === until.toUpperCase();
  }
}

const watch: Command = async (ctx) => {
  const { options } = ctx;
  if (options.workspace) {
    noMoreArgs(ctx.args, 0);
    return watchWorkspace(ctx, options.workspace, parseUntil(options.until, null));
  }
  const planId = arg(ctx.args, 0, "<planId> (or --workspace <workspace>)");
  noMoreArgs(ctx.args, 1);
  const until = parseUntil(options.until, "applied")!;
  return watchPlan(ctx, planId, until, options.timeout !== undefined ? parseDuration(options.timeout) : null);
};

async function watchPlan({ api, options, io }: CommandContext, planId: string, until: UntilState, timeoutMs: number | null = null): Promise<number> {
  let last: GateStatusFieldsFragment | null = null;
  let outcome: number | null = null;
  if (!options.json) io.out(`Watching plan ${planId} until ${until}${timeoutMs !== null ? ` (at most ${options.timeout})` : ""} (Ctrl-C to stop)…`);
  const deadline = new AbortController();
  const timer = timeoutMs !== null ? setTimeout(() => deadline.abort(), timeoutMs) : null;
  await api.subscribe(WatchPlanGateDocument, { planId }, (data) => {
    const status = data.planGate;
    if (last && status.version <= last.version) return;
    last = status;
    if (options.json) io.out(JSON.stringify(status));
    else io.out(`[${stamp()}] ${gateText(status)}`);
    if (reached(until, status.planStatus, status.passed)) {
      outcome = EXIT.ok;
      return "stop";
    }
    if (TERMINAL.has(status.planStatus)) {
      outcome = EXIT.gateNotPassed;
      return "stop";
    }
  }, deadline.signal).finally(() => timer && clearTimeout(timer));
  if (outcome === EXIT.ok) {
    if (!options.json) io.out(`Plan ${planId} reached ${until}.`);
    return outcome;
  }
  if (outcome !== null) {
    if (!options.json) io.out(`Plan ${planId} ended ${await howItEnded(api, planId, last!.planStatus)} without reaching ${until}.`);
    return outcome;
  }
  if (deadline.signal.aborted) {
    const seen = last as GateStatusFieldsFragment | null; // assigned in the callback
    if (options.json) io.out(JSON.stringify({ timedOut: true, planId, until, gate: seen }));
    else io.out(`Timed out after ${options.timeout}: plan ${planId} did not reach ${until}${seen ? ` (it is ${seen.planStatus.toLowerCase()}, gate ${seen.passed ? "passed" : "not passed"})` : ""}.`);
    return EXIT.gateNotPassed;
  }
  // The server completed the subscription: the plan finished, or we may no longer read it.
  const final = await api.request(PlanGateDocument, { planId }).then((r) => r.gate, () => null);
  if (final && reached(until, final.planStatus, final.passed)) {
    if (!options.json) io.out(`Plan ${planId} reached ${until}.`);
    else io.out(JSON.stringify(final));
    return EXIT.ok;
  }
  if (!options.json) io.out(final ? `Plan ${planId} ended ${await howItEnded(api, planId, final.planStatus)} without reaching ${until}.` : `The server stopped the watch: plan ${planId} is no longer visible to you.`);
  return final ? EXIT.gateNotPassed : EXIT.error;
}

/** "discarded", "superseded by plan …", "failed": a finished plan's end, in words. */
async function howItEnded(api: Api, planId: string, status: string): Promise<string> {
  const fate = await api.request(PlanFateDocument, { planId }).then((r) => r.plan, () => null);
  if (fate?.discardReason === "superseded") return `superseded${fate.supersededBy ? ` by plan ${fate.supersededBy.id}` : ""}`;
  if (fate?.discardReason === "workspace_archived") return "discarded (its workspace was archived)";
  return (fate?.status ?? status).toLowerCase();
}

async function watchWorkspace({ api, options, io }: CommandContext, name: string, until: UntilState | null): Promise<number> {
  const w = await findWorkspace(api, name);
  let version = -Infinity;
  let open = new Map<string, GateStatusFieldsFragment>();
  let reachedBy: string | null = null;
  if (!options.json) io.out(`Watching every open plan on ${w.name}${until ? ` until one is ${until}` : ""} (Ctrl-C to stop)…`);
  await api.subscribe(WatchWorkspaceGatesDocument, { workspaceId: w.id }, async (data) => {
    const update = data.workspaceGates;
    if (update.version <= version) return;
    version = update.version;
    const now = new Map(update.plans.map((p) => [p.planId, p] as const));
    // Plans that left the open list finished: read how.
    const finished: GateStatusFieldsFragment[] = [];
    for (const planId of open.keys()) {
      if (now.has(planId)) continue;
      const final = await api.request(PlanGateDocument, { planId }).then((r) => r.gate, () => null);
      if (final) finished.push(final);
    }
    const changed = update.plans.filter((p) => open.get(p.planId)?.version !== p.version || open.get(p.planId)?.passed !== p.passed);
    open = now;
    if (options.json) io.out(JSON.stringify({ ...update, finished }));
    else {
      const lines = [`[${stamp()}] ${update.workspaceName}: ${update.plans.length} open plan${update.plans.length === 1 ? "" : "s"}`];
      for (const p of changed) lines.push(gateText(p).replace(/^/gm, "  "));
      for (const f of finished) lines.push(`  plan ${f.planId} ${f.planStatus.toLowerCase()}`);
      io.out(lines.join("\n"));
    }
    if (!until) return;
    for (const p of [...update.plans, ...finished]) {
      if (reached(until, p.planStatus, p.passed)) {
        reachedBy = p.planId;
        return "stop";
      }
    }
  });
  if (reachedBy) {
    if (!options.json) io.out(`Plan ${reachedBy} on ${w.name} reached ${until}.`);
    return EXIT.ok;
  }
  if (!options.json) io.out(`The server stopped the watch of ${w.name}.`);
  return until ? EXIT.gateNotPassed : EXIT.ok;
}

function requestText(r: ApprovalRequestFieldsFragment): string {
  const tool = r.logicalTool && r.logicalTool !== r.tool ? `${r.logicalTool} → ${r.tool}` : r.tool;
  const tallies = r.quorum.rules.map((t) => `${t.approvals}/${t.count}`).join(", ");
  const lines = [
    `${r.id}  ${tool}  ${r.environment}${r.workspaceName ? ` on ${r.workspaceName}` : ""}  ${r.status.toLowerCase()}`,
    `  revision ${r.revision} · quorum ${r.quorum.state.toLowerCase()}${tallies ? ` (${tallies})` : ""} · expires ${when(r.expiresAt)}${r.amountUsd != null ? ` · $${r.amountUsd}` : ""}`,
  ];
  for (const v of r.votes) lines.push(`  ${v.decision.toLowerCase()} by ${v.reviewer.name}${v.comment ? `: ${v.comment}` : ""}`);
  if (r.viewerCanVote) lines.push(`  vote: countersign vote ${r.id} approve|deny`);
  return lines.join("\n");
}

const inbox: Command = async ({ api, args, options, io }) => {
  noMoreArgs(args, 0);
  const workspaceId = options.workspace ? (await findWorkspace(api, options.workspace)).id : null;
  const requests: ApprovalRequestFieldsFragment[] = [];
  let after: string | null = null;
  for (;;) {
    const page: ApprovalInboxQuery["approvalInbox"] = (await api.request(ApprovalInboxDocument, { workspaceId, first: 100, after })).approvalInbox;
    requests.push(...page.edges.map((e) => e.node));
    if (!page.pageInfo.hasNextPage || !page.pageInfo.endCursor) break;
    after = page.pageInfo.endCursor;
  }
  if (options.json) json(io, requests);
  else io.out(requests.length ? requests.map(requestText).join("\n\n") : "Nothing waits for your decision.");
  return EXIT.ok;
};

const vote: Command = async ({ api, args, options, io }) => {
  const requestId = arg(args, 0, "<requestId>");
  const decisionArg = arg(args, 1, "the decision (approve or deny)").toLowerCase();
  noMoreArgs(args, 2);
  if (decisionArg !== "approve" && decisionArg !== "deny") throw new UsageError(`The decision is approve or deny (got "${decisionArg}").`);
  const request = (await api.request(ApprovalRequestDocument, { id: requestId })).approvalRequest;
  if (!request) throw new CliError("not_found", `No approval request ${requestId} that you can read.`, { hint: "`countersign inbox` lists what you may decide." });
  const result = unwrap(
    (
      await api.request(VoteOnApprovalRequestDocument, {
        input: { requestId, decision: decisionArg === "approve" ? "APPROVE" : "DENY", expectedRevision: request.revision, comment: options.comment ?? null },
      })
    ).voteOnApprovalRequest,
  );
  if (options.json) json(io, result);
  else io.out(`Voted ${decisionArg} on ${requestId}.\n${requestText(result.request)}`);
  return EXIT.ok;
};

// -------------------------------------------------------------------------------------------
// plan …: the CI commands (docs/ci.md)

const WAIT_STATES = ["passed", "applying", "applied", "finished"] as const satisfies readonly UntilState[];

/** `90`, `90s`, `10m`, `2h` → milliseconds. */
export function parseDuration(value: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/i.exec(value);
  const amount = m ? Number(m[1]) : NaN;
  if (!m || !(amount > 0)) throw new UsageError(`--timeout takes a duration such as 30s, 10m or 2h (got "${value}").`);
  const unit = (m[2] ?? "s").toLowerCase();
  const ms = amount * (unit === "ms" ? 1 : unit === "s" ? 1000 : unit === "m" ? 60_000 : 3_600_000);
  // setTimeout's limit (about 24.8 days).
  if (ms > 2_147_483_647) throw new UsageError(`--timeout is at most 24 days (got "${value}").`);
  return ms;
}

/** A file's text, or standard input for `-`; a file that cannot be read is a CliError with `hint`. */
async function readInputFile(path: string, hint?: string): Promise<string> {
  if (path === "-") {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  }
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    throw new CliError("bad_file", `Cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}).`, hint ? { hint } : undefined);
  }
}

const readPlanFile = (path: string) => readInputFile(path, "Write it with `terraform show -json tfplan > plan.json`, or pass - to read standard input.");

const planSubmit: Command = async ({ api, args, options, io }) => {
  const file = arg(args, 0, "<file> (the output of `terraform show -json`, or - for standard input)");
  noMoreArgs(args, 1);
  if (!options.workspace) throw new UsageError("Missing --workspace <workspace> (a name or id).");
  const targets = options.target ?? [];
  const text = await readPlanFile(file);
  if (!text.trim()) throw new CliError("validation", `${file === "-" ? "Standard input" : file} is empty.`, { hint: "Write it with `terraform show -json tfplan > plan.json`." });
  const w = await findWorkspace(api, options.workspace);
  // The text as is: the server parses it and names the path of anything wrong in it.
  const runUrl = options["run-url"];
  const plan = unwrap(
    (await api.request(SubmitPlanDocument, { input: { workspaceId: w.id, plan: text, ...(targets.length ? { targets } : {}), ...(runUrl !== undefined ? { runUrl } : {}), origin: "CLI" } }))
      .submitPlan,
  );
  if (options.json) json(io, plan);
  else {
    io.out(plan.id);
    io.err(`Submitted plan ${plan.id} on ${plan.workspace.name}: ${plan.changeCount} change${plan.changeCount === 1 ? "" : "s"}${plan.targeted ? ` (targeted: ${plan.targets.join(", ")})` : ""}.`);
  }
  return EXIT.ok;
};

const planWait: Command = async (ctx) => {
  const planId = arg(ctx.args, 0, "<planId>");
  noMoreArgs(ctx.args, 1);
  const until = parseUntil(ctx.options.until, "passed")!;
  if (!(WAIT_STATES as readonly string[]).includes(until)) throw new UsageError(`plan wait --until takes one of: ${WAIT_STATES.join(", ")} (got "${until}").`);
  const timeoutMs = ctx.options.timeout !== undefined ? parseDuration(ctx.options.timeout) : null;
  // One request first, so a wrong URL, a rejected token or an unknown plan fails at once (exit 1)
  // rather than after the reconnection attempts below.
  await loadGate(ctx.api, planId);
  // A wait in a pipeline outlives a server restart or a dropped connection: keep reconnecting
  // (the backoff is capped at 30 s; each reconnect re-subscribes and gets the current gate).
  ctx.api.retryAttempts = 30;
  return watchPlan(ctx, planId, until, timeoutMs);
};

const planReport: Command = async ({ api, args, options, io }) => {
  const planId = arg(args, 0, "<planId>");
  const outcome = arg(args, 1, "the outcome (applied or failed)").toLowerCase();
  noMoreArgs(args, 2);
  if (outcome !== "applied" && outcome !== "failed") throw new UsageError(`The outcome is applied or failed (got "${outcome}").`);
  const input = { planId, outcome: outcome === "applied" ? ("APPLIED" as const) : ("FAILED" as const), message: options.message ?? null };
  const plan = unwrap((await api.request(ReportPlanResultDocument, { input })).reportPlanResult);
  if (options.json) json(io, plan);
  else io.out(`Plan ${plan.id} is ${plan.status.toLowerCase()}.`);
  return EXIT.ok;
};

const planDiscard: Command = async ({ api, args, options, io }) => {
  const planId = arg(args, 0, "<planId>");
  noMoreArgs(args, 1);
  const plan = unwrap((await api.request(DiscardPlanDocument, { planId })).discardPlan);
  if (options.json) json(io, plan);
  else io.out(`Plan ${plan.id} is discarded; it can no longer apply.`);
  return EXIT.ok;
};

const PLAN_COMMANDS: Record<string, Command> = { submit: planSubmit, wait: planWait, apply, report: planReport, discard: planDiscard };

const plan: Command = async (ctx) => {
  const sub = arg(ctx.args, 0, "plan command (submit, wait, apply, report or discard)");
  const handler = PLAN_COMMANDS[sub];
  if (!handler) throw new UsageError(`Unknown plan command: ${sub} (submit, wait, apply, report or discard).`);
  return handler({ ...ctx, args: ctx.args.slice(1) });
};

// -------------------------------------------------------------------------------------------
// policies …: the gateway's Cedar policy set per workspace (docs/held-tool-calls.md)

const KIND_LABEL: Record<string, string> = { PERMIT: "permit", DENY: "deny", NEEDS_APPROVAL: "needs approval (makes tickets)" };

const policiesShow: Command = async ({ api, args, options, io }) => {
  const name = arg(args, 0, "<workspace>");
  noMoreArgs(args, 1);
  const w = await findWorkspace(api, name);
  const found = (await api.request(GatewayPolicySetDocument, { workspaceId: w.id })).workspace;
  const set = found?.gatewayPolicySet;
  if (!found || !set) throw new CliError("not_found", `You cannot read the gateway policy set of ${name}.`, { hint: "Reading it needs (gateway_policy, read) on the workspace." });
  if (options.json) return json(io, found), EXIT.ok;
  const lines = [
    `${found.name} (${found.environment}${found.production ? ", production" : ""}): ${set.isDefault ? "the default set (nothing saved)" : `version ${set.version}, saved by ${set.author?.name ?? "?"} at ${set.createdAt}${set.note ? ` — ${set.note}` : ""}`}`,
    ...(set.valid ? set.rules.map((r) => `  ${r.id}: ${KIND_LABEL[r.kind] ?? r.kind}. ${r.explanation}`) : ["  Does not parse: every call is denied.", ...set.issues.map((i) => `  ${i.message}`)]),
    "",
    set.namingConvention,
  ];
  io.out(lines.join("\n"));
  return EXIT.ok;
};

const policiesSave: Command = async ({ api, args, options, io }) => {
  const name = arg(args, 0, "<workspace>");
  const file = arg(args, 1, "<file> (Cedar policy text, or - for standard input)");
  noMoreArgs(args, 2);
  const text = await readInputFile(file);
  const w = await findWorkspace(api, name);
  const current = (await api.request(GatewayPolicySetDocument, { workspaceId: w.id })).workspace?.gatewayPolicySet;
  const saved = unwrap(
    (await api.request(SaveGatewayPolicySetDocument, { input: { workspaceId: w.id, policies: text, expectedVersion: current?.version ?? 0, note: options.note ?? null } })).saveGatewayPolicySet,
  );
  if (options.json) json(io, saved);
  else io.out(`Saved version ${saved.policySet.version} on ${w.name}: ${saved.policySet.rules.map((r) => `${r.id} (${KIND_LABEL[r.kind] ?? r.kind})`).join(", ")}.`);
  return EXIT.ok;
};

const policiesSimulate: Command = async ({ api, args, options, io }) => {
  const name = arg(args, 0, "<workspace>");
  const tool = arg(args, 1, "<tool> (<connection>.<operation>)");
  noMoreArgs(args, 2);
  let callArgs: unknown;
  try {
    callArgs = options.args === undefined ? undefined : JSON.parse(options.args);
  } catch {
    throw new UsageError(`--args takes a JSON object (got "${options.args}").`);
  }
  const draft = options.file === undefined ? undefined : await readInputFile(options.file);
  const w = await findWorkspace(api, name);
  const sim = unwrap(
    (await api.request(SimulateGatewayCallDocument, { input: { workspaceId: w.id, tool, ...(callArgs !== undefined ? { arguments: callArgs } : {}), ...(draft !== undefined ? { policies: draft } : {}) } })).simulateGatewayCall,
  );
  if (options.json) return json(io, sim), EXIT.ok;
  const lines = [`${tool} on ${w.name}: ${sim.decision.toLowerCase().replace("_", " ")}${sim.reason ? ` (${sim.reason})` : ""}${sim.policyIds.length ? ` by ${sim.policyIds.join(", ")}` : ""}`];
  if (sim.approval) {
    if (sim.approval.defaultDeny) lines.push("  No approval rule covers it: the request would close at once (default_deny).");
    if (!sim.approval.rules) lines.push("  (the approval rules it would match need (approval_policy, read) on the workspace)");
    for (const r of sim.approval.rules ?? []) lines.push(`  rule ${r.ruleId} (${r.policyName}): ${r.effect.toLowerCase()}${r.count ? `, ${r.count} approval${r.count === 1 ? "" : "s"}` : ""}`);
    if (sim.approval.eligibleReviewers) lines.push(`  could review now: ${sim.approval.eligibleReviewers.map((u) => u.name).join(", ") || "nobody"}`);
  }
  io.out(lines.join("\n"));
  return EXIT.ok;
};

const POLICY_COMMANDS: Record<string, Command> = { save: policiesSave, simulate: policiesSimulate };

const policies: Command = async (ctx) => {
  const first = arg(ctx.args, 0, "<workspace>, or save / simulate");
  const handler = POLICY_COMMANDS[first];
  return handler ? handler({ ...ctx, args: ctx.args.slice(1) }) : policiesShow(ctx);
};

const COMMANDS: Record<string, Command> = { whoami, workspaces, workspace, gate, approve, withdraw, reserve, release, apply, plan, watch, inbox, vote, policies };
