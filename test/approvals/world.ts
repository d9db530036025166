import { createServer, type Server } from "node:http";
import { Redis } from "ioredis";
import { approvalAuthority } from "../../src/services/approvals/authority.js";
import { createDeliveryWorker, type DeliveryOptions } from "../../src/workers/delivery.js";
import { createIngestWorker, type IngestOptions } from "../../src/workers/ingest.js";
import { validateApprovalRules, type ApprovalRule } from "../../src/domain/approvals/policy.js";
import { createCedarGate, DEFAULT_GATEWAY_POLICIES } from "../../src/gateway/cedar-gate.js";
import { createGateway, type GatewayOptions, type TaskOptions, type ToolCallInput } from "../../src/gateway/gateway.js";
import { createGatewayHttpHandler } from "../../src/gateway/http.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { createPostgresGatewayStore } from "../../src/gateway/postgres-store.js";
import { createPostgresTaskStore } from "../../src/gateway/postgres-tasks.js";
import { reviewProgress } from "../../src/services/approvals/review-progress.js";
import { withdrawApprovalRequest } from "../../src/services/approvals/withdraw.js";
import { approvalWake } from "../../src/workers/approval-wake.js";
import { createUpstreamPool } from "../../src/gateway/upstream.js";
import { argumentHash } from "../../src/domain/canonical.js";
import { createLogger } from "../../src/infra/logger.js";
import type { Prisma } from "../../src/generated/prisma/client.js";
import { systemRoleId } from "../../src/services/system-roles.js";
import { TEST_REDIS_URL } from "../helpers/env.js";
import { addMember, createOrg, type MemberFixture, type OrgFixture } from "../helpers/fixtures.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { startUpstream, type UpstreamCall, type UpstreamRequestHook } from "../helpers/mcp-upstream.js";

/**
 * One org with a prod workspace, its connection and virtual key, three reviewers holding the
 * approval-reviewer role, an allow rule asking two of them for `github.*` in prod, a gateway
 * (the library, on its own HTTP server) whose connection runs on a real upstream MCP server
 * (test/helpers/mcp-upstream.ts) that records every call it runs, and the two workers — all on
 * the real PostgreSQL and Redis, each test file on its own schema and stream.
 */

/**
 * One call the world's upstream ran: the tool and arguments it received, and the held call it
 * was (the approval whose execution was claimed for these arguments when it ran; null for a
 * call allowed outright), the connection it came through and so its concrete tool
 * (`<connection>.<tool>`), where known.
 */
export type Execution = Omit<UpstreamCall, "tool"> & { tool: string; upstreamTool: string; approvalId: string | null; connectionId: string | null };

export const APPROVAL_SECRET = "test-approval-secret-0123456789abcdef";
export const SERVICE_TOKEN = "test-gateway-service-token-0123456789";
export const REVIEWER_ROLE = systemRoleId("approval-reviewer");

export const TWO_REVIEWERS: ApprovalRule[] = [
  { id: "prod-github-two", effect: "allow", tools: ["github.*"], environments: ["prod"], roles: [REVIEWER_ROLE], userIds: [], count: 2 },
];

export type World = Awaited<ReturnType<typeof createWorld>>;

