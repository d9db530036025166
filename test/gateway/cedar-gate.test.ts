import { describe, expect, it } from "vitest";
import { CedarEvaluationError, CedarPolicyError, checkGatePolicies, createCedarGate, DEFAULT_GATEWAY_POLICIES, type GateRequest } from "../../src/gateway/index.js";

// Seed 003, "The gate". Every test evaluates real Cedar policies through cedar-wasm.

const request = (overrides: Partial<GateRequest> = {}): GateRequest => ({
  principal: { type: "VirtualKey", id: "key-1" },
  action: { type: "Action", id: "tools/call" },
  resource: { type: "Tool", id: "github.delete_repo" },
  context: {},
  destructive: true,
  environment: "prod",
  production: true,
  alreadyApproved: false,
  ...overrides,
});

/** A workspace-authored approval forbid that does not itself look at destructive/prod/approved,
 *  so each of the gate's own conditions can be seen failing on its own. */
const WORKSPACE_POLICIES = `
@id("permit-all") permit (principal, action, resource);
@id("repo-deletes-needs-approval") forbid (principal, action, resource == Tool::"github.delete_repo");
`;

describe("the gate", () => {
  it("a deny becomes ApprovalRequired only when destructive, prod, not approved, a policy matched and every matched id ends in needs-approval", () => {
    const gate = createCedarGate(DEFAULT_GATEWAY_POLICIES);
    expect(gate.decide(request())).toEqual({ decision: "approval_required", policyIds: ["prod-destructive-needs-approval"] });
    expect(createCedarGate(WORKSPACE_POLICIES).decide(request())).toEqual({
      decision: "approval_required",
      policyIds: ["repo-deletes-needs-approval"],
    });
  });

  it("a deny for a tool that is not destructive stays a deny", () => {
    expect(createCedarGate(WORKSPACE_POLICIES).decide(request({ destructive: false }))).toEqual({
      decision: "deny",
      reason: "forbidden",
      policyIds: ["repo-deletes-needs-approval"],
    });
  });

  it("a deny outside production stays a deny, whatever the environment is named", () => {
    expect(createCedarGate(WORKSPACE_POLICIES).decide(request({ production: false }))).toEqual({
      decision: "deny",
      reason: "forbidden",
      policyIds: ["repo-deletes-needs-approval"],
    });
    // The tier decides, not the name: a workspace named prod that is not production holds nothing.
    expect(createCedarGate(WORKSPACE_POLICIES).decide(request({ environment: "prod", production: false })).decision).toBe("deny");
    expect(createCedarGate(DEFAULT_GATEWAY_POLICIES).decide(request({ environment: "prod", production: false })).decision).toBe("allow");
  });

  it("a production workspace named staging holds destructive calls", () => {
    expect(createCedarGate(DEFAULT_GATEWAY_POLICIES).decide(request({ environment: "staging", production: true }))).toEqual({
      decision: "approval_required",
      policyIds: ["prod-destructive-needs-approval"],
    });
  });

  it("the Cedar context carries the environment name and the tier", () => {
    const gate = createCedarGate(`
@id("permit-all") permit (principal, action, resource);
@id("staging-name-needs-approval") forbid (principal, action, resource) when { context.environment == "staging" && context.production } unless { context.approved };`);
    expect(gate.decide(request({ environment: "staging", production: true })).decision).toBe("approval_required");
    expect(gate.decide(request({ environment: "eu-prod", production: true })).decision).toBe("allow");
  });

  it("a deny of a call that is already approved stays a deny", () => {
    expect(createCedarGate(WORKSPACE_POLICIES).decide(request({ alreadyApproved: true }))).toEqual({
      decision: "deny",
      reason: "forbidden",
      policyIds: ["repo-deletes-needs-approval"],
    });
  });

  it("an approved call passes the default approval forbid", () => {
    expect(createCedarGate(DEFAULT_GATEWAY_POLICIES).decide(request({ alreadyApproved: true }))).toEqual({ decision: "allow" });
  });

  it("a deny is not ApprovalRequired unless every matched id ends in needs-approval", () => {
    const gate = createCedarGate(`${WORKSPACE_POLICIES}
@id("no-repo-deletes-on-fridays") forbid (principal, action, resource) when { context.weekday == "friday" };`);
    const decision = gate.decide(request({ context: { weekday: "friday" } }));
    expect(decision).toMatchObject({ decision: "deny", reason: "forbidden" });
    expect(decision.decision === "deny" && [...decision.policyIds].sort()).toEqual(["no-repo-deletes-on-fridays", "repo-deletes-needs-approval"]);
    expect(gate.decide(request({ context: { weekday: "monday" } })).decision).toBe("approval_required");
  });

  it("a deny with no matched policy stays a deny", () => {
    const gate = createCedarGate(`@id("reads-only") permit (principal, action, resource) when { context.destructive == false };`);
    expect(gate.decide(request())).toEqual({ decision: "deny", reason: "no_policy_matched", policyIds: [] });
    expect(createCedarGate("").decide(request())).toEqual({ decision: "deny", reason: "no_policy_matched", policyIds: [] });
  });

  it("a deny caused by any other forbid stays a deny", () => {
    const gate = createCedarGate(`
@id("permit-all") permit (principal, action, resource);
@id("block-repo-deletes") forbid (principal, action, resource == Tool::"github.delete_repo");`);
    expect(gate.decide(request())).toEqual({ decision: "deny", reason: "forbidden", policyIds: ["block-repo-deletes"] });
  });

  it("the suffix must end the id: needs-approval-v2 is not an approval gate", () => {
    const gate = createCedarGate(`
@id("permit-all") permit (principal, action, resource);
@id("deletes-needs-approval-v2") forbid (principal, action, resource);`);
    expect(gate.decide(request())).toMatchObject({ decision: "deny", reason: "forbidden" });
  });

  it("the request's destructive, environment, production and approved facts override the free-form context", () => {
    const gate = createCedarGate(DEFAULT_GATEWAY_POLICIES);
    const decision = gate.decide(request({ context: { destructive: false, environment: "dev", production: false, approved: true } }));
    expect(decision.decision).toBe("approval_required");
  });

  it("a non-destructive call in prod is allowed by the default policies", () => {
    expect(createCedarGate(DEFAULT_GATEWAY_POLICIES).decide(request({ destructive: false }))).toEqual({ decision: "allow" });
  });

  it("a forbid that fails to evaluate denies instead of failing open", () => {
    const gate = createCedarGate(`
@id("permit-all") permit (principal, action, resource);
@id("large-refunds-needs-approval") forbid (principal, action, resource) when { context.amount_usd > 100 };`);
    const decision = gate.decide(request());
    expect(decision).toMatchObject({ decision: "deny", reason: "forbidden", policyIds: ["large-refunds-needs-approval"] });
    expect(decision.decision === "deny" && decision.evaluationErrors?.[0]?.policyId).toBe("large-refunds-needs-approval");
    expect(gate.decide(request({ context: { amount_usd: 500 } })).decision).toBe("approval_required");
    expect(gate.decide(request({ context: { amount_usd: 5 } })).decision).toBe("allow");
  });

  it("a request Cedar cannot evaluate throws instead of deciding", () => {
    const gate = createCedarGate(DEFAULT_GATEWAY_POLICIES);
    expect(() => gate.decide(request({ principal: { type: "not a type", id: "k" } }))).toThrow(CedarEvaluationError);
  });

  it("policy text is validated once, when the gate is created", () => {
    expect(() => createCedarGate("permit (principal, action")).toThrow(CedarPolicyError);
    expect(() => createCedarGate("permit (principal, action, resource);")).toThrow(/no @id/);
    expect(() => createCedarGate(`@id("a") permit (principal, action, resource); @id("a") forbid (principal, action, resource);`)).toThrow(
      /duplicate policy @id/,
    );
    expect(() => createCedarGate(`@id("t") permit (principal == ?principal, action, resource);`)).toThrow(/templates/);
    expect(createCedarGate(DEFAULT_GATEWAY_POLICIES).policyIds).toEqual(["permit-all", "prod-destructive-needs-approval"]);
  });
});

