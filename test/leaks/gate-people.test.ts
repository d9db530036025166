// The plan page shows the people who can answer a plan (seed 000): whoever may read the plan sees
// the id and name of every person on its gate — the same people the reasons name in text — while
// emails stay member data behind (member, read). The person fields are found by walking the
// schema from GateStatus, so a person field added later is covered (and a `User` reached from the
// gate fails the walk: the gate names people as GatePerson; User.email is guarded alike,
// test/graphql/type-paths.test.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isListType, isNonNullType, isObjectType, type GraphQLNamedType, type GraphQLOutputType, type GraphQLSchema } from "graphql";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { APPROVE, PLAN, READ, allActions, memberOf, ops, person, role, seedStack, seedWorkspace } from "../gate/helpers.js";
import { schema } from "../../src/graphql/schema/index.js";

let t: TestApp;
let org: OrgFixture;
let o: ReturnType<typeof ops>;
beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  o = ops(t);
});
afterAll(() => t.close());

const named = (type: GraphQLOutputType): GraphQLNamedType => (isListType(type) || isNonNullType(type) ? named(type.ofType as GraphQLOutputType) : type);

/** Every path from `root` to a field whose type is `target`, as a nested selection, walking object types only. */
function selectionTo(s: GraphQLSchema, root: string, target: string, leaf: string, seen = new Set<string>()): { selection: string; paths: string[][]; reached: Set<string> } {
  const reached = new Set<string>();
  const paths: string[][] = [];
  const walk = (typeName: string, path: string[], visiting: Set<string>): string => {
    const type = s.getType(typeName);
    if (!isObjectType(type) || visiting.has(typeName)) return "";
    reached.add(typeName);
    const parts: string[] = [];
    for (const [name, field] of Object.entries(type.getFields())) {
      const inner = named(field.type);
      if (!isObjectType(inner)) continue;
      if (field.args.some((a) => isNonNullType(a.type))) continue;
      if (inner.name === target) {
        paths.push([...path, name]);
        parts.push(`${name} { ${leaf} }`);
        reached.add(inner.name);
      } else if (seen.has(inner.name)) {
        parts.push(`${name} { id }`);
      } else {
        const sub = walk(inner.name, [...path, name], new Set([...visiting, typeName]));
        if (sub) parts.push(`${name} { ${sub} }`);
        else reached.add(inner.name);
      }
    }
    return parts.join(" ");
  };
  return { selection: walk(root, [], new Set()), paths, reached };
}

/** The values at `path` in `data` (lists flattened). */
function at(data: unknown, path: string[]): unknown[] {
  let level: unknown[] = [data];
  for (const key of path) {
    level = level.flatMap((v) => (v == null ? [] : Array.isArray(v) ? v : [v])).map((v) => (v as Record<string, unknown>)[key]);
  }
  return level.flatMap((v) => (v == null ? [] : Array.isArray(v) ? v : [v]));
}

describe("people on a gate", () => {
  // Role is a type of its own, whose members are guarded there by (member, read): the walk stops at it.
  const walked = () => selectionTo(schema, "GateEvaluation", "GatePerson", "id name email", new Set(["Role"]));

  it("no User is reachable from a gate's explanation: every person on it is a GatePerson", () => {
    const { reached, paths } = walked();
    expect(reached.has("User")).toBe(false);
    expect(paths.map((p) => p.join("."))).toEqual(expect.arrayContaining(["requirements.missingApprovers.eligibleUsers", "reservations.currentMembers"]));
  });

  it("a plan reader without (member, read) sees the id and name of everyone who can answer the plan, never an email; the reasons name the same people", async () => {
    const stack = await seedStack(t, org.orgId);
    const ws = await seedWorkspace(t, org.orgId, stack.id, 1);
    const runner = await person(t, org.orgId, "runner", [READ, PLAN]);
    const dba = await role(t, org.orgId, "DBA", [READ]);
    const dan = await memberOf(t, org.orgId, dba.id, "dan");
    const devops = await role(t, org.orgId, "DevOps");
    const carol = await memberOf(t, org.orgId, devops.id, "carol");
    const dave = await memberOf(t, org.orgId, devops.id, "dave");
    await o.policy(org.adminToken, { workspaceIds: [ws.id], addressPatterns: ["aws_db_instance.*"], requirements: allActions(1, { approverRoleIds: [dba.id] }) });
    expect((await o.reserve(carol.token, ws.id, devops.id)).__typename).toBe("MutationReserveWorkspaceSuccess");
    const plan = await o.submit(runner.token, ws.id, [{ address: "aws_db_instance.primary", action: "UPDATE" }]);
    const approver = await person(t, org.orgId, "approver", [READ, APPROVE]);
    expect((await o.approve(approver.token, plan.id)).__typename).toBe("MutationApprovePlanSuccess");

    const { selection, paths } = walked();
    const query = `query($planId: ID!) { gate(planId: $planId) { evaluation { ${selection} reasons { code message } } } }`;
    const asApprover = await t.gql(query, { planId: plan.id }, approver.token);
    expect(asApprover.errors).toBeUndefined();
    const evaluation = asApprover.data.gate.evaluation;

    const eligible = at(evaluation, ["requirements", "missingApprovers", "eligibleUsers"]) as { id: string; name: string }[];
    const current = at(evaluation, ["reservations", "currentMembers"]) as { id: string; name: string }[];
    const names = async (ids: string[]) => (await t.db.prisma.user.findMany({ where: { id: { in: ids } }, select: { id: true, name: true }, orderBy: { id: "asc" } }));
    expect([...eligible].sort((a, b) => a.id.localeCompare(b.id)).map(({ id, name }) => ({ id, name }))).toEqual(await names([dan.userId]));
    expect([...current].sort((a, b) => a.id.localeCompare(b.id)).map(({ id, name }) => ({ id, name }))).toEqual(await names([carol.userId, dave.userId]));
    const reasons = (evaluation.reasons as { message: string }[]).map((r) => r.message).join("\n");
    for (const p of [...eligible, ...current]) expect(reasons).toContain(p.name);

    // No email anywhere on the gate for this reader, whatever path reaches a person (their own aside).
    const people = paths.flatMap((path) => at(evaluation, path)) as { id: string; email: string | null }[];
    expect(people.length).toBeGreaterThanOrEqual(4);
    for (const p of people) expect(p.email, p.id).toEqual(p.id === approver.userId ? expect.any(String) : null);
    const emails = await t.db.prisma.user.findMany({ where: { id: { in: [dan.userId, carol.userId, dave.userId, runner.userId] } }, select: { email: true } });
    for (const { email } of emails) expect(JSON.stringify(asApprover.data)).not.toContain(email);

    // (member, read) shows them, as it shows members.
    const asAdmin = await t.gql(query, { planId: plan.id }, org.adminToken);
    expect(asAdmin.errors).toBeUndefined();
    const adminPeople = paths.flatMap((path) => at(asAdmin.data.gate.evaluation, path)) as { email: string | null }[];
    expect(adminPeople.every((p) => typeof p.email === "string" && p.email.includes("@"))).toBe(true);
  });
});
