// The dashboard's workspace list in one statement. Read through Prisma, the list's query
// (workspaces with their stack, active reservations with their role, open plans with their
// approvals and change counts) was six statements, each compiled by Prisma's query compiler and
// mapped back, which was most of the list's time (docs/benchmarks.md, "The workspace list").
// Here the same rows come from one statement as JSON, turned into exactly what Prisma returns for
// WORKSPACE_LIST_INCLUDE, so every GraphQL type still resolves, and authorizes, its own objects.
// A selection that asks for anything else is read through Prisma (answersQuery).
import { isDeepStrictEqual } from "node:util";
import type { Database } from "../infra/db.js";
import { modelRow } from "../infra/model-rows.js";
import type { Approval, Plan, Prisma, Reservation, Role, Stack, Workspace } from "../generated/prisma/client.js";

/** The Prisma include the statement answers: what the dashboard's WorkspaceFields selects. */
export const WORKSPACE_LIST_INCLUDE = {
  stack: true,
  reservations: {
    where: { releasedAt: null },
    orderBy: [{ placedAt: "asc" }, { id: "asc" }],
    include: { holderRole: true },
  },
  plans: {
    where: { status: { in: ["planned", "applying"] } },
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
    include: {
      approvals: { orderBy: [{ createdAt: "asc" }, { id: "asc" }] },
      _count: { select: { changes: true } },
    },
  },
} satisfies Prisma.WorkspaceInclude;

export type WorkspaceListRow = Workspace & {
  stack: Stack;
  reservations: (Reservation & { holderRole: Role | null })[];
  plans: (Plan & { approvals: Approval[]; _count: { changes: number } })[];
};

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** Arguments that pick or order rows: the query and the statement must agree on each, present or not. */
const ROW_ARGUMENTS = ["where", "orderBy", "take", "skip", "cursor", "distinct"];

/**
 * Whether the statement's rows answer `query` (a Prisma findMany's arguments, as the GraphQL
 * plugin planned them for the selection): every relation it includes is included here with the
 * same filter and order (relations the query does not ask for may come along), and nothing is
 * asked in `select` form. Anything else is read through Prisma.
 */
export function answersQuery(query: unknown, answered: unknown = { include: WORKSPACE_LIST_INCLUDE }): boolean {
  if (query === true) return answered === true;
  if (!isObject(query) || !isObject(answered)) return false;
  for (const [key, value] of Object.entries(query)) {
    if (key === "include") {
      const included = answered.include;
      if (!isObject(value) || !isObject(included)) return false;
      for (const [relation, nested] of Object.entries(value)) {
        if (!(relation in included) || !answersQuery(nested, included[relation])) return false;
      }
    } else if (!isDeepStrictEqual(value, answered[key])) {
      return false;
    }
  }
  return ROW_ARGUMENTS.every((key) => !(key in answered) || key in query);
}

// The filters and orders are WORKSPACE_LIST_INCLUDE's, in SQL (test/workspace-list-rows.test.ts
// compares the rows with Prisma's for the same include).
const WORKSPACE_LIST_SQL = `
  SELECT to_json(w) AS workspace,
         (SELECT to_json(s) FROM stacks s WHERE s.id = w."stackId") AS stack,
         (SELECT COALESCE(json_agg(json_build_object(
                   'row', r,
                   'holderRole', (SELECT to_json(hr) FROM roles hr WHERE hr.id = r."holderRoleId"))
                   ORDER BY r."placedAt", r.id), '[]')
            FROM reservations r
           WHERE r."workspaceId" = w.id AND r."releasedAt" IS NULL) AS reservations,
         (SELECT COALESCE(json_agg(json_build_object(
                   'row', p,
                   'approvals', (SELECT COALESCE(json_agg(a ORDER BY a."createdAt", a.id), '[]') FROM approvals a WHERE a."planId" = p.id),
                   'changes', (SELECT count(*) FROM resource_changes c WHERE c."planId" = p.id))
                   ORDER BY p."createdAt", p.id), '[]')
            FROM plans p
           WHERE p."workspaceId" = w.id AND p.status IN ('planned', 'applying')) AS plans
    FROM workspaces w
   WHERE w.id = ANY($1::text[])`;

interface ListJson {
  workspace: Json;
  stack: Json;
  reservations: { row: Json; holderRole: Json | null }[];
  plans: { row: Json; approvals: Json[]; changes: number }[];
}

/** The people the list's rows name (who holds, placed and released a reservation; who submitted, approved and withdrew), ids with nulls. */
export function peopleNamedBy(rows: readonly WorkspaceListRow[]): (string | null)[] {
  return rows.flatMap((w) => [
    ...w.reservations.flatMap((r) => [r.holderUserId, r.placedById, r.releasedById]),
    ...w.plans.flatMap((p) => [p.submittedById, ...p.approvals.flatMap((a) => [a.userId, a.withdrawnById])]),
  ]);
}

/** The workspaces `ids` names (in no particular order), each as Prisma returns it for WORKSPACE_LIST_INCLUDE. */
export async function workspaceListRows(db: Database, ids: readonly string[]): Promise<WorkspaceListRow[]> {
  if (ids.length === 0) return [];
  const rows = await db.sql.query<ListJson>(WORKSPACE_LIST_SQL, [ids], { prepare: true });
  return rows.map((r) => ({
    ...modelRow<Workspace>("Workspace", r.workspace),
    stack: modelRow<Stack>("Stack", r.stack),
    reservations: r.reservations.map((x) => ({
      ...modelRow<Reservation>("Reservation", x.row),
      holderRole: x.holderRole === null ? null : modelRow<Role>("Role", x.holderRole),
    })),
    plans: r.plans.map((x) => ({
      ...modelRow<Plan>("Plan", x.row),
      approvals: x.approvals.map((a) => modelRow<Approval>("Approval", a)),
      _count: { changes: Number(x.changes) },
    })),
  }));
}
