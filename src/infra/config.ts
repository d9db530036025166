import path from "node:path";
import { z } from "zod";
import { parseTrustedProxies } from "./trusted-proxies.js";

/** Everything the process reads from its environment, validated once at start. */
const EnvSchema = z.object({
  DATABASE_URL: z.string().url().optional(),
  /** A PostgreSQL schema to run in (tests give each file its own). */
  DATABASE_SCHEMA: z.string().regex(/^[a-z_][a-z0-9_]*$/).optional(),
  REDIS_URL: z.string().optional(),
  /** The prefix of the Redis keys the shared limits count under (deployments sharing one Redis keep apart). */
  COUNTERSIGN_LIMITS_KEY_PREFIX: z.string().min(1).default("countersign:limits"),
  COUNTERSIGN_DATA_DIR: z.string().default("./.countersign"),
  COUNTERSIGN_BOOTSTRAP_TOKEN: z.string().min(16).optional(),
  COUNTERSIGN_PUBLIC_URL: z.string().url().optional(),
  /** HS256 approval-token secret shared by control and the gateway: at least 32 bytes (RFC 7518 §3.2). */
  COUNTERSIGN_APPROVAL_SECRET: z.string().min(32).optional(),
  COUNTERSIGN_APPROVAL_TOKEN_ISSUER: z.string().min(1).default("obol-control"),
  COUNTERSIGN_APPROVAL_TOKEN_AUDIENCE: z.string().min(1).default("obol-gateway"),
  /** The Redis stream held tool calls travel on (tests give each file its own). */
  COUNTERSIGN_APPROVAL_STREAM: z.string().min(1).default("stream:approvals"),
  COUNTERSIGN_GATEWAY_URL: z.string().url().optional(),
  COUNTERSIGN_GATEWAY_SERVICE_TOKEN: z.string().min(16).optional(),
  COUNTERSIGN_INBOX_URL: z.string().url().optional(),
  /**
   * "on" mounts the gateway (tools/call, the agent's status read, resume) on this server. Default:
   * on in the embedded default (no DATABASE_URL), off otherwise.
   */
  COUNTERSIGN_GATEWAY_EMBEDDED: z.enum(["on", "off"]).optional(),
  /** "all" (default) runs background workers in the API process; "none" leaves them to `npm run worker`. */
  COUNTERSIGN_WORKERS: z.enum(["all", "none"]).default("all"),
  COUNTERSIGN_INGEST_INTERVAL_MS: z.coerce.number().int().positive().default(10_000),
  COUNTERSIGN_DELIVERY_INTERVAL_MS: z.coerce.number().int().positive().default(10_000),
  /** Pending stream entries idle this long are reclaimed from a crashed consumer. */
  COUNTERSIGN_INGEST_CLAIM_IDLE_MS: z.coerce.number().int().positive().default(60_000),
  /**
   * A held call whose request has not reached the inbox this long after it was held is put back
   * on the approval stream from its durable record (the stream lost it: Redis restarted empty).
   */
  COUNTERSIGN_HELD_REPUBLISH_AFTER_MS: z.coerce.number().int().positive().default(30_000),
  /** Retry-After (seconds) on answers refused because PostgreSQL or Redis is unreachable. */
  COUNTERSIGN_UNAVAILABLE_RETRY_AFTER_S: z.coerce.number().int().positive().default(5),
  COUNTERSIGN_SEED_DEMO: z.enum(["auto", "never"]).default("auto"),
  /** The largest /graphql request body and WebSocket message, in bytes (HTTP 413 / close 1009). */
  COUNTERSIGN_MAX_BODY_BYTES: z.coerce.number().int().min(1024).default(1_048_576),
  /**
   * Comma-separated addresses or CIDR ranges of the proxies in front (a load balancer): from a
   * peer in it, the client's address for the unauthenticated rate limits is read from
   * X-Forwarded-For. Empty (default): the socket's peer, whatever the header says.
   */
  COUNTERSIGN_TRUSTED_PROXIES: z.string().default(""),
  /**
   * After SIGTERM, how long /readyz answers 503 while the node keeps serving, so the balancer's
   * health checks take it out before it stops accepting.
   */
  COUNTERSIGN_DRAIN_UNREADY_MS: z.coerce.number().int().min(0).max(20_000).default(5_000),
  PORT: z.coerce.number().int().min(0).max(65535).default(4000),
  HOST: z.string().default("0.0.0.0"),
  /** Requests (and WebSocket operations) per second per token, or per client address without one; 0 turns the limit off. */
  COUNTERSIGN_RATE_LIMIT_RPS: z.coerce.number().min(0).default(50),
  /** Requests a token may send at once above the steady rate (the bucket's size); default twice the rate. */
  COUNTERSIGN_RATE_LIMIT_BURST: z.coerce.number().int().min(1).optional(),
  /** Open WebSocket operations (subscriptions) per token on one process; 0 turns the cap off. */
  COUNTERSIGN_MAX_SUBSCRIPTIONS_PER_TOKEN: z.coerce.number().int().min(0).default(100),
  /** A WebSocket that has not sent connection_init this long after opening is closed (4408). */
  COUNTERSIGN_WS_INIT_TIMEOUT_MS: z.coerce.number().int().positive().default(3_000),
  /** When set, GET /metrics answers only `Authorization: Bearer <this>`. */
  COUNTERSIGN_METRICS_TOKEN: z.string().min(16).optional(),
  /** Comma-separated origins allowed to call the API from a browser (CORS); empty: same origin only. */
  COUNTERSIGN_CORS_ORIGINS: z.string().default(""),
  /**
   * Comma-separated origins a browser page may call the MCP gateway from. A gateway request whose
   * Origin header names any other (or `null`) is 403; requests without Origin (agents) pass.
   * Empty (default): only the origin of COUNTERSIGN_PUBLIC_URL, when that is set.
   */
  COUNTERSIGN_GATEWAY_ALLOWED_ORIGINS: z.string().default(""),
  /** Gateway requests per second per virtual key, or per client address without a live one; 0 turns the limit off. */
  COUNTERSIGN_GATEWAY_RATE_LIMIT_RPS: z.coerce.number().min(0).default(20),
  /** Gateway requests a key may send at once above the steady rate; default twice the rate. */
  COUNTERSIGN_GATEWAY_RATE_LIMIT_BURST: z.coerce.number().int().min(1).optional(),
  /**
   * Requests per second per client address on the routes third parties post signed bodies to
   * (Slack's clicks, HCP Terraform's run tasks, GitHub's events), before the body is read; 0 turns
   * the limit off. One vendor posts from few addresses for every organization: keep it generous.
   */
  COUNTERSIGN_INTEGRATION_RATE_LIMIT_RPS: z.coerce.number().min(0).default(50),
  /** Integration requests an address may send at once above the steady rate; default twice the rate. */
  COUNTERSIGN_INTEGRATION_RATE_LIMIT_BURST: z.coerce.number().int().min(1).optional(),
  /**
   * "1" lets webhooks deliver to loopback and private addresses (off: refused). Link-local
   * (cloud metadata) and the other never-allowed ranges stay refused (src/domain/address-policy.ts).
   */
  COUNTERSIGN_WEBHOOK_ALLOW_PRIVATE: z.enum(["0", "1"]).default("0"),
  /**
   * "1" lets connections' upstream MCP servers be on loopback and private addresses (off:
   * refused at save and at connect). Its own flag: an operator running internal MCP servers
   * need not open webhooks to the internal network too.
   */
  COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE: z.enum(["0", "1"]).default("0"),
  /** Seals webhook signing secrets at rest (AES-256-GCM); falls back to COUNTERSIGN_APPROVAL_SECRET. */
  COUNTERSIGN_WEBHOOK_SECRET_KEY: z.string().min(32).optional(),
  COUNTERSIGN_WEBHOOK_INTERVAL_MS: z.coerce.number().int().positive().default(2_000),
  /** Delivery attempts before a delivery is marked failed (redeliverWebhook starts it again). */
  COUNTERSIGN_WEBHOOK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(50).default(8),
  /** The first retry's delay; each further retry doubles it (capped at one hour). */
  COUNTERSIGN_WEBHOOK_RETRY_BASE_MS: z.coerce.number().int().positive().default(10_000),
  COUNTERSIGN_WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
  /**
   * Comma-separated hosts a Slack click's response_url may name (the message is updated there);
   * any other is refused and the click changes nothing. Slack's own is hooks.slack.com.
   */
  COUNTERSIGN_SLACK_RESPONSE_HOSTS: z.string().default("hooks.slack.com"),
  /**
   * "1" lets a response_url be http: and on loopback or private addresses (a local stand-in for
   * Slack); off, it must be https: on a public address. Never-allowed ranges stay refused.
   */
  COUNTERSIGN_SLACK_ALLOW_PRIVATE: z.enum(["0", "1"]).default("0"),
  /**
   * Comma-separated hosts an HCP Terraform run task's plan_json_api_url and task_result_callback_url
   * may name (Terraform Enterprise: its own host); any other is refused. HCP Terraform: app.terraform.io, and archivist.terraform.io where its plan downloads redirect.
   */
  COUNTERSIGN_HCP_HOSTS: z.string().default("app.terraform.io,archivist.terraform.io"),
  /**
   * "1" lets those URLs be http: and on loopback or private addresses (a Terraform Enterprise on
   * the internal network, or a local stand-in); off, https: on public addresses. Never-allowed ranges stay refused.
   */
  COUNTERSIGN_HCP_ALLOW_PRIVATE: z.enum(["0", "1"]).default("0"),
  /** How often the run task worker looks at open run tasks' gates and due callbacks. */
  COUNTERSIGN_HCP_INTERVAL_MS: z.coerce.number().int().positive().default(2_000),
  /**
   * How long after HCP's request a gate still waiting is reported `failed` ("approval still
   * pending"). HCP errors a task whose request runs past 60 minutes: at most that, default 55.
   */
  COUNTERSIGN_HCP_RESULT_DEADLINE_MS: z.coerce.number().int().positive().max(3_600_000).default(3_300_000),
  /**
   * The GitHub REST API a GitHub App integration talks to (installation tokens, deployment
   * protection rule answers): https://api.github.com, or a GitHub Enterprise Server's
   * https://<host>/api/v3. A callback URL GitHub sends is answered only when it is under it.
   */
  COUNTERSIGN_GITHUB_API_URL: z.string().url().default("https://api.github.com"),
  /**
   * "1" lets the GitHub API be http: and on loopback or private addresses (a GitHub Enterprise
   * Server inside the network, a local stand-in in tests); off, refused. Never-allowed ranges stay refused.
   */
  COUNTERSIGN_GITHUB_ALLOW_PRIVATE: z.enum(["0", "1"]).default("0"),
  /** How often waiting deployment protection requests are matched to plans and their gates read. */
  COUNTERSIGN_GITHUB_INTERVAL_MS: z.coerce.number().int().positive().default(5_000),
  /** Live personal organizations one person (one email) may own at once, across every organization they open them from. */
  COUNTERSIGN_PERSONAL_ORGS_PER_PERSON: z.coerce.number().int().min(0).default(3),
  /** Personal organizations one person may open in a burst, and per hour after it (in-process, per API process). */
  COUNTERSIGN_PERSONAL_ORG_CREATE_BURST: z.coerce.number().int().min(1).default(3),
  COUNTERSIGN_PERSONAL_ORG_CREATE_PER_HOUR: z.coerce.number().min(0).default(6),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});

