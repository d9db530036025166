// The fleet as docs/operations.md describes it, run for real: Debian's HAProxy with the repo's own
// deploy/haproxy.cfg (the addresses given as the environment variables the file reads), two API
// nodes and one worker node as child processes started the documented way, on the shared
// PostgreSQL (a fresh schema) and a Redis of the test's own (the nodes' event channels are not
// prefixed, so a shared Redis would mix them with other runs). Every request of the test goes
// through HAProxy, as a client's would.
//
// It proves: one token's rate limit, one virtual key's gateway limit and one person's
// personal-organization creation hold across both nodes; a rolling restart (each API node
// SIGTERMed, restarted and back in rotation, then the worker node, replaced by one started
// beside it) under a steady stream of requests, held calls executed on a real MCP upstream and
// open graphql-ws subscriptions fails no request, retries nothing in HAProxy (the drain alone
// makes it clean), strands no lease, and leaves every subscriber on the gate's final state; and
// HAProxy keeps no idle connection to a node for a request to race the node's idle timeout on.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createClient, type Client } from "graphql-ws";
import { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { TEST_DATABASE_URL } from "../helpers/env.js";
import { addMember, createOrg } from "../helpers/fixtures.js";
import { newSchemaName } from "../helpers/harness.js";
import { startTalkingUpstream, startUpstream, type TalkingUpstream, type Upstream } from "../helpers/mcp-upstream.js";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
// @ts-expect-error: a plain ES module script without types
import { currentBundle } from "../../scripts/bundle.mjs";
import { freePort, sleep, startRedis, until, type PrivateRedis } from "../faults/harness.js";
import { APPROVAL_SECRET, APPROVE_PLAN, SERVICE_TOKEN, seedWorld, SUBMIT, VOTE, type FaultWorld } from "../faults/world.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const HAPROXY_CFG = path.join(ROOT, "deploy/haproxy.cfg");

// The limits every node runs with: one token may send 5 a second in bursts of 40, a virtual key
// the same at the gateway, a person may open 2 personal organizations at once and 1 an hour.
// A burst of twice 40 sent at once is refused in part unless it takes 8 s to send (what refills
// meanwhile); counted per node, none of it would be.
const RPS = 5;
const BURST = 40;
// HAProxy checks every 250 ms here (COUNTERSIGN_LB_CHECK_INTER; production's default is 1 s):
// a node is out 2 failed checks after SIGTERM, about 0.5 s, 2.5 s at worst (a check that started
// just before may take its whole `timeout check 2s`), back after 2 passing ones. The unready period
// keeps fall x inter + timeout check below it, as deploy/haproxy.cfg asks; the node stops
// accepting only after it.
const CHECK_INTER = "250ms";
const UNREADY_MS = 3_000;

const VIEWER = `query Viewer { viewer { id } }`;
const GATE = `query Gate($planId: ID!) { gate(planId: $planId) { passed evaluation { approvalsCounted } } }`;
const PLAN_GATE = `subscription PlanGate($planId: ID!) { planGate(planId: $planId) { planId version passed evaluation { approvalsCounted } } }`;
const CREATE_PERSONAL = `mutation($input: CreatePersonalOrganizationInput!) {
  createPersonalOrganization(input: $input) { __typename }
}`;

type GateState = { planId: string; version: number; passed: boolean; evaluation: { approvalsCounted: number } };

// ── Processes ────────────────────────────────────────────────────────────────────────────

interface Node {
  name: string;
  child: ChildProcess;
  output(): string;
  /** SIGTERM, as a deploy sends it: resolves with the exit code once the process is gone. */
  terminate(): Promise<number | null>;
}

const children: ChildProcess[] = [];
const T0 = Date.now();
/** FLEET_PHASES=1 prints when each node started and stopped (where the wall time goes). */
const phase = (what: string) => void (process.env.FLEET_PHASES && process.stderr.write(`[fleet ${((Date.now() - T0) / 1000).toFixed(1)} s] ${what}\n`));

function spawnNode(name: string, args: string[], env: Record<string, string>): Node {
  let out = "";
  const child = spawn("node", args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", LOG_LEVEL: "info", COUNTERSIGN_SEED_DEMO: "never", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    name,
    child,
    output: () => out,
    async terminate() {
      child.kill("SIGTERM");
      return exited;
    },
  };
}

async function readyz(port: number): Promise<number> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(3_000) })).status;
  } catch {
    return 0;
  }
}

