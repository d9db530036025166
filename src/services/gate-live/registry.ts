// Who watches what on this process: the live gate subscribers, indexed by workspace and by
// organization, so an event (which names an organization and, for "gate:changed", workspaces)
// finds its subscribers without a scan.

import type { GateSnapshot } from "../gate.js";
import type { LatestQueue } from "./queue.js";

export interface WorkspaceGates {
  workspaceId: string;
  workspaceName: string;
  version: number;
  /** Every open (planned or applying) plan on the workspace, oldest first. */
  plans: GateSnapshot[];
}

/** A workspace as a workspaceGates subscriber watches it: its name, and the groups its read is checked on. */
export interface WorkspaceHead {
  id: string;
  orgId: string;
  name: string;
  authzGroups: string[];
}

/** Plan statuses after which a planGate subscription delivers its last message and completes. */
export const TERMINAL = new Set(["applied", "failed", "discarded"]);

export interface Viewer {
  orgId: string;
  userId: string;
}

/** Writes a message straight to the subscriber's transport, when its layer can (LatestQueue.deliverDirect). */
export interface DirectWriter<T> {
  write(message: T): boolean;
}

/** What the subscription's own context re-reads before each delivery: its principal (an Authz). */
export interface Refreshable {
  refresh(): void;
}

export interface PlanSubscriber {
  kind: "plan";
  viewer: Viewer;
  planId: string;
  workspaceId: string;
  queue: LatestQueue<GateSnapshot>;
  direct?: DirectWriter<GateSnapshot>;
  /** Refreshed before each delivery, so the subscription's own context re-reads its principal. */
  authz: Refreshable;
}

export interface WorkspaceSubscriber {
  kind: "workspace";
  viewer: Viewer;
  workspaceId: string;
  queue: LatestQueue<WorkspaceGates>;
  direct?: DirectWriter<WorkspaceGates>;
  authz: Refreshable;
}

export type Subscriber = PlanSubscriber | WorkspaceSubscriber;

/** What changed for one organization: everything it watches (`all`), or these workspaces. */
export interface Dirty {
  all: boolean;
  workspaceIds: Set<string>;
  /** When the first event of this round arrived (performance.now()). */
  since: number;
}

export class SubscriberRegistry {
  private readonly subscribers = new Set<Subscriber>();
  private readonly byWorkspace = new Map<string, Set<Subscriber>>();
  private readonly byOrg = new Map<string, Set<Subscriber>>();

  get size(): number {
    return this.subscribers.size;
  }

  add(sub: Subscriber): void {
    this.subscribers.add(sub);
    addTo(this.byWorkspace, sub.workspaceId, sub);
    addTo(this.byOrg, sub.viewer.orgId, sub);
  }

  /** False if it was not (or no longer) registered. */
  remove(sub: Subscriber): boolean {
    if (!this.subscribers.delete(sub)) return false;
    removeFrom(this.byWorkspace, sub.workspaceId, sub);
    removeFrom(this.byOrg, sub.viewer.orgId, sub);
    return true;
  }

  watchesOrg(orgId: string): boolean {
    return this.byOrg.has(orgId);
  }

  watchesWorkspace(workspaceId: string): boolean {
    return this.byWorkspace.has(workspaceId);
  }

  /** Every organization with a subscriber on this process. */
  orgs(): IterableIterator<string> {
    return this.byOrg.keys();
  }

  /** The organization's subscribers that `dirty` concerns. */
  affected(orgId: string, dirty: Dirty): Subscriber[] {
    return [...(this.byOrg.get(orgId) ?? [])].filter((s) => dirty.all || dirty.workspaceIds.has(s.workspaceId));
  }
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
