import type { Database } from "../infra/db.js";

type Tx = Parameters<Parameters<Database["prisma"]["$transaction"]>[0]>[0];

/**
 * Deleting a role releases every reservation it holds; the admin who deletes the role is
 * recorded as the releaser (seed 000, Releasing). Releases are recorded, not deleted.
 */
export async function releaseReservationsOfRole(tx: Tx, roleId: string, releasedById: string) {
  const released = await tx.reservation.updateManyAndReturn({
    where: { holderRoleId: roleId, releasedAt: null },
    data: { releasedAt: new Date(), releasedById, releaseReason: "role_deleted" },
  });
  return { workspaceIds: [...new Set(released.map((r) => r.workspaceId))] };
}