export async function createWorld(
  options: {
    gateway?: Partial<GatewayOptions>;
    delivery?: Partial<DeliveryOptions>;
    ingest?: Partial<IngestOptions>;
    rules?: ApprovalRule[];
    env?: Record<string, string>;
    tasks?: Partial<TaskOptions>;
    /** Sees every request the upstream receives (its headers and JSON-RPC body). */
    onUpstreamRequest?: UpstreamRequestHook;
  } = {},
) {
  // The worlds' upstreams listen on 127.0.0.1 (test/helpers/mcp-upstream.ts).
  const t: TestApp = await startTestApp({ env: { COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE: "1", ...options.env } });
  const { db } = t;
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  const streamKey = `stream:approvals:${t.schemaName}`;
  const logger = createLogger(process.env.TEST_LOG_LEVEL ?? "silent");
  const org: OrgFixture = await createOrg(db);
  const stack = await db.prisma.stack.create({ data: { orgId: org.orgId, name: `payments-${t.schemaName}`, authzGroups: ["team-payments"] } });
  const workspace = await db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: "payments-prod", environment: "prod", production: true } });
  const executions: Execution[] = [];
  const upstream = await startUpstream({
    onRequest: options.onUpstreamRequest,
    onCall: async (call) => {
      // The held call this is: its execution is claimed (Executing) before the upstream is called.
      const claimed = await db.prisma.gatewayExecution.findMany({ where: { state: "Executing" }, select: { approvalId: true } });
      const held = claimed.length
        ? await db.prisma.gatewayInvocation.findFirst({ where: { approvalId: { in: claimed.map((c) => c.approvalId) }, argumentHash: argumentHash(call.arguments), tool: { endsWith: `.${call.tool}` } } })
        : null;
      const via = held ? null : await db.prisma.connection.findFirst({ where: { url: new URL(call.path, upstream.url).href }, select: { id: true, name: true } });
      executions.push({
        ...call,
        tool: held?.tool ?? (via ? `${via.name}.${call.tool}` : call.tool),
        upstreamTool: call.tool,
        approvalId: held?.approvalId ?? null,
        connectionId: held?.connectionId ?? via?.id ?? null,
      });
    },
  });
  // Its upstream listens on 127.0.0.1: loopback is allowed, as COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE=1 does.
  const upstreams = createUpstreamPool({ approvalSecret: APPROVAL_SECRET, defaultTimeoutMs: 3_000, addresses: { allowPrivate: true } });
  const connection = await db.prisma.connection.create({ data: { orgId: org.orgId, workspaceId: workspace.id, name: "github", provider: "github", url: upstream.url } });
  const keyPlaintext = generateVirtualKey();
  const virtualKey = await db.prisma.virtualKey.create({
    data: { orgId: org.orgId, workspaceId: workspace.id, name: "deploy-agent", keyHash: hashVirtualKey(keyPlaintext), prefix: virtualKeyPrefix(keyPlaintext), createdById: org.adminId },
  });
  const reviewers: MemberFixture[] = [];
  for (let i = 0; i < 3; i++) reviewers.push(await addMember(db, org.orgId, { role: "approval-reviewer", name: `reviewer-${i + 1}` }));
  const policy = await setPolicy(options.rules ?? TWO_REVIEWERS);

  async function setPolicy(rules: ApprovalRule[]) {
    const valid = validateApprovalRules(rules);
    if (!valid.ok) throw new Error(JSON.stringify(valid.issues));
    return db.prisma.approvalPolicy.create({
      data: { orgId: org.orgId, workspaceId: workspace.id, name: `policy-${Math.random().toString(36).slice(2, 8)}`, rules: valid.rules as unknown as Prisma.InputJsonValue },
    });
  }

  // Held calls as MCP tasks, as Countersign wires them (src/workers/runtime.ts), when asked for.
  const wake = approvalWake(t.events);
  const gatewayOptions = (tasks: Partial<TaskOptions> = {}, extra: Partial<GatewayOptions> = {}): GatewayOptions => ({
    // As Countersign wires it (src/workers/runtime.ts): the database's own driver for the reads an agent repeats.
    store: createPostgresGatewayStore(db.prisma, { sql: db.sql, authority: (id) => approvalAuthority(db.sql, id) }),
    stream: redis,
    streamKey,
    gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
    approvalSecret: APPROVAL_SECRET,
    serviceToken: SERVICE_TOKEN,
    inboxUrl: "https://countersign.test/inbox/{approval_id}",
    upstreams,
    ...(options.tasks ? { tasks: { store: createPostgresTaskStore(db.sql), reviewProgress: (id: string) => reviewProgress(db.sql, id), withdraw: (id: string) => withdrawApprovalRequest(db, t.events, id), wake, ...options.tasks, ...tasks } } : {}),
    ...options.gateway,
    ...extra,
  });

  /** A gateway instance (the library on an HTTP server of its own) on the world's database, stream and upstream. */
  async function serveGateway(tasks: Partial<TaskOptions> = {}, port = 0, extra: Partial<GatewayOptions> = {}) {
    const instance = createGateway(gatewayOptions(tasks, extra));
    const handler = createGatewayHttpHandler(instance);
    const server: Server = createServer((req, res) => {
      void handler(req, res).then((handled) => {
        if (!handled) res.writeHead(404).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
    const address = server.address();
    return {
      gateway: instance,
      url: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`,
      close: () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections?.();
        }),
    };
  }

  const served = await serveGateway();
  const gateway = served.gateway;
  const gatewayUrl = served.url;

  const ingest = createIngestWorker({ db, redis, events: t.events, logger, streamKey, claimIdleMs: 60_000, ...options.ingest });
  const delivery = createDeliveryWorker({
    db,
    events: t.events,
    logger,
    approvalSecret: APPROVAL_SECRET,
    gatewayUrl,
    serviceToken: SERVICE_TOKEN,
    retryBaseMs: 20,
    httpTimeoutMs: 5_000,
    intervalMs: 0, // ticks are driven by the tests; 0 sweeps expiry on every one
    ...options.delivery,
  });

  /** A destructive prod call from the agent, through the gateway library. */
  function callTool(args: Record<string, unknown> = { repo: "acme/payments" }, extra: Partial<ToolCallInput> = {}, tool = "github.delete_repo") {
    return gateway.handleToolCall({
      authorization: `Bearer ${keyPlaintext}`,
      body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: tool, arguments: args, _meta: { amount_usd: 125 } } },
      ...extra,
    });
  }

  async function streamLength(): Promise<number> {
    return redis.xlen(streamKey);
  }

  return {
    t,
    db,
    redis,
    streamKey,
    logger,
    org,
    stack,
    workspace,
    connection,
    virtualKey,
    keyPlaintext,
    reviewers,
    policy,
    setPolicy,
    executions,
    upstream,
    upstreams,
    gateway,
    gatewayUrl,
    serveGateway,
    /** What wakes waiting tasks/result calls (the event bus's approval:changed). */
    wake,
    ingest,
    delivery,
    callTool,
    streamLength,
    async close() {
      await served.close();
      await wake.close();
      await upstreams.close();
      await upstream.close();
      await redis.del(streamKey).catch(() => 0);
      redis.disconnect();
      await t.close();
    },
  };
}

export const VOTE = `mutation Vote($input: VoteOnApprovalRequestInput!) {
  voteOnApprovalRequest(input: $input) {
    __typename
    ... on MutationVoteOnApprovalRequestSuccess { data { request { id status executionStatus revision } vote { decision reviewer { id } } } }
    ... on ConflictError { code message currentRevision }
    ... on InvalidStateError { code message state }
    ... on PermissionDeniedError { code message }
    ... on NotFoundError { code message }
    ... on ValidationError { code issues { field message } }
  }
}`;

export async function vote(world: World, reviewer: { token: string }, requestId: string, decision: "APPROVE" | "DENY" = "APPROVE", expectedRevision?: number) {
  const revision = expectedRevision ?? (await world.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id: requestId } })).revision;
  const result = await world.t.gql(VOTE, { input: { requestId, decision, expectedRevision: revision } }, reviewer.token);
  if (result.errors) throw new Error(JSON.stringify(result.errors));
  return result.data.voteOnApprovalRequest;
}

/** Holds a call and files it: the approval id of a pending request. */
export async function heldAndFiled(world: World, args?: Record<string, unknown>): Promise<string> {
  const held = await world.callTool(args);
  if (held.outcome.kind !== "approval_required") throw new Error(`expected a hold, got ${JSON.stringify(held.body)}`);
  await world.ingest.tick();
  return held.outcome.approvalId;
}
