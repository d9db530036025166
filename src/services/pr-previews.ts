// PR preview mode (seed 004, "preview").
//
// A pull request is the one deployment origin whose code has not been reviewed: even its
// read-only plan runs `tofu init` (fetching the modules and providers the PR's HCL names) and
// `tofu plan` (executing those providers and data sources) with the stack's credentials. So
// before a runner plans a PR it asks Countersign, recording a PR preview:
//
//   - the stack's prPlanMode is manual (the default): the preview is created parked on its
//     confirmation stage (awaiting_confirmation) and the runner waits;
//   - a person holding (stack, preview) confirms it (confirmPrPreview): neither (stack, deploy)
//     nor (stack, confirm) reaches it;
//   - prPlanMode auto confirms every future preview at request time, a standing yes, so setting
//     auto needs (stack, preview) too (on top of (stack, update), as for any stack setting).
//
// Requesting one is triggering a run on the stack: (stack, deploy), which CI identities hold
// (stack-triggerer). A preview is never applied; it is not a Plan of the apply gate.

import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { SignedInAuthz } from "../authz/authz.js";
import { checkPermission } from "../domain/catalog/index.js";
import { ConflictError, InvalidStateError, NotFoundError, PermissionDeniedError } from "../errors.js";
import type { Database } from "../infra/db.js";
import { txSql } from "../infra/db.js";
import { findReadableStack } from "./stacks.js";
import { parseInput } from "./parse.js";
import { stackTarget } from "../authz/targets.js";

export const PR_PLAN_MODES = ["manual", "auto"] as const;
export type PrPlanMode = (typeof PR_PLAN_MODES)[number];

export const SetPrPlanModeInput = z.object({
  stackId: z.string().min(1),
  mode: z.enum(PR_PLAN_MODES),
  /** The stack revision read; a stale one is a ConflictError. Optional: the mode is one value. */
  revision: z.number().int().positive().optional(),
});

/**
 * (stack, update) on the stack; and (stack, preview) to set auto (seed 004: preview "also gates
 * setting pr_plan_mode to auto, which turns every future PR preview into a standing yes").
 * Going back to manual takes no preview grant: it only makes previews wait again.
 */
export async function setStackPrPlanMode(db: Database, authz: SignedInAuthz, raw: unknown) {
  const input = parseInput(SetPrPlanModeInput, raw);
  const stack = await findReadableStack(db, authz, input.stackId);
  await authz.require(stackTarget(stack, "update"));
  if (input.mode === "auto") await authz.require(stackTarget(stack, "preview"));
  const base = input.revision ?? stack.revision;
  if (base !== stack.revision) {
    throw new ConflictError(`Stack ${stack.name} is at revision ${stack.revision}, not ${base}: reload it and edit again.`, stack.revision);
  }
  // Written only over the revision authorized above: a rename or regrouping in between is a
  // conflict, so the grant checked is the grant of the stack written.
  const written = await db.prisma.stack.updateMany({
    where: { id: stack.id, revision: stack.revision },
    data: { prPlanMode: input.mode, revision: { increment: 1 } },
  });
  if (written.count === 0) {
    const current = await db.prisma.stack.findUnique({ where: { id: stack.id }, select: { revision: true } });
    if (!current) throw new NotFoundError("Stack", stack.id);
    throw new ConflictError(`Stack ${stack.name} changed while you edited it (now revision ${current.revision}): reload it and edit again.`, current.revision);
  }
  return db.prisma.stack.findUniqueOrThrow({ where: { id: stack.id } });
}

export const RequestPrPreviewInput = z.object({
  stackId: z.string().min(1),
  pullRequest: z.number().int().positive("A pull request number is positive.").max(2_147_483_647),
  commitSha: z
    .string()
    .regex(/^[0-9a-f]{7,64}$/, "A commit SHA is 7 to 64 lowercase hexadecimal characters."),
});

/**
 * (stack, deploy). One preview per (stack, pull request, commit): asking again for the same
 * commit answers the same preview (a retried CI job does not park a second one). The stack's
 * mode is read under a share lock on its row, so a preview is parked or confirmed by the mode
 * in force when it is recorded, never by one being changed at that moment.
 */
