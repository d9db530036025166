import { createPubSub, type PubSub } from "graphql-yoga";
import { createRedisEventTarget } from "@graphql-yoga/redis-event-target";
import { Redis } from "ioredis";

/**
 * Every topic, typed in one map (STYLE.md: events carry ids, subscribers reload).
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
}

export type TopicName = keyof Topics;

type PubSubArgs = { [K in TopicName]: [Topics[K]] };

export interface EventBus {
  publish<K extends TopicName>(topic: K, payload: Topics[K]): void;
  subscribe<K extends TopicName>(topic: K): AsyncIterable<Topics[K]> & AsyncIterator<Topics[K]>;
  /** "redis" when events cross processes, "memory" on the embedded default. */
  readonly kind: "redis" | "memory";
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * The in-process bus (embedded default) or Redis pub/sub (REDIS_URL). `channelPrefix`
 * isolates test runs sharing one Redis. Uses @graphql-yoga/redis-event-target on ioredis 5,
 * the version its peer range accepts, rather than a hand-written event target on ioredis 6.
 */
export function createEventBus(options: { redisUrl?: string; channelPrefix?: string }): EventBus {
  const prefix = options.channelPrefix ?? "countersign";
  if (!options.redisUrl) {
    const pubsub = createPubSub<PubSubArgs>();
    return wrap(pubsub, "memory", prefix, async () => true, async () => {});
  }
  const publishClient = new Redis(options.redisUrl, { maxRetriesPerRequest: 3, lazyConnect: false });
  const subscribeClient = new Redis(options.redisUrl, { maxRetriesPerRequest: 3, lazyConnect: false });
  const eventTarget = createRedisEventTarget({ publishClient, subscribeClient });
  const pubsub = createPubSub<PubSubArgs>({ eventTarget });
  return wrap(
    pubsub,
    "redis",
    prefix,
    async () => (await publishClient.ping().catch(() => "")) === "PONG",
    async () => {
      publishClient.disconnect();
      subscribeClient.disconnect();
    },
  );
}

function wrap(
  pubsub: PubSub<PubSubArgs>,
  kind: EventBus["kind"],
  prefix: string,
  ping: () => Promise<boolean>,
  close: () => Promise<void>,
): EventBus {
  const channel = (topic: string) => `${prefix}:${topic}` as TopicName;
  return {
    kind,
    publish(topic, payload) {
      (pubsub.publish as (t: string, p: unknown) => void)(channel(topic), payload);
    },
    subscribe(topic) {
      return pubsub.subscribe(channel(topic)) as never;
    },
    ping,
    close,
  };
}
