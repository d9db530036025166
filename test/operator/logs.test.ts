// Log hygiene: a refused operation (a query bomb, an invalid or malformed query, variables that
// do not coerce, a bad token, a rate limit) writes ONE line at info or warn, with no stack; only
// a truly unexpected failure writes at error, carrying the id the client was shown.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { createLogger } from "../../src/infra/logger.js";
import { OPERATION_LIMITS } from "../../src/app.js";
import { trackedClient } from "./ws.js";

let t: TestApp;
let base: string;
let org: OrgFixture;
const lines: Record<string, any>[] = [];

beforeAll(async () => {
  const logger = createLogger("info", { write: (line: string) => void lines.push(JSON.parse(line)) });
  t = await startTestApp({ logger, env: { COUNTERSIGN_RATE_LIMIT_RPS: "1", COUNTERSIGN_RATE_LIMIT_BURST: "3" } });
  base = await t.listen();
  org = await createOrg(t.db);
});
afterAll(() => t.close());

/** The lines logged while `fn` ran. */
async function logged(fn: () => Promise<unknown>): Promise<Record<string, any>[]> {
  const from = lines.length;
  await fn();
  await new Promise((r) => setTimeout(r, 50));
  return lines.slice(from);
}

const INFO = 30;
const WARN = 40;
const ERROR = 50;

let depthBomb = "id";
for (let i = 0; i <= OPERATION_LIMITS.maxDepth; i++) depthBomb = `stacks { edges { node { ${depthBomb} } } }`;

describe("refused operations: one line at info or warn, no stack", () => {
  const cases: [string, () => Promise<unknown>, string][] = [
    ["a depth bomb", () => t.gql(`query Bomb { ${depthBomb} }`, {}, org.adminToken), "GRAPHQL_VALIDATION_FAILED"],
    ["an alias bomb", () => t.gql(`query Aliases { ${Array.from({ length: OPERATION_LIMITS.maxAliases + 1 }, (_, i) => `a${i}: viewer { id }`).join(" ")} }`, {}, org.adminToken), "GRAPHQL_VALIDATION_FAILED"],
    ["a token bomb", () => t.gql(`query Tokens { ${Array.from({ length: OPERATION_LIMITS.maxTokens }, () => "__typename").join(" ")} }`, {}, org.adminToken), "GRAPHQL_PARSE_FAILED"],
    ["an invalid query", () => t.gql(`query Invalid { nope }`, {}, org.adminToken), "GRAPHQL_VALIDATION_FAILED"],
    ["a syntax error", () => t.gql(`query Broken { viewer { id }`, {}, org.adminToken), "GRAPHQL_PARSE_FAILED"],
    ["variables that do not coerce", () => t.gql(`query Vars($id: ID!) { workspace(id: $id) { id } }`, {}, org.adminToken), "BAD_REQUEST"],
    ["a bad token", () => t.gql(`query BadToken { viewer { id } }`, {}, "cs_not-a-token"), "UNAUTHENTICATED"],
  ];
  for (const [what, send, outcome] of cases) {
    it(`${what}: one ${outcome} line, no error level, no stack`, async () => {
      const out = await logged(send);
      expect(out.filter((l) => l.level >= ERROR)).toEqual([]);
      expect(JSON.stringify(out)).not.toContain('"stack"');
      const refused = out.filter((l) => l.msg === "graphql operation refused");
      expect(refused).toHaveLength(1);
      expect(refused[0]).toMatchObject({ level: INFO, outcome });
      expect(out.filter((l) => l.msg?.startsWith("graphql operation"))).toHaveLength(1);
    });
  }

  it("a rate-limited request: one warn line, no stack", async () => {
    const out = await logged(async () => {
      for (let i = 0; i < 6; i++) {
        const res = await fetch(`${base}/graphql`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${org.adminToken}` },
          body: JSON.stringify({ query: "{ viewer { id } }" }),
        });
        await res.arrayBuffer();
      }
    });
    const limited = out.filter((l) => l.msg === "request rate limited");
    expect(limited.length).toBeGreaterThanOrEqual(1);
    for (const l of limited) expect(l.level).toBe(WARN);
    expect(out.filter((l) => l.level >= ERROR)).toEqual([]);
    expect(JSON.stringify(out)).not.toContain('"stack"');
    expect(JSON.stringify(out)).not.toContain(org.adminToken);
  });
});

describe("refused over WebSocket", () => {
  it("a depth bomb or a syntax error ends that operation with an error, not the socket, and logs one info line", async () => {
    await new Promise((r) => setTimeout(r, 3_100)); // the rate test above spent this token's bucket
    const { client, closed } = trackedClient(base, org.adminToken, { lazy: false });
    let socketClosed = false;
    void closed.then(() => (socketClosed = true));
    const run = (query: string) =>
      new Promise<any>((resolve) => {
        let last: unknown = null;
        client.subscribe({ query }, { next: (r) => (last = r), error: (e) => resolve({ error: e }), complete: () => resolve(last) });
      });
    try {
      const out = await logged(async () => {
        const bomb = await run(`query WsBomb { ${depthBomb} }`);
        expect(JSON.stringify(bomb.error)).toMatch(/depth/i);
        const broken = await run(`query WsBroken { viewer {`);
        expect(JSON.stringify(broken.error)).toMatch(/Syntax Error/);
      });
      expect(out.filter((l) => l.level >= ERROR)).toEqual([]);
      expect(out.filter((l) => l.msg === "graphql operation refused").map((l) => l.outcome)).toEqual(["GRAPHQL_VALIDATION_FAILED", "GRAPHQL_PARSE_FAILED"]);
      // The same socket still serves (once this file's 1 rps bucket has a request again).
      await new Promise((r) => setTimeout(r, 1_100));
      const ok = await run(`query WsViewer { viewer { id } }`);
      expect(ok?.data?.viewer?.id, JSON.stringify(ok)).toBe(org.adminId);
      expect(socketClosed).toBe(false);
    } finally {
      await client.dispose();
    }
  });
});

describe("unexpected failures", () => {
  it("log once at error with the errorId the client saw", async () => {
    // A real fault: the table behind `stacks` disappears under the running app (this file's own schema).
    await t.db.sql.query(`ALTER TABLE stacks RENAME TO stacks_moved`);
    try {
      let res: any;
      const out = await logged(async () => (res = await t.gql(`query Stacks { stacks { edges { node { id } } } }`, {}, org.adminToken)));
      const message: string = res.errors[0].message;
      const id = /Unexpected error \(id ([0-9a-f-]{36})\)/.exec(message)?.[1];
      expect(id).toBeTruthy();
      const errors = out.filter((l) => l.level >= ERROR);
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatchObject({ errorId: id, msg: "unexpected error" });
      expect(errors[0]!.err.stack).toBeTruthy();
    } finally {
      await t.db.sql.query(`ALTER TABLE stacks_moved RENAME TO stacks`);
    }
  });
});
