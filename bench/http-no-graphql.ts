// The check API and the dashboard's workspace list without GraphQL, for the http bench's context
// rows (bench/http.ts starts it as its own process, under tsx): node:http handlers doing what an
// endpoint beside GraphQL would have to do for one request, and no more. Each reads the token
// with its authz epoch (one statement) while taking one Redis round trip (the product takes the
// token's rate there), then:
//
// - `POST /check` with `{ "checks": [...] }`: the product's checkPermissions (its resource
//   statement, the principals kept across requests under the epoch, as the server keeps them);
// - `POST /workspaces`: the product's listWorkspaceIds (first 100) and workspaceListRows, the
//   people the rows name in one statement, whether the caller may approve each workspace, written
//   as the dashboard's WorkspaceFields (operations/fragments.graphql) but for the answers of
//   what the caller may reserve or release.
//
// No GraphQL parse, validation, coercion, execution, completion or per-object read rule (every
// row comes from workspaces the caller may read). Not a product surface: a measure of what
// leaving GraphQL would save. Anything else answers 200 (bench/http.ts's readiness probe).

import { createServer, type IncomingMessage } from "node:http";
import { Redis } from "ioredis";
import { authenticateWithEpoch } from "../src/auth/authenticate.js";
import { hashToken } from "../src/auth/tokens.js";
import { Authz, type SignedInAuthz } from "../src/authz/authz.js";
import { EpochCache, type PrincipalCache } from "../src/authz/principal.js";
import { openPostgres } from "../src/infra/db.js";
import { checkPermissions, type PermissionCheckInput } from "../src/services/permission-check.js";
import { peopleNamedBy, workspaceListRows } from "../src/services/workspace-list.js";
import { listWorkspaceIds } from "../src/services/workspaces.js";

const db = await openPostgres(process.env.DATABASE_URL!, process.env.DATABASE_SCHEMA);
const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
const principals: PrincipalCache = new EpochCache();

async function signedIn(req: IncomingMessage): Promise<SignedInAuthz | null> {
  const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "")?.[1];
  const tokenHash = token ? hashToken(token) : null;
  const key = `bench:no-graphql:${tokenHash?.slice(0, 16) ?? "anonymous"}`;
  const [authenticated] = await Promise.all([authenticateWithEpoch(db.sql, tokenHash), redis.multi().incr(key).pexpire(key, 1000).exec()]);
  return authenticated ? (new Authz(db.sql, authenticated.viewer, { cache: principals, epoch: authenticated.authzEpoch }) as SignedInAuthz) : null;
}

async function workspaces(authz: SignedInAuthz): Promise<unknown> {
  const page = await listWorkspaceIds(db, authz, { first: 100, after: null });
  const rows = await workspaceListRows(db, page.rows.map((r) => r.id));
  const ids = new Set(peopleNamedBy(rows).filter((id) => id !== null));
  const people = new Map(
    (await db.sql.query<{ id: string; name: string }>(`SELECT id, name FROM users WHERE id = ANY($1::text[])`, [[...ids]], { prepare: true })).map((u) => [u.id, u]),
  );
  const person = (id: string | null) => (id ? (people.get(id) ?? null) : null);
  const nodes = await Promise.all(
    rows.map(async (w) => ({
      id: w.id,
      name: w.name,
      environment: w.environment,
      archived: w.archivedAt !== null,
      frozen: w.frozen,
      requiredApprovals: w.requiredApprovals,
      viewerCanApprove: await authz.check({ resourceType: "workspace", action: "approve", matchValue: w.name, groups: w.stack.authzGroups }),
      stack: { id: w.stack.id, name: w.stack.name },
      reservations: w.reservations.map((r) => ({
        id: r.id,
        active: r.releasedAt === null,
        holderKind: r.holderRoleId ? "ROLE" : "USER",
        holderUser: person(r.holderUserId),
        holderRole: r.holderRole ? { id: r.holderRole.id, key: r.holderRole.key, name: r.holderRole.name } : null,
        placedBy: person(r.placedById),
        placedAt: r.placedAt,
        releasedAt: r.releasedAt,
        releasedBy: person(r.releasedById),
        releaseReason: r.releaseReason,
      })),
      openPlans: w.plans.map((p) => ({
        id: p.id,
        status: p.status,
        createdAt: p.createdAt,
        changeCount: p._count.changes,
        targeted: p.targeted,
        submittedBy: person(p.submittedById),
        approvals: p.approvals.map((a) => ({ id: a.id, approvedAt: a.createdAt, user: person(a.userId), withdrawnAt: a.withdrawnAt, withdrawnBy: person(a.withdrawnById) })),
      })),
    })),
  );
  return { edges: nodes.map((node) => ({ node })), pageInfo: { hasNextPage: page.hasNextPage } };
}

const server = createServer(async (req, res) => {
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (req.url !== "/check" && req.url !== "/workspaces") return void res.writeHead(200).end("{}");
    const authz = await signedIn(req);
    if (!authz) return void res.writeHead(401).end();
    const data =
      req.url === "/check"
        ? await checkPermissions({ db, authz }, (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { checks: PermissionCheckInput[] }).checks)
        : await workspaces(authz);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data }));
  } catch (error) {
    res.writeHead(500).end(String((error as Error).message));
  }
});
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1");
process.on("SIGTERM", () => server.close(() => void Promise.all([db.close(), redis.quit()]).then(() => process.exit(0))));
