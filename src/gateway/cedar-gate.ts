import { createHash } from "node:crypto";
import {
  checkParsePolicySet,
  preparsePolicySet,
  statefulIsAuthorized,
  policySetTextToParts,
  policyToJson,
  type CedarValueJson,
  type DetailedError,
  type EntityJson,
  type EntityUid,
} from "@cedar-policy/cedar-wasm/nodejs";

/**
 * The gateway's gate (seed 003, "The gate"): Cedar decides, and a Cedar Deny becomes
 * ApprovalRequired only for a destructive call in production that is not already approved, when
 * at least one policy determined the deny and every one of them is named `…needs-approval`.
 * "The environment is prod" is read as "the workspace's tier is production": an explicit property
 * of the workspace (`production`), never a compare on its environment's name.
 */

/** The suffix that marks a forbid as an approval gate. A naming convention, not a Cedar feature. */
export const NEEDS_APPROVAL_SUFFIX = "needs-approval";

/**
 * The set every workspace without a saved one runs (and the example a workspace extends): allow
 * everything, except that destructive tools in a production workspace are held for approval until
 * the call carries a verified approval (`context.approved`). The gate writes `destructive`,
 * `environment` (the workspace's environment name), `production` (its tier) and `approved` into
 * the context itself, so a policy can always read them.
 */
export const DEFAULT_GATEWAY_POLICIES = `@id("permit-all")
permit (principal, action, resource);

@id("prod-destructive-needs-approval")
forbid (principal, action, resource)
when { context.destructive && context.production }
unless { context.approved };
`;

export type GateRequest = {
  principal: EntityUid;
  action: EntityUid;
  resource: EntityUid;
  /** Extra context attributes. `destructive`, `environment`, `production` and `approved` are set by the gate. */
  context: Record<string, CedarValueJson>;
  destructive: boolean;
  /** The workspace's environment name (what approval-policy rules match on). */
  environment: string;
  /** The workspace's tier: only a production workspace's destructive calls can become tickets. */
  production: boolean;
  /** True only when an approval token verified and every bound claim matched the live call. */
  alreadyApproved: boolean;
  entities?: EntityJson[];
};

export type GateEvaluationError = { policyId: string; message: string };

export type GateDecision =
  | { decision: "allow" }
  | {
      decision: "deny";
      /**
       * `policy_set_unavailable` / `policy_set_invalid`: the workspace's saved set could not be
       * read or parsed, so nothing was evaluated (the gateway fails closed; no policy ids).
       */
      reason: "forbidden" | "no_policy_matched" | "policy_set_unavailable" | "policy_set_invalid";
      policyIds: string[];
      /** Forbids that failed to evaluate; Cedar would skip them, the gate denies instead. */
      evaluationErrors?: GateEvaluationError[];
    }
  | { decision: "approval_required"; policyIds: string[] };

export type CedarGate = {
  /** Policy ids (their `@id` annotations), sorted. */
  readonly policyIds: readonly string[];
  decide(request: GateRequest): GateDecision;
};

/**
 * The id under which Cedar keeps a policy set parsed (cedar-wasm's preparsed cache, per
 * process): the hash of its policies, so one text is parsed once however many gates use it,
 * instead of on every call (isAuthorized parses the text each time).
 */
const preparsedIds = new WeakMap<Record<string, string>, string>();
function preparsedId(byId: Record<string, string>): string {
  const known = preparsedIds.get(byId);
  if (known) return known;
  const id = `gate-${createHash("sha256").update(JSON.stringify(Object.entries(byId).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))).digest("hex")}`;
  const parsed = preparsePolicySet(id, { staticPolicies: byId });
  if (parsed.type === "failure") throw new CedarEvaluationError(parsed.errors.map(describe));
  preparsedIds.set(byId, id);
  return id;
}

/**
 * A gate remembers its last decisions: Cedar's answer is a pure function of the policy set (one
 * per gate) and the request, and an agent repeats the same call (key, tool, connection, facts)
 * over and over. Requests carrying entities are always evaluated. Bounded; oldest out first.
 */
const DECISION_MEMO_SIZE = 1_024;
function memoized(gate: CedarGate): CedarGate {
  const memo = new Map<string, GateDecision>();
  return {
    policyIds: gate.policyIds,
    decide(request) {
      if (request.entities && request.entities.length > 0) return gate.decide(request);
      const key = JSON.stringify(request);
      const known = memo.get(key);
      if (known) return known;
      const decision = gate.decide(request); // a throw is never remembered
      memo.set(key, Object.freeze(decision));
      if (memo.size > DECISION_MEMO_SIZE) memo.delete(memo.keys().next().value!);
      return decision;
    },
  };
}

export class CedarPolicyError extends Error {
  override readonly name = "CedarPolicyError";
  constructor(
    message: string,
    readonly details: string[] = [],
  ) {
    super(details.length > 0 ? `${message}: ${details.join("; ")}` : message);
  }
}

