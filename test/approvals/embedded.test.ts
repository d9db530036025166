import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDeliveryWorker } from "../../src/workers/delivery.js";
import { createIngestWorker } from "../../src/workers/ingest.js";
import { createApprovalPolicy } from "../../src/services/approvals/policies.js";
import { voteOnApprovalRequest } from "../../src/services/approvals/requests.js";
import type { Viewer } from "../../src/auth/authenticate.js";
import { Authz } from "../../src/authz/authz.js";
import { createCedarGate, DEFAULT_GATEWAY_POLICIES } from "../../src/gateway/cedar-gate.js";
import { createGateway } from "../../src/gateway/gateway.js";
import { createGatewayHttpHandler } from "../../src/gateway/http.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { createPostgresGatewayStore } from "../../src/gateway/postgres-store.js";
import { openPglite, type Database } from "../../src/infra/db.js";
import { createEventBus, type EventBus } from "../../src/infra/events.js";
import { createLogger } from "../../src/infra/logger.js";
import { migrate } from "../../src/infra/migrate.js";
import { reconcileSystemRoles, systemRoleId } from "../../src/services/system-roles.js";
import { TEST_REDIS_URL } from "../helpers/env.js";
import { createUpstreamPool } from "../../src/gateway/upstream.js";
import { startUpstream, type Upstream } from "../helpers/mcp-upstream.js";
import { APPROVAL_SECRET, SERVICE_TOKEN } from "./world.js";

// The embedded default's database (PGlite: one connection every caller shares) runs the same
// held-call flow: a transaction that read through db.sql from inside itself would wait forever.

let dir: string;
let db: Database;
let events: EventBus;
let redis: Redis;
let server: Server;
let upstream: Upstream;
// The connection's upstream MCP server listens on 127.0.0.1: loopback is allowed for it.
const upstreams = createUpstreamPool({ approvalSecret: APPROVAL_SECRET, defaultTimeoutMs: 3_000, addresses: { allowPrivate: true } });
const stream = `stream:approvals:pglite-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "countersign-approvals-"));
  db = await openPglite(dir);
  await migrate(db.sql);
  await reconcileSystemRoles(db.prisma);
  events = createEventBus({});
  redis = new Redis(TEST_REDIS_URL);
  upstream = await startUpstream();
}, 120_000);

afterAll(async () => {
  server?.close();
  await upstreams.close();
  await upstream?.close();
  await redis?.del(stream);
  redis?.disconnect();
  await events?.close();
  await db?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("held tool calls on PGlite", () => {
  it("holds, files, takes two votes, delivers and executes once", async () => {
    const org = await db.prisma.organization.create({ data: { slug: "pglite", name: "pglite" } });
    const viewers: Viewer[] = [];
    for (const [i, role] of (["admin", "approval-reviewer", "approval-reviewer"] as const).entries()) {
      const user = await db.prisma.user.create({ data: { email: `u${i}@pglite.test`, name: `u${i}` } });
      // The first is the owner (a super admin): managing approval policies is owner-only.
      await db.prisma.membership.create({ data: { orgId: org.id, userId: user.id, isSuperAdmin: i === 0 } });
      await db.prisma.roleAssignment.create({ data: { orgId: org.id, userId: user.id, roleId: systemRoleId(role) } });
      viewers.push({ userId: user.id, orgId: org.id, tokenId: "t", name: user.name, email: user.email, isServiceAccount: false });
    }
    const as = (v: Viewer) => ({ db, events, authz: new Authz(db.sql, v) });
    const stack = await db.prisma.stack.create({ data: { orgId: org.id, name: "s" } });
    const ws = await db.prisma.workspace.create({ data: { orgId: org.id, stackId: stack.id, name: "w", environment: "prod", production: true } });
    await db.prisma.connection.create({ data: { orgId: org.id, workspaceId: ws.id, name: "github", provider: "github", url: upstream.url } });
    const key = generateVirtualKey();
    await db.prisma.virtualKey.create({ data: { orgId: org.id, workspaceId: ws.id, name: "k", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: viewers[0]!.userId } });
    await createApprovalPolicy(as(viewers[0]!), {
      workspaceId: ws.id,
      name: "two",
      rules: [{ id: "two", effect: "allow", tools: ["github.*"], environments: ["prod"], roles: [systemRoleId("approval-reviewer")], count: 2 }],
    });

    const gateway = createGateway({
      store: createPostgresGatewayStore(db.prisma),
      stream: redis,
      streamKey: stream,
      gate: createCedarGate(DEFAULT_GATEWAY_POLICIES),
      approvalSecret: APPROVAL_SECRET,
      serviceToken: SERVICE_TOKEN,
      upstreams,
    });
    const handler = createGatewayHttpHandler(gateway);
    server = createServer((req, res) => void handler(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));

    const held = await gateway.handleToolCall({ authorization: `Bearer ${key}`, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: "r" } } } });
    expect(held.status).toBe(423);
    const id = (held.outcome as { approvalId: string }).approvalId;
    const logger = createLogger("silent");
    expect(await createIngestWorker({ db, redis, events, logger, streamKey: stream }).tick()).toMatchObject({ inserted: 1 });
    await voteOnApprovalRequest(as(viewers[1]!), { requestId: id, decision: "approve", expectedRevision: 1 });
    await voteOnApprovalRequest(as(viewers[2]!), { requestId: id, decision: "approve", expectedRevision: 2 });
    const delivery = createDeliveryWorker({ db, events, logger, approvalSecret: APPROVAL_SECRET, serviceToken: SERVICE_TOKEN, gatewayUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}` });
    expect(await delivery.tick()).toEqual([{ kind: "delivered", replayed: false }]);
    expect(upstream.calls.get("delete_repo")).toBe(1);
    expect(await db.prisma.approvalRequest.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: "approved", executionStatus: "executed" });
  }, 60_000);
});
