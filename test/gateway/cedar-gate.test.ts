import { describe, expect, it } from "vitest";
import { CedarEvaluationError, CedarPolicyError, createCedarGate, DEFAULT_GATEWAY_POLICIES, type GateRequest } from "../../src/gateway/index.js";

// Seed 003, "The gate". Every test evaluates real Cedar policies through cedar-wasm.

const request = (overrides: Partial<GateRequest> = {}): GateRequest => ({
  principal: { type: "VirtualKey", id: "key-1" },
  action: { type: "Action", id: "tools/call" },
  resource: { type: "Tool", id: "github.delete_repo" },
  context: {},
  destructive: true,
  environment: "prod",
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

  it("a deny outside prod stays a deny", () => {
    expect(createCedarGate(WORKSPACE_POLICIES).decide(request({ environment: "staging" }))).toEqual({
      decision: "deny",
      reason: "forbidden",
      policyIds: ["repo-deletes-needs-approval"],
    });
    // "production" is not "prod": the environment is compared exactly.
    expect(createCedarGate(WORKSPACE_POLICIES).decide(request({ environment: "production" })).decision).toBe("deny");
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

  it("the request's destructive, environment and approved facts override the free-form context", () => {
    const gate = createCedarGate(DEFAULT_GATEWAY_POLICIES);
    const decision = gate.decide(request({ context: { destructive: false, environment: "dev", approved: true } }));
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
