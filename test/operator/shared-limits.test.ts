// Limits hold across processes: two Countersign apps on one database and one Redis (each with its
// own Redis connection, as two processes behind a balancer have) share one allowance per token,
// per virtual key and per person, and one cap on a token's open operations. Requests alternate
// between the two, as a round-robin balancer sends them.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "graphql-ws";
import { DEMO_UPSTREAM_URL } from "../../src/gateway/demo-upstream.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../src/gateway/keys.js";
import { hashToken } from "../../src/auth/tokens.js";
import { createLogger } from "../../src/infra/logger.js";
import { createSharedLimits } from "../../src/infra/shared-limits.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { newSchemaName, startTestApp, type TestApp } from "../helpers/harness.js";
import { ops, person, PLAN, READ, seedStack, seedWorkspace } from "../gate/helpers.js";
import { subscribe } from "../gate/ws.js";
import { trackedClient, within } from "./ws.js";

const VIEWER = `query Viewer { viewer { id } }`;
const PLAN_GATE = `subscription($planId: ID!) { planGate(planId: $planId) { planId version } }`;
const CREATE = `mutation($input: CreatePersonalOrganizationInput!) {
  createPersonalOrganization(input: $input) { __typename ... on LimitExceededError { limit retryAfterSeconds } }
}`;

// One refill every 5 s: nothing comes back mid-test on a loaded machine.
const ENV = {
  COUNTERSIGN_RATE_LIMIT_RPS: "0.2",
  COUNTERSIGN_RATE_LIMIT_BURST: "6",
  COUNTERSIGN_MAX_SUBSCRIPTIONS_PER_TOKEN: "2",
  COUNTERSIGN_PERSONAL_ORGS_PER_PERSON: "100",
  COUNTERSIGN_PERSONAL_ORG_CREATE_BURST: "2",
  COUNTERSIGN_PERSONAL_ORG_CREATE_PER_HOUR: "1",
  COUNTERSIGN_GATEWAY_EMBEDDED: "on",
  COUNTERSIGN_APPROVAL_SECRET: "shared-limits-approval-secret-0123456789abcdef",
  COUNTERSIGN_GATEWAY_SERVICE_TOKEN: "shared-limits-service-token-0123456789",
  COUNTERSIGN_GATEWAY_RATE_LIMIT_RPS: "0.2",
  COUNTERSIGN_GATEWAY_RATE_LIMIT_BURST: "3",
};

let a: TestApp;
let b: TestApp;
const bases: string[] = [];
let org: OrgFixture;
const clients: Client[] = [];
/** Process a's log lines. */
const lines: Array<Record<string, any>> = [];

beforeAll(async () => {
  const schemaName = newSchemaName();
  a = await startTestApp({ schemaName, env: ENV, logger: createLogger("info", { write: (line: string) => void lines.push(JSON.parse(line)) }) });
  b = await startTestApp({ schemaName, env: ENV });
  bases.push(await a.listen(), await b.listen());
  org = await createOrg(a.db);
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await b?.close();
  await a?.close();
});

const post = (base: string, token: string) =>
  fetch(`${base}/graphql`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify({ query: VIEWER }) });