export async function requestPrPreview(db: Database, authz: SignedInAuthz, raw: unknown) {
  const input = parseInput(RequestPrPreviewInput, raw);
  const stack = await findReadableStack(db, authz, input.stackId);
  await authz.require(stackTarget(stack, "deploy"));
  const viewer = authz.viewer;
  const id = await db.prisma.$transaction(async (tx) => {
    const sql = txSql(tx);
    const [locked] = await sql.query<{ prPlanMode: PrPlanMode }>(
      `SELECT "prPlanMode"::text AS "prPlanMode" FROM stacks WHERE id = $1 FOR SHARE`,
      [stack.id],
    );
    if (!locked) throw new NotFoundError("Stack", stack.id);
    const auto = locked.prPlanMode === "auto";
    const [row] = await sql.query<{ id: string }>(
      `INSERT INTO pr_previews (id, "orgId", "stackId", "pullRequest", "commitSha", status, "autoConfirmed", "requestedById", "confirmedAt", "createdAt")
       VALUES ($8, $1, $2, $3, $4, $5::"PrPreviewStatus", $6, $7, CASE WHEN $6::boolean THEN now() END, now())
       ON CONFLICT ("stackId", "pullRequest", "commitSha") DO UPDATE SET "stackId" = EXCLUDED."stackId"
       RETURNING id`,
      [stack.orgId, stack.id, input.pullRequest, input.commitSha, auto ? "confirmed" : "awaiting_confirmation", auto, viewer.userId, randomUUID()],
    );
    return row!.id;
  });
  return db.prisma.prPreview.findUniqueOrThrow({ where: { id } });
}

/** A preview of the viewer's org whose stack the viewer may read, or NotFound. */
export async function findReadablePrPreview(db: Database, authz: SignedInAuthz, id: string) {
  await authz.requireMember();
  const preview = await db.prisma.prPreview.findFirst({
    where: { id, orgId: authz.viewer.orgId },
    include: { stack: { select: { name: true, authzGroups: true } } },
  });
  if (!preview || !(await authz.can(stackTarget(preview.stack, "read")))) throw new NotFoundError("PrPreview", id);
  return preview;
}

/**
 * Seed 004: "a pull request's read-only preview plan is created parked on a confirmation stage
 * instead of running, and preview is what confirms it". (stack, preview) on the preview's stack,
 * checked against the stack row as it is while the preview is confirmed (held FOR SHARE), so a
 * regrouping or rename landing meanwhile cannot slip a confirmation through.
 */
export async function confirmPrPreview(db: Database, authz: SignedInAuthz, id: string) {
  const preview = await findReadablePrPreview(db, authz, id);
  const principal = await authz.requireMember();
  const viewer = authz.viewer;
  await authz.require(stackTarget(preview.stack, "preview"));
  const confirmedId = await db.prisma.$transaction(async (tx) => {
    const sql = txSql(tx);
    const [stack] = await sql.query<{ name: string; authzGroups: string[] }>(
      `SELECT name, "authzGroups" FROM stacks WHERE id = $1 FOR SHARE`,
      [preview.stackId],
    );
    if (!stack) throw new NotFoundError("PrPreview", id);
    const now = checkPermission(principal, stackTarget(stack, "preview"));
    if (!now.allowed) throw new PermissionDeniedError(now.missing);
    const [row] = await sql.query<{ id: string }>(
      `UPDATE pr_previews SET status = 'confirmed', "confirmedById" = $2, "confirmedAt" = now()
        WHERE id = $1 AND status = 'awaiting_confirmation' RETURNING id`,
      [id, viewer.userId],
    );
    if (!row) {
      throw new InvalidStateError("PrPreview", "confirmed", `PR preview ${id} is already confirmed; only one awaiting confirmation can be confirmed.`);
    }
    return row.id;
  });
  return db.prisma.prPreview.findUniqueOrThrow({ where: { id: confirmedId } });
}