/** An API node: `node scripts/start.mjs` (docs/operations.md), serving once /readyz answers 200. */
async function startApiNode(name: string, port: number, env: Record<string, string>): Promise<Node> {
  const node = spawnNode(name, ["scripts/start.mjs"], { ...env, PORT: String(port), HOST: "127.0.0.1", COUNTERSIGN_WORKERS: "none" });
  await until(async () => {
    if (node.child.exitCode !== null) throw new Error(`${name} exited: ${node.output().slice(-2000)}`);
    return (await readyz(port)) === 200;
  }, 90_000, `${name} ready`);
  phase(`${name} ready`);
  return node;
}

/** The worker node: `node --import tsx src/worker.ts` (what `npm run worker` execs). */
async function startWorkerNode(env: Record<string, string>): Promise<Node> {
  const node = spawnNode("worker", ["--import", "tsx", "src/worker.ts"], env);
  await until(() => {
    if (node.child.exitCode !== null) throw new Error(`worker exited: ${node.output().slice(-2000)}`);
    return node.output().includes("Countersign workers running");
  }, 90_000, "worker running");
  phase("worker running");
  return node;
}

/** HAProxy on deploy/haproxy.cfg, in the foreground; the file reads its addresses from these variables. */
async function startHaproxy(env: Record<string, string>): Promise<ChildProcess> {
  const check = spawnSync("haproxy", ["-c", "-f", HAPROXY_CFG], { env: { ...process.env, ...env }, encoding: "utf8" });
  if (check.status !== 0) throw new Error(`haproxy -c: ${check.stderr}${check.stdout}`);
  const child = spawn("haproxy", ["-db", "-f", HAPROXY_CFG], { env: { PATH: process.env.PATH ?? "", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let out = "";
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
  haproxyOutput = () => out;
  await until(async () => {
    if (child.exitCode !== null) throw new Error(`haproxy exited: ${out}`);
    return fetch(`http://127.0.0.1:${env.COUNTERSIGN_LB_STATS!.split(":")[1]}/stats;csv`).then((r) => r.ok, () => false);
  }, 10_000, "haproxy up");
  return child;
}

let haproxyOutput = () => "";

/** HAProxy's statistics (`/stats;csv`), one record per proxy and server. */
async function haproxyStats(port: number): Promise<Array<Record<string, string>>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/stats;csv`)).text();
  const [header, ...lines] = text.trim().split("\n");
  const names = header!.replace(/^# /, "").split(",");
  return lines.map((line) => Object.fromEntries(line.split(",").map((v, i) => [names[i]!, v])));
}

// ── The fleet ────────────────────────────────────────────────────────────────────────────

let redis: PrivateRedis;
let upstream: Upstream;
/** An upstream that asks the agent during a call (elicitation): the agent's answer is a POST of its own. */
let talking: TalkingUpstream;
let w: FaultWorld;
const schema = newSchemaName();
let lb: string;
let statsPort: number;
const apiPorts: number[] = [];
const api: Node[] = [];
let worker: Node;
let haproxy: ChildProcess;
let nodeEnv: Record<string, string>;
let workerEnv: Record<string, string>;
const clients: Client[] = [];

/** Waits until HAProxy sees every API node up (its checks passed `rise` times). */
const allUp = () =>
  until(async () => {
    const servers = (await haproxyStats(statsPort)).filter((r) => r.pxname === "api" && r.svname !== "BACKEND" && r.svname !== "FRONTEND");
    return servers.length === 2 && servers.every((s) => s.status === "UP");
  }, 30_000, "both API nodes UP in HAProxy");

beforeAll(async () => {
  // The server's bundle, built once here: the API nodes (scripts/start.mjs) then load it instead
  // of each building it at once on a cold cache, and every restart below loads the same file.
  [redis, upstream, talking] = await Promise.all([startRedis(), startUpstream(), startTalkingUpstream(), currentBundle()]);
  const tracing = await startTraceReceiver(upstream.url);
  const [lbPort, stats, api1, api2] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  lb = `http://127.0.0.1:${lbPort}`;
  phase(`balancer at ${lb}, API nodes at ${api1} and ${api2}`);
  statsPort = stats!;
  apiPorts.push(api1!, api2!);
  const common = {
    DATABASE_URL: TEST_DATABASE_URL,
    DATABASE_SCHEMA: schema,
    REDIS_URL: redis.url,
    COUNTERSIGN_APPROVAL_SECRET: APPROVAL_SECRET,
    COUNTERSIGN_GATEWAY_SERVICE_TOKEN: SERVICE_TOKEN,
    OTEL_EXPORTER_OTLP_ENDPOINT: tracing.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_BSP_SCHEDULE_DELAY: "200",
  };
  nodeEnv = {
    ...common,
    COUNTERSIGN_GATEWAY_EMBEDDED: "on",
    COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE: "1",
    // HAProxy connects from loopback: its X-Forwarded-For names the client.
    COUNTERSIGN_TRUSTED_PROXIES: "127.0.0.1",
    COUNTERSIGN_DRAIN_UNREADY_MS: String(UNREADY_MS),
    COUNTERSIGN_RATE_LIMIT_RPS: String(RPS),
    COUNTERSIGN_RATE_LIMIT_BURST: String(BURST),
    COUNTERSIGN_GATEWAY_RATE_LIMIT_RPS: String(RPS),
    COUNTERSIGN_GATEWAY_RATE_LIMIT_BURST: String(BURST),
    COUNTERSIGN_PERSONAL_ORGS_PER_PERSON: "100",
    COUNTERSIGN_PERSONAL_ORG_CREATE_BURST: "2",
    COUNTERSIGN_PERSONAL_ORG_CREATE_PER_HOUR: "1",
  };
  // The worker resumes approved calls at the gateway through the balancer, like any client.
  workerEnv = { ...common, COUNTERSIGN_GATEWAY_URL: lb, COUNTERSIGN_INGEST_INTERVAL_MS: "250", COUNTERSIGN_DELIVERY_INTERVAL_MS: "250" };
  // Everything at once: start order does not matter (each node migrates under an advisory lock,
  // HAProxy takes a node in once its checks pass).
  const [seeded, first, second, w0, proxy] = await Promise.all([
    seedWorld(TEST_DATABASE_URL, schema),
    startApiNode("api1", api1!, nodeEnv),
    startApiNode("api2", api2!, nodeEnv),
    startWorkerNode(workerEnv),
    startHaproxy({
      COUNTERSIGN_LB_BIND: `127.0.0.1:${lbPort}`,
      COUNTERSIGN_LB_STATS: `127.0.0.1:${statsPort}`,
      COUNTERSIGN_API_1: `127.0.0.1:${api1}`,
      COUNTERSIGN_API_2: `127.0.0.1:${api2}`,
      COUNTERSIGN_LB_CHECK_INTER: CHECK_INTER,
      ...(process.env.FLEET_PHASES ? { COUNTERSIGN_LB_LOG_LEVEL: "info" } : {}),
    }),
  ]);
  w = seeded;
  api.push(first, second);
  worker = w0;
  haproxy = proxy;
  // The workspace's connection runs its tools on the real upstream MCP server (through the
  // recording hop when traces are collected).
  await w.db.prisma.connection.updateMany({ where: { workspaceId: w.workspaceId }, data: { url: tracing.upstreamUrl } });
  await w.db.prisma.connection.create({ data: { orgId: w.orgId, workspaceId: w.workspaceId, name: "talk", provider: "github", url: talking.url } });
  await allUp();
}, 120_000);

afterAll(async () => {
  if (process.env.FLEET_PHASES) writeFileSync("/tmp/fleet-haproxy.log", haproxyOutput());
  for (const c of clients) await c.dispose();
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await upstream?.close();
  await talking?.close();
  await receiver?.close();
  await redis?.stop();
  await w?.db.sql.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
  await w?.db.close();
});

// ── Clients, all through HAProxy ─────────────────────────────────────────────────────────

async function gql(token: string, query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(`${lb}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const text = await res.text();
  let body: any = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = { raw: text };
  }
  return { status: res.status, body };
}

/** A tools/call through the gateway with a virtual key (the plain JSON-RPC POST). */
async function toolCall(key: string, name: string, args: Record<string, unknown>) {
  const res = await fetch(`${lb}/gateway/v1/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
  });
  const body = (await res.json().catch(() => null)) as any;
  return { status: res.status, body };
}