/** Cedar refused the request itself (malformed entity uid, bad context value…). Never an allow. */
export class CedarEvaluationError extends Error {
  override readonly name = "CedarEvaluationError";
  constructor(readonly details: string[]) {
    super(`Cedar could not evaluate the request: ${details.join("; ")}`);
  }
}

/** How the gate treats a policy, by its effect and its `@id` (the seed's naming convention). */
export type GatePolicyKind = "permit" | "deny" | "needs_approval";

/** One policy of a valid set, in the order written. */
export type GatePolicy = {
  id: string;
  effect: "permit" | "forbid";
  kind: GatePolicyKind;
  /** The policy's own text, as written. */
  text: string;
  /** What the gate does with a call this policy matches, in words. */
  explanation: string;
};

/** Why a set was refused: each issue names the policy (1-based, in the order written) when it can. */
export type GatePolicyIssue = {
  code: "cedar_parse_error" | "missing_id" | "duplicate_id" | "template" | "invalid_policy";
  message: string;
  /** 1-based position of the policy in the text; null when the error cannot be placed. */
  policy: number | null;
  /** The policy's `@id`, when it has one. */
  policyId: string | null;
};

export type GatePolicyCheck = { ok: true; policies: GatePolicy[] } | { ok: false; issues: GatePolicyIssue[] };

/**
 * Checks a policy text the way the gate needs it: Cedar parses it (cedar-wasm), every policy is
 * static (no templates) and carries a unique, non-blank `@id`. A valid set comes back classified;
 * an invalid one with every issue Cedar and the gate found, each placed at its policy.
 */
export function checkGatePolicies(text: string): GatePolicyCheck {
  const parts = policySetTextToParts(text);
  if (parts.type === "failure") {
    const chunks = policyChunks(text);
    return { ok: false, issues: flatten(parts.errors).map((error) => parseIssue(text, chunks, error)) };
  }
  const issues: GatePolicyIssue[] = [];
  if (parts.policy_templates.length > 0) {
    issues.push({ code: "template", message: "templates are not supported by the gateway gate; write static policies", policy: null, policyId: null });
  }
  const policies: GatePolicy[] = [];
  const seen = new Set<string>();
  writtenOrder(parts.policies).forEach((policyText, index) => {
    const at = { policy: index + 1 };
    const json = policyToJson(policyText);
    if (json.type === "failure") {
      issues.push({ code: "invalid_policy", message: `invalid policy: ${json.errors.map(describe).join("; ")}`, ...at, policyId: null });
      return;
    }
    const id = json.json.annotations?.["id"];
    if (id === undefined || id === null || id.trim() === "") {
      issues.push({ code: "missing_id", message: `policy ${index + 1} has no @id annotation; every gate policy must be named`, ...at, policyId: null });
      return;
    }
    if (seen.has(id)) {
      issues.push({ code: "duplicate_id", message: `duplicate policy @id ${JSON.stringify(id)}`, ...at, policyId: id });
      return;
    }
    seen.add(id);
    const effect = json.json.effect;
    const kind = classify(id, effect);
    policies.push({ id, effect, kind, text: policyText, explanation: explain(kind, json.json.conditions) });
  });
  if (issues.length > 0) return { ok: false, issues };
  const byId = Object.fromEntries(policies.map((p) => [p.id, p.text]));
  const checked = checkParsePolicySet({ staticPolicies: byId });
  if (checked.type === "failure") {
    return { ok: false, issues: checked.errors.map((e) => ({ code: "cedar_parse_error", message: describe(e), policy: null, policyId: null })) };
  }
  return { ok: true, policies };
}

/** The seed's convention: a forbid whose `@id` ends in needs-approval makes tickets; any other forbid denies. */
function classify(id: string, effect: "permit" | "forbid"): GatePolicyKind {
  if (effect === "permit") return "permit";
  return id.endsWith(NEEDS_APPROVAL_SUFFIX) ? "needs_approval" : "deny";
}

function explain(kind: GatePolicyKind, conditions: { kind: "when" | "unless"; body: unknown }[]): string {
  if (kind === "permit") return "Allows the calls it matches, unless a forbid matches them too.";
  if (kind === "deny") {
    return `Denies the calls it matches: its @id does not end in ${NEEDS_APPROVAL_SUFFIX}, so no approval can unblock them.`;
  }
  const base =
    `Holds the calls it matches for approval (a ticket) when the call is destructive, the workspace is production, ` +
    `the call is not yet approved and every policy that denied it ends in ${NEEDS_APPROVAL_SUFFIX}; otherwise the deny stands.`;
  const stepsAside = conditions.some((c) => c.kind === "unless" && JSON.stringify(c.body).includes('"attr":"approved"'));
  return stepsAside
    ? base
    : `${base} Warning: it has no \`unless { context.approved }\`, so it denies the approved call too and a held call can never run.`;
}

/**
 * policySetTextToParts returns the policies sorted by their generated ids (policy0, policy1,
 * policy10, policy11, policy2…): undo that sort so positions match the text as written.
 */
