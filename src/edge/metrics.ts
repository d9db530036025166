// GET /metrics: Prometheus text format (prom-client), one registry per app instance.
// docs/operations.md, "Metrics", says what each one means.
//
// Counted as things happen: operations (by name, type and outcome, with latency), refusals by
// the rate limiter, gate rounds (src/services/gate-live.ts reports each round). Read on scrape:
// open WebSockets and operations (src/auth/live-sockets.ts), delivery jobs by state (one
// GROUP BY), the approval stream's consumer group (XINFO GROUPS), the database pool, Redis.
// The scrape-time reads run together before the registry renders; one that fails or takes
// longer than SCRAPE_READ_MS leaves its metric out of that scrape (up-gauges read 0, and
// countersign_scrape_read_ok{read} is 0); it never fails the scrape.

import type { IncomingMessage, ServerResponse } from "node:http";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { Redis } from "ioredis";
import type { LiveSockets } from "../auth/live-sockets.js";
import { bearerFrom } from "../auth/tokens.js";
import { sameSecret } from "../domain/signing.js";
import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import type { EventBus } from "../infra/events.js";

const SCRAPE_READ_MS = 2_000;
/** Distinct operation names kept as labels; any further name is counted as "other". */
const MAX_OPERATION_NAMES = 200;
/** The ingest worker's consumer group (src/workers/ingest.ts). */
const INGEST_GROUP = "countersign-ingest";
/** delivery_jobs.status values (prisma/schema.prisma): each is reported, 0 when none. */
const DELIVERY_STATES = ["queued", "leased", "delivered", "failed"] as const;

export interface GateRound {
  evaluations: number;
  deliveries: number;
  /** From the first event the round handles to its last delivery. */
  seconds: number;
}

export interface Metrics {
  readonly registry: Registry;
  /** One GraphQL operation done: `outcome` is "ok" or the error code it ended with. */
  operation(name: string | null | undefined, type: string, outcome: string, seconds: number): void;
  rateLimited(scope: "http" | "ws_connect" | "ws_operation" | "ws_subscriptions"): void;
  /** A take refused by one of the shared limits' buckets (src/infra/limit-refusals.ts), by its name. */
  limitRefused(bucket: string): void;
  gateRound(round: GateRound): void;
  /** Serves GET /metrics (401 without the configured token). */
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
  close(): Promise<void>;
}