/** A graphql-ws subscriber to a plan's gate that reconnects as a client would (through HAProxy, to whichever node is up). */
function gateSubscriber(token: string, planId: string) {
  const states: GateState[] = [];
  const errors: unknown[] = [];
  let connections = 0;
  const client = createClient({
    url: `${lb.replace(/^http/, "ws")}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${token}` },
    lazy: false,
    retryAttempts: Number.POSITIVE_INFINITY,
    shouldRetry: () => true,
    retryWait: async () => void (await sleep(200)),
    on: { connected: () => void connections++ },
  });
  clients.push(client);
  client.subscribe<{ planGate: GateState }>(
    { query: PLAN_GATE, variables: { planId } },
    { next: (r) => (r.errors ? errors.push(r.errors) : r.data && states.push(r.data.planGate)), error: (e) => errors.push(e), complete: () => {} },
  );
  return { states, errors, connections: () => connections };
}

// ── The proofs ───────────────────────────────────────────────────────────────────────────

/** Sends `n` requests at once; how many were answered 200, how many 429, and in how many seconds. */
async function burstOf(n: number, send: () => Promise<number>) {
  const started = Date.now();
  const statuses = await Promise.all(Array.from({ length: n }, send));
  return { ok: statuses.filter((s) => s === 200).length, limited: statuses.filter((s) => s === 429).length, seconds: (Date.now() - started) / 1000, statuses };
}

