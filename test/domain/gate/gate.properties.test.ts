// Properties of the gate over generated workspaces (fast-check).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  CHANGE_ACTIONS,
  REQUIREMENT_COUNTS,
  evaluateGate,
  type GateInput,
  type GatePolicy,
  type GateReservation,
  type PolicyRequirement,
} from "../../../src/domain/gate/index.js";

const USERS = ["u0", "u1", "u2", "u3", "u4", "u5"] as const;
const ROLES = ["r0", "r1", "r2"] as const;
const ADDRESSES = [
  "aws_s3_bucket.x",
  "aws_db_instance.y",
  "module.a.aws_s3_bucket.x",
  "module.a.aws_db_instance.z[0]",
  "module.b.aws_s3_bucket.y",
  "module.a.module.c.aws_db_instance.y",
  'module.b["k"].aws_s3_bucket.z',
] as const;
const PATTERNS = [
  ...ADDRESSES,
  "*",
  "module.a.*",
  "module.b*",
  "*.aws_s3_bucket.*",
  "aws_db_instance.*",
  "*aws_db_instance*",
  "module.*.y",
  "*[0]",
] as const;

const action = fc.constantFrom(...CHANGE_ACTIONS);
const requirement: fc.Arbitrary<PolicyRequirement> = fc.record({
  count: fc.constantFrom(...REQUIREMENT_COUNTS),
  approverUserIds: fc.subarray([...USERS], { maxLength: 2 }),
  approverRoleIds: fc.subarray([...ROLES], { maxLength: 1 }),
});
const policyBody = fc.record({
  assignedAddresses: fc.subarray([...ADDRESSES], { maxLength: 2 }),
  addressPatterns: fc.subarray([...PATTERNS], { maxLength: 3 }),
  requirements: fc.record({ create: requirement, update: requirement, delete: requirement, replace: requirement }),
});
const policies = fc
  .array(policyBody, { maxLength: 4 })
  .map((bodies): GatePolicy[] => bodies.map((body, i) => ({ id: `p${i}`, name: `Policy ${i}`, ...body })));
const reservation = fc.oneof(
  fc.constantFrom(...USERS).map((userId) => ({ kind: "user" as const, userId })),
  fc.constantFrom(...ROLES).map((roleId) => ({ kind: "role" as const, roleId })),
);

const world: fc.Arbitrary<GateInput> = fc
  .record({
    baseline: fc.integer({ min: 0, max: 3 }),
    changes: fc.uniqueArray(fc.record({ address: fc.constantFrom(...ADDRESSES), action }), {
      selector: (c) => c.address,
      maxLength: 6,
    }),
    policies,
    approvals: fc.array(fc.record({ userId: fc.constantFrom(...USERS), minute: fc.integer({ min: 0, max: 59 }) }), { maxLength: 7 }),
    holders: fc.subarray([...USERS]),
    members: fc.tuple(fc.subarray([...USERS]), fc.subarray([...USERS]), fc.subarray([...USERS])),
    reservations: fc.array(reservation, { maxLength: 3 }),
  })
  .map(
    (w): GateInput => ({
      baseline: w.baseline,
      changes: w.changes,
      policies: w.policies,
      approvals: w.approvals.map((a) => ({ userId: a.userId, approvedAt: new Date(Date.UTC(2025, 0, 6, 9, a.minute)) })),
      approveHolders: new Set(w.holders),
      roleMembers: new Map(ROLES.map((role, i) => [role, w.members[i] ?? []])),
      reservations: w.reservations.map((holder, i): GateReservation => ({ id: `res${i}`, holder, placedByUserId: "u0" })),
    }),
  );

