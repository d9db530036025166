// Live gate status: the process-wide hub behind the planGate and workspaceGates subscriptions.
//
// Seed 000, "Live gate status": push the recomputed evaluation whenever anything the
// gate reads changes. Events carry ids (src/infra/events.ts): "gate:changed" names workspaces,
// "authz:changed" means every open gate in the organization may have changed (role
// membership, bindings, group sync, deactivation, role deletion, grants).
//
// How it scales (docs/apply-gate.md, "Live status"):
// - ONE bus subscription per topic per process, however many subscribers; the hub routes.
// - Per event round, ONE version (nextval before any read) and ONE evaluation per affected plan,
//   shared by every subscriber of that plan on this process (memoized by plan id + version); each
//   user's principal loads at most once per round, shared by the evaluation and the authorization
//   of all of that user's subscriptions, and is kept for later rounds while the authz epoch read
//   with the version stays the same (EpochCache: no authz change has committed since); so are
//   the user and role rows the evaluations name.
// - Events arriving while a round runs are coalesced into the next round (per organization).
// - A subscriber's queue keeps only the newest message: a slow client skips intermediate
//   statuses instead of growing memory, and never receives one older than what it already has.
// Subscribers are authorized on subscribe (by the caller) and again on every delivery with a
// principal that is current at that round's epoch: a member removed from the org, or who lost
// read, stops receiving at the next event, whatever published it.

import { randomUUID } from "node:crypto";
import { checkPermission } from "../domain/catalog/index.js";
import type { CompiledPrincipal } from "../domain/catalog/check.js";
import { EpochCache, loadPrincipals, type LoadedPrincipal } from "../authz/principal.js";
import type { Database } from "../infra/db.js";
import type { EventBus, Topics } from "../infra/events.js";
import {
  loadPlanHead,
  nextGateVersion,
  nextGateVersionAndEpoch,
  openPlanHeads,
  planHeads,
  principalSource,
  readGateInputs,
  loadPeople,
  snapshotOf,
  type GateInputRead,
  type GateSnapshot,
  type People,
  type PeopleSource,
  type PlanHead,
  type PrincipalSource,
  type RoleRow,
  type UserRow,
} from "./gate.js";
import { workspaceTarget } from "../authz/targets.js";

export interface WorkspaceGates {
  workspaceId: string;
  workspaceName: string;
  version: number;
  /** Every open (planned or applying) plan on the workspace, oldest first. */
  plans: GateSnapshot[];
}

const TERMINAL = new Set(["applied", "failed", "discarded"]);
/** The most cached user ids a round sends to leave out of its principal read (loadPrincipals' `except`). */
const MAX_EXCEPT = 2_000;
/** A failed round is retried after this long, doubling while rounds keep failing, up to RETRY_MAX_MS. */
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 4_000;

/** An async iterator that holds only the newest message (by version). */
export class LatestQueue<T extends { version: number }> implements AsyncIterableIterator<T> {
  private pending: T | null = null;
  private maxVersion = -Infinity;
  private waiter: ((r: IteratorResult<T>) => void) | null = null;
  private ending = false;
  private closed = false;
  private readonly onClose: () => void;

  constructor(onClose: () => void = () => {}) {
    this.onClose = onClose;
  }

  push(message: T): void {
    if (this.closed || this.ending || message.version <= this.maxVersion) return;
    this.maxVersion = message.version;
    if (this.waiter) {
      const resolve = this.waiter;
      this.waiter = null;
      resolve({ value: message, done: false });
    } else {
      this.pending = message;
    }
  }

  /**
   * Hands `message` to `direct` instead of queueing it, when nothing is queued and the consumer
   * is already waiting for its next message (so everything before it has been handed on: order
   * is kept). True if `direct` took it; false leaves the message to push().
   */
  deliverDirect(message: T, direct: (message: T) => boolean): boolean {
    if (this.closed || this.ending || this.pending || !this.waiter || message.version <= this.maxVersion) return false;
    if (!direct(message)) return false;
    this.maxVersion = message.version;
    return true;
  }

