// The HTTP request path: a real Countersign server (`tsx src/main.ts`, the
// product's own app factory, on a bench schema) and a bare graphql-yoga server (bench/http-bare.ts,
// `viewer { name }` from memory) each in its own process, loaded alternately by the same bounded
// client (autocannon in this process, same connections, same duration, warm-up first):
//
// - `{ __typename }` with a valid token: at least 0.8× bare yoga's requests per second;
// - `{ viewer { name } }`, authenticated: at least 0.6×;
// - the dashboard's workspace list (operations/workspaces.graphql) on an organization of 50
//   workspaces with reservations and open plans, beside one raw SQL statement reading the same
//   rows: at most 3× its p50;
// - the check API as a runner calls it (a service account asking about a member, by resource id,
//   the docs' selection): one question within 1.5× the p50 of the same client's `viewer` round
//   trip, timed in the same rounds; a batch of 100 under 5 ms p95 — and, as context, the same
//   batch answered without GraphQL (bench/http-no-graphql.ts: token, Redis, the product's service);
//   the workspace list likewise, beside the raw SQL.
//
// Every response is checked: a load run whose responses are not the expected body (a 429, an
// error, a wrong viewer) is reported as failed, not as fast. Loopback only; every loop is bounded.

import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { generateToken, hashToken, tokenPrefix } from "../src/auth/tokens.js";
import { WorkspacesDocument } from "../src/generated/graphql/graphql.js";
import type { Database } from "../src/infra/db.js";
import { reconcileSystemRoles, systemRoleId } from "../src/services/system-roles.js";
import { BENCH_DATABASE_URL, consume, cpuMsOf, freePort, load1, log, row, summarize, timeAsync, withBenchSchema, type BenchRow } from "./lib.js";

const CONNECTIONS = Number(process.env.BENCH_HTTP_CONNECTIONS ?? 16);
/** Seconds per measured load run; each case runs ROUNDS times per server, alternating; rows give the means. */
const SECONDS = Number(process.env.BENCH_HTTP_SECONDS ?? 8);
const WARMUP_SECONDS = Number(process.env.BENCH_HTTP_WARMUP_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_HTTP_ROUNDS ?? 2);
const WORKSPACES = 50;
const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const VIEWER_NAME = "Bench Viewer";
const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** Which parts run (comma-separated: typename, viewer, workspaces, check); all by default. For profiling one. */
const ONLY = new Set((process.env.BENCH_HTTP_ONLY ?? "typename,viewer,workspaces,check").split(",").map((s) => s.trim()));

// ── The organization: 50 workspaces, reservations, open plans ─────────────────────────

interface Seeded {
  orgId: string;
  /** The dashboard's reader (workspace-reader). */
  token: string;
  /** A workspace-approver: their list also reads what they may reserve (src/services/reservations.ts). */
  approverToken: string;
  /** A runner's service account: (member, check) and read on stacks, workspaces and roles. */
  runnerToken: string;
  memberIds: string[];
  stackIds: string[];
  workspaceIds: string[];
}

