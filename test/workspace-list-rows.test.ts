import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./helpers/harness.js";
import { addMember, createOrg } from "./helpers/fixtures.js";
import { answersQuery, WORKSPACE_LIST_INCLUDE, workspaceListRows } from "../src/services/workspace-list.js";
import { WorkspacesDocument } from "../src/generated/graphql/graphql.js";

/**
 * The dashboard's workspace list reads its rows in one statement (src/services/workspace-list.ts):
 * they must be the rows Prisma returns for the same include, or a field would answer differently.
 */
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const byId = <T extends { id: string }>(rows: T[]) => [...rows].sort((a, b) => (a.id < b.id ? -1 : 1));

describe("the workspace list's one statement", () => {
  it("reads exactly the rows Prisma reads for the list's include: every column, Dates, JSON, filters and order", async () => {
    const org = await createOrg(t.db);
    const a = await addMember(t.db, org.orgId, { role: "workspace-approver" });
    const b = await addMember(t.db, org.orgId, { role: "workspace-approver" });
    const role = await t.db.prisma.role.create({ data: { orgId: org.orgId, key: "oncall", name: "On call", description: "pager" } });
    const stack = await t.db.prisma.stack.create({
      data: { orgId: org.orgId, name: "s", authzGroups: ["g1", "g2"], labels: { team: "x", "a.b": 2 }, outputs: [{ name: "o", value: { n: 1.5 }, sensitive: true }] },
    });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const w = await t.db.prisma.workspace.create({
        data: { orgId: org.orgId, stackId: stack.id, name: `w-${i}`, environment: i ? "prod" : "dev", production: i > 0, requiredApprovals: i, archivedAt: i === 2 ? new Date() : null },
      });
      ids.push(w.id);
      // Reservations: a person's, a role's, a released one (left out), placed at the same instant (ordered by id then).
      const at = new Date("2026-12-01T10:00:00.123Z");
      await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: w.id, holderUserId: a.userId, placedById: b.userId, placedAt: at } });
      await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: w.id, holderRoleId: role.id, placedById: a.userId, placedAt: at } });
      await t.db.prisma.reservation.create({
        data: { orgId: org.orgId, workspaceId: w.id, holderUserId: b.userId, placedById: b.userId, releasedAt: new Date(), releasedById: b.userId, releaseReason: "released" },
      });
      // Plans: planned and applying are open (listed), applied is not; one carries a stored evaluation and changes.
      for (const status of ["planned", "applying", "applied"] as const) {
        const plan = await t.db.prisma.plan.create({
          data: {
            orgId: org.orgId,
            workspaceId: w.id,
            submittedById: a.userId,
            status,
            targeted: status === "applying",
            targets: status === "applying" ? ["aws_s3_bucket.a"] : [],
            applyEvaluation: status === "applying" ? { passed: true, reasons: [], counted: 2 } : undefined,
            runUrl: "https://ci.example/run/1",
          },
        });
        await t.db.prisma.resourceChange.createMany({
          data: Array.from({ length: i + 1 }, (_, k) => ({ planId: plan.id, address: `aws_s3_bucket.b${k}`, action: "update" })),
        });
        await t.db.prisma.approval.create({ data: { planId: plan.id, userId: b.userId, comment: "ok" } });
        await t.db.prisma.approval.create({ data: { planId: plan.id, userId: a.userId, withdrawnAt: new Date(), withdrawnById: a.userId } });
      }
    }
    const prisma = await t.db.prisma.workspace.findMany({ where: { id: { in: ids } }, include: WORKSPACE_LIST_INCLUDE });
    const ours = await workspaceListRows(t.db, ids);
    expect(ours).toHaveLength(3);
    expect(byId(ours)).toStrictEqual(byId(prisma));
    // The rows are what the list shows: two active reservations, two open plans each.
    for (const w of ours) {
      expect(w.reservations.map((r) => r.releasedAt)).toEqual([null, null]);
      expect(w.plans.map((p) => p.status)).toEqual(["planned", "applying"]);
      expect(w.createdAt).toBeInstanceOf(Date);
    }
  });

  it("answers the query the dashboard's selection plans, and nothing that filters, orders or selects otherwise", () => {
    expect(answersQuery({ include: WORKSPACE_LIST_INCLUDE })).toBe(true);
    // Fewer relations (a page without plans) is answered: the rows carry more than asked.
    expect(answersQuery({ include: { stack: true, reservations: WORKSPACE_LIST_INCLUDE.reservations } })).toBe(true);
    // Released reservations too, every plan, another order, a relation it does not read, select form: Prisma.
    expect(answersQuery({ include: { ...WORKSPACE_LIST_INCLUDE, reservations: { ...WORKSPACE_LIST_INCLUDE.reservations, where: {} } } })).toBe(false);
    expect(answersQuery({ include: { ...WORKSPACE_LIST_INCLUDE, plans: true } })).toBe(false);
    expect(answersQuery({ include: { ...WORKSPACE_LIST_INCLUDE, plans: { ...WORKSPACE_LIST_INCLUDE.plans, orderBy: { createdAt: "desc" } } } })).toBe(false);
    const { orderBy: _order, ...unordered } = WORKSPACE_LIST_INCLUDE.reservations;
    expect(answersQuery({ include: { ...WORKSPACE_LIST_INCLUDE, reservations: unordered } })).toBe(false);
    expect(answersQuery({ include: { ...WORKSPACE_LIST_INCLUDE, policies: true } })).toBe(false);
    expect(answersQuery({ include: { ...WORKSPACE_LIST_INCLUDE, stack: { include: { workspaces: true } } } })).toBe(false);
    expect(answersQuery({ select: { id: true } })).toBe(false);
  });

  it("serves the dashboard's list in one statement after the page's ids, and another selection through Prisma with the same answer", async () => {
    const org = await createOrg(t.db);
    const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: "s" } });
    for (let i = 0; i < 3; i++) {
      const w = await t.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: `w-${i}` } });
      await t.db.prisma.plan.create({ data: { orgId: org.orgId, workspaceId: w.id, submittedById: org.adminId, status: "planned" } });
    }
    const LIST = WorkspacesDocument.toString();
    await t.gql(LIST, { first: 100 }, org.adminToken);
    const before = t.db.statementCount();
    const list = await t.gql(LIST, { first: 100 }, org.adminToken);
    const listStatements = t.db.statementCount() - before;
    expect(list.errors).toBeUndefined();
    // The same workspaces with their plans' history beside (a selection the statement does not answer).
    const other = await t.gql(`{ workspaces(first: 10) { edges { node { id openPlans { id submittedBy { id name } } plans(first: 5) { edges { node { id } } } } } } }`, {}, org.adminToken);
    expect(other.errors).toBeUndefined();
    expect(other.data.workspaces.edges.map((e: any) => e.node.openPlans)).toEqual(list.data.workspaces.edges.map((e: any) => e.node.openPlans.map((p: any) => ({ id: p.id, submittedBy: p.submittedBy }))));
    // The token; the page's ids; the list's statement; the people it names; the roles an admin may reserve for.
    expect(listStatements).toBeLessThanOrEqual(6);
  });
});
