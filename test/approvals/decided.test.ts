// Held calls after the vote: a decided call stays visible with its outcome (executed, failed,
// denied, expired, invalidated, or approved and under way) instead of vanishing from the inbox,
// and two calls of the same tool are told apart by what the seed lets a reviewer see (time, agent
// key, amount summary, request id). Only where the reader holds (approval_request, read); never
// across organizations. Real gateway, PostgreSQL and Redis (test/approvals/world.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { approvalOutcome } from "../../src/services/approvals/requests.js";
import { addMember, createOrg } from "../helpers/fixtures.js";
import { createWorld, heldAndFiled, vote, type World } from "./world.js";

let w: World;
beforeAll(async () => {
  w = await createWorld();
});
afterAll(async () => w?.close());

const DECIDED = `query($workspaceId: ID, $first: Int) { decidedApprovalRequests(workspaceId: $workspaceId, first: $first) {
  id tool status executionStatus outcome createdAt decidedAt agentKeyName amountUsd } }`;
const INBOX = `{ approvalInbox { edges { node { id } } } }`;
const decided = async (token: string, vars: Record<string, unknown> = {}) => {
  const res = await w.t.gql(DECIDED, vars, token);
  if (res.errors) throw new Error(JSON.stringify(res.errors));
  return res.data.decidedApprovalRequests as Array<Record<string, unknown>>;
};

/** Every status × execution status the table can hold, and the outcome it reads as. */
const TABLE: [status: string, execution: string, expired: boolean, outcome: string][] = [
  ["pending", "none", false, "pending"],
  ["pending", "none", true, "expired"],
  ["approved", "pending", false, "approved"],
  ["approved", "dispatched", false, "approved"],
  ["approved", "executed", false, "executed"],
  ["approved", "failed", false, "failed"],
  ["rejected", "none", false, "denied"],
  ["default_deny", "none", false, "denied"],
  ["expired", "none", true, "expired"],
  ["invalidated", "none", false, "invalidated"],
];

describe("decided calls stay visible with their outcome", () => {
  it("a denied call leaves the inbox and appears among the decided, with its time, agent key and id", async () => {
    const reviewer = w.reviewers[0]!;
    const first = await heldAndFiled(w, { repo: "acme/one" });
    const second = await heldAndFiled(w, { repo: "acme/two" });
    const inbox = async () => (await w.t.gql(INBOX, {}, reviewer.token)).data.approvalInbox.edges.map((e: { node: { id: string } }) => e.node.id);
    expect(await inbox()).toEqual(expect.arrayContaining([first, second]));
    expect((await vote(w, reviewer, first, "DENY")).__typename).toBe("MutationVoteOnApprovalRequestSuccess");
    expect(await inbox()).not.toContain(first);
    const rows = await decided(reviewer.token);
    const row = rows.find((r) => r["id"] === first);
    expect(row).toMatchObject({ id: first, tool: "github.delete_repo", status: "REJECTED", outcome: "DENIED", agentKeyName: expect.any(String) });
    expect(row!["decidedAt"]).toEqual(expect.any(String));
    expect(rows.some((r) => r["id"] === second)).toBe(false);
  });

  it("every status the table can hold reads as its outcome, over GraphQL and in the one function", async () => {
    const source = await heldAndFiled(w, { repo: "acme/source" });
    const base = await w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id: source } });
    const ids: string[] = [];
    for (const [i, [status, execution, expired]] of TABLE.entries()) {
      const id = `${source}-t${i}`;
      ids.push(id);
      const { id: _id, createdAt: _c, updatedAt: _u, decidedAt: _d, ...rest } = base;
      await w.db.prisma.approvalRequest.create({
        data: {
          ...rest,
          requestSnapshot: rest.requestSnapshot as object,
          policyRevisions: rest.policyRevisions as object,
          matchedRules: rest.matchedRules as object,
          id,
          status: status as never,
          executionStatus: execution as never,
          expiresAt: new Date(Date.now() + (expired ? -60_000 : 600_000)),
          idempotencyKey: `${base.idempotencyKey}-${i}`,
        },
      });
    }
    const rows = await decided(w.org.adminToken, { workspaceId: w.workspace.id, first: 100 });
    for (const [i, [status, execution, expired, outcome]] of TABLE.entries()) {
      const label = `${status}/${execution}${expired ? " (past expiry)" : ""}`;
      expect(approvalOutcome({ status, executionStatus: execution, expiresAt: new Date(Date.now() + (expired ? -1 : 1) * 60_000) }), label).toBe(outcome);
      const row = rows.find((r) => r["id"] === ids[i]);
      if (outcome === "pending") expect(row, label).toBeUndefined();
      else expect(row?.["outcome"], label).toBe(outcome.toUpperCase());
    }
  });

  it("only where the reader holds (approval_request, read), never across organizations", async () => {
    await heldAndFiled(w, { repo: "acme/hidden" }).then((id) => vote(w, w.reviewers[0]!, id, "DENY"));
    expect((await decided(w.org.adminToken)).length).toBeGreaterThan(0);
    const plain = await addMember(w.db, w.org.orgId, { name: "no approval read", grants: [{ resourceType: "workspace", action: "read" }] });
    expect(await decided(plain.token)).toEqual([]);
    const other = await createOrg(w.db);
    expect(await decided(other.adminToken)).toEqual([]);
    expect(await decided(other.adminToken, { workspaceId: w.workspace.id })).toEqual([]);
  });
});