export async function seed(db: Database): Promise<Seeded> {
  await reconcileSystemRoles(db.prisma);
  const org = await db.prisma.organization.create({ data: { slug: `bench-${randomUUID().slice(0, 8)}`, name: "Bench" } });
  const people = Array.from({ length: 20 }, (_, i) => ({ id: randomUUID(), email: `u${i}-${org.id}@bench.local`, name: i === 0 ? VIEWER_NAME : `User ${i}` }));
  await db.prisma.user.createMany({ data: people });
  await db.prisma.membership.createMany({ data: people.map((p) => ({ orgId: org.id, userId: p.id })) });
  // The viewer reads workspaces (a workspace-reader: no approve, so no reservation options to read); the others approve.
  await db.prisma.roleAssignment.createMany({
    data: people.map((p, i) => ({ orgId: org.id, userId: p.id, roleId: systemRoleId(i === 0 ? "workspace-reader" : "workspace-approver") })),
  });
  const roles = await Promise.all(
    Array.from({ length: 3 }, (_, i) => db.prisma.role.create({ data: { orgId: org.id, key: `oncall-${i}`, name: `On call ${i}` } })),
  );
  const stacks = await Promise.all(
    Array.from({ length: 5 }, (_, i) => db.prisma.stack.create({ data: { orgId: org.id, name: `stack-${i}`, authzGroups: i % 2 ? ["platform"] : [] } })),
  );
  const workspaces = await Promise.all(
    Array.from({ length: WORKSPACES }, (_, i) =>
      db.prisma.workspace.create({
        data: { orgId: org.id, stackId: stacks[i % stacks.length]!.id, name: `ws-${String(i).padStart(2, "0")}`, environment: i % 3 ? "staging" : "production", production: i % 3 === 0, requiredApprovals: 1 + (i % 3) },
      }),
    ),
  );
  const user = (i: number) => people[i % people.length]!.id;
  // Each workspace: one active reservation (a person or a role), one released; two open plans
  // with two approvals each (one withdrawn on every third), and three finished plans (not listed).
  await db.prisma.reservation.createMany({
    data: workspaces.flatMap((w, i) => [
      i % 2
        ? { orgId: org.id, workspaceId: w.id, holderRoleId: roles[i % roles.length]!.id, placedById: user(i + 1) }
        : { orgId: org.id, workspaceId: w.id, holderUserId: user(i + 2), placedById: user(i + 1) },
      { orgId: org.id, workspaceId: w.id, holderUserId: user(i + 3), placedById: user(i + 3), releasedAt: new Date(), releasedById: user(i + 4), releaseReason: "released" },
    ]),
  });
  const plans = workspaces.flatMap((w, i) => [
    ...[0, 1].map((k) => ({ id: randomUUID(), orgId: org.id, workspaceId: w.id, submittedById: user(i + k + 5), status: "planned" as const })),
    ...[0, 1, 2].map((k) => ({ id: randomUUID(), orgId: org.id, workspaceId: w.id, submittedById: user(i + k + 7), status: "applied" as const })),
  ]);
  await db.prisma.plan.createMany({ data: plans });
  await db.prisma.approval.createMany({
    data: plans
      .filter((p) => p.status === "planned")
      .flatMap((p, i) => [
        { planId: p.id, userId: user(i + 10) },
        i % 3 === 0
          ? { planId: p.id, userId: user(i + 11), withdrawnAt: new Date(), withdrawnById: user(i + 11) }
          : { planId: p.id, userId: user(i + 11) },
      ]),
  });
  const token = generateToken();
  await db.prisma.apiToken.create({ data: { userId: people[0]!.id, orgId: org.id, name: "bench", tokenHash: hashToken(token), prefix: tokenPrefix(token) } });
  const approverToken = generateToken();
  await db.prisma.apiToken.create({ data: { userId: people[1]!.id, orgId: org.id, name: "bench-approver", tokenHash: hashToken(approverToken), prefix: tokenPrefix(approverToken) } });
  // The runner asking the check API before each action (docs/permissions.md, "The check API").
  const runner = await db.prisma.user.create({ data: { email: `runner-${org.id}@bench.local`, name: "Bench Runner", isServiceAccount: true } });
  await db.prisma.membership.create({ data: { orgId: org.id, userId: runner.id } });
  const runnerRole = await db.prisma.role.create({
    data: {
      orgId: org.id,
      key: "runner",
      name: "Runner",
      permissions: { create: [["member", "check"], ["stack", "read"], ["workspace", "read"], ["role", "read"]].map(([resourceType, action]) => ({ resourceType: resourceType!, action: action! })) },
    },
  });
  await db.prisma.roleAssignment.create({ data: { orgId: org.id, userId: runner.id, roleId: runnerRole.id } });
  const runnerToken = generateToken();
  await db.prisma.apiToken.create({ data: { userId: runner.id, orgId: org.id, name: "runner", tokenHash: hashToken(runnerToken), prefix: tokenPrefix(runnerToken) } });
  return { orgId: org.id, token, approverToken, runnerToken, memberIds: people.map((p) => p.id), stackIds: stacks.map((x) => x.id), workspaceIds: workspaces.map((w) => w.id) };
}

