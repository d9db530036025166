// Peers: the same 20 grants decided by Countersign's check, by Cedar
// (`@cedar-policy/cedar-wasm`, `statefulIsAuthorized` over a preparsed policy set: its fastest
// path) and by casbin, side by side in one run.
//
// The grants are bench/stacks.ts's realistic custom-role union (prefix, literal and infix
// patterns, authz groups, a `*` action, untargeted grants on other families). Each engine gets
// them in its own idiom: Countersign a compiled principal; Cedar one `permit` per tuple for a
// principal in a role, the pattern as `like`, the group as `groups.contains`; casbin a policy
// line per tuple under a model whose matcher is the seed's three conditions, with a glob
// function. Before anything is timed, all three decide every question and must agree; a
// disagreement is printed and fails the row (a faster wrong answer is no comparison).
// In-process and CPU-only: no database.

import {
  isAuthorized,
  preparsePolicySet,
  statefulIsAuthorized,
  type AuthorizationAnswer,
  type EntityJson,
  type EntityUid,
} from "@cedar-policy/cedar-wasm/nodejs";
import { newEnforcer, newModelFromString, type Enforcer } from "casbin";
import { fileURLToPath } from "node:url";
import {
  checkPermission,
  compilePrincipal,
  FAMILIES,
  type ConcreteResourceType,
  type Target,
} from "../src/domain/catalog/index.js";
import { log, nsPerOp, row, type BenchRow } from "./lib.js";
import { REALISTIC_GRANTS, realisticGrants } from "./stacks.js";

/** One user glob grant as bench/stacks.ts writes it. */
interface GlobGrant {
  readonly resourceType: string;
  readonly action: string;
  readonly resourcePattern?: string;
  readonly authzGroup?: string;
}

const GRANTS: readonly GlobGrant[] = REALISTIC_GRANTS;

type Question = Target & { readonly expect: boolean; readonly why: string };

const q = (
  resourceType: ConcreteResourceType,
  action: string,
  matchValue: string | null,
  groups: readonly string[] | null,
  expect: boolean,
  why: string,
): Question => ({ resourceType, action: action as Target["action"], matchValue, groups, expect, why });

/**
 * Allowed and denied, through every arm: prefix, literal (with a LIKE metacharacter), infix,
 * suffix-anchored, group, `*` action, untargeted, "anywhere?" (a null match value), families
 * without patterns or groups, an owner-only pair. `expect` is what the seed's semantics say;
 * the bench checks all three engines against each other and against it.
 */