  /** No more messages after the one pending (if any). */
  end(): void {
    this.ending = true;
    if (!this.pending && this.waiter) {
      const resolve = this.waiter;
      this.waiter = null;
      this.close();
      resolve({ value: undefined, done: true });
    }
  }

  next(): Promise<IteratorResult<T>> {
    if (this.pending) {
      const value = this.pending;
      this.pending = null;
      return Promise.resolve({ value, done: false });
    }
    if (this.ending || this.closed) {
      this.close();
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve) => (this.waiter = resolve));
  }

  return(): Promise<IteratorResult<T>> {
    this.close();
    if (this.waiter) {
      const resolve = this.waiter;
      this.waiter = null;
      resolve({ value: undefined, done: true });
    }
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  private close() {
    if (this.closed) return;
    this.closed = true;
    this.pending = null;
    this.onClose();
  }
}

interface Viewer {
  orgId: string;
  userId: string;
}

interface PlanSubscriber {
  kind: "plan";
  viewer: Viewer;
  planId: string;
  workspaceId: string;
  queue: LatestQueue<GateSnapshot>;
  /** Writes a message straight to the subscriber's transport, when its layer can (deliverDirect). */
  direct?: (message: GateSnapshot) => boolean;
  /** Called before each delivery, so the subscription's own context re-reads its principal. */
  refresh: () => void;
}

interface WorkspaceSubscriber {
  kind: "workspace";
  viewer: Viewer;
  workspaceId: string;
  queue: LatestQueue<WorkspaceGates>;
  direct?: (message: WorkspaceGates) => boolean;
  refresh: () => void;
}

type Subscriber = PlanSubscriber | WorkspaceSubscriber;

interface Dirty {
  all: boolean;
  workspaceIds: Set<string>;
  /** When the first event of this round arrived (performance.now()). */
  since: number;
}