/** Requests each API node has answered so far (HAProxy's per-server totals). */
const servedByNode = async () => (await haproxyStats(statsPort)).filter((r) => r.pxname === "api" && /^api\d$/.test(r.svname!)).map((r) => Number(r.stot));

describe("a fleet behind HAProxy (deploy/haproxy.cfg)", () => {
  // A flood can make a check miss its 2 s on a loaded machine: each proof starts with both nodes in.
  beforeEach(() => allUp());

  it("one token's burst of 40 is 40 across both nodes, not 40 on each", async () => {
    const m = await addMember(w.db, w.orgId, { role: "admin" });
    // Each node learns the token on its first request (charged to the client's address).
    for (let i = 0; i < 2; i++) {
      const res = await gql(m.token, VIEWER);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    const before = await servedByNode();
    const burst = await burstOf(2 * BURST, async () => (await gql(m.token, VIEWER)).status);
    const after = await servedByNode();
    // Round-robin gave each node its half; per-process limits would have let all 80 through.
    expect(after.map((n, i) => n - before[i]!)).toEqual([BURST, BURST]);
    expect(burst.ok + burst.limited).toBe(2 * BURST);
    // What was left of the burst after the two learning requests, plus what refilled meanwhile.
    expect(burst.ok).toBeLessThanOrEqual(BURST + Math.ceil(RPS * burst.seconds));
    expect(burst.limited).toBeGreaterThan(0);
  });

  it("one virtual key's gateway burst of 40 is 40 across both nodes", async () => {
    const key = generateVirtualKey();
    await w.db.prisma.virtualKey.create({
      data: { orgId: w.orgId, workspaceId: w.workspaceId, name: "burst", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: w.adminId },
    });
    // A read-only tool: it runs on the upstream at once. Each node proves the key live first.
    for (let i = 0; i < 2; i++) {
      const res = await toolCall(key, "github.list_repos", {});
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    const burst = await burstOf(2 * BURST, async () => (await toolCall(key, "github.list_repos", {})).status);
    expect(burst.ok + burst.limited).toBe(2 * BURST);
    expect(burst.ok).toBeLessThanOrEqual(BURST + Math.ceil(RPS * burst.seconds));
    expect(burst.limited).toBeGreaterThan(0);
  });

  it("an agent's answers to its upstream's questions reach the node whose call asked, whichever node HAProxy sends them to", async () => {
    const key = generateVirtualKey();
    await w.db.prisma.virtualKey.create({
      data: { orgId: w.orgId, workspaceId: w.workspaceId, name: "asked", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: w.adminId },
    });
    const agent = new McpClient({ name: "fleet-agent", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });
    let asked = 0;
    agent.setRequestHandler(ElicitRequestSchema, async () => (asked++, { action: "accept", content: { branch: `b${asked}` } }));
    await agent.connect(new StreamableHTTPClientTransport(new URL(`${lb}/gateway/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    try {
      // Round robin, a new connection to a node per request: a call and the answer POSTed during
      // it go to different nodes unless another request falls between them.
      const before = await servedByNode();
      for (let i = 1; i <= 4; i++) {
        const result = (await agent.callTool({ name: "talk.elicit", arguments: {} }, undefined, { timeout: 20_000 })) as { content: { text: string }[] };
        expect(JSON.parse(result.content[0]!.text)).toEqual({ method: "elicitation/create", answer: { action: "accept", content: { branch: `b${i}` } } });
      }
      const after = await servedByNode();
      expect(after.every((n, i) => n > before[i]!), "both nodes served the calls and answers").toBe(true);
    } finally {
      await agent.close();
    }
  });

  it("a person's 2 personal organizations at once are 2 across both nodes", async () => {
    const someone = await addMember(w.db, (await createOrg(w.db)).orgId);
    const opened: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await gql(someone.token, CREATE_PERSONAL, { input: { name: "Mine" } });
      opened.push(res.body?.data?.createPersonalOrganization?.__typename ?? `${res.status} ${JSON.stringify(res.body)}`);
    }
    expect(opened).toEqual(["MutationCreatePersonalOrganizationSuccess", "MutationCreatePersonalOrganizationSuccess", "LimitExceededError", "LimitExceededError"]);
  });

  it("HAProxy keeps no idle connection to a node (one per request), so none can meet the node's own idle timeout with a request on it", async () => {
    // On a reused idle connection a request could arrive just as the node's 5 s idle timeout
    // resets it; HAProxy then closes the client's connection unanswered (docs/operations.md,
    // Keep-alive). Six at once, so that with pooling each node would keep some.
    const m = await addMember(w.db, w.orgId, { role: "admin" });
    const answers = await Promise.all(Array.from({ length: 6 }, () => gql(m.token, VIEWER)));
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(200));
    const servers = (await haproxyStats(statsPort)).filter((r) => r.pxname === "api" && /^api\d$/.test(r.svname!));
    expect(servers.map((s) => `${s.svname} idle ${Number(s.idle_conn_cur) + Number(s.safe_conn_cur)}`)).toEqual(["api1 idle 0", "api2 idle 0"]);
  });

  it("a rolling restart of both API nodes and the worker node under load fails no request, retries nothing, strands no lease, and every subscriber ends on the final gate state", async () => {
    const statsBefore = (await haproxyStats(statsPort)).find((r) => r.pxname === "api" && r.svname === "BACKEND")!;
    // A plan waiting for three approvals, watched by three people.
    const submitted = await gql(w.runnerToken, SUBMIT, { input: { workspaceId: w.workspaceId, changes: [{ address: "aws_s3_bucket.fleet", action: "CREATE" }] } });
    expect(submitted.body?.data?.submitPlan?.data?.id, JSON.stringify(submitted.body)).toBeTruthy();
    const planId = submitted.body.data.submitPlan.data.id as string;
    const watchers = await Promise.all([0, 1, 2].map(async () => gateSubscriber((await addMember(w.db, w.orgId, { role: "admin" })).token, planId)));
    await until(() => watchers.every((s) => s.states.length > 0), 15_000, "every subscriber's first gate state");

    const failures: string[] = [];
    let running = true;

    // A steady stream: three readers, each a request every 250 ms (under their 5 a second).
    const readers = await Promise.all([0, 1, 2].map(async () => (await addMember(w.db, w.orgId, { role: "admin" })).token));
    let reads = 0;
    const stream = readers.map(async (token) => {
      while (running) {
        try {
          const res = await gql(token, VIEWER);
          reads++;
          if (res.status !== 200 || !res.body?.data?.viewer?.id) failures.push(`viewer: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
        } catch (error) {
          const cause = (error as { cause?: { code?: string; message?: string } }).cause;
          failures.push(`viewer: ${(error as Error).message} (${cause?.code ?? ""} ${cause?.message ?? ""})`);
          phase(`viewer failed: ${cause?.code} ${cause?.message}`);
        }
        await sleep(250);
      }
    });

    // Held calls, one after another: held (423), filed by the worker, approved by the reviewer,
    // delivered by the worker through HAProxy to a gateway, executed on the upstream.
    const held: string[] = [];
    const executed: string[] = [];
    const agentKey = w.keyPlaintext;
    const heldCalls = (async () => {
      for (let n = 0; running; n++) {
        const repo = `acme/fleet-${n}`;
        try {
          const call = await toolCall(agentKey, "github.delete_repo", { repo });
          const approvalId = call.body?.error?.data?.approval_id as string | undefined;
          if (call.status !== 423 || !approvalId) {
            failures.push(`held call: ${call.status} ${JSON.stringify(call.body).slice(0, 300)}`);
            continue;
          }
          held.push(repo);
          await until(async () => (await w.db.prisma.approvalRequest.findUnique({ where: { id: approvalId } })) !== null, 60_000, `${repo} filed`);
          const voted = await gql(w.reviewerToken, VOTE, { input: { requestId: approvalId, decision: "APPROVE", expectedRevision: 1 } });
          if (voted.status !== 200 || voted.body?.data?.voteOnApprovalRequest?.__typename !== "MutationVoteOnApprovalRequestSuccess") {
            failures.push(`vote: ${voted.status} ${JSON.stringify(voted.body).slice(0, 300)}`);
            continue;
          }
          // The agent reads its call's status twice a second (under its key's 5), as an agent would poll.
          for (let polls = 0; ; polls++) {
            const res = await fetch(`${lb}/gateway/v1/approvals/${approvalId}`, { headers: { authorization: `Bearer ${agentKey}` } });
            const body = (await res.json()) as { execution_status?: string };
            if (res.status !== 200) failures.push(`status read: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
            if (body.execution_status === "executed") break;
            if (polls > 120) throw new Error(`${repo} not executed after ${polls} reads`);
            await sleep(500);
          }
          executed.push(repo);
        } catch (error) {
          failures.push(`held call ${repo}: ${(error as Error).message}`);
        }
      }
    })();

    // Approvals between the restarts: the gate moves while subscribers are being moved.
    const approve = async (token: string) => {
      const res = await gql(token, APPROVE_PLAN, { planId });
      if (res.body?.data?.approvePlan?.__typename !== "MutationApprovePlanSuccess") failures.push(`approvePlan: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
    };

    await sleep(1_000);
    let replacement: Promise<Node> | undefined;
    for (const [i, node] of api.entries()) {
      await approve(w.approverTokens[i]!);
      // The new worker node starts beside the old one while the last API node restarts (more
      // than one worker is safe: one consumer group, leased deliveries), so its start, the
      // slowest of all, adds nothing to the restart; the old one is SIGTERMed once it runs.
      if (i === api.length - 1) replacement = startWorkerNode(workerEnv);
      // The deploy: SIGTERM, the node drains and exits 0; the new one starts, HAProxy takes it back.
      phase(`${node.name} SIGTERM`);
      expect(await node.terminate(), node.output().slice(-2000)).toBe(0);
      phase(`${node.name} exited`);
      api[i] = await startApiNode(node.name, apiPorts[i]!, nodeEnv);
      await allUp();
      phase("all up");
    }
    await approve(w.approverTokens[2]!);
    const next = await replacement!;
    phase("worker SIGTERM");
    expect(await worker.terminate(), worker.output().slice(-2000)).toBe(0);
    phase("worker exited");
    worker = next;
    await sleep(1_000);
    running = false;
    await Promise.all([...stream, heldCalls]);

    expect(failures).toEqual([]);
    expect(reads).toBeGreaterThan(0);
    // Every held call ran once on the upstream, none twice.
    expect(held.length).toBeGreaterThan(0);
    expect(executed).toEqual(held);
    expect(upstream.calls.get("delete_repo")).toBe(held.length);

    // No lease stranded: every delivery job finished, none is leased or mid-dispatch, and the
    // approval stream has no entry read and not acknowledged.
    const jobs = await w.db.sql.query<{ status: string; leased: number }>(
      `SELECT status, count(*)::int AS leased FROM delivery_jobs WHERE status <> 'delivered' OR "leaseOwner" IS NOT NULL AND "leaseExpiresAt" > now() GROUP BY status`,
    );
    expect(jobs).toEqual([]);
    const webhookLeases = await w.db.sql.query(`SELECT id FROM webhook_deliveries WHERE status IN ('leased', 'dispatching')`);
    expect(webhookLeases).toEqual([]);
    const r = new Redis(redis.url);
    try {
      const groups = (await r.xinfo("GROUPS", "stream:approvals")) as unknown[][];
      for (const g of groups) expect(Number(g[g.indexOf("pending") + 1])).toBe(0);
    } finally {
      r.disconnect();
    }

    // Every subscriber, reconnected through HAProxy after its node drained, ends on the final
    // state: three approvals counted, the gate passed.
    const final = (await gql(w.adminToken, GATE, { planId })).body.data.gate;
    expect(final).toEqual({ passed: true, evaluation: { approvalsCounted: 3 } });
    await until(() => watchers.every((s) => s.states.at(-1)?.passed === true), 15_000, "every subscriber on the final gate state");
    for (const s of watchers) {
      expect(s.errors).toEqual([]);
      expect(s.states.at(-1)).toMatchObject({ planId, passed: true, evaluation: { approvalsCounted: 3 } });
    }
    // Both API nodes were restarted under them: at least one subscriber moved.
    expect(watchers.some((s) => s.connections() > 1)).toBe(true);

    // HAProxy retried and redispatched nothing, and answered no 5xx of its own: the drain took
    // each node out before it stopped accepting.
    const statsAfter = (await haproxyStats(statsPort)).find((r) => r.pxname === "api" && r.svname === "BACKEND")!;
    for (const counter of ["wretr", "wredis", "econ", "eresp", "hrsp_5xx"]) {
      expect(`${counter} ${Number(statsAfter[counter]) - Number(statsBefore[counter])}`).toBe(`${counter} 0`);
    }
  }, 150_000);

  it("an approval's trace holds its operation span and its database spans under one trace id; a held call's execution reaches the upstream with a traceparent of the vote's trace", async () => {
    // Every node exports to the receiver below (started in beforeAll, see startTraceReceiver).
    const spans = receiver!.spans;
    const submitted = await gql(w.runnerToken, SUBMIT, { input: { workspaceId: w.workspaceId, changes: [{ address: "aws_s3_bucket.traced", action: "CREATE" }] } });
    const planId = submitted.body.data.submitPlan.data.id as string;
    const approved = await gql(w.approverTokens[0]!, `mutation ApprovePlan($planId: ID!) { approvePlan(planId: $planId) { __typename } }`, { planId });
    expect(approved.body.data.approvePlan.__typename).toBe("MutationApprovePlanSuccess");
    await until(() => spans().some((s) => JSON.stringify(s).includes("ApprovePlan")), 20_000, "the approval's operation span exported");
    const operation = spans().find((s) => JSON.stringify(s).includes("ApprovePlan"))!;
    const sameTrace = spans().filter((s) => s.traceId === operation.traceId);
    expect(sameTrace.some((s) => /^prisma:|^pg[.:]/.test(s.name) || s.attributes.some((a) => a.key === "db.system"))).toBe(true);

    const traced = await toolCall(w.keyPlaintext, "github.delete_repo", { repo: "acme/traced" });
    const approvalId = traced.body.error.data.approval_id as string;
    await until(async () => (await w.db.prisma.approvalRequest.findUnique({ where: { id: approvalId } })) !== null, 20_000, "filed");
    await gql(w.reviewerToken, VOTE, { input: { requestId: approvalId, decision: "APPROVE", expectedRevision: 1 } });
    await until(() => receiver!.upstreamTraceparents.some((t) => /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/.test(t)), 30_000, "the execution's traceparent at the upstream");
    // One trace across the nodes: the vote (an API node), the delivery attempt (the worker node),
    // the gateway's resume (an API node again) and the call the upstream received.
    const upstreamTraces = () => new Set(receiver!.upstreamTraceparents.map((t) => t.split("-")[1]));
    const voteTrace = () => spans().find((s) => s.name.startsWith("mutation.") && upstreamTraces().has(s.traceId))?.traceId;
    const namesIn = (traceId: string | undefined) => new Set(spans().filter((s) => s.traceId === traceId).map((s) => s.name));
    await until(() => ["approval delivery", "gateway resume", "mcp upstream POST"].every((n) => namesIn(voteTrace()).has(n)), 20_000, "the vote's trace reaching the upstream");
  }, 60_000);
});

// ── Tracing: a real OTLP/HTTP JSON receiver, and the upstream's view of traceparent ─────────

type OtlpSpan = { traceId: string; spanId: string; name: string; attributes: Array<{ key: string; value: unknown }> };

let receiver: { spans(): OtlpSpan[]; upstreamTraceparents: string[]; close(): Promise<void> } | null = null;

/**
 * An OTLP/HTTP receiver (JSON encoding: POST /v1/traces) and a recording hop in front of the
 * upstream that keeps each request's traceparent. Called from beforeAll.
 */
async function startTraceReceiver(upstreamUrl: string): Promise<{ endpoint: string; upstreamUrl: string; close(): Promise<void> }> {
  const spans: OtlpSpan[] = [];
  const upstreamTraceparents: string[] = [];
  const otlp: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: OtlpSpan[] }> }> };
        for (const rs of body.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) spans.push({ ...s, attributes: s.attributes ?? [] });
      } catch {
        // not JSON: not ours
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  const target = new URL(upstreamUrl);
  const hop: Server = createServer((req, res) => {
    const traceparent = req.headers.traceparent;
    if (typeof traceparent === "string") upstreamTraceparents.push(traceparent);
    const forward = httpRequest({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  await Promise.all([otlp, hop].map((s) => new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve))));
  const portOf = (s: Server) => (s.address() as { port: number }).port;
  const close = async () => {
    for (const s of [otlp, hop]) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  };
  receiver = { spans: () => spans, upstreamTraceparents, close };
  return { endpoint: `http://127.0.0.1:${portOf(otlp)}`, upstreamUrl: `http://127.0.0.1:${portOf(hop)}${target.pathname}`, close };
}
