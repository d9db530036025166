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
 * ApprovalRequired only for a destructive call in prod that is not already approved, when at
 * least one policy determined the deny and every one of them is named `…needs-approval`.
 */

/** The suffix that marks a forbid as an approval gate. A naming convention, not a Cedar feature. */
export const NEEDS_APPROVAL_SUFFIX = "needs-approval";
export const PROD_ENVIRONMENT = "prod";

/**
 * An example set a workspace may extend: allow everything, except that destructive tools in prod
 * are held for approval until the call carries a verified approval (`context.approved`).
 * The gate writes `destructive`, `environment` and `approved` into the context itself, so a
 * policy can always read them.
 */
export const DEFAULT_GATEWAY_POLICIES = `@id("permit-all")
permit (principal, action, resource);

@id("prod-destructive-needs-approval")
forbid (principal, action, resource)
when { context.destructive && context.environment == "prod" }
unless { context.approved };
`;

export type GateRequest = {
  principal: EntityUid;
  action: EntityUid;
  resource: EntityUid;
  /** Extra context attributes. `destructive`, `environment` and `approved` are set by the gate. */
  context: Record<string, CedarValueJson>;
  destructive: boolean;
  environment: string;
  /** True only when an approval token verified and every bound claim matched the live call. */
  alreadyApproved: boolean;
  entities?: EntityJson[];
};

export type GateEvaluationError = { policyId: string; message: string };

export type GateDecision =
  | { decision: "allow" }
  | {
      decision: "deny";
      reason: "forbidden" | "no_policy_matched";
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

type ParsedPolicy = { id: string; effect: "permit" | "forbid"; text: string };

/**
 * Parses and validates the policy text once. Every policy must carry a unique `@id`: Cedar names
 * policies parsed from one text `policy0`, `policy1`… and ignores `@id`, so the gate splits the
 * text and hands Cedar a map of `@id` → policy, which makes Cedar's determining policies come
 * back under the names the needs-approval convention is written in.
 */
export function createCedarGate(policiesText: string): CedarGate {
  const policies = parsePolicies(policiesText);
  const byId: Record<string, string> = {};
  const effectById = new Map<string, "permit" | "forbid">();
  for (const policy of policies) {
    byId[policy.id] = policy.text;
    effectById.set(policy.id, policy.effect);
  }
  const checked = checkParsePolicySet({ staticPolicies: byId });
  if (checked.type === "failure") throw new CedarPolicyError("invalid policy set", checked.errors.map(describe));

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
        request.environment === PROD_ENVIRONMENT &&
        !request.alreadyApproved &&
        policyIds.every((id) => id.endsWith(NEEDS_APPROVAL_SUFFIX));
      return approvable ? { decision: "approval_required", policyIds } : { decision: "deny", reason: "forbidden", policyIds };
    },
  });
}

function parsePolicies(text: string): ParsedPolicy[] {
  const parts = policySetTextToParts(text);
  if (parts.type === "failure") throw new CedarPolicyError("invalid policy text", parts.errors.map(describe));
  if (parts.policy_templates.length > 0) {
    throw new CedarPolicyError("templates are not supported by the gateway gate; write static policies");
  }
  const seen = new Set<string>();
  return parts.policies.map((policyText, index) => {
    const json = policyToJson(policyText);
    if (json.type === "failure") throw new CedarPolicyError("invalid policy", json.errors.map(describe));
    const id = json.json.annotations?.["id"];
    if (id === undefined || id.trim() === "") {
      throw new CedarPolicyError(`policy ${index + 1} has no @id annotation; every gate policy must be named`, [policyText]);
    }
    if (seen.has(id)) throw new CedarPolicyError(`duplicate policy @id ${JSON.stringify(id)}`);
    seen.add(id);
    return { id, effect: json.json.effect, text: policyText };
  });
}

function describe(error: DetailedError): string {
  return error.help ? `${error.message} (${error.help})` : error.message;
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}
