import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ApprovalPolicyError,
  matchRequest,
  policySetHash,
  quorum,
  reviewerEligibility,
  toolGlobMatches,
  validateApprovalPolicySet,
  validateApprovalRules,
  type ApprovalPolicy,
  type ApprovalRule,
} from "../../../src/domain/approvals/index.js";

// Seed 003, "The inbox", "Approval policies" and "Voting".

const allow = (id: string, over: Partial<ApprovalRule> = {}): ApprovalRule => ({
  id,
  effect: "allow",
  tools: ["*"],
  environments: ["prod"],
  roles: [],
  userIds: [],
  ...over,
});
const deny = (id: string, over: Partial<ApprovalRule> = {}): ApprovalRule => ({ ...allow(id, over), effect: "deny", ...over });
const policy = (id: string, rules: ApprovalRule[], over: Partial<ApprovalPolicy> = {}): ApprovalPolicy => ({
  id,
  revision: 1,
  enabled: true,
  rules,
  ...over,
});
const prodDelete = { tool: "github.delete_repo", environment: "prod" };

describe("validating approval rules", () => {
  it("accepts a well-formed rule and defaults an allow count to 1", () => {
    const result = validateApprovalRules([{ id: "sre", effect: "allow", tools: ["github.*"], environments: ["prod"], roles: ["role-sre"], userIds: [] }]);
    expect(result).toEqual({ ok: true, rules: [expect.objectContaining({ id: "sre", count: 1 })] });
  });

  it("reports every issue with its field path", () => {
    const result = validateApprovalRules([
      { id: "ok", effect: "allow", tools: ["*"], environments: ["*"], roles: ["r"], userIds: [], count: 11 },
      { id: "d", effect: "deny", tools: ["gh?"], environments: ["prod*"], roles: [], userIds: [], count: 1 },
      { id: "ok", effect: "maybe", tools: [], environments: ["prod"], roles: ["r"], userIds: [], extra: true },
    ]);
    expect(result.ok).toBe(false);
    const paths = !result.ok ? result.issues.map((i) => i.path.join(".")) : [];
    expect(paths).toEqual(
      expect.arrayContaining(["0.count", "1.tools.0", "1.environments.0", "1.count", "1.roles", "2.effect", "2.tools", "2"]),
    );
  });

  it("reports a duplicate rule id within a policy and across a workspace's policies", () => {
    const dup = validateApprovalRules([allow("a", { roles: ["r"] }), allow("a", { roles: ["r"] })]);
    expect(!dup.ok && dup.issues).toEqual([{ path: [1, "id"], message: "duplicate rule id a" }]);
    const issues = validateApprovalPolicySet([policy("p1", [allow("a")]), policy("p2", [allow("a")], { enabled: false })]);
    expect(issues.map((i) => i.path)).toEqual([[1, "rules", 0, "id"]]);
  });

  it("rejects input that is not a list of rules", () => {
    expect(validateApprovalRules({ id: "x" })).toMatchObject({ ok: false, issues: [{ path: [] }] });
  });
});

describe("tool globs", () => {
  it.each([
    ["*", "anything", true],
    ["*", "", true],
    ["github.*", "github.delete_repo", true],
    ["github.*", "gitlab.delete_repo", false],
    ["*.delete_*", "github.delete_repo", true],
    ["*.delete_*", "github.create_repo", false],
    ["a*a", "a", false],
    ["a*a", "aa", true],
    ["github.delete_repo", "github.delete_repo", true],
    ["github.delete_repo", "GitHub.delete_repo", false],
    ["github.delete_repo", "github.delete_repo2", false],
  ])("%s matches %s: %s", (glob, tool, expected) => {
    expect(toolGlobMatches(glob, tool)).toBe(expected);
  });

  it("agrees with an anchored regular expression", () => {
    const piece = fc.constantFrom("a", "b", ".", "_", "*");
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), fc.array(fc.constantFrom("a", "b", ".", "_"), { maxLength: 10 }), (g, t) => {
        const glob = g.join("");
        const tool = t.join("");
        const regex = new RegExp(`^${glob.split("*").map((s) => s.replace(/[.]/g, "\\.")).join(".*")}$`);
        expect(toolGlobMatches(glob, tool)).toBe(regex.test(tool));
      }),
      { numRuns: 500 },
    );
  });
});