const QUESTIONS: readonly Question[] = [
  q("stack", "read", "team-a-0042", ["env-prod"], true, "prefix"),
  q("stack", "read", "team-b-0042", ["env-prod"], false, "other prefix, other group"),
  q("stack", "read", "svc-0000001", ["env-staging"], true, "group"),
  q("stack", "read", "svc-0000001", [], false, "no group"),
  q("stack", "read", null, null, false, "anywhere? needs an untargeted grant"),
  q("stack", "deploy", "team-a-7", [], true, "prefix"),
  q("stack", "deploy", "svc-0000042", ["env-staging", "tier-2"], true, "second group"),
  q("stack", "deploy", "svc-0000043", ["env-prod", "tier-1"], false, "groups of other grants"),
  q("stack", "preview", "team-a-x", [], true, "prefix"),
  q("stack", "preview", "team-b-x", ["env-staging"], false, "group of another action"),
  q("stack", "read_logs", "core-payments-api", ["tier-3"], true, "infix"),
  q("stack", "read_logs", "svc-9", ["tier-1"], true, "group"),
  q("stack", "read_logs", "payments", ["tier-2"], false, "infix needs its dashes"),
  q("stack", "update", "prod_backend", [], true, "literal"),
  q("stack", "update", "prodXbackend", [], false, "'_' is a literal, not one character"),
  q("stack", "confirm", "team-b-api", [], true, "literal"),
  q("stack", "confirm", "team-b-api-2", [], false, "literal is whole-string"),
  q("stack", "delete", "sandbox-17", [], true, "'*' action"),
  q("stack", "unlock_state", "sandbox-x", ["env-prod"], true, "'*' action"),
  q("stack", "create", "sandbox-new", ["env-staging"], true, "'*' action on create"),
  q("stack", "delete", "team-a-1", [], false, "prefix of other actions"),
  q("cloud_integration", "read", "aws-prod", ["env-staging"], true, "group"),
  q("cloud_integration", "read", "aws-prod", ["env-prod"], false, "other group"),
  q("cloud_integration", "update", "aws-prod", ["env-staging"], false, "group of another action"),
  q("runner_group", "read", "default", null, true, "untargeted"),
  q("runner_group", "read", null, null, true, "untargeted, anywhere?"),
  q("runner_group", "delete", "default", null, false, "no grant"),
  q("label", "read", "team/owner", null, true, "untargeted"),
  q("label", "update", "team/owner", null, true, "prefix across '/'"),
  q("label", "update", "env", null, false, "other key"),
  q("label", "create", "team/x", null, false, "no grant"),
  q("stack_authz_group", "assign", "team-a-ops", null, true, "prefix"),
  q("stack_authz_group", "assign", "env-prod", null, false, "other name"),
  q("role", "read", null, null, true, "untargeted"),
  q("role", "update", null, null, false, "no grant"),
  q("member", "read", null, null, true, "untargeted"),
  q("member", "check", null, null, false, "no grant"),
  q("workspace", "read", "team-c-ws", ["env-staging"], true, "group"),
  q("workspace", "approve", "team-a-42-prod", [], true, "infix"),
  q("workspace", "approve", "team-a-42-dev", ["env-prod"], false, "suffix-anchored"),
  q("approval_request", "decide", "team-a-ws", ["tier-1"], true, "group"),
  q("approval_request", "read", "team-a-ws", ["tier-1"], false, "group of another action"),
  q("approval_policy", "manage", "team-a-prod", ["tier-1"], false, "owner-only"),
  q("webhook", "read", null, null, false, "no grant"),
];

// ── Cedar ────────────────────────────────────────────────────────────────────────────

const pascal = (family: string) => family.split("_").map((w) => w[0]!.toUpperCase() + w.slice(1)).join("");
const cedarAction = (family: string, action: string): EntityUid => ({ type: "Action", id: `${family}:${action}` });
const USER = { type: "User", id: "bench-user" } satisfies EntityUid;
const ROLE = { type: "CustomRole", id: "bench-role" } satisfies EntityUid;
const POLICY_SET_ID = "countersign-bench-peers";

/** A user glob (`*` any run; the 20 grants use no `?`) as a Cedar `like` pattern: `*` stays, nothing else is special but `\`. */
function cedarLike(glob: string): string {
  if (glob.includes("?")) throw new Error(`Cedar's like has no one-character wildcard: ${glob}`);
  return JSON.stringify(glob.replace(/\\/g, "\\\\"));
}

/** One `permit` per tuple, for any principal in the role (how a shared policy set would say it). */
function cedarPolicies(grants: readonly GlobGrant[]): string {
  return grants
    .map((g, i) => {
      const family = FAMILIES[g.resourceType as ConcreteResourceType];
      const actions =
        g.action === "*"
          ? `action in [${family.actions.map((a) => `Action::"${g.resourceType}:${a}"`).join(", ")}]`
          : `action == Action::"${g.resourceType}:${g.action}"`;
      const when =
        g.resourcePattern !== undefined && g.resourcePattern !== ""
          ? ` when { resource has name && resource.name like ${cedarLike(g.resourcePattern)} }`
          : g.authzGroup !== undefined && g.authzGroup !== ""
            ? ` when { resource has groups && resource.groups.contains(${JSON.stringify(g.authzGroup)}) }`
            : "";
      return `@id("grant-${i}")\npermit (principal in CustomRole::"${ROLE.id}", ${actions}, resource is ${pascal(g.resourceType)})${when};`;
    })
    .join("\n");
}

