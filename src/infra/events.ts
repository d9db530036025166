import { createPubSub, type PubSub } from "graphql-yoga";
import { Redis } from "ioredis";
import type { Logger } from "./logger.js";

/**
 * Every topic, typed in one map (events carry ids, subscribers reload).
 * Names are `domain:event`; a test proves each topic subscribed to has a publisher.
 */
export interface Topics {
  /** Anything that can change a workspace's gates: approvals, reservations, policies, plans. */
  "gate:changed": { orgId: string; workspaceIds: string[]; reason: string };
  /** Role membership or grants changed in an org: every open gate there may change. */
  "authz:changed": { orgId: string; reason: string };
  /** An API token was revoked: every process closes that token's WebSockets (src/auth/live-sockets.ts). */
  "auth:token_revoked": { orgId: string; tokenId: string };
  /** A held tool call's request changed state or got a vote. */
  "approval:changed": { orgId: string; workspaceId: string; requestId: string; reason: string };
  /**
   * An agent's answer to a request the gateway relayed during a call (elicitation, sampling,
   * roots), POSTed to a process other than the one whose call asked: the one topic that carries
   * a message rather than ids, since only the asking process can use it (src/workers/answer-relay.ts).
   */
  "gateway:answer": { owner: string; message: unknown };
}

export type TopicName = keyof Topics;

type PubSubArgs = { [K in TopicName]: [Topics[K]] };