describe("checking a policy set (what saving one validates)", () => {
  it("a forbid whose @id ends in needs-approval makes tickets; any other forbid denies", () => {
    const checked = checkGatePolicies(`
@id("permit-all") permit (principal, action, resource);
@id("deletes-needs-approval") forbid (principal, action, resource) when { context.destructive } unless { context.approved };
@id("no-wipes") forbid (principal, action, resource == Tool::"db.wipe");`);
    expect(checked.ok && checked.policies.map((p) => [p.id, p.kind])).toEqual([
      ["permit-all", "permit"],
      ["deletes-needs-approval", "needs_approval"],
      ["no-wipes", "deny"],
    ]);
    expect(checked.ok && checked.policies[2]!.explanation).toMatch(/no approval can unblock/);
    expect(checked.ok && checked.policies[1]!.explanation).not.toMatch(/Warning/);
  });

  it("a needs-approval forbid that does not step aside for an approved call is flagged", () => {
    const checked = checkGatePolicies(`@id("all-needs-approval") forbid (principal, action, resource);`);
    expect(checked.ok && checked.policies[0]!.explanation).toMatch(/Warning: it has no `unless \{ context.approved \}`/);
  });

  it("a set that cannot be parsed is refused with the Cedar error, placed at its policy and line", () => {
    const checked = checkGatePolicies(`@id("ok") permit (principal, action, resource);
@id("broken") forbid (principal, action, resource) when { context.x == };`);
    expect(checked.ok).toBe(false);
    const issue = !checked.ok ? checked.issues[0]! : null;
    expect(issue).toMatchObject({ code: "cedar_parse_error", policy: 2, policyId: "broken" });
    expect(issue?.message).toMatch(/^policy 2 \("broken"\), line 2, column \d+: unexpected token `\}`/);
  });

  it("every policy needs a unique @id; positions follow the text past ten policies", () => {
    const many = Array.from({ length: 12 }, (_, i) => `@id("p${i}") permit (principal, action, resource);`).join("\n");
    const checked = checkGatePolicies(`${many}\npermit (principal, action, resource);\n@id("p3") permit (principal, action, resource);`);
    expect(!checked.ok && checked.issues.map((i) => [i.code, i.policy, i.policyId])).toEqual([
      ["missing_id", 13, null],
      ["duplicate_id", 14, "p3"],
    ]);
    const ok = checkGatePolicies(many);
    expect(ok.ok && ok.policies.map((p) => p.id)).toEqual(Array.from({ length: 12 }, (_, i) => `p${i}`));
  });
});