/** The same rows the workspace list returns, in one statement (what a hand-written endpoint would send). */
const RAW_WORKSPACE_LIST_SQL = `
  SELECT w.id, w.name, w.environment, w."archivedAt" IS NOT NULL AS archived, w.frozen, w."requiredApprovals",
         json_build_object('id', s.id, 'name', s.name) AS stack,
         (SELECT json_agg(json_build_object(
                   'id', r.id, 'holderUser', hu.name, 'holderRole', hr.name, 'placedBy', pb.name, 'placedAt', r."placedAt"))
            FROM reservations r
            LEFT JOIN users hu ON hu.id = r."holderUserId"
            LEFT JOIN roles hr ON hr.id = r."holderRoleId"
            JOIN users pb ON pb.id = r."placedById"
           WHERE r."workspaceId" = w.id AND r."releasedAt" IS NULL) AS reservations,
         (SELECT json_agg(json_build_object(
                   'id', p.id, 'status', p.status, 'createdAt', p."createdAt", 'submittedBy', sb.name,
                   'changeCount', (SELECT count(*) FROM resource_changes c WHERE c."planId" = p.id),
                   'approvals', (SELECT json_agg(json_build_object('id', a.id, 'user', au.name, 'withdrawnAt', a."withdrawnAt"))
                                   FROM approvals a JOIN users au ON au.id = a."userId" WHERE a."planId" = p.id))
                   ORDER BY p."createdAt", p.id)
            FROM plans p JOIN users sb ON sb.id = p."submittedById"
           WHERE p."workspaceId" = w.id AND p.status IN ('planned', 'applying')) AS "openPlans"
    FROM workspaces w JOIN stacks s ON s.id = w."stackId"
   WHERE w."orgId" = $1 AND w."archivedAt" IS NULL
   ORDER BY w.name, w.id
   LIMIT 101`;

// ── Servers ───────────────────────────────────────────────────────────────────────────


interface Started {
  url: string;
  child: ChildProcess;
}

/** `args`: what follows `node` (Countersign as production starts it: `scripts/start.mjs`, its bundle). */
async function start(label: string, args: string[], env: Record<string, string>): Promise<Started> {
  const port = await freePort();
  const profile = process.env.BENCH_HTTP_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_HTTP_CPU_PROF}/${label}`] : [];
  const child = spawn(process.execPath, [...profile, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env, PORT: String(port), HOST: "127.0.0.1" },
    // Countersign logs one line per operation (LOG_LEVEL info, its default): written, then dropped.
    stdio: ["ignore", "ignore", "inherit"],
  });
  const url = `http://127.0.0.1:${port}/graphql`;
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`${label} exited with ${child.exitCode}`);
    const ok = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ query: "{ __typename }" }) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { url, child };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new Error(`${label} did not answer within 60 s`);
}

async function stop(server: Started | undefined): Promise<void> {
  if (!server || server.child.exitCode !== null) return;
  server.child.kill("SIGTERM");
  await new Promise((r) => server.child.once("exit", r).once("error", r));
}

// ── Load ──────────────────────────────────────────────────────────────────────────────

interface Case {
  key: string;
  label: string;
  query: string;
  /** The exact body every response must carry. */
  expect: string;
}

const CASES: Case[] = [
  { key: "typename", label: "{ __typename } with a valid token", query: "{ __typename }", expect: JSON.stringify({ data: { __typename: "Query" } }) },
  { key: "viewer", label: "authenticated { viewer { name } }", query: "{ viewer { name } }", expect: JSON.stringify({ data: { viewer: { name: VIEWER_NAME } } }) },
];

interface Load {
  rps: number;
  p50: number;
  p99: number;
  bad: number;
  /** The server process's CPU time (user + system) per answered request, ms: independent of other load. */
  cpuMs: number;
}