interface WorkspaceHead {
  id: string;
  orgId: string;
  name: string;
  authzGroups: string[];
}

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
  private readonly subscribers = new Set<Subscriber>();
  private readonly byWorkspace = new Map<string, Set<Subscriber>>();
  private readonly byOrg = new Map<string, Set<Subscriber>>();
  private readonly dirty = new Map<string, Dirty>();
  private iterators: AsyncIterator<unknown>[] = [];
  private ready: Promise<void> | null = null;
  private working: Promise<void> | null = null;
  private readonly probes = new Map<string, () => void>();
  /** Initial-status computations not yet started, per plan: subscribers arriving together share one. */
  private readonly initial = new Map<string, { started: boolean; promise: Promise<GateSnapshot | null> }>();
  /** The last rounds (newest last): versions, plans evaluated, messages delivered (`direct`: of them, straight to the transport), rows loaded. */
  readonly recentRounds: {
    orgId: string;
    version: number;
    evaluations: number;
    deliveries: number;
    direct: number;
    principalsLoaded: number;
    /** Users and roles whose rows the round read (the rest came from the cache). */
    peopleLoaded: number;
  }[] = [];
  /** Told of every finished round, with its event-to-delivery time (the metrics, src/edge/metrics.ts). */
  readonly roundListeners = new Set<(round: { evaluations: number; deliveries: number; seconds: number }) => void>();
  /** Per organization with subscribers: principals, users and roles, kept while the authz epoch holds. */
  private readonly caches = new Map<string, OrgCaches>();

  /** Organizations whose round failed (a database outage), retried until one succeeds. */
  private readonly failed = new Map<string, Dirty>();
  private retryTimer: NodeJS.Timeout | null = null;
  private retryDelayMs = RETRY_MIN_MS;

  constructor(
    private readonly db: Database,
    private readonly events: EventBus,
  ) {
    // Events may have been lost (the bus was down): every subscriber gets the current state, with
    // a new version, as if everything it watches had changed. Duplicates are told by the version.
    events.onResync(() => this.resync());
  }

  /** Marks every watched organization entirely dirty: one round each recomputes and delivers. */
  resync(): void {
    for (const orgId of this.byOrg.keys()) this.mark(orgId, null);
  }

  // --- subscribing ---------------------------------------------------------------------------

  /** Caller has authorized the viewer for the plan. Resolves once events are flowing. */
  async watchPlan(
    viewer: Viewer,
    head: PlanHead,
    refresh: () => void,
    direct?: (message: GateSnapshot) => boolean,
  ): Promise<LatestQueue<GateSnapshot>> {
    const sub: PlanSubscriber = {
      kind: "plan",
      viewer,
      planId: head.id,
      workspaceId: head.workspaceId,
      refresh,
      direct,
      queue: new LatestQueue<GateSnapshot>(() => this.remove(sub)),
    };
    await this.register(sub);
    // First message: the current status, computed after registration, so no event is missed.
    void this.initialSnapshot(head.orgId, head.id).then(
      (snapshot) => {
        if (!snapshot) return sub.queue.end();
        sub.queue.push(snapshot);
        if (TERMINAL.has(snapshot.planStatus)) sub.queue.end();
      },
      () => sub.queue.end(),
    );
    return sub.queue;
  }

  async watchWorkspace(
    viewer: Viewer,
    workspace: WorkspaceHead,
    refresh: () => void,
    direct?: (message: WorkspaceGates) => boolean,
  ): Promise<LatestQueue<WorkspaceGates>> {
    const sub: WorkspaceSubscriber = {
      kind: "workspace",
      viewer,
      workspaceId: workspace.id,
      refresh,
      direct,
      queue: new LatestQueue<WorkspaceGates>(() => this.remove(sub)),
    };
    await this.register(sub);
    void (async () => {
      const version = await nextGateVersion(this.db.sql);
      const principals = principalSource(this.db.sql, workspace.orgId);
      const heads = await openPlanHeads(this.db.sql, workspace.orgId, [workspace.id]);
      const plans = await Promise.all(heads.map((h) => this.evaluate(h, version, principals)));
      sub.queue.push({ workspaceId: workspace.id, workspaceName: workspace.name, version, plans });
    })().catch(() => sub.queue.end());
    return sub.queue;
  }

  private initialSnapshot(orgId: string, planId: string): Promise<GateSnapshot | null> {
    const waiting = this.initial.get(planId);
    if (waiting && !waiting.started) return waiting.promise;
    const entry = { started: false, promise: Promise.resolve<GateSnapshot | null>(null) };
    entry.promise = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
      entry.started = true;
      if (this.initial.get(planId) === entry) this.initial.delete(planId);
      const version = await nextGateVersion(this.db.sql);
      const head = await loadPlanHead(this.db.sql, orgId, planId);
      return head ? this.evaluate(head, version, principalSource(this.db.sql, orgId)) : null;
    });
    this.initial.set(planId, entry);
    return entry.promise;
  }

  /** Adds a subscriber and makes sure the bus subscription runs; undone if it cannot start. */
  private async register(sub: Subscriber) {
    this.add(sub);
    try {
      await this.start();
    } catch (error) {
      this.remove(sub);
      throw error;
    }
  }

  private add(sub: Subscriber) {
    this.subscribers.add(sub);
    addTo(this.byWorkspace, sub.workspaceId, sub);
    addTo(this.byOrg, sub.viewer.orgId, sub);
  }

  private remove(sub: Subscriber) {
    if (!this.subscribers.delete(sub)) return;
    removeFrom(this.byWorkspace, sub.workspaceId, sub);
    removeFrom(this.byOrg, sub.viewer.orgId, sub);
    if (!this.byOrg.has(sub.viewer.orgId)) this.caches.delete(sub.viewer.orgId);
    if (this.subscribers.size === 0) this.stop();
  }

  // --- the bus -------------------------------------------------------------------------------

  private start(): Promise<void> {
    this.ready ??= this.listen();
    return this.ready;
  }

  private async listen(): Promise<void> {
    // authz first: Redis processes SUBSCRIBEs in order, so the gate probe proves both.
    const authz = this.events.subscribe("authz:changed");
    const gate = this.events.subscribe("gate:changed");
    this.iterators = [authz, gate];
    void this.consume<Topics["authz:changed"]>(authz, (e) => this.mark(e.orgId, null));
    const probe = randomUUID();
    const arrived = new Promise<void>((resolve) => this.probes.set(probe, resolve));
    void this.consume<Topics["gate:changed"]>(gate, (e) => {
      if (e.reason.startsWith("probe:")) return this.probes.get(e.reason.slice(6))?.();
      this.mark(e.orgId, e.workspaceIds);
    });
    // Publish until our own probe comes back: then the subscription is live on the bus.
    let timer: NodeJS.Timeout | undefined;
    const publish = () => this.events.publish("gate:changed", { orgId: "", workspaceIds: [], reason: `probe:${probe}` });
    try {
      publish();
      timer = setInterval(publish, 200);
      await Promise.race([
        arrived,
        new Promise((_, reject) => setTimeout(() => reject(new Error("The event bus did not deliver within 10 s.")), 10_000).unref()),
      ]);
    } catch (error) {
      // Only if nobody restarted the hub meanwhile (a stop and a new start while we waited).
      if (this.iterators[0] === authz) this.stop();
      throw error;
    } finally {
      clearInterval(timer);
      this.probes.delete(probe);
    }
  }

  private async consume<E extends { orgId: string }>(iterator: AsyncIterator<E>, handle: (event: E) => void) {
    try {
      for (;;) {
        const { value, done } = await iterator.next();
        if (done) return;
        if (value && typeof value === "object" && typeof value.orgId === "string") handle(value);
      }
    } catch {
      // The bus closed: nothing more to route.
    }
  }

  private stop() {
    const iterators = this.iterators;
    this.iterators = [];
    this.ready = null;
    for (const it of iterators) void it.return?.();
  }

  // --- routing -------------------------------------------------------------------------------

  private mark(orgId: string, workspaceIds: readonly string[] | null) {
    if (!orgId || !this.byOrg.has(orgId)) return;
    const dirty = this.dirty.get(orgId) ?? { all: false, workspaceIds: new Set<string>(), since: performance.now() };
    if (workspaceIds === null) dirty.all = true;
    else for (const id of workspaceIds) if (this.byWorkspace.has(id)) dirty.workspaceIds.add(id);
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
          this.recompute(orgId, dirty).then(
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

  /**
   * One round for one organization: one version, one evaluation per affected plan.
   *
   * The round's critical path is version → (heads ∥ watched plans' inputs ∥ the principals of
   * viewers and approvers, one read) → names → evaluation → delivery. The version comes first
   * (see nextGateVersion); every read after it runs as early as its ids are known, and each
   * plan's evaluation starts as soon as its head is in, not behind authorization.
   * Delivery then walks each plan's (or workspace's) subscribers in one synchronous pass, so a
   * round costs a handful of promises, not several per subscriber (docs/benchmarks.md, "gate").
   */
  private async recompute(orgId: string, dirty: Dirty): Promise<void> {
    const subs = [...(this.byOrg.get(orgId) ?? [])].filter((s) => dirty.all || dirty.workspaceIds.has(s.workspaceId));
    if (subs.length === 0) return;
    const sql = this.db.sql;
    const { version, authzEpoch } = await nextGateVersionAndEpoch(sql);
    const caches = this.orgCaches(orgId);
    const cached = caches.principals.at(authzEpoch);
    const tally = { orgId, version, evaluations: 0, deliveries: 0, direct: 0, principalsLoaded: 0, peopleLoaded: 0 };
    const people = cachedPeople(sql, caches, authzEpoch, (n) => (tally.peopleLoaded += n));

    const planSubs = new Map<string, PlanSubscriber[]>();
    const workspaceSubs = new Map<string, WorkspaceSubscriber[]>();
    for (const sub of subs) {
      if (sub.kind === "plan") addToList(planSubs, sub.planId, sub);
      else addToList(workspaceSubs, sub.workspaceId, sub);
    }
    // A watched plan's inputs are read beside its head (the version is already taken, so this
    // read sees every change committed before the event), instead of after it.
    const inputReads = new Map<string, GateInputRead>();
    for (const [planId, [first]] of planSubs) {
      const read = readGateInputs(sql, { id: planId, workspaceId: first!.workspaceId, orgId });
      read.catch(() => {}); // awaited by the evaluation; a plan that turned out stored never is
      inputReads.set(planId, read);
    }

    // Every subscriber's principal and every watched plan's approvers', in one read beside the
    // inputs (the evaluation needs the approvers' right after them), except those still current
    // in the cache (same authz epoch as when they were loaded). Anyone else an evaluation asks
    // for (approvers of a plan only a workspaceGates subscriber watches) loads on demand.
    // A failed load fails the round (as any failed read does); it never reads as "not allowed".
    const viewerIds = [...new Set(subs.map((s) => s.viewer.userId))].filter((id) => !cached.has(id));
    // Cached users are left out of the approvers too, up to a list size worth sending each round;
    // past it, cached approvers are read again (the approvers of watched plans, not every viewer).
    const except = cached.size <= MAX_EXCEPT ? [...cached.keys()] : [];
    const batch = loadPrincipals(sql, orgId, viewerIds, [...planSubs.keys()], except).then((loaded) => {
      caches.principals.keep(authzEpoch, loaded);
      tally.principalsLoaded = loaded.size;
      return loaded;
    });
    batch.catch(() => {}); // awaited below
    const onDemand = principalSource(sql, orgId);
    const principals: PrincipalSource = (userId) => {
      const hit = cached.get(userId);
      return hit ? Promise.resolve(hit) : batch.then((loaded) => loaded.get(userId) ?? onDemand(userId));
    };
    const [watchedHeads, openHeads, workspaceHeads] = await Promise.all([
      planHeads(sql, orgId, [...planSubs.keys()]),
      openPlanHeads(sql, orgId, [...workspaceSubs.keys()]),
      workspaceSubs.size === 0
        ? Promise.resolve<WorkspaceHead[]>([])
        : sql.query<WorkspaceHead>(
            `SELECT w.id, w."orgId", w.name, s."authzGroups" FROM workspaces w JOIN stacks s ON s.id = w."stackId"
              WHERE w.id = ANY($1::text[]) AND w."orgId" = $2`,
            [[...workspaceSubs.keys()], orgId],
            { prepare: true },
          ),
    ]);

    // One evaluation per affected plan for this version, all started now.
    const snapshots = new Map<string, Promise<GateSnapshot>>();
    for (const head of [...watchedHeads, ...openHeads]) {
      if (snapshots.has(head.id)) continue;
      const snapshot = this.evaluate(head, version, principals, inputReads.get(head.id), people);
      snapshot.catch(() => {}); // awaited below; a plan nobody may read is never awaited
      snapshots.set(head.id, snapshot);
      tally.evaluations++;
    }

    /** Authorizes each subscriber as the principal is now; ends those who may no longer read. */
    const authorized = <S extends Subscriber>(
      group: readonly S[],
      workspace: { name: string; authzGroups: readonly string[] },
      loaded: ReadonlyMap<string, CompiledPrincipal>,
    ): S[] => {
      const target = workspaceTarget(workspace, "read");
      const allowedByUser = new Map<string, boolean>();
      const out: S[] = [];
      for (const sub of group) {
        sub.refresh();
        let allowed = allowedByUser.get(sub.viewer.userId);
        if (allowed === undefined) {
          allowed = checkPermission((cached.get(sub.viewer.userId) ?? loaded.get(sub.viewer.userId))!, target).allowed;
          allowedByUser.set(sub.viewer.userId, allowed);
        }
        if (allowed) out.push(sub);
        else sub.queue.end();
      }
      return out;
    };
    const deliver = <T extends { version: number }>(
      subscribers: readonly { queue: LatestQueue<T>; direct?: (message: T) => boolean }[],
      message: T,
      last: boolean,
    ) => {
      for (const sub of subscribers) {
        // A last message goes through the queue, which completes the subscription after it.
        if (!last && sub.direct && sub.queue.deliverDirect(message, sub.direct)) {
          tally.direct++;
          continue;
        }
        sub.queue.push(message);
        if (last) sub.queue.end();
      }
      tally.deliveries += subscribers.length;
    };

    const heads = new Map(watchedHeads.map((h) => [h.id, h]));
    const openByWorkspace = new Map<string, PlanHead[]>();
    for (const h of openHeads) addToList(openByWorkspace, h.workspaceId, h);
    const workspaces = new Map(workspaceHeads.map((w) => [w.id, w]));

    await Promise.all([
      ...[...planSubs].map(async ([planId, group]) => {
        const head = heads.get(planId);
        if (!head) return group.forEach((sub) => sub.queue.end());
        const [snapshot, loaded] = await Promise.all([snapshots.get(planId)!, batch]);
        const readers = authorized(group, { name: head.workspaceName, authzGroups: head.authzGroups }, loaded);
        deliver(readers, snapshot, TERMINAL.has(snapshot.planStatus));
      }),
      ...[...workspaceSubs].map(async ([workspaceId, group]) => {
        const workspace = workspaces.get(workspaceId);
        if (!workspace) return group.forEach((sub) => sub.queue.end());
        const [plans, loaded] = await Promise.all([
          Promise.all((openByWorkspace.get(workspaceId) ?? []).map((h) => snapshots.get(h.id)!)),
          batch,
        ]);
        // One message object per workspace per round, so its GraphQL result is shared too.
        const message: WorkspaceGates = { workspaceId, workspaceName: workspace.name, version, plans };
        deliver(authorized(group, workspace, loaded), message, false);
      }),
    ]);
    this.recentRounds.push(tally);
    for (const listener of this.roundListeners) listener({ ...tally, seconds: (performance.now() - dirty.since) / 1000 });
    if (this.recentRounds.length > 50) this.recentRounds.shift();
  }

  private orgCaches(orgId: string): OrgCaches {
    let caches = this.caches.get(orgId);
    if (!caches) this.caches.set(orgId, (caches = { principals: new EpochCache(), users: new EpochCache(), roles: new EpochCache() }));
    return caches;
  }

  private evaluate(head: PlanHead, version: number, principals: PrincipalSource, read?: GateInputRead, people?: PeopleSource): Promise<GateSnapshot> {
    return snapshotOf(this.db.sql, head, version, principals, read, people);
  }
}

interface OrgCaches {
  principals: EpochCache<LoadedPrincipal>;
  users: EpochCache<UserRow>;
  roles: EpochCache<RoleRow>;
}

/**
 * The names an evaluation mentions, from the round's caches where they are current at `epoch`
 * (user and role rows bump the authz epoch too), loading only the rest, in one read.
 */
function cachedPeople(sql: Database["sql"], caches: OrgCaches, epoch: number, loaded: (count: number) => void): PeopleSource {
  return async (userIds, roleIds) => {
    const users = caches.users.at(epoch);
    const roles = caches.roles.at(epoch);
    const missingUsers = [...userIds].filter((id) => !users.has(id));
    const missingRoles = [...roleIds].filter((id) => !roles.has(id));
    if (missingUsers.length === 0 && missingRoles.length === 0) return mergePeople(users, roles, null, userIds, roleIds);
    const fresh = await loadPeople(sql, missingUsers, missingRoles);
    loaded(fresh.users.size + fresh.roles.size);
    caches.users.keep(epoch, fresh.users);
    caches.roles.keep(epoch, fresh.roles);
    // From what was read first: a full cache keeps nothing more.
    return mergePeople(users, roles, fresh, userIds, roleIds);
  };
}

/** Exactly the requested users and roles that exist, from the cache and a fresh read. */
function mergePeople(
  users: ReadonlyMap<string, UserRow>,
  roles: ReadonlyMap<string, RoleRow>,
  fresh: People | null,
  userIds: ReadonlySet<string>,
  roleIds: ReadonlySet<string>,
): People {
  const pick = <V>(ids: ReadonlySet<string>, cached: ReadonlyMap<string, V>, read: ReadonlyMap<string, V> | undefined) => {
    const out = new Map<string, V>();
    for (const id of ids) {
      const row = read?.get(id) ?? cached.get(id);
      if (row !== undefined) out.set(id, row);
    }
    return out;
  };
  return { users: pick(userIds, users, fresh?.users), roles: pick(roleIds, roles, fresh?.roles) };
}

function addTo<K, V>(map: Map<K, Set<V>>, key: K, value: V) {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(value);
}

function removeFrom<K, V>(map: Map<K, Set<V>>, key: K, value: V) {
  const set = map.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) map.delete(key);
}

function addToList<K, V>(map: Map<K, V[]>, key: K, value: V) {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
