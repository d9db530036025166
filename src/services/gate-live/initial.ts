// A live gate subscription's first message: the current status, computed after the subscriber
// is registered (so no event between the two is missed), under a version of its own; a later
// round's message replaces it by version.

import type { Database } from "../../infra/db.js";
import { loadPlanHead, nextGateVersion, openPlanHeads, principalSource, snapshotOf, type GateSnapshot, type PlanHead } from "../gate.js";
import type { WorkspaceGates, WorkspaceHead } from "./registry.js";

export class InitialSnapshots {
  /** Computations not yet started, per plan: subscribers arriving together share one. */
  private readonly waiting = new Map<string, { started: boolean; promise: Promise<GateSnapshot | null> }>();

  constructor(private readonly db: Database) {}

  /** The plan's current status, or null when it no longer exists. */
  plan(orgId: string, planId: string): Promise<GateSnapshot | null> {
    const waiting = this.waiting.get(planId);
    if (waiting && !waiting.started) return waiting.promise;
    const entry = { started: false, promise: Promise.resolve<GateSnapshot | null>(null) };
    entry.promise = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
      entry.started = true;
      if (this.waiting.get(planId) === entry) this.waiting.delete(planId);
      const version = await nextGateVersion(this.db.sql);
      const head = await loadPlanHead(this.db.sql, orgId, planId);
      return head ? snapshotOf(this.db.sql, head, version, principalSource(this.db.sql, orgId)) : null;
    });
    this.waiting.set(planId, entry);
    return entry.promise;
  }

  /** Plan-head reads not yet sent, per organization and plan: subscribers arriving together share one. */
  private readonly heads = new Map<string, Promise<PlanHead | null>>();

  /**
   * The plan's head, as loadPlanHead reads it, for a subscriber being authorized: read after the
   * turn of the event loop it was asked in, so every subscriber that shares the read asked
   * before it was sent (none is answered from a read older than its own request).
   */
  planHead(orgId: string, planId: string): Promise<PlanHead | null> {
    const key = `${orgId}\u0000${planId}`;
    let read = this.heads.get(key);
    if (!read) {
      read = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        this.heads.delete(key);
        return loadPlanHead(this.db.sql, orgId, planId);
      });
      this.heads.set(key, read);
    }
    return read;
  }

  /** Every open plan of the workspace, as it stands now. */
  async workspace(workspace: WorkspaceHead): Promise<WorkspaceGates> {
    const version = await nextGateVersion(this.db.sql);
    const principals = principalSource(this.db.sql, workspace.orgId);
    const heads = await openPlanHeads(this.db.sql, workspace.orgId, [workspace.id]);
    const plans = await Promise.all(heads.map((h) => snapshotOf(this.db.sql, h, version, principals)));
    return { workspaceId: workspace.id, workspaceName: workspace.name, version, plans };
  }
}