export function createMetrics(deps: { config: Config; db: Database; events: EventBus; sockets: LiveSockets }): Metrics {
  const { config, db, events, sockets } = deps;
  const registry = new Registry();
  const readOk = new Gauge({ name: "countersign_scrape_read_ok", help: "1 if a scrape-time read succeeded, by read", labelNames: ["read"], registers: [registry] });

  /** A scrape-time read, bounded in time; null (and read_ok 0) if it failed. */
  const read = async <T>(name: string, fn: () => Promise<T>): Promise<T | null> => {
    let timer: NodeJS.Timeout | undefined;
    try {
      const value = await Promise.race([
        fn(),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("timeout")), SCRAPE_READ_MS))),
      ]);
      readOk.set({ read: name }, 1);
      return value;
    } catch {
      readOk.set({ read: name }, 0);
      return null;
    } finally {
      clearTimeout(timer);
    }
  };

  const operations = new Counter({
    name: "countersign_graphql_operations_total",
    help: "GraphQL operations by operation name, type and outcome (ok, or the error code)",
    labelNames: ["operation", "type", "outcome"],
    registers: [registry],
  });
  const duration = new Histogram({
    name: "countersign_graphql_operation_duration_seconds",
    help: "GraphQL operation latency (for a subscription: until it is set up)",
    labelNames: ["operation", "type", "outcome"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const limited = new Counter({
    name: "countersign_rate_limited_total",
    help: "Requests and operations refused by a rate limit or quota, by where",
    labelNames: ["scope"],
    registers: [registry],
  });
  const refusals = new Counter({
    name: "countersign_limit_refusals_total",
    help: "Takes refused by a rate limit, by limit (graphql, gateway, integration, personal-org)",
    labelNames: ["limit"],
    registers: [registry],
  });
  new Gauge({
    name: "countersign_websockets_open",
    help: "Authenticated WebSocket connections open on this process",
    registers: [registry],
    collect() {
      this.set(sockets.size);
    },
  });
  new Gauge({
    name: "countersign_subscriptions_open",
    help: "Operations open on WebSockets on this process, by kind (the root field: planGate, workspaceGates, ...)",
    labelNames: ["kind"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, n] of sockets.operationsByKind()) this.set({ kind }, n);
    },
  });
  const rounds = new Counter({ name: "countersign_gate_rounds_total", help: "Live gate rounds (one per organization per batch of events)", registers: [registry] });
  const roundDeliveries = new Counter({ name: "countersign_gate_deliveries_total", help: "Live gate statuses delivered to subscribers", registers: [registry] });
  const roundEvaluations = new Counter({ name: "countersign_gate_evaluations_total", help: "Gate evaluations run by live rounds", registers: [registry] });
  const deliveryLatency = new Histogram({
    name: "countersign_gate_delivery_latency_seconds",
    help: "From an event reaching this process to the round's statuses being handed to subscribers",
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });

  // Redis: the event bus (when REDIS_URL is set) and the approval stream, on a client of our own
  // that never queues commands while disconnected (a scrape during an outage answers at once).
  const redis = config.redisUrl
    ? new Redis(config.redisUrl, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, connectionName: "countersign-metrics" })
    : null;
  redis?.on("error", () => {}); // reported as countersign_redis_up 0
  let connecting: Promise<void> | null = null;
  const redisReady = async (): Promise<Redis> => {
    if (!redis) throw new Error("no redis");
    if (redis.status === "wait" || redis.status === "end") connecting ??= redis.connect().finally(() => (connecting = null));
    if (connecting) await connecting;
    return redis;
  };

  /** What the scrape reads from PostgreSQL and Redis: all at once, before the registry renders. */
  let scraped: {
    deliveryJobs: { state: string; n: number }[] | null;
    dbUp: boolean;
    eventsUp: boolean | null;
    streamUp: boolean | null;
    stream: { pending: number; lag: number | null } | null;
  } = { deliveryJobs: null, dbUp: false, eventsUp: null, streamUp: null, stream: null };
  const readAll = async () => {
    const [deliveryJobs, dbUp, eventsUp, streamUp, stream] = await Promise.all([
      read("delivery_jobs", () => db.sql.query<{ state: string; n: number }>(`SELECT status AS state, count(*)::int AS n FROM delivery_jobs GROUP BY status`)),
      read("database", () => db.sql.query("SELECT 1")).then((r) => r !== null),
      events.kind === "redis" ? read("redis_events", () => events.ping()).then((r) => r === true) : Promise.resolve(null),
      redis ? read("redis_stream", async () => (await redisReady()).ping()).then((r) => r === "PONG") : Promise.resolve(null),
      redis
        ? read("approval_stream", async () => {
            const groups = (await (await redisReady()).xinfo("GROUPS", config.approvalStream)) as unknown[][];
            for (const raw of groups) {
              const g: Record<string, unknown> = {};
              for (let i = 0; i + 1 < raw.length; i += 2) g[String(raw[i])] = raw[i + 1];
              if (g.name !== INGEST_GROUP) continue;
              return { pending: Number(g.pending ?? 0), lag: g.lag === null || g.lag === undefined ? null : Number(g.lag) };
            }
            return null; // no ingest group yet
          })
        : Promise.resolve(null),
    ]);
    scraped = { deliveryJobs, dbUp, eventsUp, streamUp, stream };
  };

  new Gauge({
    name: "countersign_delivery_jobs",
    help: "Delivery jobs (approved held calls being resumed) by state: queued, leased, delivered, failed",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      this.reset();
      if (!scraped.deliveryJobs) return;
      for (const state of DELIVERY_STATES) this.set({ state }, 0);
      for (const r of scraped.deliveryJobs) this.set({ state: r.state }, r.n);
    },
  });
  new Gauge({
    name: "countersign_db_pool_connections",
    help: "PostgreSQL pool connections by state (total, idle, waiting: requests queued for one)",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      this.reset();
      const stats = db.poolStats?.();
      if (!stats) return;
      this.set({ state: "total" }, stats.total);
      this.set({ state: "idle" }, stats.idle);
      this.set({ state: "waiting" }, stats.waiting);
    },
  });
  new Gauge({
    name: "countersign_db_up",
    help: "1 if PostgreSQL answered SELECT 1 at this scrape",
    registers: [registry],
    collect() {
      this.set(scraped.dbUp ? 1 : 0);
    },
  });
  new Gauge({
    name: "countersign_redis_up",
    help: "1 if Redis answered at this scrape, by client (events: the pub/sub bus; stream: the approval stream)",
    labelNames: ["client"],
    registers: [registry],
    collect() {
      this.reset();
      if (scraped.eventsUp !== null) this.set({ client: "events" }, scraped.eventsUp ? 1 : 0);
      if (scraped.streamUp !== null) this.set({ client: "stream" }, scraped.streamUp ? 1 : 0);
    },
  });
  const streamLabel = { stream: config.approvalStream };
  new Gauge({
    name: "countersign_approval_stream_pending",
    help: "Held-call entries delivered to the ingest group and not yet acknowledged (XINFO GROUPS pending)",
    labelNames: ["stream"],
    registers: [registry],
    collect() {
      this.reset();
      if (scraped.stream) this.set(streamLabel, scraped.stream.pending);
    },
  });
  new Gauge({
    name: "countersign_approval_stream_lag",
    help: "Held-call entries in the stream not yet delivered to the ingest group (XINFO GROUPS lag; Redis 7+)",
    labelNames: ["stream"],
    registers: [registry],
    collect() {
      this.reset();
      const lag = scraped.stream?.lag;
      if (lag !== null && lag !== undefined && Number.isFinite(lag)) this.set(streamLabel, lag);
    },
  });

  const names = new Set<string>();
  const label = (name: string | null | undefined): string => {
    if (!name) return "anonymous";
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(name)) return "other";
    if (names.has(name)) return name;
    if (names.size >= MAX_OPERATION_NAMES) return "other";
    names.add(name);
    return name;
  };

  const expected = config.metricsToken ?? null;
  const authorized = (req: IncomingMessage): boolean => expected === null || sameSecret(bearerFrom(req.headers.authorization) ?? "", expected);

  return {
    registry,
    operation(name, type, outcome, seconds) {
      const labels = { operation: label(name), type, outcome };
      operations.inc(labels);
      duration.observe(labels, seconds);
    },
    rateLimited(scope) {
      limited.inc({ scope });
    },
    limitRefused: (bucket) => refusals.inc({ limit: bucket }),
    gateRound(round) {
      rounds.inc();
      roundDeliveries.inc(round.deliveries);
      roundEvaluations.inc(round.evaluations);
      deliveryLatency.observe(round.seconds);
    },
    async handle(req, res) {
      if (!authorized(req)) {
        res.writeHead(401, { "content-type": "text/plain", "www-authenticate": 'Bearer realm="metrics"' }).end("Unauthorized\n");
        return;
      }
      await readAll();
      const body = await registry.metrics();
      res.writeHead(200, { "content-type": registry.contentType }).end(body);
    },
    async close() {
      redis?.disconnect();
    },
  };
}