/** The entities of one question: the user in the role, and the resource with its name and groups (absent when null). */
function cedarRequest(t: Target): { principal: EntityUid; action: EntityUid; resource: EntityUid; context: Record<string, never>; entities: EntityJson[] } {
  const resource: EntityUid = { type: pascal(t.resourceType), id: t.matchValue ?? "(anywhere)" };
  const attrs: EntityJson["attrs"] = {};
  if (t.matchValue !== null) attrs.name = t.matchValue;
  if (t.groups !== null) attrs.groups = [...t.groups];
  return {
    principal: USER,
    action: cedarAction(t.resourceType, t.action),
    resource,
    context: {},
    entities: [
      { uid: USER, attrs: {}, parents: [ROLE] },
      { uid: ROLE, attrs: {}, parents: [] },
      { uid: resource, attrs, parents: [] },
    ],
  };
}

function cedarAllowed(answer: AuthorizationAnswer): boolean {
  if (answer.type !== "success") throw new Error(`Cedar failed: ${answer.errors.map((e) => e.message).join("; ")}`);
  return answer.response.decision === "allow";
}

// ── casbin ───────────────────────────────────────────────────────────────────────────

/** The seed's three conditions as a casbin matcher; `g` is the role a user holds. */
const CASBIN_MODEL = `
[request_definition]
r = sub, rt, act, name, groups

[policy_definition]
p = sub, rt, act, pattern, grp

[role_definition]
g = _, _

[policy_effect]
e = some(where (p.eft == allow))

[matchers]
m = g(r.sub, p.sub) && (p.rt == r.rt || p.rt == "*") && (p.act == r.act || p.act == "*") && ((p.pattern == "" && p.grp == "") || (p.pattern != "" && r.name != "" && countersignGlob(r.name, p.pattern)) || (p.grp != "" && inGroups(p.grp, r.groups)))
`;

/** A glob (`*` any run, whole string, case-sensitive) as a cached RegExp: casbin's own globMatch is minimatch, where `*` stops at `/`. */
const globs = new Map<string, RegExp>();
function globMatch(value: string, glob: string): boolean {
  let re = globs.get(glob);
  if (re === undefined) {
    re = new RegExp(`^${glob.split("*").map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`, "s");
    globs.set(glob, re);
  }
  return re.test(value);
}

async function casbinEnforcer(grants: readonly GlobGrant[]): Promise<Enforcer> {
  const enforcer = await newEnforcer(newModelFromString(CASBIN_MODEL));
  await enforcer.addFunction("countersignGlob", (value: string, glob: string) => globMatch(value, glob));
  await enforcer.addFunction("inGroups", (group: string, groups: readonly string[]) => groups.includes(group));
  await enforcer.addPolicies(grants.map((g) => [ROLE.id, g.resourceType, g.action, g.resourcePattern ?? "", g.authzGroup ?? ""]));
  await enforcer.addGroupingPolicy(USER.id, ROLE.id);
  return enforcer;
}

/** A question as casbin's request values: a null match value is "", null groups are none. */
const casbinRequest = (t: Target) => [USER.id, t.resourceType, t.action, t.matchValue ?? "", t.groups === null ? [] : [...t.groups]] as const;

// ── The run ──────────────────────────────────────────────────────────────────────────