describe("matching at ingest", () => {
  it("no allow rule matching tool and environment → default_deny", () => {
    expect(matchRequest([], prodDelete).defaultDeny).toBe(true);
    expect(matchRequest([policy("p", [allow("staging-only", { environments: ["staging"], roles: ["r"] })])], prodDelete).defaultDeny).toBe(true);
    expect(matchRequest([policy("p", [allow("stripe-only", { tools: ["stripe.*"], roles: ["r"] })])], prodDelete).defaultDeny).toBe(true);
    expect(matchRequest([policy("p", [deny("contractors", { roles: ["r"] })])], prodDelete)).toMatchObject({
      defaultDeny: true,
      matchedRules: [{ ruleId: "contractors", effect: "deny" }],
    });
    expect(matchRequest([policy("p", [allow("any", { roles: ["r"] })], { enabled: false })], prodDelete).defaultDeny).toBe(true);
    expect(matchRequest([policy("p", [allow("any", { environments: ["*"], roles: ["r"] })])], prodDelete).defaultDeny).toBe(false);
  });

  it("snapshots the matching rules as immutable copies with their policy id and revision", () => {
    const rules = [allow("sre", { tools: ["github.*"], roles: ["role-sre"], count: 2 }), allow("stripe", { tools: ["stripe.*"], roles: ["r"] })];
    const policies = [policy("p1", rules, { revision: 7 })];
    const { matchedRules, policyRevisions } = matchRequest(policies, prodDelete);
    expect(matchedRules).toEqual([
      { policyId: "p1", policyRevision: 7, ruleId: "sre", effect: "allow", count: 2, tools: ["github.*"], environments: ["prod"], roles: ["role-sre"], userIds: [] },
    ]);
    expect(policyRevisions).toEqual({ p1: 7 });
    expect(Object.isFrozen(matchedRules) && Object.isFrozen(matchedRules[0]) && Object.isFrozen(matchedRules[0]?.roles)).toBe(true);
    rules[0]!.roles.push("role-everyone");
    expect(matchedRules[0]?.roles).toEqual(["role-sre"]);
  });

  it("refuses two active rules sharing an id", () => {
    expect(() => matchRequest([policy("p1", [allow("a")]), policy("p2", [allow("a")])], prodDelete)).toThrow(ApprovalPolicyError);
  });
});

describe("reviewers", () => {
  const snapshot = matchRequest(
    [policy("p", [allow("admins", { roles: ["role-admin"] }), allow("named", { userIds: ["u-carol"] }), deny("no-contractors", { roles: ["role-contractor"], userIds: ["u-mallory"] })])],
    prodDelete,
  ).matchedRules;

  it("a principal matches a rule when their role is selected or their user id is named", () => {
    expect(reviewerEligibility(snapshot, { userId: "u-alice", roleIds: ["role-admin"] })).toEqual({ eligible: true, allowRuleIds: ["admins"] });
    expect(reviewerEligibility(snapshot, { userId: "u-carol", roleIds: [] })).toEqual({ eligible: true, allowRuleIds: ["named"] });
    expect(reviewerEligibility(snapshot, { userId: "u-bob", roleIds: ["role-viewer"] })).toEqual({ eligible: false, allowRuleIds: [] });
  });

  it("an explicit matching reviewer deny defeats every allow", () => {
    expect(reviewerEligibility(snapshot, { userId: "u-dave", roleIds: ["role-admin", "role-contractor"] })).toEqual({
      eligible: false,
      allowRuleIds: [],
      deniedBy: "no-contractors",
    });
    expect(reviewerEligibility(snapshot, { userId: "u-mallory", roleIds: ["role-admin"] })).toMatchObject({ eligible: false, deniedBy: "no-contractors" });
  });

  it("a reviewer deny excludes the person; it is not a decision to reject the request", () => {
    const excluded = { userId: "u-dave", roleIds: ["role-admin", "role-contractor"] };
    expect(quorum(snapshot, [{ ...excluded, decision: "approve" }]).state).toBe("pending");
    expect(quorum(snapshot, [{ ...excluded, decision: "deny" }]).state).toBe("pending");
  });
});

