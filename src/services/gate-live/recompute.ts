// One live gate round for one organization: one version (nextval before any read) and ONE
// evaluation per affected plan, shared by every subscriber of that plan on this process; each
// user's principal loads at most once per round (or not at all while the authz epoch holds,
// ./caches.ts), shared by the evaluation and the authorization of all of that user's
// subscriptions. Subscribers are authorized again at every delivery with a principal current at
// the round's epoch: one who may no longer read the workspace is ended, whatever published.

import { checkPermission } from "../../domain/catalog/index.js";
import type { CompiledPrincipal } from "../../domain/catalog/check.js";
import { loadPrincipals } from "../../authz/principal.js";
import { workspaceTarget } from "../../authz/targets.js";
import type { Database } from "../../infra/db.js";
import {
  nextGateVersionAndEpoch,
  openPlanHeads,
  planHeads,
  principalSource,
  readGateInputs,
  snapshotOf,
  type GateInputRead,
  type GateSnapshot,
  type PlanHead,
  type PrincipalSource,
} from "../gate.js";
import { cachedPeople, type OrgCachesStore } from "./caches.js";
import type { LatestQueue } from "./queue.js";
import { TERMINAL, type DirectWriter, type PlanSubscriber, type Subscriber, type WorkspaceGates, type WorkspaceHead, type WorkspaceSubscriber } from "./registry.js";

/** The most cached user ids a round sends to leave out of its principal read (loadPrincipals' `except`). */
const MAX_EXCEPT = 2_000;

/** What one round did: its version, plans evaluated, messages delivered (`direct`: of them, straight to the transport), rows loaded. */
export interface RoundTally {
  orgId: string;
  version: number;
  evaluations: number;
  deliveries: number;
  direct: number;
  principalsLoaded: number;
  /** Users and roles whose rows the round read (the rest came from the cache). */
  peopleLoaded: number;
}

export interface RoundDeps {
  sql: Database["sql"];
  caches: OrgCachesStore;
}

/**
 * Recomputes and delivers what `subs` (the organization's affected subscribers, at least one)
 * watch.
 *
 * The round's critical path is version → (heads ∥ watched plans' inputs ∥ the principals of
 * viewers and approvers, one read) → names → evaluation → delivery. The version comes first
 * (see nextGateVersion); every read after it runs as early as its ids are known, and each
 * plan's evaluation starts as soon as its head is in, not behind authorization.
 * Delivery then walks each plan's (or workspace's) subscribers in one synchronous pass, so a
 * round costs a handful of promises, not several per subscriber (docs/benchmarks.md, "gate").
 */
export async function recomputeRound(deps: RoundDeps, orgId: string, subs: readonly Subscriber[]): Promise<RoundTally> {
  const { sql } = deps;
  const { version, authzEpoch } = await nextGateVersionAndEpoch(sql);
  const caches = deps.caches.of(orgId);
  const cached = caches.principals.at(authzEpoch);
  const tally: RoundTally = { orgId, version, evaluations: 0, deliveries: 0, direct: 0, principalsLoaded: 0, peopleLoaded: 0 };
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
    const snapshot = snapshotOf(sql, head, version, principals, inputReads.get(head.id), people);
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
      sub.authz.refresh();
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
    subscribers: readonly { queue: LatestQueue<T>; direct?: DirectWriter<T> }[],
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
  return tally;
}

function addToList<K, V>(map: Map<K, V[]>, key: K, value: V) {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