export type Config = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new Error(`Invalid environment:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  return {
    database: e.DATABASE_URL
      ? ({ kind: "postgres", url: e.DATABASE_URL, schema: e.DATABASE_SCHEMA } as const)
      : ({ kind: "pglite", dataDir: path.resolve(e.COUNTERSIGN_DATA_DIR, "pgdata") } as const),
    redisUrl: e.REDIS_URL,
    limitsKeyPrefix: e.COUNTERSIGN_LIMITS_KEY_PREFIX,
    dataDir: path.resolve(e.COUNTERSIGN_DATA_DIR),
    bootstrapToken: e.COUNTERSIGN_BOOTSTRAP_TOKEN,
    publicUrl: e.COUNTERSIGN_PUBLIC_URL,
    approvalSecret: e.COUNTERSIGN_APPROVAL_SECRET,
    approvalTokenIssuer: e.COUNTERSIGN_APPROVAL_TOKEN_ISSUER,
    approvalTokenAudience: e.COUNTERSIGN_APPROVAL_TOKEN_AUDIENCE,
    approvalStream: e.COUNTERSIGN_APPROVAL_STREAM,
    gatewayEmbedded: e.COUNTERSIGN_GATEWAY_EMBEDDED ? e.COUNTERSIGN_GATEWAY_EMBEDDED === "on" : !e.DATABASE_URL,
    gatewayUrl: e.COUNTERSIGN_GATEWAY_URL,
    gatewayServiceToken: e.COUNTERSIGN_GATEWAY_SERVICE_TOKEN,
    inboxUrl: e.COUNTERSIGN_INBOX_URL,
    workers: e.COUNTERSIGN_WORKERS,
    ingestIntervalMs: e.COUNTERSIGN_INGEST_INTERVAL_MS,
    deliveryIntervalMs: e.COUNTERSIGN_DELIVERY_INTERVAL_MS,
    ingestClaimIdleMs: e.COUNTERSIGN_INGEST_CLAIM_IDLE_MS,
    heldRepublishAfterMs: e.COUNTERSIGN_HELD_REPUBLISH_AFTER_MS,
    unavailableRetryAfterSeconds: e.COUNTERSIGN_UNAVAILABLE_RETRY_AFTER_S,
    seedDemo: e.COUNTERSIGN_SEED_DEMO,
    maxBodyBytes: e.COUNTERSIGN_MAX_BODY_BYTES,
    port: e.PORT,
    trustedProxies: parseProxies(e.COUNTERSIGN_TRUSTED_PROXIES),
    drainUnreadyMs: e.COUNTERSIGN_DRAIN_UNREADY_MS,
    host: e.HOST,
    logLevel: e.LOG_LEVEL,
    rateLimit: {
      rps: e.COUNTERSIGN_RATE_LIMIT_RPS,
      burst: e.COUNTERSIGN_RATE_LIMIT_BURST ?? Math.max(1, Math.ceil(e.COUNTERSIGN_RATE_LIMIT_RPS * 2)),
      maxSubscriptionsPerToken: e.COUNTERSIGN_MAX_SUBSCRIPTIONS_PER_TOKEN,
    },
    wsInitTimeoutMs: e.COUNTERSIGN_WS_INIT_TIMEOUT_MS,
    metricsToken: e.COUNTERSIGN_METRICS_TOKEN,
    corsOrigins: parseOrigins("COUNTERSIGN_CORS_ORIGINS", e.COUNTERSIGN_CORS_ORIGINS),
    /** The outbound address policy for connections' upstreams (src/domain/address-policy.ts). */
    upstreams: { allowPrivate: e.COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE === "1" },
    personalOrganizations: {
      perPerson: e.COUNTERSIGN_PERSONAL_ORGS_PER_PERSON,
      createBurst: e.COUNTERSIGN_PERSONAL_ORG_CREATE_BURST,
      createPerHour: e.COUNTERSIGN_PERSONAL_ORG_CREATE_PER_HOUR,
    },
    gatewayEdge: {
      allowedOrigins: [
        ...new Set([
          ...parseOrigins("COUNTERSIGN_GATEWAY_ALLOWED_ORIGINS", e.COUNTERSIGN_GATEWAY_ALLOWED_ORIGINS),
          ...(e.COUNTERSIGN_PUBLIC_URL ? [new URL(e.COUNTERSIGN_PUBLIC_URL).origin] : []),
        ]),
      ],
      rps: e.COUNTERSIGN_GATEWAY_RATE_LIMIT_RPS,
      burst: e.COUNTERSIGN_GATEWAY_RATE_LIMIT_BURST ?? Math.max(1, Math.ceil(e.COUNTERSIGN_GATEWAY_RATE_LIMIT_RPS * 2)),
    },
    integrationEdge: {
      rps: e.COUNTERSIGN_INTEGRATION_RATE_LIMIT_RPS,
      burst: e.COUNTERSIGN_INTEGRATION_RATE_LIMIT_BURST ?? Math.max(1, Math.ceil(e.COUNTERSIGN_INTEGRATION_RATE_LIMIT_RPS * 2)),
    },
    webhooks: {
      allowPrivate: e.COUNTERSIGN_WEBHOOK_ALLOW_PRIVATE === "1",
      secretKey: e.COUNTERSIGN_WEBHOOK_SECRET_KEY ?? e.COUNTERSIGN_APPROVAL_SECRET,
      intervalMs: e.COUNTERSIGN_WEBHOOK_INTERVAL_MS,
      maxAttempts: e.COUNTERSIGN_WEBHOOK_MAX_ATTEMPTS,
      retryBaseMs: e.COUNTERSIGN_WEBHOOK_RETRY_BASE_MS,
      timeoutMs: e.COUNTERSIGN_WEBHOOK_TIMEOUT_MS,
    },
    slack: {
      responseHosts: e.COUNTERSIGN_SLACK_RESPONSE_HOSTS.split(",").map((h) => h.trim().toLowerCase()).filter(Boolean),
      allowPrivate: e.COUNTERSIGN_SLACK_ALLOW_PRIVATE === "1",
      timeoutMs: e.COUNTERSIGN_WEBHOOK_TIMEOUT_MS,
    },
    /** HCP Terraform run tasks (src/services/hcp-run-task.ts); retries as webhooks' (maxAttempts, retryBaseMs, timeoutMs). */
    hcp: {
      hosts: e.COUNTERSIGN_HCP_HOSTS.split(",").map((h) => h.trim().toLowerCase()).filter(Boolean),
      allowPrivate: e.COUNTERSIGN_HCP_ALLOW_PRIVATE === "1",
      intervalMs: e.COUNTERSIGN_HCP_INTERVAL_MS,
      resultDeadlineMs: e.COUNTERSIGN_HCP_RESULT_DEADLINE_MS,
      maxAttempts: e.COUNTERSIGN_WEBHOOK_MAX_ATTEMPTS,
      retryBaseMs: e.COUNTERSIGN_WEBHOOK_RETRY_BASE_MS,
      timeoutMs: e.COUNTERSIGN_WEBHOOK_TIMEOUT_MS,
    },
    /** GitHub deployment protection rules; answers retry like webhooks (attempts, backoff, timeout). */
    github: {
      apiUrl: e.COUNTERSIGN_GITHUB_API_URL.replace(/\/+$/, ""),
      allowPrivate: e.COUNTERSIGN_GITHUB_ALLOW_PRIVATE === "1",
      intervalMs: e.COUNTERSIGN_GITHUB_INTERVAL_MS,
      maxAttempts: e.COUNTERSIGN_WEBHOOK_MAX_ATTEMPTS,
      retryBaseMs: e.COUNTERSIGN_WEBHOOK_RETRY_BASE_MS,
      timeoutMs: e.COUNTERSIGN_WEBHOOK_TIMEOUT_MS,
    },
  };
}

function parseProxies(raw: string) {
  try {
    return parseTrustedProxies(raw);
  } catch (error) {
    throw new Error(`Invalid environment:\n  COUNTERSIGN_TRUSTED_PROXIES: ${(error as Error).message}`);
  }
}

/** `https://a.example, https://b.example` → exact origins (scheme://host[:port], no path); `*` is refused. */
function parseOrigins(variable: string, raw: string): string[] {
  const origins = raw.split(",").map((o) => o.trim()).filter(Boolean);
  for (const origin of origins) {
    let parsed: URL | null = null;
    try {
      parsed = new URL(origin);
    } catch {}
    if (!parsed || parsed.origin !== origin) {
      throw new Error(`Invalid environment:\n  ${variable}: "${origin}" is not an origin like https://app.example.com`);
    }
  }
  return origins;
}