describe("quorum", () => {
  const snapshot = matchRequest(
    [
      policy("broad", [allow("admins-one", { tools: ["github.*"], roles: ["role-admin"], count: 1 })]),
      policy("narrow", [allow("sre-two", { tools: ["github.delete_*"], roles: ["role-sre"], count: 2 })]),
      policy("dba", [allow("dba-two", { tools: ["github.delete_*"], roles: ["role-dba"], count: 2 })]),
    ],
    prodDelete,
  ).matchedRules;
  const sre = (userId: string) => ({ userId, roleIds: ["role-sre"] });

  it("votes are not pooled across rules: a one-person rule reaches quorum while a two-person rule waits", () => {
    const result = quorum(snapshot, [{ userId: "u-ada", roleIds: ["role-admin", "role-sre"], decision: "approve" }]);
    expect(result).toEqual({
      state: "approved",
      satisfiedRuleId: "admins-one",
      perRule: [
        { policyId: "broad", ruleId: "admins-one", count: 1, approvals: 1 },
        { policyId: "dba", ruleId: "dba-two", count: 2, approvals: 0 },
        { policyId: "narrow", ruleId: "sre-two", count: 2, approvals: 1 },
      ],
    });
  });

  it("one approval under each of two two-person rules is not a quorum", () => {
    const result = quorum(snapshot, [
      { ...sre("u-sam"), decision: "approve" },
      { userId: "u-dora", roleIds: ["role-dba"], decision: "approve" },
    ]);
    expect(result.state).toBe("pending");
  });

  it("a two-person rule is met by two distinct eligible approvers", () => {
    expect(quorum(snapshot, [{ ...sre("u-sam"), decision: "approve" }, { ...sre("u-sam"), decision: "approve" }]).state).toBe("pending");
    expect(quorum(snapshot, [{ ...sre("u-sam"), decision: "approve" }, { ...sre("u-sue"), decision: "approve" }])).toMatchObject({
      state: "approved",
      satisfiedRuleId: "sre-two",
    });
  });

  it("a permitted reviewer's deny vote closes the request", () => {
    expect(quorum(snapshot, [{ ...sre("u-sam"), decision: "approve" }, { ...sre("u-sue"), decision: "deny" }])).toMatchObject({
      state: "rejected",
      rejectedBy: "u-sue",
    });
  });

  it("a deny vote from someone who may not review changes nothing", () => {
    expect(quorum(snapshot, [{ userId: "u-eve", roleIds: ["role-viewer"], decision: "deny" }]).state).toBe("pending");
  });

  it("votes from principals no longer eligible do not count: quorum is rechecked with current memberships", () => {
    const cast = [{ ...sre("u-sam"), decision: "approve" as const }, { ...sre("u-sue"), decision: "approve" as const }];
    expect(quorum(snapshot, cast).state).toBe("approved");
    const sueLostTheRole = [cast[0]!, { ...cast[1]!, roleIds: [] }];
    expect(quorum(snapshot, sueLostTheRole)).toMatchObject({ state: "pending", perRule: expect.arrayContaining([{ policyId: "narrow", ruleId: "sre-two", count: 2, approvals: 1 }]) });
  });

  it("a reviewer excluded by a deny rule after voting no longer counts", () => {
    const withDeny = matchRequest([policy("p", [allow("admins-one", { roles: ["role-admin"] }), deny("no-u-ada", { userIds: ["u-ada"] })])], prodDelete).matchedRules;
    expect(quorum(withDeny, [{ userId: "u-ada", roleIds: ["role-admin"], decision: "approve" }]).state).toBe("pending");
  });
});

describe("the policy-set hash", () => {
  const p1 = policy("p1", [allow("a", { roles: ["r1", "r2"] })]);
  const p2 = policy("p2", [allow("b", { userIds: ["u1"], count: 2 })], { revision: 3 });
  const off = policy("p3", [allow("c", { roles: ["r3"] })], { enabled: false });
  const base = policySetHash([p1, p2, off]);

  it("the policy-set hash changes when any active policy changes or is disabled and not when a disabled one changes", () => {
    expect(policySetHash([p1, { ...p2, revision: 4 }, off])).not.toBe(base);
    expect(policySetHash([p1, { ...p2, rules: [allow("b", { userIds: ["u1"], count: 3 })] }, off])).not.toBe(base);
    expect(policySetHash([p1, { ...p2, enabled: false }, off])).not.toBe(base);
    expect(policySetHash([p1, p2, { ...off, enabled: true }])).not.toBe(base);
    expect(policySetHash([p1, p2, { ...off, revision: 9, rules: [allow("c", { roles: ["r4"] })] }])).toBe(base);
    expect(policySetHash([p1, p2])).toBe(base);
  });

  it("is order-independent", () => {
    expect(policySetHash([off, p2, p1])).toBe(base);
    expect(policySetHash([{ ...p1, rules: [allow("a", { roles: ["r2", "r1"] })] }, p2])).toBe(base);
    expect(policySetHash([p1, { ...p2, rules: [{ ...allow("b", { userIds: ["u1"] }), count: 2 }] }])).toBe(base);
  });

  it("writes an allow rule's default count out", () => {
    const { count: _count, ...withoutCount } = allow("a", { roles: ["r1", "r2"], count: 1 });
    expect(policySetHash([{ ...p1, rules: [withoutCount] }])).toBe(policySetHash([{ ...p1, rules: [allow("a", { roles: ["r1", "r2"], count: 1 })] }]));
    expect(policySetHash([])).toMatch(/^[0-9a-f]{64}$/);
  });
});