async function load(server: Started, token: string, query: string, expect: string, seconds: number): Promise<Load> {
  const url = server.url;
  const cpuBefore = cpuMsOf(server.child.pid!);
  const result = await autocannon({
    url,
    method: "POST",
    connections: CONNECTIONS,
    duration: seconds,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query }),
    expectBody: expect,
  });
  const answered = Math.max(1, result["2xx"]);
  return {
    cpuMs: (cpuMsOf(server.child.pid!) - cpuBefore) / answered,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    bad: result.non2xx + result.mismatches + result.errors + result.timeouts,
  };
}

/** Checks one response by hand before loading, so a misconfigured run fails loudly. */
async function check(url: string, token: string, query: string, expect: string): Promise<void> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify({ query }) });
  const body = await res.text();
  if (res.status !== 200 || body !== expect) throw new Error(`${url} answered ${res.status} ${body.slice(0, 300)} to ${query}; expected ${expect}`);
}

/** Wall time of one call, ms. */
async function msOf(fn: () => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

async function throughputRows(bare: Started, countersign: Started, token: string): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const targets = [0.8, 0.6];
  for (const [i, c] of CASES.entries()) {
    if (!ONLY.has(c.key)) continue;
    await check(bare.url, token, c.query, c.expect);
    await check(countersign.url, token, c.query, c.expect);
    // Warm-up: JIT, prepared statements, pools, caches on both sides. Not counted.
    await load(bare, token, c.query, c.expect, WARMUP_SECONDS);
    await load(countersign, token, c.query, c.expect, WARMUP_SECONDS);
    const runs = { bare: [] as Load[], countersign: [] as Load[] };
    for (let r = 0; r < ROUNDS; r++) {
      // Alternating, so a burst of load from elsewhere on the machine falls on both.
      const b = await load(bare, token, c.query, c.expect, SECONDS);
      const s = await load(countersign, token, c.query, c.expect, SECONDS);
      runs.bare.push(b);
      runs.countersign.push(s);
      log(
        `${c.label} round ${r + 1}: ratio ${(s.rps / b.rps).toFixed(2)}, bare ${b.rps.toFixed(0)} req/s (p50 ${b.p50} ms, ${b.cpuMs.toFixed(3)} ms CPU each), ` +
          `countersign ${s.rps.toFixed(0)} req/s (p50 ${s.p50} ms, p99 ${s.p99} ms, ${s.cpuMs.toFixed(3)} ms CPU each), load average ${load1()}`,
      );
    }
    const bad = [...runs.bare, ...runs.countersign].reduce((n, l) => n + l.bad, 0);
    const bareRps = mean(runs.bare.map((l) => l.rps));
    const csRps = mean(runs.countersign.map((l) => l.rps));
    const target = targets[i]!;
    rows.push(
      row(`${c.label}, ${CONNECTIONS} connections (req/s)`, csRps, "req/s", {
        baseline: { name: "bare graphql-yoga", value: bareRps },
        target: `≥ ${target}× bare`,
        // Throughput: higher is better, so the ratio must reach the target; a bad response fails the row.
        pass: bad === 0 && csRps / bareRps >= target,
      }),
      row(`${c.label} (p50 latency)`, mean(runs.countersign.map((l) => l.p50)), "ms", {
        baseline: { name: "bare graphql-yoga", value: mean(runs.bare.map((l) => l.p50)) },
        target: "context",
      }),
      // The server's own CPU per request does not depend on what else the machine runs
      // (PostgreSQL's share of a request is not in it).
      row(`${c.label} (server CPU per request)`, mean(runs.countersign.map((l) => l.cpuMs)), "ms", {
        baseline: { name: "bare graphql-yoga", value: mean(runs.bare.map((l) => l.cpuMs)) },
        target: "context",
      }),
    );
    if (bad > 0) log(`${c.label}: ${bad} responses were not the expected body`);
  }
  return rows;
}

