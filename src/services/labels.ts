import { z } from "zod";
import type { SignedInAuthz } from "../authz/authz.js";
import type { Database } from "../infra/db.js";
import { ConflictError, ValidationError } from "../errors.js";
import { findReadableStack } from "./stacks.js";
import { stackTarget } from "../authz/targets.js";
import { DisplayName } from "./input-rules.js";

export const StackOutputsInput = z
  .array(z.object({ name: DisplayName, value: z.json(), sensitive: z.boolean().default(false) }))
  .max(500);

export async function setStackOutputs(db: Database, authz: SignedInAuthz, stackId: string, outputs: z.infer<typeof StackOutputsInput>) {
  const stack = await findReadableStack(db, authz, stackId);
  await authz.require(stackTarget(stack, "update"));
  return db.prisma.stack.update({ where: { id: stack.id }, data: { outputs } });
}

const LABEL_KEY = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$/;

/**
 * (label, create) manages the protected-key set, as a whole-set replace (seed 004, label),
 * over the revision the caller read (required: a stale one is a ConflictError, so two editors
 * never silently undo each other's protection).
 */
export async function setProtectedLabelKeys(db: Database, authz: SignedInAuthz, keys: string[], revision: number) {
  await authz.require({ resourceType: "label", action: "create", matchValue: null, groups: null });
  const issues = keys.flatMap((key, i) =>
    LABEL_KEY.test(key) ? [] : [{ field: `keys.${i}`, code: "invalid_label_key", message: "Not a valid label key." }],
  );
  if (issues.length) throw new ValidationError(issues);
  const unique = [...new Set(keys)].sort();
  const orgId = authz.viewer.orgId;
  const { count } = await db.prisma.organization.updateMany({
    where: { id: orgId, protectedLabelKeysRevision: revision },
    data: { protectedLabelKeys: unique, protectedLabelKeysRevision: { increment: 1 } },
  });
  if (count === 0) {
    const current = await db.prisma.organization.findUniqueOrThrow({ where: { id: orgId }, select: { protectedLabelKeysRevision: true } });
    throw new ConflictError(
      `The protected label keys are at revision ${current.protectedLabelKeysRevision}, not ${revision}: reload them and edit again.`,
      current.protectedLabelKeysRevision,
    );
  }
  return unique;
}