export interface EventBus {
  /**
   * Fire and forget: never throws and never leaves a rejected promise behind. An event the bus
   * cannot carry (Redis down) is dropped, and every process is told to resync once it is back.
   */
  publish<K extends TopicName>(topic: K, payload: Topics[K]): void;
  subscribe<K extends TopicName>(topic: K): AsyncIterable<Topics[K]> & AsyncIterator<Topics[K]>;
  /**
   * Called when events may have been lost: this process's connection to the bus came back, or
   * another process reconnected after dropping events. Whoever keeps live state (the gate hub,
   * approval subscriptions) re-reads it and pushes the current state. Returns an unsubscribe.
   * The in-process bus loses nothing and never calls it.
   */
  onResync(listener: () => void): () => void;
  /** "redis" when events cross processes, "memory" on the embedded default. */
  readonly kind: "redis" | "memory";
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

/** The channel (beside the topics) on which a process that dropped events asks every process to resync. */
const RESYNC_CHANNEL = "bus:resync";
/** Resync signals arriving together (both clients reconnecting, several processes) make one. */
const RESYNC_DEBOUNCE_MS = 100;
const PING_TIMEOUT_MS = 1_000;

/**
 * The in-process bus (embedded default) or Redis pub/sub (REDIS_URL). `channelPrefix`
 * isolates test runs sharing one Redis.
 *
 * On Redis the event target is our own (redisEventTarget below), not
 * @graphql-yoga/redis-event-target: that one leaves the promises of PUBLISH, SUBSCRIBE and
 * UNSUBSCRIBE unhandled, so one publish during an outage ended the process on an unhandled
 * MaxRetriesPerRequestError. Here every command's failure is caught and counted, and both
 * clients have 'error' listeners (an ioredis client without one reports through the process).
 */
export function createEventBus(options: { redisUrl?: string; channelPrefix?: string; logger?: Logger }): EventBus {
  const prefix = options.channelPrefix ?? "countersign";
  if (!options.redisUrl) {
    const pubsub = createPubSub<PubSubArgs>();
    return wrap(pubsub, "memory", prefix, () => () => {}, async () => true, async () => {});
  }
  const log = options.logger?.child({ module: "event-bus" });
  const publishClient = new Redis(options.redisUrl, { maxRetriesPerRequest: 3, lazyConnect: false });
  const subscribeClient = new Redis(options.redisUrl, { maxRetriesPerRequest: 3, lazyConnect: false });
  const resyncChannel = `${prefix}:${RESYNC_CHANNEL}`;

  const listeners = new Set<() => void>();
  let resyncTimer: NodeJS.Timeout | null = null;
  const resyncLocally = (why: string) => {
    if (resyncTimer || listeners.size === 0) return;
    resyncTimer = setTimeout(() => {
      resyncTimer = null;
      log?.info({ why }, "event bus resync: live subscriptions re-read their state");
      for (const listener of [...listeners]) {
        try {
          listener();
        } catch (error) {
          log?.error({ err: error }, "resync listener failed");
        }
      }
    }, RESYNC_DEBOUNCE_MS);
    resyncTimer.unref();
  };

  /** Events were dropped on the way out: once Redis carries messages again, every process resyncs. */
  let dropped = false;
  const announceResync = () => {
    if (!dropped) return;
    dropped = false;
    publishClient.publish(resyncChannel, "").catch(() => {
      dropped = true; // still down: the next 'ready' tries again
    });
  };
  const onDropped = (error: unknown) => {
    if (!dropped) log?.warn({ err: String(error) }, "event bus unavailable: events are dropped until it is back, then every process resyncs");
    dropped = true;
  };

  watchConnection(publishClient, "publish", log, () => {
    announceResync();
    resyncLocally("publish connection restored");
  });
  watchConnection(subscribeClient, "subscribe", log, () => resyncLocally("subscribe connection restored"));

  const eventTarget = redisEventTarget(publishClient, subscribeClient, onDropped, () => announceResync());
  // Another process that dropped events asks for a resync on this channel (ioredis re-subscribes
  // after a reconnect on its own).
  subscribeClient.on("message", (channel: string) => {
    if (channel === resyncChannel) resyncLocally("another process dropped events");
  });
  subscribeClient.subscribe(resyncChannel).catch(() => {});

  // Our target dispatches yoga's CustomEvent at runtime; createPubSub types eventTarget with its own TypedEventTarget generic, which no hand-made target can name.
  const pubsub = createPubSub<PubSubArgs>({ eventTarget: eventTarget as never });
  return wrap(
    pubsub,
    "redis",
    prefix,
    (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async () => {
      if (publishClient.status !== "ready") return false;
      const pong = await Promise.race([
        publishClient.ping().catch(() => ""),
        new Promise<string>((resolve) => setTimeout(() => resolve(""), PING_TIMEOUT_MS).unref()),
      ]);
      return pong === "PONG";
    },
    async () => {
      if (resyncTimer) clearTimeout(resyncTimer);
      listeners.clear();
      publishClient.disconnect();
      subscribeClient.disconnect();
    },
  );
}

/**
 * Logs an ioredis client's errors (once per outage, not per reconnect attempt) and calls
 * `restored` on every 'ready' that follows a lost connection.
 */
export function watchConnection(client: Redis, name: string, log: Logger | undefined, restored: () => void): void {
  let wasReady = false;
  let lost = false;
  let warned = false;
  client.on("error", (error: Error) => {
    if (!warned) log?.warn({ client: name, err: error.message }, "Redis connection error; retrying");
    warned = true;
    if (wasReady) lost = true;
  });
  client.on("close", () => {
    if (wasReady) lost = true;
  });
  client.on("ready", () => {
    const wasLost = lost;
    wasReady = true;
    lost = false;
    warned = false;
    if (wasLost) {
      log?.info({ client: name }, "Redis connection restored");
      restored();
    }
  });
}

type Callback = (event: CustomEvent) => void;

/** Redis pub/sub as an EventTarget for createPubSub, JSON payloads, every command's failure caught. */
function redisEventTarget(
  publishClient: Redis,
  subscribeClient: Redis,
  onDropped: (error: unknown) => void,
  onPublished: () => void,
): unknown {
  const callbacksForTopic = new Map<string, Set<Callback>>();
  subscribeClient.on("message", (channel: string, message: string) => {
    const callbacks = callbacksForTopic.get(channel);
    if (!callbacks) return;
    let detail: unknown;
    try {
      detail = message === "" ? null : JSON.parse(message);
    } catch {
      return; // not ours
    }
    const event = new CustomEvent(channel, { detail });
    for (const callback of callbacks) callback(event);
  });
  const bound = new WeakMap<object, Callback>();
  const callbackOf = (listener: unknown): Callback | null => {
    if (listener == null) return null;
    if (typeof listener === "function") return listener as Callback;
    let callback = bound.get(listener);
    if (!callback) bound.set(listener, (callback = (event) => (listener as { handleEvent: Callback }).handleEvent(event)));
    return callback;
  };
  return {
    addEventListener(topic: string, listener: unknown) {
      const callback = callbackOf(listener);
      if (!callback) return;
      let callbacks = callbacksForTopic.get(topic);
      if (!callbacks) {
        callbacksForTopic.set(topic, (callbacks = new Set()));
        // Failing here (Redis down) is not final: ioredis re-subscribes every channel it was
        // asked for once it reconnects, and the resync covers what was missed meanwhile.
        subscribeClient.subscribe(topic).catch(() => {});
      }
      callbacks.add(callback);
    },
    dispatchEvent(event: CustomEvent) {
      const detail = event.detail;
      publishClient.publish(event.type, detail === undefined ? "" : JSON.stringify(detail)).then(onPublished, onDropped);
      return true;
    },
    removeEventListener(topic: string, listener: unknown) {
      const callback = callbackOf(listener);
      const callbacks = callbacksForTopic.get(topic);
      if (!callback || !callbacks) return;
      callbacks.delete(callback);
      if (callbacks.size > 0) return;
      callbacksForTopic.delete(topic);
      subscribeClient.unsubscribe(topic).catch(() => {});
    },
  };
}

function wrap(
  pubsub: PubSub<PubSubArgs>,
  kind: EventBus["kind"],
  prefix: string,
  onResync: EventBus["onResync"],
  ping: () => Promise<boolean>,
  close: () => Promise<void>,
): EventBus {
  const channel = (topic: string) => `${prefix}:${topic}` as TopicName;
  return {
    kind,
    publish(topic, payload) {
      try {
        (pubsub.publish as (t: string, p: unknown) => void)(channel(topic), payload);
      } catch {
        // Publishing never fails the caller: what it announces has already committed.
      }
    },
    subscribe(topic) {
      // The channel name is a template string, so yoga's Repeater loses the topic's payload type; Topics[K] is what was published under it.
      return pubsub.subscribe(channel(topic)) as never;
    },
    onResync,
    ping,
    close,
  };
}