async function workspaceListRows(db: Database, countersign: Started, noGraphql: Started, s: Seeded): Promise<BenchRow[]> {
  // Exactly what the dashboard sends (src/dashboard/app.ts, loadWorkspaces): the generated document, 100 a page.
  const body = JSON.stringify({ query: WorkspacesDocument.toString(), variables: { first: 100, after: null } });
  const headersOf = (token: string) => ({ "content-type": "application/json", authorization: `Bearer ${token}` });
  const once = async (headers = headersOf(s.token)) => {
    const res = await fetch(countersign.url, { method: "POST", headers, body });
    const json = (await res.json()) as { data?: { workspaces: { edges: { node: { reservations: unknown[]; openPlans: unknown[] } }[] } }; errors?: unknown[] };
    if (res.status !== 200 || json.errors || !json.data) throw new Error(`workspace list answered ${res.status}: ${JSON.stringify(json).slice(0, 300)}`);
    return json.data.workspaces.edges;
  };
  const edges = await once();
  const openPlans = edges.reduce((n, e) => n + e.node.openPlans.length, 0);
  const reservations = edges.reduce((n, e) => n + e.node.reservations.length, 0);
  log(`workspace list: ${edges.length} workspaces, ${reservations} active reservations, ${openPlans} open plans`);
  if (edges.length !== WORKSPACES || openPlans !== 2 * WORKSPACES || reservations !== WORKSPACES) throw new Error("the workspace list did not return the seeded rows");
  const raw = await db.sql.query(RAW_WORKSPACE_LIST_SQL, [s.orgId], { prepare: true });
  if (raw.length !== WORKSPACES) throw new Error(`the raw workspace list returned ${raw.length} rows`);
  // The same list without GraphQL: the same rows, the same people, no executor.
  const listUrl = new URL("/workspaces", noGraphql.url).href;
  const bare = async () => {
    const res = await fetch(listUrl, { method: "POST", headers: headersOf(s.token), body: "{}" });
    const json = (await res.json()) as { data?: { edges: { node: { reservations: unknown[]; openPlans: unknown[] } }[] } };
    if (res.status !== 200 || !json.data) throw new Error(`the list without GraphQL answered ${res.status}`);
    return json.data.edges;
  };
  const bareEdges = await bare();
  if (bareEdges.length !== WORKSPACES || bareEdges.reduce((n, e) => n + e.node.openPlans.length, 0) !== openPlans) throw new Error("the list without GraphQL did not return the seeded rows");

  // Rounds of each in turn (20 warm-up calls each first), so a burst of load from elsewhere falls on both.
  const httpSamples: number[] = [];
  const approverSamples: number[] = [];
  const sqlSamples: number[] = [];
  const bareSamples: number[] = [];
  const approver = headersOf(s.approverToken);
  if ((await once(approver)).length !== WORKSPACES) throw new Error("the approver's workspace list did not return the seeded rows");
  await timeAsync(async () => consume(await once(approver)), { warmup: 20, iterations: 0 });
  const rawSql = async () => consume(await db.sql.query(RAW_WORKSPACE_LIST_SQL, [s.orgId], { prepare: true }));
  await timeAsync(async () => consume(await once()), { warmup: 20, iterations: 0 });
  await timeAsync(rawSql, { warmup: 20, iterations: 0 });
  await timeAsync(async () => consume(await bare()), { warmup: 20, iterations: 0 });
  // The server's CPU time across the HTTP calls (clock ticks), as the check API's rows below.
  let serverCpuMs = 0;
  const pid = countersign.child.pid!;
  for (let r = 0; r < 5; r++) {
    const cpuBefore = cpuMsOf(pid);
    for (let i = 0; i < 20; i++) httpSamples.push(await msOf(async () => consume(await once())));
    serverCpuMs += cpuMsOf(pid) - cpuBefore;
    for (let i = 0; i < 20; i++) sqlSamples.push(await msOf(rawSql));
    for (let i = 0; i < 20; i++) approverSamples.push(await msOf(async () => consume(await once(approver))));
    for (let i = 0; i < 20; i++) bareSamples.push(await msOf(async () => consume(await bare())));
  }
  const http = summarize(httpSamples);
  const asApprover = summarize(approverSamples);
  const sql = summarize(sqlSamples);
  const withoutGraphql = summarize(bareSamples);
  const cpuPerCall = serverCpuMs / httpSamples.length;
  log(
    `workspace list: HTTP p50 ${http.p50.toFixed(2)} ms p99 ${http.p99.toFixed(2)} ms (server CPU ${cpuPerCall.toFixed(2)} ms a call); ` +
      `raw SQL p50 ${sql.p50.toFixed(2)} ms; without GraphQL p50 ${withoutGraphql.p50.toFixed(2)} ms; as an approver p50 ${asApprover.p50.toFixed(2)} ms; load average ${load1()}`,
  );
  const label = `workspace list (dashboard), ${WORKSPACES} workspaces with reservations and open plans, one client`;
  return [
    row(`${label} (p50)`, http.p50, "ms", {
      baseline: { name: "raw SQL of the same rows, one statement", value: sql.p50 },
      target: "≤ 3× raw SQL",
      pass: http.p50 <= 3 * sql.p50,
    }),
    row(`${label} (p99)`, http.p99, "ms", { baseline: { name: "raw SQL p99", value: sql.p99 }, target: "context" }),
    row(`${label}, server CPU per call`, cpuPerCall, "ms", { target: "context" }),
    // The same list for a caller who may reserve: what each workspace lets them reserve is read too.
    row(`${label}, as an approver (p50)`, asApprover.p50, "ms", { baseline: { name: "the reader's p50, same rounds", value: http.p50 }, target: "context" }),
    // What leaving GraphQL would save: the same rows and people as JSON from node:http (bench/http-no-graphql.ts).
    row(`${label}, without GraphQL (p50)`, withoutGraphql.p50, "ms", { baseline: { name: "raw SQL of the same rows, one statement", value: sql.p50 }, target: "context" }),
  ];
}

