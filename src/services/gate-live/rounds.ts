// When the live gate recomputes: events mark organizations dirty, one loop runs a round per
// dirty organization, and events arriving while a round runs are coalesced into the next round
// (per organization). A round that fails is retried later, never dropped.

import type { Dirty } from "./registry.js";

/** A failed round is retried after this long, doubling while rounds keep failing, up to RETRY_MAX_MS. */
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 4_000;

export interface RoundSchedulerDeps {
  /** Whether anyone on this process watches the organization / the workspace (events for others are dropped). */
  watchesOrg(orgId: string): boolean;
  watchesWorkspace(workspaceId: string): boolean;
  /** One round for one organization; a rejection schedules a retry. */
  run(orgId: string, dirty: Dirty): Promise<void>;
}

export class RoundScheduler {
  private readonly dirty = new Map<string, Dirty>();
  private working: Promise<void> | null = null;
  /** Organizations whose round failed (a database outage), retried until one succeeds. */
  private readonly failed = new Map<string, Dirty>();
  private retryTimer: NodeJS.Timeout | null = null;
  private retryDelayMs = RETRY_MIN_MS;

  constructor(private readonly deps: RoundSchedulerDeps) {}

  /** Marks these workspaces of the organization (all it watches: null) for the next round. */
  mark(orgId: string, workspaceIds: readonly string[] | null): void {
    if (!orgId || !this.deps.watchesOrg(orgId)) return;
    const dirty = this.dirty.get(orgId) ?? { all: false, workspaceIds: new Set<string>(), since: performance.now() };
    if (workspaceIds === null) dirty.all = true;
    else for (const id of workspaceIds) if (this.deps.watchesWorkspace(id)) dirty.workspaceIds.add(id);
    if (!dirty.all && dirty.workspaceIds.size === 0) return;
    this.dirty.set(orgId, dirty);
    this.working ??= this.work().finally(() => (this.working = null));
  }

  private async work(): Promise<void> {
    while (this.dirty.size > 0) {
      const round = [...this.dirty];
      this.dirty.clear();
      await Promise.all(
        round.map(([orgId, dirty]) =>
          this.deps.run(orgId, dirty).then(
            () => (this.retryDelayMs = RETRY_MIN_MS),
            () => this.retryLater(orgId, dirty),
          ),
        ),
      );
    }
  }

  /**
   * A round that failed (PostgreSQL unreachable) is not dropped: its organization is marked again
   * after a delay (doubling up to RETRY_MAX_MS while rounds keep failing), so subscribers get the
   * state as of the recovery without another event.
   */
  private retryLater(orgId: string, dirty: Dirty) {
    const pending = this.failed.get(orgId) ?? { all: false, workspaceIds: new Set<string>(), since: dirty.since };
    pending.all ||= dirty.all;
    for (const id of dirty.workspaceIds) pending.workspaceIds.add(id);
    this.failed.set(orgId, pending);
    if (this.retryTimer) return;
    const delay = this.retryDelayMs;
    this.retryDelayMs = Math.min(this.retryDelayMs * 2, RETRY_MAX_MS);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      const retry = [...this.failed];
      this.failed.clear();
      for (const [id, d] of retry) this.mark(id, d.all ? null : [...d.workspaceIds]);
    }, delay);
    this.retryTimer.unref();
  }
}
