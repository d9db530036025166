// The check API without GraphQL, for the http bench's batch rows (bench/http.ts starts it as its
// own process): a node:http handler that does what a check endpoint beside GraphQL would have to
// do for one request — read the token with its authz epoch (one statement), take one Redis round
// trip (the product takes the token's rate there), answer the batch with the product's own
// checkPermissions (its resource statement, the principals kept across requests under the
// epoch, as the server keeps them) and write the answers as JSON. No GraphQL parse, validation,
// variable coercion or execution. Not a product surface: a measure of what leaving GraphQL
// would save. `POST /check` with `{ "checks": [...] }` and the token; anything else answers 200
// (bench/http.ts's readiness probe).

import { createServer } from "node:http";
import { Redis } from "ioredis";
import { authenticateWithEpoch } from "../src/auth/authenticate.js";
import { hashToken } from "../src/auth/tokens.js";
import { Authz, type SignedInAuthz } from "../src/authz/authz.js";
import { EpochCache, type PrincipalCache } from "../src/authz/principal.js";
import { openPostgres } from "../src/infra/db.js";
import { checkPermissions, type PermissionCheckInput } from "../src/services/permission-check.js";

const db = await openPostgres(process.env.DATABASE_URL!, process.env.DATABASE_SCHEMA);
const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
const principals: PrincipalCache = new EpochCache();

const server = createServer(async (req, res) => {
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (req.url !== "/check") return void res.writeHead(200).end("{}");
    const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "")?.[1];
    const key = `bench:check-bare:${token ? hashToken(token).slice(0, 16) : "anonymous"}`;
    const [authenticated] = await Promise.all([authenticateWithEpoch(db.sql, token ? hashToken(token) : null), redis.multi().incr(key).pexpire(key, 1000).exec()]);
    if (!authenticated) return void res.writeHead(401).end();
    const authz = new Authz(db.sql, authenticated.viewer, { cache: principals, epoch: authenticated.authzEpoch }) as SignedInAuthz;
    const { checks } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { checks: PermissionCheckInput[] };
    const data = await checkPermissions({ db, authz }, checks);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data }));
  } catch (error) {
    res.writeHead(500).end(String((error as Error).message));
  }
});
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1");
process.on("SIGTERM", () => server.close(() => void Promise.all([db.close(), redis.quit()]).then(() => process.exit(0))));