describe("limits shared by two processes", () => {
  it("both apps count in Redis; without REDIS_URL a process counts in memory", () => {
    expect(a.app.services.limits.kind).toBe("redis");
    expect(b.app.services.limits.kind).toBe("redis");
    expect(createSharedLimits({ keyPrefix: "unused" }).kind).toBe("memory");
  });

  it("a token's burst of 6 is 6 across both processes, not 6 on each", async () => {
    const m = await addMember(a.db, org.orgId, { role: "admin" });
    // Each process learns the token on its first request (charged to the address).
    for (const base of bases) expect((await post(base, m.token)).status).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await post(bases[i % 2]!, m.token);
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 429, 429, 429, 429]);
  });

  it("a token's requests read it once each, and once refused it is not read again until its Retry-After", async () => {
    const m = await addMember(a.db, org.orgId, { role: "admin" });
    // Process a learns the token through yoga.fetch, which takes no point.
    expect((await a.gql(VIEWER, {}, m.token)).data.viewer.id).toBeTruthy();
    const hash = hashToken(m.token);
    const sql = a.db.sql;
    const query = sql.query;
    let reads = 0;
    sql.query = ((text: string, params?: unknown[], options?: unknown) => {
      if (text.includes(`t."tokenHash" = $1`) && params?.[0] === hash) reads++;
      return query.call(sql, text, params, options as never);
    }) as typeof query;
    const seen: Array<[number, number]> = [];
    try {
      for (let i = 0; i < 9; i++) {
        const before = reads;
        const res = await post(bases[0]!, m.token);
        await res.arrayBuffer();
        seen.push([res.status, reads - before]);
      }
    } finally {
      sql.query = query;
    }
    // Six admitted, each with one read; the first refusal may have read it beside its take (the
    // token was known and not refused yet); the refusals after it read nothing.
    expect(seen.slice(0, 6)).toEqual(Array(6).fill([200, 1]));
    expect(seen.slice(6).map(([status]) => status)).toEqual([429, 429, 429]);
    expect(seen.slice(7).map(([, n]) => n)).toEqual([0, 0]);
  });

  it("a token's first refusal is a 429 with Retry-After: a mutation has no effect, a query that does not parse is not answered or logged", async () => {
    const postA = async (token: string, query: string, variables?: unknown) => {
      const res = await fetch(`${bases[0]}/graphql`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify({ query, variables }) });
      return { status: res.status, retryAfter: res.headers.get("retry-after"), body: await res.json() };
    };
    /** A token known valid to process a with its burst spent: its next request is over its rate. */
    const spent = async () => {
      const m = await addMember(a.db, (await createOrg(a.db)).orgId);
      for (let i = 0; i < 7; i++) expect((await postA(m.token, VIEWER)).status).toBe(200);
      return m;
    };
    const refusal = (seconds: number) => ({
      errors: [{ message: `Rate limit exceeded: at most 0.2 requests per second. Retry after ${seconds} s.`, extensions: { code: "RATE_LIMITED", retryAfterSeconds: seconds } }],
    });

    const creator = await spent();
    const from = lines.length;
    const created = await postA(creator.token, CREATE, { input: { name: "Mine" } });
    expect(created.status).toBe(429);
    expect(Number(created.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(created.body).toEqual(refusal(Number(created.retryAfter)));
    // No personal organization opened for the creator (the mutation never ran).
    const { email } = await a.db.prisma.user.findUniqueOrThrow({ where: { id: creator.userId } });
    const [opened] = await a.db.prisma.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM organizations o JOIN users u ON u.id = o."ownerUserId" WHERE o.personal AND lower(u.email) = lower(${email})`;
    expect(opened!.n).toBe(0);

    const breaker = await spent();
    const broken = await postA(breaker.token, `query Broken { viewer {`);
    expect(broken.status).toBe(429);
    expect(broken.body).toEqual(refusal(Number(broken.retryAfter)));
    await new Promise((r) => setTimeout(r, 50));
    const logged = lines.slice(from).filter((l) => l.msg !== "graphql operation" || l.outcome !== "ok");
    expect(logged.map((l) => l.msg)).toEqual(["request rate limited", "request rate limited"]);
  });

  it("a socket's operations read its token once each, and once refused it is not read again until its Retry-After", async () => {
    const m = await addMember(a.db, org.orgId, { role: "admin" });
    // Process a learns the token through yoga.fetch (no point): the socket is charged to the token.
    expect((await a.gql(VIEWER, {}, m.token)).data.viewer.id).toBeTruthy();
    const { client } = trackedClient(bases[0]!, m.token, { lazy: false });
    clients.push(client);
    await within(new Promise((resolve) => client.on("connected", resolve)), 3_000, "the socket connecting");
    const hash = hashToken(m.token);
    const sql = a.db.sql;
    const query = sql.query;
    let reads = 0;
    sql.query = ((text: string, params?: unknown[], options?: unknown) => {
      if (text.includes(`t."tokenHash" = ANY($1::text[])`) && (params?.[0] as string[]).includes(hash)) reads++;
      return query.call(sql, text, params, options as never);
    }) as typeof query;
    const run = () =>
      new Promise<string>((resolve) => {
        let last = "";
        client.subscribe({ query: VIEWER }, { next: (r) => (last = JSON.stringify(r)), error: (e) => resolve(JSON.stringify(e)), complete: () => resolve(last) });
      });
    const seen: Array<[string, number]> = [];
    try {
      for (let i = 0; i < 8; i++) {
        const before = reads;
        const answer = await run();
        seen.push([answer.includes("RATE_LIMITED") ? "refused" : answer.includes('"viewer"') ? "ok" : answer, reads - before]);
      }
    } finally {
      sql.query = query;
    }
    // The connection took one of the 6; five operations, each with one read; then refusals, the
    // first of which may have read the token beside its take, the ones after it nothing.
    expect(seen.slice(0, 5)).toEqual(Array(5).fill(["ok", 1]));
    expect(seen.slice(5).map(([answer]) => answer)).toEqual(["refused", "refused", "refused"]);
    expect(seen.slice(6).map(([, n]) => n)).toEqual([0, 0]);
  });

  it("a token's cap of 2 open subscriptions is 2 across both processes; completing one on one process makes room on the other", async () => {
    const m = await addMember(a.db, org.orgId, { role: "admin" });
    const stackId = (await seedStack(a, org.orgId)).id;
    const w = await seedWorkspace(a, org.orgId, stackId, 1);
    const runner = await person(a, org.orgId, "runner", [READ, PLAN]);
    const plan = await ops(a).submit(runner.token, w.id, [{ address: "aws_s3_bucket.logs", action: "CREATE" }]);
    const [onA, onB] = bases.map((base) => trackedClient(base, m.token).client);
    clients.push(onA!, onB!);
    const first = subscribe(onA!, PLAN_GATE, { planId: plan.id }, (d) => d.planGate);
    const second = subscribe(onB!, PLAN_GATE, { planId: plan.id }, (d) => d.planGate);
    await first.next();
    await second.next();
    for (const client of [onA!, onB!]) {
      const over = subscribe(client, PLAN_GATE, { planId: plan.id }, (d) => d.planGate);
      await within(over.completed, 3_000, "the third subscription being refused");
      expect(JSON.stringify(over.errors)).toContain("Too many open subscriptions");
    }
    first.dispose();
    const fourth = subscribe(onB!, PLAN_GATE, { planId: plan.id }, (d) => d.planGate);
    await within(fourth.next(), 3_000, "a subscription in the freed slot");
    second.dispose();
    fourth.dispose();
  });

  it("a person's 2 personal organizations at once are 2 across both processes", async () => {
    const someone = await addMember(a.db, (await createOrg(a.db)).orgId);
    const opened = [];
    for (const app of [a, b, a, b]) opened.push((await app.gql(CREATE, { input: { name: "Mine" } }, someone.token)).data.createPersonalOrganization);
    expect(opened.map((o: { __typename: string }) => o.__typename)).toEqual([
      "MutationCreatePersonalOrganizationSuccess",
      "MutationCreatePersonalOrganizationSuccess",
      "LimitExceededError",
      "LimitExceededError",
    ]);
  });

  it("a virtual key's gateway burst of 3 is 3 across both processes", async () => {
    const stack = await a.db.prisma.stack.create({ data: { orgId: org.orgId, name: "shared-limits" } });
    const ws = await a.db.prisma.workspace.create({ data: { orgId: org.orgId, stackId: stack.id, name: "shared-limits", environment: "prod", production: true } });
    await a.db.prisma.connection.create({ data: { orgId: org.orgId, workspaceId: ws.id, name: "github", provider: "github", url: DEMO_UPSTREAM_URL } });
    const key = generateVirtualKey();
    await a.db.prisma.virtualKey.create({ data: { orgId: org.orgId, workspaceId: ws.id, name: "agent", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: org.adminId } });
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.list_repos", arguments: {} } });
    const call = async (base: string) => {
      const res = await fetch(`${base}/gateway/v1/mcp`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${key}` }, body });
      await res.arrayBuffer();
      return res.status;
    };
    // Each process proves the key live on its first call (charged to the address).
    for (const base of bases) expect(await call(base)).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push(await call(bases[i % 2]!));
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429]);
  });
});
