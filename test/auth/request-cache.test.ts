// A request's token is read on every request, and its principal is kept across requests only
// under the authz epoch read in that same statement (src/auth/authenticate.ts, Authz in
// src/authz/authz.ts). So a revoked token (the mutation, or a plain UPDATE), an expired token,
// a removed role, a removed grant and a deactivated member take effect on the very next
// request, also when the change was made through another server on the same database; never
// after a TTL. Two servers share one schema: B serves the requests (and keeps their principals),
// A or plain SQL makes the change.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { issueToken } from "../../src/services/accounts.js";
import { person, READ, seedStack, seedWorkspace, type Person } from "../gate/helpers.js";

let a: TestApp;
let b: TestApp;
let baseA: string;
let baseB: string;
let org: OrgFixture;
let workspaceId: string;

beforeAll(async () => {
  a = await startTestApp();
  b = await startTestApp({ schemaName: a.schemaName });
  baseA = await a.listen();
  baseB = await b.listen();
  org = await createOrg(a.db);
  const stack = await seedStack(a, org.orgId);
  workspaceId = (await seedWorkspace(a, org.orgId, stack.id)).id;
});
afterAll(async () => {
  await b.app.close();
  await a.close();
});

/** One operation over real HTTP to one server. */
async function post<T = any>(base: string, query: string, variables: Record<string, unknown> | undefined, token: string) {
  const res = await fetch(`${base}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as { data?: T; errors?: { message: string; extensions?: { code?: string } }[] };
}

const VIEWER = `{ viewer { name } }`;
const WORKSPACE = `query($id: ID!) { workspace(id: $id) { id } }`;
const REVOKE = `mutation($id: ID!) { revokeApiToken(id: $id) { __typename ... on Error { code message } } }`;
const DEACTIVATE = `mutation($id: ID!) { deactivateMember(userId: $id) { __typename ... on Error { code message } } }`;
const UNASSIGN = `mutation($id: ID!) { unassignRole(userId: $id) { __typename ... on Error { code message } } }`;

const codeOf = (res: { errors?: { extensions?: { code?: string } }[] }) => res.errors?.[0]?.extensions?.code;

/** The member as B names them, or undefined when B refuses the request. */
const nameOn = async (base: string, token: string): Promise<string | undefined> => (await post(base, VIEWER, undefined, token)).data?.viewer?.name;

/** B answers as the member, twice: the second answer comes from B's kept principal. */
async function warm(m: Person) {
  for (let i = 0; i < 2; i++) expect(await nameOn(baseB, m.token)).toMatch(new RegExp(`^${m.name}-`));
}

async function seesWorkspace(base: string, token: string): Promise<boolean> {
  const res = await post<{ workspace: { id: string } | null }>(base, WORKSPACE, { id: workspaceId }, token);
  return res.data?.workspace?.id === workspaceId;
}

describe("principals kept across requests", () => {
  it("an unchanged principal is kept: a signed-in request after the first sends one statement (token and epoch together)", async () => {
    const m = await person(a, org.orgId, "kept", [READ]);
    await warm(m);
    const before = b.db.statementCount();
    for (let i = 0; i < 5; i++) expect(await nameOn(baseB, m.token)).toMatch(new RegExp(`^${m.name}-`));
    expect(b.db.statementCount() - before).toBe(5);
  });

  it("a change to anything a principal is made of, in any organization, is seen by the next request (the epoch moved)", async () => {
    const m = await person(a, org.orgId, "other-org", [READ]);
    await warm(m);
    const other = await createOrg(a.db);
    const before = b.db.statementCount();
    expect(await nameOn(baseB, m.token)).toMatch(new RegExp(`^${m.name}-`));
    // The other org's creation bumped the epoch: the principal was loaded again (token + principal).
    expect(b.db.statementCount() - before).toBe(2);
    expect(other.orgId).not.toBe(org.orgId);
  });
});

describe("the very next request after a change on another server", () => {
  it("a token revoked with revokeApiToken on A is refused by B's next request", async () => {
    const m = await person(a, org.orgId, "revoked", [READ]);
    const t = await issueToken(a.db.prisma, { userId: m.userId, orgId: org.orgId, name: "to revoke" });
    await warm({ ...m, token: t.token });
    const res = await post(baseA, REVOKE, { id: t.id }, org.adminToken);
    expect(res.data.revokeApiToken.__typename).toBe("MutationRevokeApiTokenSuccess");
    expect(codeOf(await post(baseB, VIEWER, undefined, t.token))).toBe("UNAUTHENTICATED");
    // The member's other token still works.
    expect(await nameOn(baseB, m.token)).toMatch(new RegExp(`^${m.name}-`));
  });

  it("a token revoked by a plain SQL UPDATE (no event, no epoch) is refused by B's next request", async () => {
    const m = await person(a, org.orgId, "revoked-sql", [READ]);
    const t = await issueToken(a.db.prisma, { userId: m.userId, orgId: org.orgId, name: "revoked in SQL" });
    await warm({ ...m, token: t.token });
    await a.db.sql.query(`UPDATE api_tokens SET "revokedAt" = now() WHERE id = $1`, [t.id]);
    expect(codeOf(await post(baseB, VIEWER, undefined, t.token))).toBe("UNAUTHENTICATED");
  });

  it("a token whose expiresAt passes is refused by the next request, with no write at all", async () => {
    const m = await person(a, org.orgId, "expiring", [READ]);
    const expiresAt = new Date(Date.now() + 1_500);
    const t = await issueToken(a.db.prisma, { userId: m.userId, orgId: org.orgId, name: "short", expiresAt });
    await warm({ ...m, token: t.token });
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt.getTime() - Date.now()) + 200));
    expect(codeOf(await post(baseB, VIEWER, undefined, t.token))).toBe("UNAUTHENTICATED");
  });

  it("a token expired by a plain SQL UPDATE of expiresAt is refused by B's next request", async () => {
    const m = await person(a, org.orgId, "expired-sql", [READ]);
    await warm(m);
    await a.db.sql.query(`UPDATE api_tokens SET "expiresAt" = now() - interval '1 second' WHERE "userId" = $1`, [m.userId]);
    expect(codeOf(await post(baseB, VIEWER, undefined, m.token))).toBe("UNAUTHENTICATED");
  });

  it("a role unassigned on A: B's next request no longer holds its grant", async () => {
    const m = await person(a, org.orgId, "unassigned", [READ]);
    await warm(m);
    expect(await seesWorkspace(baseB, m.token)).toBe(true);
    const res = await post(baseA, UNASSIGN, { id: m.userId }, org.adminToken);
    expect(res.data.unassignRole.__typename).toBe("MutationUnassignRoleSuccess");
    expect(await seesWorkspace(baseB, m.token)).toBe(false);
    // Still a member, so still signed in: only the grant went.
    expect(await nameOn(baseB, m.token)).toMatch(new RegExp(`^${m.name}-`));
  });

  it("a role assignment deleted by plain SQL: B's next request no longer holds its grant", async () => {
    const m = await person(a, org.orgId, "deleted-assignment", [READ]);
    await warm(m);
    expect(await seesWorkspace(baseB, m.token)).toBe(true);
    await a.db.sql.query(`DELETE FROM role_assignments WHERE "userId" = $1`, [m.userId]);
    expect(await seesWorkspace(baseB, m.token)).toBe(false);
  });

  it("a grant removed from the member's role by plain SQL: B's next request no longer holds it", async () => {
    const m = await person(a, org.orgId, "removed-grant", [READ]);
    await warm(m);
    expect(await seesWorkspace(baseB, m.token)).toBe(true);
    await a.db.sql.query(
      `DELETE FROM role_permissions WHERE "roleId" IN (SELECT "roleId" FROM role_assignments WHERE "userId" = $1)`,
      [m.userId],
    );
    expect(await seesWorkspace(baseB, m.token)).toBe(false);
  });

  it("a member deactivated on A is refused by B's next request", async () => {
    const m = await person(a, org.orgId, "deactivated", [READ]);
    await warm(m);
    const res = await post(baseA, DEACTIVATE, { id: m.userId }, org.adminToken);
    expect(res.data.deactivateMember.__typename).toBe("MutationDeactivateMemberSuccess");
    const next = await post(baseB, VIEWER, undefined, m.token);
    expect(next.data?.viewer ?? null).toBeNull();
    expect(codeOf(next)).toBe("NOT_FOUND");
    expect(await seesWorkspace(baseB, m.token)).toBe(false);
  });

  it("a member deactivated by a plain SQL UPDATE is refused by B's next request", async () => {
    const m = await person(a, org.orgId, "deactivated-sql", [READ]);
    await warm(m);
    await a.db.sql.query(`UPDATE memberships SET "deactivatedAt" = now() WHERE "userId" = $1 AND "orgId" = $2`, [m.userId, org.orgId]);
    expect(codeOf(await post(baseB, VIEWER, undefined, m.token))).toBe("NOT_FOUND");
  });

  it("a granted role is held by B's next request too (kept principals never lag a grant)", async () => {
    const m = await person(a, org.orgId, "granted", []);
    await warm(m);
    expect(await seesWorkspace(baseB, m.token)).toBe(false);
    await a.db.sql.query(
      `INSERT INTO role_permissions ("id", "roleId", "resourceType", "action", "resourcePattern", "authzGroup")
       SELECT gen_random_uuid()::text, "roleId", 'workspace', 'read', '', '' FROM role_assignments WHERE "userId" = $1`,
      [m.userId],
    );
    expect(await seesWorkspace(baseB, m.token)).toBe(true);
  });
});