// ── The check API ─────────────────────────────────────────────────────────────────────

/** The runner's request of docs/permissions.md ("The check API"): decision, the roles that grant it, what is missing. */
const CHECK_QUERY = `query Check($checks: [PermissionCheckInput!]!) {
  checkPermissions(checks: $checks) {
    ... on QueryCheckPermissionsSuccess { data { action allowed decision via { kind roleKey } missing { action matchValue } } }
    ... on Error { code message }
  }
}`;
const CHECK_ROUNDS = 10;
const CHECK_PER_ROUND = 30;

/** Question i of a batch: a member (of 20), and a workspace or a stack action on one of the org's objects. */
function question(s: Seeded, i: number) {
  const principalId = s.memberIds[i % s.memberIds.length]!;
  if (i % 4 === 3) return { principalId, resourceType: "stack", action: ["read", "deploy"][i % 2]!, resourceId: s.stackIds[i % s.stackIds.length]! };
  return { principalId, resourceType: "workspace", action: ["approve", "read", "update"][i % 3]!, resourceId: s.workspaceIds[i % s.workspaceIds.length]! };
}

async function checkApiRows(countersign: Started, noGraphql: Started, s: Seeded): Promise<BenchRow[]> {
  const headers = { "content-type": "application/json", authorization: `Bearer ${s.runnerToken}` };
  const bareUrl = new URL("/check", noGraphql.url).href;
  const post = (body: string, url = countersign.url) => fetch(url, { method: "POST", headers, body }).then(async (res) => ({ status: res.status, text: await res.text() }));
  const checks = Array.from({ length: 100 }, (_, i) => question(s, i));
  const bodies = {
    viewer: JSON.stringify({ query: "{ viewer { name } }" }),
    one: JSON.stringify({ query: CHECK_QUERY, variables: { checks: [question(s, 0)] } }),
    batch: JSON.stringify({ query: CHECK_QUERY, variables: { checks } }),
    bare: JSON.stringify({ checks }),
  };
  const urlOf = (key: keyof typeof bodies) => (key === "bare" ? bareUrl : countersign.url);
  // Every answer is checked against the first one, which must answer every question without an error.
  const expected = {} as Record<keyof typeof bodies, string>;
  for (const [key, body] of Object.entries(bodies) as [keyof typeof bodies, string][]) {
    const { status, text } = await post(body, urlOf(key));
    const json = JSON.parse(text) as { data?: { checkPermissions?: { data?: { allowed: boolean }[] } } | { allowed: boolean }[]; errors?: unknown[] };
    const answered = key === "viewer" ? (json.data ? 1 : 0) : key === "bare" ? (Array.isArray(json.data) ? json.data.length : 0) : ((json.data as { checkPermissions?: { data?: unknown[] } })?.checkPermissions?.data?.length ?? 0);
    if (status !== 200 || json.errors || answered !== (key === "batch" || key === "bare" ? 100 : 1)) throw new Error(`check API (${key}) answered ${status}: ${text.slice(0, 300)}`);
    expected[key] = text;
  }
  const allowed = (JSON.parse(expected.batch) as { data: { checkPermissions: { data: { allowed: boolean }[] } } }).data.checkPermissions.data.map((a) => a.allowed);
  const bareAllowed = (JSON.parse(expected.bare) as { data: { allowed: boolean }[] }).data.map((a) => a.allowed);
  if (allowed.join() !== bareAllowed.join()) throw new Error("the check without GraphQL answered the batch otherwise than the check API");
  log(`check API: the batch of 100 allows ${allowed.filter(Boolean).length}`);
  const samples = { viewer: [] as number[], one: [] as number[], batch: [] as number[], bare: [] as number[] };
  // The server's CPU time across each kind's calls (clock ticks, summed over the 300 calls): it
  // moves much less than wall time when other work shares the machine.
  const cpuMs = { viewer: 0, one: 0, batch: 0, bare: 0 };
  const timeOne = async (key: keyof typeof bodies, keep: boolean) => {
    let answer = { status: 0, text: "" };
    const pid = (key === "bare" ? noGraphql : countersign).child.pid!;
    const cpuBefore = cpuMsOf(pid);
    const ms = await msOf(async () => (answer = await post(bodies[key], urlOf(key))));
    if (keep) cpuMs[key] += cpuMsOf(pid) - cpuBefore;
    if (answer.status !== 200 || answer.text !== expected[key]) throw new Error(`check API (${key}) answered ${answer.status}: ${answer.text.slice(0, 300)}`);
    if (keep) samples[key].push(ms);
  };
  // Rounds of each kind in turn, so a burst of load from elsewhere on the machine falls on all three.
  for (let r = 0; r <= CHECK_ROUNDS; r++) {
    for (const key of ["viewer", "one", "batch", "bare"] as const) {
      for (let i = 0; i < CHECK_PER_ROUND; i++) await timeOne(key, r > 0); // round 0 warms up
    }
  }
  const viewer = summarize(samples.viewer);
  const one = summarize(samples.one);
  const batch = summarize(samples.batch);
  const bare = summarize(samples.bare);
  log(
    `check API: viewer p50 ${viewer.p50.toFixed(2)} ms p95 ${viewer.p95.toFixed(2)} ms; one question p50 ${one.p50.toFixed(2)} ms p95 ${one.p95.toFixed(2)} ms; ` +
      `batch of 100 p50 ${batch.p50.toFixed(2)} ms p95 ${batch.p95.toFixed(2)} ms; without GraphQL p50 ${bare.p50.toFixed(2)} ms p95 ${bare.p95.toFixed(2)} ms; load average ${load1()}`,
  );
  const cpuPer = (key: keyof typeof bodies) => cpuMs[key] / Math.max(1, samples[key].length);
  log(`check API: server CPU per call: viewer ${cpuPer("viewer").toFixed(2)} ms, one question ${cpuPer("one").toFixed(2)} ms, batch of 100 ${cpuPer("batch").toFixed(2)} ms, without GraphQL ${cpuPer("bare").toFixed(2)} ms`);
  const label = "check API (runner: a member, by resource id), one client";
  return [
    row(`${label}: one question (p50)`, one.p50, "ms", {
      baseline: { name: "viewer round trip p50, same rounds", value: viewer.p50 },
      target: "≤ 1.5× viewer",
      pass: one.p50 <= 1.5 * viewer.p50,
    }),
    row(`${label}: one question (p95)`, one.p95, "ms", { baseline: { name: "viewer round trip p95", value: viewer.p95 }, target: "context" }),
    row(`${label}: batch of 100 (p50)`, batch.p50, "ms", { baseline: { name: "viewer round trip p50", value: viewer.p50 }, target: "context" }),
    row(`${label}: batch of 100 (p95)`, batch.p95, "ms", { baseline: { name: "viewer round trip p95", value: viewer.p95 }, max: 5 }),
    row(`${label}: batch of 100, server CPU per call`, cpuPer("batch"), "ms", { baseline: { name: "viewer's server CPU per call", value: cpuPer("viewer") }, target: "context" }),
    // What leaving GraphQL would save: the same batch, token read, Redis round trip and service, on node:http.
    row(`${label}: batch of 100 without GraphQL (p50)`, bare.p50, "ms", { baseline: { name: "the check API's p50, same rounds", value: batch.p50 }, target: "context" }),
    row(`${label}: batch of 100 without GraphQL (p95)`, bare.p95, "ms", { baseline: { name: "the check API's p95, same rounds", value: batch.p95 }, target: "context" }),
    row(`${label}: batch of 100 without GraphQL, server CPU per call`, cpuPer("bare"), "ms", { baseline: { name: "the check API's", value: cpuPer("batch") }, target: "context" }),
  ];
}

