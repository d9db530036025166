// Live gate status: the process-wide hub behind the planGate and workspaceGates subscriptions.
//
// Seed 000, "Live gate status": push the recomputed evaluation whenever anything the
// gate reads changes. Events carry ids (src/infra/events.ts): "gate:changed" names workspaces,
// "authz:changed" means every open gate in the organization may have changed (role
// membership, bindings, group sync, deactivation, role deletion, grants).
//
// The hub composes its parts (docs/apply-gate.md, "Live status"), each readable alone:
// - gate-live/registry.ts: who watches what on this process, by workspace and by organization;
// - gate-live/listen.ts: ONE bus subscription per topic per process, however many subscribers;
// - gate-live/rounds.ts: events mark organizations dirty; events arriving while a round runs
//   are coalesced into the next round (per organization); a failed round is retried with backoff;
// - gate-live/recompute.ts: a round, ONE version and ONE evaluation per affected plan, shared
//   by every subscriber of that plan, with per-organization caches (gate-live/caches.ts);
// - gate-live/initial.ts: each subscription's first message;
// - gate-live/queue.ts: a subscriber's queue keeps only the newest message.
// Subscribers are authorized on subscribe (by the caller) and again on every delivery with a
// principal that is current at that round's epoch: a member removed from the org, or who lost
// read, stops receiving at the next event, whatever published it.

import type { Database } from "../infra/db.js";
import type { EventBus } from "../infra/events.js";
import type { GateSnapshot, PlanHead } from "./gate.js";
import { OrgCachesStore } from "./gate-live/caches.js";
import { InitialSnapshots } from "./gate-live/initial.js";
import { BusListener } from "./gate-live/listen.js";
import { LatestQueue } from "./gate-live/queue.js";
import { recomputeRound, type RoundTally } from "./gate-live/recompute.js";
import {
  SubscriberRegistry,
  TERMINAL,
  type DirectWriter,
  type Dirty,
  type PlanSubscriber,
  type Refreshable,
  type Subscriber,
  type Viewer,
  type WorkspaceGates,
  type WorkspaceHead,
  type WorkspaceSubscriber,
} from "./gate-live/registry.js";
import { RoundScheduler } from "./gate-live/rounds.js";

export { LatestQueue, type DirectWriter, type Refreshable, type WorkspaceGates };

/** How many finished rounds recentRounds keeps. */
const RECENT_ROUNDS = 50;

const hubs = new WeakMap<EventBus, GateHub>();

/** The process's hub for this bus (one per app). */
export function gateHub(db: Database, events: EventBus): GateHub {
  let hub = hubs.get(events);
  if (!hub) {
    hub = new GateHub(db, events);
    hubs.set(events, hub);
  }
  return hub;
}

export class GateHub {
  private readonly registry = new SubscriberRegistry();
  /** Per organization with subscribers: principals, users and roles, kept while the authz epoch holds. */
  private readonly caches = new OrgCachesStore();
  private readonly initial: InitialSnapshots;
  private readonly bus: BusListener;
  private readonly rounds: RoundScheduler;
  /** The last rounds (newest last): versions, plans evaluated, messages delivered (`direct`: of them, straight to the transport), rows loaded. */
  readonly recentRounds: RoundTally[] = [];
  /** Told of every finished round, with its event-to-delivery time (the metrics, src/edge/metrics.ts). */
  readonly roundListeners = new Set<(round: { evaluations: number; deliveries: number; seconds: number }) => void>();

  constructor(
    private readonly db: Database,
    events: EventBus,
  ) {
    this.initial = new InitialSnapshots(db);
    this.rounds = new RoundScheduler({
      watchesOrg: (orgId) => this.registry.watchesOrg(orgId),
      watchesWorkspace: (workspaceId) => this.registry.watchesWorkspace(workspaceId),
      run: (orgId, dirty) => this.round(orgId, dirty),
    });
    this.bus = new BusListener(events, {
      authzChanged: (orgId) => this.rounds.mark(orgId, null),
      gateChanged: (orgId, workspaceIds) => this.rounds.mark(orgId, workspaceIds),
    });
    // Events may have been lost (the bus was down): every subscriber gets the current state, with
    // a new version, as if everything it watches had changed. Duplicates are told by the version.
    events.onResync(() => this.resync());
  }

