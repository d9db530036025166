// A workspace's held calls (approvalRequests) and a reviewer's inbox (approvalInbox) page newest
// first by keyset cursors (creation time, then id), as every other list: a call filed, decided or
// voted on between two pages moves no other call across the cursor, so a bot that pages while it
// votes sees every call once; an inbox longer than one scan is paged through, never cut; a cursor
// the API did not issue is refused. Real gateway, PostgreSQL and Redis (test/approvals/world.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INBOX_SCAN_LIMIT } from "../../src/services/approvals/requests.js";
import { createWorld, heldAndFiled, vote, type World } from "./world.js";

let w: World;
let base: Awaited<ReturnType<World["db"]["prisma"]["approvalRequest"]["findUniqueOrThrow"]>>;
beforeAll(async () => {
  w = await createWorld();
  base = await w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id: await heldAndFiled(w, { repo: "acme/paging" }) } });
  // Out of the way of every list below: the lists here are of the copies.
  await w.db.prisma.approvalRequest.update({ where: { id: base.id }, data: { status: "expired" } });
});
afterAll(async () => w?.close());

let copies = 0;
/** Copies of the held call, pending, at the given creation times (newest first is the order read back). */
async function filed(times: Date[], overrides: { matchedRules?: object } = {}): Promise<string[]> {
  const { id: _id, createdAt: _c, updatedAt: _u, decidedAt: _d, ...rest } = base;
  const rows = times.map((createdAt) => {
    const n = copies++;
    return {
      ...rest,
      requestSnapshot: rest.requestSnapshot as object,
      policyRevisions: rest.policyRevisions as object,
      matchedRules: overrides.matchedRules ?? (rest.matchedRules as object),
      id: `${base.id}-p${String(n).padStart(5, "0")}`,
      idempotencyKey: `${base.idempotencyKey}-p${n}`,
      status: "pending" as const,
      expiresAt: new Date(Date.now() + 600_000),
      createdAt,
    };
  });
  await w.db.prisma.approvalRequest.createMany({ data: rows });
  return rows.map((r) => r.id);
}

const PAGE = `edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor }`;
const REQUESTS = `query($w: ID!, $first: Int, $after: String) { approvalRequests(workspaceId: $w, statuses: [PENDING], first: $first, after: $after) { ${PAGE} } }`;
const INBOX = `query($first: Int, $after: String) { approvalInbox(first: $first, after: $after) { ${PAGE} } }`;
type Page = { edges: { cursor: string; node: { id: string } }[]; pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null } };

async function page(query: string, field: "approvalRequests" | "approvalInbox", token: string, vars: Record<string, unknown>): Promise<Page> {
  const res = await w.t.gql(query, { w: w.workspace.id, ...vars }, token);
  if (res.errors) throw new Error(JSON.stringify(res.errors));
  return res.data[field] as Page;
}

/** Clears every pending call of the workspace, so each test reads only its own. */
async function clear() {
  await w.db.prisma.approvalRequest.updateMany({ where: { workspaceId: w.workspace.id, status: "pending" }, data: { status: "expired" } });
}

const at = (secondsAgo: number) => new Date(Date.UTC(2026, 11, 4, 12, 0, 0) - secondsAgo * 1000);

describe("held calls page newest first by keyset cursors", () => {
  /** Walks approvalRequests two at a time from `after`, collecting the ids. */
  async function walk(after: string | null): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < 10 && after; i++) {
      const next = await page(REQUESTS, "approvalRequests", w.org.adminToken, { first: 2, after });
      expect(next.pageInfo.hasPreviousPage).toBe(true);
      ids.push(...next.edges.map((e) => e.node.id));
      after = next.pageInfo.hasNextPage ? next.pageInfo.endCursor : null;
    }
    return ids;
  }

  it.each([
    ["decided (it leaves the PENDING list)", async (newest: string) => void (await w.db.prisma.approvalRequest.update({ where: { id: newest }, data: { status: "rejected" } }))],
    ["filed, newer than every other", async () => void (await filed([at(0)]))],
  ])("approvalRequests: a call %s between two pages moves no other across the cursor", async (_label, between) => {
    await clear();
    // Two share a creation time: the id orders them (the copies' ids ascend as they are filed).
    const [newest, second, third, fourth, oldest] = await filed([at(1), at(2), at(3), at(3), at(5)]);
    const first = await page(REQUESTS, "approvalRequests", w.org.adminToken, { first: 2 });
    expect(first.edges.map((e) => e.node.id)).toEqual([newest, second]);
    expect(first.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    await between(newest!);
    expect(await walk(first.pageInfo.endCursor)).toEqual([third, fourth, oldest]);
  });

  it("approvalInbox: a reviewer who denies each page before asking for the next sees every call once", async () => {
    await clear();
    const ids = await filed([at(10), at(11), at(12), at(13), at(14)]);
    const reviewer = w.reviewers[0]!;
    const seen: string[] = [];
    let after: string | null = null;
    for (let i = 0; i < 10; i++) {
      const p: Page = await page(INBOX, "approvalInbox", reviewer.token, { first: 2, after });
      for (const e of p.edges) {
        seen.push(e.node.id);
        expect((await vote(w, reviewer, e.node.id, "DENY")).__typename).toBe("MutationVoteOnApprovalRequestSuccess");
      }
      if (!p.pageInfo.hasNextPage) break;
      after = p.pageInfo.endCursor;
    }
    expect(seen).toEqual(ids);
  });

  it(`approvalInbox: past ${INBOX_SCAN_LIMIT} calls the reviewer may not decide, the next page goes on to the ones they may`, async () => {
    await clear();
    const [eligible] = await filed([at(100)]);
    // Newer than it: more calls than one scan reads, each with no rule the reviewer is eligible under.
    await filed(Array.from({ length: INBOX_SCAN_LIMIT + 5 }, (_, i) => at(50 - i / 1000)), { matchedRules: [] });
    const reviewer = w.reviewers[1]!;
    const first = await page(INBOX, "approvalInbox", reviewer.token, { first: 10 });
    expect(first.edges).toEqual([]);
    expect(first.pageInfo.hasNextPage).toBe(true);
    expect(first.pageInfo.endCursor).not.toBeNull();
    const second = await page(INBOX, "approvalInbox", reviewer.token, { first: 10, after: first.pageInfo.endCursor });
    expect(second.edges.map((e) => e.node.id)).toEqual([eligible]);
    expect(second.pageInfo.hasNextPage).toBe(false);
    await clear();
  });

  it.each([
    ["an offset cursor of the old lists", Buffer.from("o:3").toString("base64url")],
    ["a name cursor", Buffer.from("k:prod").toString("base64url")],
    ["a time that is not the API's own writing", Buffer.from(`k:2026-12-04T12:00:00Z|${"x"}`).toString("base64url")],
    ["a key without its id", Buffer.from("k:2026-12-04T12:00:00.000Z|").toString("base64url")],
    ["not base64 at all", "%%%"],
  ])("a cursor the API did not issue is refused: %s", async (_label, after) => {
    for (const [query, field] of [[REQUESTS, "approvalRequests"], [INBOX, "approvalInbox"]] as const) {
      const res = await w.t.gql(query, { w: w.workspace.id, first: 1, after }, w.reviewers[0]!.token);
      expect(res.data?.[field] ?? null, field).toBeNull();
      expect(res.errors?.[0]?.extensions, field).toMatchObject({ code: "VALIDATION_FAILED" });
      expect(res.errors?.[0]?.message, field).toBe("after: This cursor was not issued by this API.");
    }
  });
});