function shuffle<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function permute(input: GateInput, seed: number): GateInput {
  const random = mulberry32(seed);
  const s = <T,>(items: readonly T[]) => shuffle(items, random);
  const requirement = (r: PolicyRequirement): PolicyRequirement => ({
    count: r.count,
    approverUserIds: s(r.approverUserIds),
    approverRoleIds: s(r.approverRoleIds),
  });
  const requirements = (p: GatePolicy): GatePolicy["requirements"] => ({
    create: requirement(p.requirements.create),
    update: requirement(p.requirements.update),
    delete: requirement(p.requirements.delete),
    replace: requirement(p.requirements.replace),
  });
  return {
    baseline: input.baseline,
    changes: s(input.changes),
    policies: s(input.policies).map((p) => ({
      ...p,
      assignedAddresses: s(p.assignedAddresses),
      addressPatterns: s(p.addressPatterns),
      requirements: requirements(p),
    })),
    approvals: s(input.approvals),
    approveHolders: new Set(s([...input.approveHolders])),
    roleMembers: new Map(s([...input.roleMembers]).map(([role, members]) => [role, s(members)])),
    reservations: s(input.reservations),
  };
}

describe("gate properties", () => {
  it("adding an approval from an approve-holder never turns a passing gate into failing", () => {
    fc.assert(
      fc.property(world, fc.nat(), fc.integer({ min: 0, max: 59 }), (input, pick, minute) => {
        fc.pre(input.approveHolders.size > 0);
        const holder = [...input.approveHolders][pick % input.approveHolders.size] as string;
        fc.pre(evaluateGate(input).passed);
        const more = { ...input, approvals: [...input.approvals, { userId: holder, approvedAt: new Date(Date.UTC(2025, 0, 6, 10, minute)) }] };
        expect(evaluateGate(more).passed).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("adding anyone's approval never turns a passing gate into failing (an approval that counts for nothing is ignored)", () => {
    fc.assert(
      fc.property(world, fc.constantFrom(...USERS, "stranger"), (input, userId) => {
        fc.pre(evaluateGate(input).passed);
        const more = { ...input, approvals: [...input.approvals, { userId, approvedAt: new Date(Date.UTC(2025, 0, 7)) }] };
        expect(evaluateGate(more).passed).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("a policy can only ever be added: adding one never takes a change off a policy, and never lowers a count a policy set", () => {
    fc.assert(
      fc.property(world, policyBody, (input, body) => {
        const before = evaluateGate(input);
        const after = evaluateGate({ ...input, policies: [...input.policies, { id: "p-new", name: "New", ...body }] });
        before.changes.forEach((was, i) => {
          const now = after.changes[i];
          expect(now?.address).toBe(was.address);
          const nowIds = new Set(now?.governedBy.map((g) => g.policyId));
          for (const g of was.governedBy) expect(nowIds.has(g.policyId)).toBe(true);
          // A change on the baseline may go lower: "An explicit count replaces the workspace
          // baseline ... whether it is higher or lower." One already under an explicit count
          // only ever gets stricter.
          if (!was.onBaseline) expect(now?.effectiveCount).toBeGreaterThanOrEqual(was.effectiveCount);
          if (!was.onBaseline) expect(now?.onBaseline).toBe(false);
        });
        const keys = new Set(after.requirements.map((r) => `${r.policyId}/${r.action}`));
        for (const r of before.requirements) expect(keys.has(`${r.policyId}/${r.action}`)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("evaluation is order-independent over input permutations", () => {
    fc.assert(
      fc.property(world, fc.integer(), (input, seed) => {
        expect(evaluateGate(permute(input, seed))).toEqual(evaluateGate(input));
      }),
      { numRuns: 500 },
    );
  });

  it("the evaluation survives a JSON round trip unchanged", () => {
    fc.assert(
      fc.property(world, (input) => {
        const evaluation = evaluateGate(input);
        expect(JSON.parse(JSON.stringify(evaluation))).toEqual(evaluation);
      }),
      { numRuns: 200 },
    );
  });

  it("passed is exactly: every requirement satisfied, the baseline met where it applies, every reservation answered", () => {
    fc.assert(
      fc.property(world, (input) => {
        const e = evaluateGate(input);
        const expected =
          e.requirements.every((r) => r.satisfied) && (!e.baseline.applies || e.baseline.counted >= e.baseline.required) && e.reservations.every((r) => r.answered);
        expect(e.passed).toBe(expected);
        expect(e.reasons.length === 0).toBe(e.passed);
      }),
      { numRuns: 300 },
    );
  });
});
