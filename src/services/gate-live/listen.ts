// The live gate's ear on the bus: ONE subscription per topic per process, however many
// subscribers; it routes each event to the hub by organization and never reads anything itself.
// Seed 000, "Live gate status": "gate:changed" names workspaces; "authz:changed" means every
// open gate in the organization may have changed.

import { randomUUID } from "node:crypto";
import type { EventBus, Topics } from "../../infra/events.js";

export interface GateEventHandlers {
  /** Everything the organization's subscribers watch may have changed. */
  authzChanged(orgId: string): void;
  /** The gates of these workspaces may have changed. */
  gateChanged(orgId: string, workspaceIds: readonly string[]): void;
}

/** How long start() waits for its own probe to come back over the bus. */
const LIVE_WITHIN_MS = 10_000;
/** How often the probe is published again while waiting (a publish may be lost). */
const PROBE_EVERY_MS = 200;

export class BusListener {
  private iterators: AsyncIterator<unknown>[] = [];
  private ready: Promise<void> | null = null;
  private readonly probes = new Map<string, () => void>();

  constructor(
    private readonly events: EventBus,
    private readonly handlers: GateEventHandlers,
  ) {}

  /** Subscribes unless already subscribed; resolves once the subscription is live on the bus. */
  start(): Promise<void> {
    this.ready ??= this.listen();
    return this.ready;
  }

  /** Ends both subscriptions; the next start() subscribes again. */
  stop(): void {
    const iterators = this.iterators;
    this.iterators = [];
    this.ready = null;
    for (const it of iterators) void it.return?.();
  }

  private async listen(): Promise<void> {
    // authz first: Redis processes SUBSCRIBEs in order, so the gate probe proves both.
    const authz = this.events.subscribe("authz:changed");
    const gate = this.events.subscribe("gate:changed");
    this.iterators = [authz, gate];
    void consume<Topics["authz:changed"]>(authz, (e) => this.handlers.authzChanged(e.orgId));
    const probe = randomUUID();
    const arrived = new Promise<void>((resolve) => this.probes.set(probe, resolve));
    void consume<Topics["gate:changed"]>(gate, (e) => {
      if (e.reason.startsWith("probe:")) return this.probes.get(e.reason.slice(6))?.();
      this.handlers.gateChanged(e.orgId, e.workspaceIds);
    });
    // Publish until our own probe comes back: then the subscription is live on the bus.
    let timer: NodeJS.Timeout | undefined;
    const publish = () => this.events.publish("gate:changed", { orgId: "", workspaceIds: [], reason: `probe:${probe}` });
    try {
      publish();
      timer = setInterval(publish, PROBE_EVERY_MS);
      await Promise.race([
        arrived,
        new Promise((_, reject) => setTimeout(() => reject(new Error("The event bus did not deliver within 10 s.")), LIVE_WITHIN_MS).unref()),
      ]);
    } catch (error) {
      // Only if nobody restarted the listener meanwhile (a stop and a new start while we waited).
      if (this.iterators[0] === authz) this.stop();
      throw error;
    } finally {
      clearInterval(timer);
      this.probes.delete(probe);
    }
  }
}

/** Hands each well-formed event to `handle` until the iterator ends or the bus closes. */
async function consume<E extends { orgId: string }>(iterator: AsyncIterator<E>, handle: (event: E) => void) {
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