  /** Marks every watched organization entirely dirty: one round each recomputes and delivers. */
  resync(): void {
    for (const orgId of this.registry.orgs()) this.rounds.mark(orgId, null);
  }

  // --- subscribing ---------------------------------------------------------------------------

  /** A plan's head for authorizing a subscriber: one read for the subscribers asking together (InitialSnapshots.planHead). */
  planHead(orgId: string, planId: string): Promise<PlanHead | null> {
    return this.initial.planHead(orgId, planId);
  }

  /**
   * Caller has authorized the viewer for the plan. Resolves once events are flowing. `authz` is
   * refreshed before each delivery (the subscription's context re-reads its principal).
   */
  async watchPlan(viewer: Viewer, head: PlanHead, authz: Refreshable, direct?: DirectWriter<GateSnapshot>): Promise<LatestQueue<GateSnapshot>> {
    const sub = new PlanSubscription(this, viewer, head.id, head.workspaceId, authz, direct);
    await this.register(sub);
    void this.initial.plan(head.orgId, head.id).then(
      (snapshot) => {
        if (!snapshot) return sub.queue.end();
        sub.queue.push(snapshot);
        if (TERMINAL.has(snapshot.planStatus)) sub.queue.end();
      },
      () => sub.queue.end(),
    );
    return sub.queue;
  }

  async watchWorkspace(viewer: Viewer, workspace: WorkspaceHead, authz: Refreshable, direct?: DirectWriter<WorkspaceGates>): Promise<LatestQueue<WorkspaceGates>> {
    const sub = new WorkspaceSubscription(this, viewer, workspace.id, authz, direct);
    await this.register(sub);
    void this.initial.workspace(workspace).then(
      (message) => sub.queue.push(message),
      () => sub.queue.end(),
    );
    return sub.queue;
  }

  /** Adds a subscriber and makes sure the bus subscription runs; undone if it cannot start. */
  private async register(sub: Subscriber) {
    this.registry.add(sub);
    try {
      await this.bus.start();
    } catch (error) {
      this.remove(sub);
      throw error;
    }
  }

  /** A subscriber's queue closed (the subscription ended): it is no longer watched. */
  remove(sub: Subscriber): void {
    if (!this.registry.remove(sub)) return;
    if (!this.registry.watchesOrg(sub.viewer.orgId)) this.caches.drop(sub.viewer.orgId);
    if (this.registry.size === 0) this.bus.stop();
  }

  // --- rounds --------------------------------------------------------------------------------

  private async round(orgId: string, dirty: Dirty): Promise<void> {
    const subs = this.registry.affected(orgId, dirty);
    if (subs.length === 0) return;
    const tally = await recomputeRound({ sql: this.db.sql, caches: this.caches }, orgId, subs);
    this.recentRounds.push(tally);
    for (const listener of this.roundListeners) listener({ ...tally, seconds: (performance.now() - dirty.since) / 1000 });
    if (this.recentRounds.length > RECENT_ROUNDS) this.recentRounds.shift();
  }
}

// The hub's subscribers are classes, not object literals with closures: one lives per subscriber
// for as long as it subscribes, and its queue reports closing to it (docs/benchmarks.md, "What a
// subscriber costs").

class PlanSubscription implements PlanSubscriber {
  readonly kind = "plan";
  readonly queue: LatestQueue<GateSnapshot> = new LatestQueue<GateSnapshot>(this);

  constructor(
    private readonly hub: GateHub,
    readonly viewer: Viewer,
    readonly planId: string,
    readonly workspaceId: string,
    readonly authz: Refreshable,
    readonly direct: DirectWriter<GateSnapshot> | undefined,
  ) {}

  queueClosed(): void {
    this.hub.remove(this);
  }
}

class WorkspaceSubscription implements WorkspaceSubscriber {
  readonly kind = "workspace";
  readonly queue: LatestQueue<WorkspaceGates> = new LatestQueue<WorkspaceGates>(this);

  constructor(
    private readonly hub: GateHub,
    readonly viewer: Viewer,
    readonly workspaceId: string,
    readonly authz: Refreshable,
    readonly direct: DirectWriter<WorkspaceGates> | undefined,
  ) {}

  queueClosed(): void {
    this.hub.remove(this);
  }
}