export async function run(): Promise<BenchRow[]> {
  const permissions = realisticGrants();
  if (permissions.length !== GRANTS.length) throw new Error(`validated ${permissions.length} of ${GRANTS.length} grants`);
  const principal = compilePrincipal({ isSuperAdmin: false, orgExists: true, orgDeleted: false, membershipActive: true, grants: permissions });

  const policies = cedarPolicies(GRANTS);
  const parsed = preparsePolicySet(POLICY_SET_ID, { staticPolicies: policies });
  if (parsed.type !== "success") throw new Error(`Cedar refused the policy set: ${parsed.errors.map((e) => e.message).join("; ")}\n${policies}`);
  const enforcer = await casbinEnforcer(GRANTS);

  const n = QUESTIONS.length;
  const cedarCalls = QUESTIONS.map((t) => ({ ...cedarRequest(t), preparsedPolicySetId: POLICY_SET_ID, validateRequest: false }));
  const cedarStateless = QUESTIONS.map((t) => ({ ...cedarRequest(t), policies: { staticPolicies: policies }, validateRequest: false }));
  const casbinCalls = QUESTIONS.map(casbinRequest);

  const decideCountersign = (i: number) => checkPermission(principal, QUESTIONS[i % n]!).allowed;
  const decideCedar = (i: number) => cedarAllowed(statefulIsAuthorized(cedarCalls[i % n]!));
  const decideCedarStateless = (i: number) => cedarAllowed(isAuthorized(cedarStateless[i % n]!));
  const decideCasbin = (i: number) => enforcer.enforceSync(...casbinCalls[i % n]!);

  // Agreement first: every question, every engine, and the seed's expected answer.
  const disagreements: string[] = [];
  for (let i = 0; i < n; i++) {
    const t = QUESTIONS[i]!;
    const got = { countersign: decideCountersign(i), cedar: decideCedar(i), cedarStateless: decideCedarStateless(i), casbin: decideCasbin(i) };
    if (Object.values(got).some((v) => v !== t.expect)) {
      disagreements.push(`(${t.resourceType}, ${t.action}, ${JSON.stringify(t.matchValue)}, ${JSON.stringify(t.groups)}) [${t.why}]: expected ${t.expect}, ${JSON.stringify(got)}`);
    }
  }
  const allowed = QUESTIONS.filter((t) => t.expect).length;
  log(`peers: ${n} questions (${allowed} allowed, ${n - allowed} denied) over ${GRANTS.length} grants; ${disagreements.length} disagreements`);
  for (const d of disagreements) log(`DISAGREEMENT ${d}`);
  const agree = disagreements.length === 0;

  const fast = { perBatch: 20_000, batches: 25 };
  const countersign = nsPerOp(decideCountersign, fast);
  const cedar = nsPerOp(decideCedar, { perBatch: 200, batches: 25, warmupCalls: 2_000 });
  const cedarParsing = nsPerOp(decideCedarStateless, { perBatch: 50, batches: 15, warmupCalls: 200 });
  const casbin = nsPerOp(decideCasbin, { perBatch: 500, batches: 25, warmupCalls: 5_000 });
  const us = (ns: number) => ns / 1000;
  log(
    `peers: p50 (p99 batch) µs/decision: countersign ${us(countersign.p50).toFixed(3)} (${us(countersign.p99).toFixed(3)}), ` +
      `cedar stateful ${us(cedar.p50).toFixed(1)} (${us(cedar.p99).toFixed(1)}), cedar parsing per call ${us(cedarParsing.p50).toFixed(1)}, ` +
      `casbin ${us(casbin.p50).toFixed(1)} (${us(casbin.p99).toFixed(1)})`,
  );

  const judged = { target: `agrees on all ${n}`, pass: agree };
  return [
    row(`the same ${GRANTS.length} grants: questions decided alike by Countersign, Cedar and casbin`, n - disagreements.length, "questions", {
      baseline: { name: "questions asked", value: n },
      ...judged,
    }),
    row(`checkPermission vs Cedar statefulIsAuthorized (preparsed policy set), ${n} questions (p50)`, us(countersign.p50), "µs/decision", {
      baseline: { name: "Cedar 4.13 wasm", value: us(cedar.p50) },
      ...judged,
    }),
    row(`checkPermission vs casbin 5.51 enforceSync (glob function), ${n} questions (p50)`, us(countersign.p50), "µs/decision", {
      baseline: { name: "casbin enforceSync", value: us(casbin.p50) },
      ...judged,
    }),
    row(`Cedar statefulIsAuthorized vs isAuthorized (policy text parsed per call)`, us(cedar.p50), "µs/decision", {
      baseline: { name: "Cedar isAuthorized", value: us(cedarParsing.p50) },
      target: "context",
    }),
  ];
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { formatTable } = await import("./lib.js");
  console.log(formatTable(await run()));
  process.exit(0);
}