function writtenOrder(parts: string[]): string[] {
  const ids = parts.map((_, i) => `policy${i}`).sort();
  const out: string[] = new Array<string>(parts.length);
  ids.forEach((id, sortedIndex) => (out[Number(id.slice("policy".length))] = parts[sortedIndex]!));
  return out;
}

function flatten(errors: DetailedError[]): DetailedError[] {
  return errors.flatMap((e) => [e, ...flatten(e.related ?? [])]);
}

/** Where each policy of a text starts and ends: split at `;` outside strings and comments. */
function policyChunks(text: string): { start: number; end: number }[] {
  const chunks: { start: number; end: number }[] = [];
  let start = 0;
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === '"') {
      i++;
      while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
      i++;
    } else {
      if (c === ";") {
        chunks.push({ start, end: i + 1 });
        start = i + 1;
      }
      i++;
    }
  }
  if (text.slice(start).trim() !== "") chunks.push({ start, end: text.length });
  return chunks;
}

function parseIssue(text: string, chunks: { start: number; end: number }[], error: DetailedError): GatePolicyIssue {
  const offset = error.sourceLocations?.[0]?.start;
  if (offset === undefined) return { code: "cedar_parse_error", message: describe(error), policy: null, policyId: null };
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  const column = offset - before.lastIndexOf("\n");
  const index = chunks.findIndex((c) => offset >= c.start && offset < c.end);
  const policy = index >= 0 ? index + 1 : chunks.length > 0 ? chunks.length : null;
  const idMatch = policy !== null ? /@id\s*\(\s*"((?:[^"\\]|\\.)*)"\s*\)/.exec(text.slice(chunks[policy - 1]!.start, chunks[policy - 1]!.end)) : null;
  const policyId = idMatch ? idMatch[1]! : null;
  const expected = error.sourceLocations?.[0]?.label;
  const where = `${policy !== null ? `policy ${policy}${policyId ? ` (${JSON.stringify(policyId)})` : ""}, ` : ""}line ${line}, column ${column}`;
  return { code: "cedar_parse_error", message: `${where}: ${describe(error)}${expected ? ` (${expected})` : ""}`, policy, policyId };
}

/**
 * Parses and validates the policy text once. Every policy must carry a unique `@id`: Cedar names
 * policies parsed from one text `policy0`, `policy1`… and ignores `@id`, so the gate splits the
 * text and hands Cedar a map of `@id` → policy, which makes Cedar's determining policies come
 * back under the names the needs-approval convention is written in.
 */
export function createCedarGate(policiesText: string): CedarGate {
  const checked = checkGatePolicies(policiesText);
  if (!checked.ok) {
    throw new CedarPolicyError(
      checked.issues.length === 1 ? checked.issues[0]!.message : "invalid policy set",
      checked.issues.length === 1 ? [] : checked.issues.map((i) => i.message),
    );
  }
  const policies = checked.policies;
  const byId: Record<string, string> = {};
  const effectById = new Map<string, "permit" | "forbid">();
  for (const policy of policies) {
    byId[policy.id] = policy.text;
    effectById.set(policy.id, policy.effect);
  }

  return memoized({
    policyIds: Object.freeze(policies.map((p) => p.id).sort()),
    decide(request) {
      const answer = statefulIsAuthorized({
        principal: request.principal,
        action: request.action,
        resource: request.resource,
        // The request's own facts win over anything a caller put in the free-form context.
        context: {
          ...request.context,
          destructive: request.destructive,
          environment: request.environment,
          production: request.production,
          approved: request.alreadyApproved,
        },
        preparsedPolicySetId: preparsedId(byId),
        entities: request.entities ?? [],
      });
      if (answer.type === "failure") throw new CedarEvaluationError(answer.errors.map(describe));
      const { decision, diagnostics } = answer.response;

      // Cedar skips a policy whose condition errors. For a forbid that would fail open, so any
      // erroring forbid denies outright — and never as a ticket: nobody can tell it was an approval.
      const erroredForbids = diagnostics.errors.filter((e) => effectById.get(e.policyId) === "forbid");
      if (erroredForbids.length > 0) {
        return {
          decision: "deny",
          reason: "forbidden",
          policyIds: unique([...(decision === "deny" ? diagnostics.reason : []), ...erroredForbids.map((e) => e.policyId)]),
          evaluationErrors: erroredForbids.map((e) => ({ policyId: e.policyId, message: e.error.message })),
        };
      }
      if (decision === "allow") return { decision: "allow" };

      const policyIds = [...diagnostics.reason];
      if (policyIds.length === 0) {
        // No forbid matched and no permit matched: there is no permit an approval could unblock.
        return { decision: "deny", reason: "no_policy_matched", policyIds };
      }
      const approvable =
        request.destructive &&
        request.production &&
        !request.alreadyApproved &&
        policyIds.every((id) => id.endsWith(NEEDS_APPROVAL_SUFFIX));
      return approvable ? { decision: "approval_required", policyIds } : { decision: "deny", reason: "forbidden", policyIds };
    },
  });
}

function describe(error: DetailedError): string {
  return error.help ? `${error.message} (${error.help})` : error.message;
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}