export async function run(): Promise<BenchRow[]> {
  return withBenchSchema(async (db, schema) => {
    const seeded = await seed(db);
    let bare: Started | undefined;
    let countersign: Started | undefined;
    try {
      bare = await start("bare-yoga", ["--import", "tsx", "bench/http-bare.ts"], { BENCH_VIEWER_NAME: VIEWER_NAME });
      // The production command (docs/operations.md): the server's bundle, not the sources under tsx.
      countersign = await start("countersign", ["scripts/start.mjs"], {
        DATABASE_URL: BENCH_DATABASE_URL,
        DATABASE_SCHEMA: schema,
        REDIS_URL,
        LOG_LEVEL: process.env.BENCH_HTTP_LOG_LEVEL ?? "info",
        // The stream and delivery workers poll on their own: not part of a request.
        COUNTERSIGN_WORKERS: "none",
        COUNTERSIGN_SEED_DEMO: "never",
        // The limiter runs on every request, but one token at this rate is not what it is for.
        COUNTERSIGN_RATE_LIMIT_RPS: "1000000",
      });
      log(`servers up; load average ${load1()}`);
      const rows = await throughputRows(bare, countersign, seeded.token);
      if (ONLY.has("workspaces") || ONLY.has("check")) {
        // The same list and batch without GraphQL (bench/http-no-graphql.ts), started only for these rows.
        const noGraphql = await start("no-graphql", ["--import", "tsx", "bench/http-no-graphql.ts"], { DATABASE_URL: BENCH_DATABASE_URL, DATABASE_SCHEMA: schema, REDIS_URL });
        try {
          if (ONLY.has("workspaces")) rows.push(...(await workspaceListRows(db, countersign, noGraphql, seeded)));
          if (ONLY.has("check")) rows.push(...(await checkApiRows(countersign, noGraphql, seeded)));
        } finally {
          await stop(noGraphql);
        }
      }
      log(`load average at the end ${load1()}`);
      return rows;
    } finally {
      await stop(countersign);
      await stop(bare);
    }
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { formatTable } = await import("./lib.js");
  console.log(formatTable(await run()));
  process.exit(0);
}
