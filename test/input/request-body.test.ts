// A body read within the cap (readBodyWithinLimit) and handed to yoga (handBodyToYoga) must reach
// it as cheaply as yoga reading the socket itself, and be answered exactly as yoga would answer
// it: @whatwg-node/server lists the keys of whatever it is handed, so handing the bytes made a
// 1 MiB body cost one string per byte before anything was parsed.
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createSchema, createYoga } from "graphql-yoga";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { handBodyToYoga, readBodyWithinLimit, yogaBodyOf } from "../../src/edge/body-limit.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";

const KiB = 1024;

const yoga = createYoga({
  schema: createSchema({
    typeDefs: /* GraphQL */ `
      type Query {
        echo(values: [String!], note: String): String!
      }
    `,
    resolvers: { Query: { echo: (_: unknown, args: { values?: string[] | null; note?: string | null }) => JSON.stringify(args) } },
  }),
  logging: false,
  maxRequestBodySize: false,
});

/** One yoga, two ways in: reading the request itself, or handed what readBodyWithinLimit read. */
async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`, server };
}
let itself: { url: string; server: Server };
let handed: { url: string; server: Server };
beforeAll(async () => {
  itself = await listen((req, res) => void yoga.requestListener(req, res));
  handed = await listen(async (req, res) => {
    const body = await readBodyWithinLimit(req, res, 1024 * KiB);
    if (!body) return;
    handBodyToYoga(req, body);
    await yoga.requestListener(req, res);
  });
});
afterAll(() => {
  itself?.server.close();
  handed?.server.close();
});

const query = "query Echo($values: [String!], $note: String) { echo(values: $values, note: $note) }";
const utf8 = (text: string) => Buffer.from(text, "utf8");
/** Every kind of body a client can send: what yoga accepts, and each way it can be wrong. */
const BODIES: Record<string, Buffer> = {
  "a query": utf8(JSON.stringify({ query })),
  "a query with variables and a name": utf8(JSON.stringify({ query, variables: { values: ["a", "b"], note: "n" }, operationName: "Echo" })),
  "a query with extensions": utf8(JSON.stringify({ query, extensions: { any: { nested: [1, 2] } } })),
  "an object of 20 keys": utf8(JSON.stringify(Object.fromEntries([["query", query], ...Array.from({ length: 19 }, (_, i) => [`k${i}`, i])]))),
  "an object of 20,000 keys": utf8(JSON.stringify(Object.fromEntries([["query", query], ...Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i])]))),
  "a batch (an array)": utf8(JSON.stringify([{ query }, { query }])),
  "an array of 100,000 numbers": utf8(JSON.stringify(Array.from({ length: 100_000 }, (_, i) => i))),
  "a string": utf8(JSON.stringify("{ echo }")),
  "a number": utf8("42"),
  "null": utf8("null"),
  "true": utf8("true"),
  "an empty object": utf8("{}"),
  "invalid JSON": utf8('{"query": '),
  "JSON after a byte order mark": Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8(JSON.stringify({ query }))]),
  "bytes that are not UTF-8": Buffer.from([0x7b, 0x22, 0x71, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
  "a GraphQL document": utf8("{ echo }"),
  "a form": utf8(`query=${encodeURIComponent(query)}&variables=${encodeURIComponent('{"note":"f"}')}`),
  "200 KiB of a query's variables": utf8(JSON.stringify({ query, variables: { note: "x".repeat(200 * KiB) } })),
};
const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "application/graphql+json",
  "application/foo+json",
  "application/graphql",
  "application/x-www-form-urlencoded",
  "text/plain",
  "multipart/form-data; boundary=x",
  null,
] as const;

async function post(url: string, body: Buffer, contentType: string | null): Promise<{ status: number; type: string | null; text: string }> {
  const res = await fetch(url, { method: "POST", body: new Uint8Array(body), headers: contentType ? { "content-type": contentType } : {} });
  return { status: res.status, type: res.headers.get("content-type"), text: await res.text() };
}

describe("a body handed to yoga", () => {
  it("is answered exactly as yoga answers it reading the request itself, for every kind of body and content type", async () => {
    const differ: string[] = [];
    let executed = 0;
    for (const [kind, body] of Object.entries(BODIES)) {
      for (const contentType of CONTENT_TYPES) {
        const expected = await post(itself.url, body, contentType);
        const got = await post(handed.url, body, contentType);
        if (got.status !== expected.status || got.type !== expected.type || got.text !== expected.text) {
          differ.push(`${kind} as ${contentType}: ${got.status} ${got.text.slice(0, 120)} (yoga itself: ${expected.status} ${expected.text.slice(0, 120)})`);
        }
        if (expected.status === 200 && expected.text.includes('"echo"')) executed++;
      }
    }
    expect(differ).toEqual([]);
    // The matrix reaches execution, not only yoga's refusals: JSON, GraphQL and form bodies run.
    expect(executed).toBeGreaterThanOrEqual(10);
  });

  it("has at most a few keys, whatever was sent: @whatwg-node lists them all", () => {
    for (const [kind, body] of Object.entries(BODIES)) {
      for (const contentType of CONTENT_TYPES) {
        const keys = Object.keys(yogaBodyOf(body, contentType ?? undefined)).length;
        expect({ kind, contentType, atMost16: keys <= 16 }).toEqual({ kind, contentType, atMost16: true });
      }
    }
    // What it replaces: the bytes themselves have a key per byte.
    expect(Object.keys(BODIES["200 KiB of a query's variables"]!).length).toBeGreaterThan(200 * KiB);
  });

  it("is yoga's parsed object for a JSON request of a few keys (nothing parsed twice), and bytes otherwise", () => {
    const object = yogaBodyOf(BODIES["a query with variables and a name"]!, "application/json");
    expect(object).toEqual({ query, variables: { values: ["a", "b"], note: "n" }, operationName: "Echo" });
    // A JSON body under a content type naming no json stays bytes: yoga refuses it (415), not @whatwg-node's parsed path.
    expect(yogaBodyOf(BODIES["a query"]!, "text/plain")).not.toEqual({ query });
    expect(Symbol.asyncIterator in yogaBodyOf(BODIES["a query"]!, "text/plain")).toBe(true);
    expect(Symbol.asyncIterator in yogaBodyOf(BODIES["an object of 20,000 keys"]!, "application/json")).toBe(true);
  });

  it("parses nothing that cannot be an object: yoga parses an array, a scalar or a byte order mark, once", () => {
    const parse = JSON.parse;
    let parsed = 0;
    JSON.parse = ((text: string, reviver?: Parameters<typeof parse>[1]) => (parsed++, parse(text, reviver))) as typeof JSON.parse;
    try {
      for (const kind of ["a batch (an array)", "an array of 100,000 numbers", "a string", "a number", "null", "true", "JSON after a byte order mark"]) {
        expect(Symbol.asyncIterator in yogaBodyOf(BODIES[kind]!, "application/json"), kind).toBe(true);
      }
      expect(parsed).toBe(0);
      yogaBodyOf(utf8(` \n\t${JSON.stringify({ query })}`), "application/json");
      expect(parsed).toBe(1);
    } finally {
      JSON.parse = parse;
    }
  });
});

describe("/graphql takes a body of any shape within the cap, and goes on serving", () => {
  let t: TestApp;
  let org: OrgFixture;
  let baseUrl: string;
  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t.db);
    baseUrl = await t.listen();
  });
  afterAll(() => t?.close());

  const nearlyMiB = (fill: (n: number) => string) => utf8(fill(1000 * KiB));
  const cases: [string, Buffer, string, number][] = [
    ["an array of numbers", nearlyMiB((n) => `[${"0,".repeat(n / 2 - 1)}0]`), "application/json", 400],
    ["an object of many keys", nearlyMiB((n) => `{"query":"{ viewer { id } }",${Array.from({ length: n / 16 }, (_, i) => `"k${i}":0`).join(",")}}`), "application/json", 400],
    ["text", nearlyMiB((n) => "x".repeat(n)), "text/plain", 415],
    ["invalid JSON", nearlyMiB((n) => `{"query":"${"x".repeat(n)}`), "application/json", 400],
  ];
  it("an invalid body is refused with its code, its status and the parser's reason, not quoted back whole", async () => {
    const marker = "QUOTED-BACK-";
    const invalid: Record<string, string> = {
      "an unterminated string": `{"query": "${marker.repeat(20_000)}`,
      "trailing text": `{"query": "{ viewer { id } }"} ${marker.repeat(20_000)}`,
      "a bare word": marker.repeat(20_000),
      // Two paddings: in one of them the cut falls between the halves of a pair.
      "astral characters at the cut": `{"query": "${"😀".repeat(60_000)}`,
      "astral characters at the cut, one further": `{"query":  "${"😀".repeat(60_000)}`,
    };
    for (const [kind, body] of Object.entries(invalid)) {
      for (const accept of ["application/json", "application/graphql-response+json"]) {
        const res = await fetch(`${baseUrl}/graphql`, { method: "POST", body, headers: { "content-type": "application/json", accept, authorization: `Bearer ${org.adminToken}` } });
        const text = await res.text();
        expect({ kind, accept, status: res.status }).toEqual({ kind, accept, status: 400 });
        expect(text.length, `${kind}: ${text.slice(0, 300)}`).toBeLessThan(1000);
        const json = JSON.parse(text) as { errors: { message: string; extensions: { code: string; originalError: { name: string; message: string } } }[] };
        expect(json.errors[0]).toMatchObject({ message: "POST body sent invalid JSON.", extensions: { code: "BAD_REQUEST", originalError: { name: "SyntaxError" } } });
        // The reason is kept (cut, never inside a surrogate pair), not the body it quoted.
        expect(json.errors[0]!.extensions.originalError.message).toMatch(/JSON/);
        expect(json.errors[0]!.extensions.originalError.message.endsWith("…")).toBe(true);
        expect(json.errors[0]!.extensions.originalError.message).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
      }
    }
  });

  it("a body that must be text (JSON, a GraphQL document, a form) and is not UTF-8 is refused before yoga decodes it; other types are answered as before", async () => {
    const notUtf8 = { "nine bytes": BODIES["bytes that are not UTF-8"]!, "1 MiB of random bytes": randomBytes(1000 * KiB) };
    const send = (body: Buffer, contentType: string | null) =>
      fetch(`${baseUrl}/graphql`, { method: "POST", body: new Uint8Array(body), headers: { ...(contentType ? { "content-type": contentType } : {}), authorization: `Bearer ${org.adminToken}` } });
    for (const [kind, body] of Object.entries(notUtf8)) {
      for (const contentType of ["application/json", "Application/JSON; charset=utf-8", "application/graphql+json", "application/graphql", "application/x-www-form-urlencoded"]) {
        const res = await send(body, contentType);
        expect({ kind, contentType, status: res.status }).toEqual({ kind, contentType, status: 400 });
        expect(await res.json()).toEqual({ errors: [{ message: expect.stringContaining("not valid UTF-8"), extensions: { code: "BAD_REQUEST" } }] });
      }
      // Types yoga does not read as text keep yoga's answer (415 unread; multipart as parts).
      for (const [contentType, status] of [["text/plain", 415], ["application/octet-stream", 415], [null, 415], ["multipart/form-data; boundary=x", 400]] as const) {
        const res = await send(body, contentType);
        expect({ kind, contentType, status: res.status }).toEqual({ kind, contentType, status });
        expect(await res.text()).not.toContain("not valid UTF-8");
      }
    }
    // Text that is UTF-8 still reaches yoga: its own refusal of invalid JSON.
    const invalidJson = await send(utf8('{"query": '), "application/json");
    expect(invalidJson.status).toBe(400);
    expect(((await invalidJson.json()) as { errors: { message: string }[] }).errors[0]!.message).toBe("POST body sent invalid JSON.");
  });

  for (const [kind, body, contentType, status] of cases) {
    it(`${kind}, ~1 MiB, as ${contentType}: ${status}`, async () => {
      const res = await fetch(`${baseUrl}/graphql`, { method: "POST", body: new Uint8Array(body), headers: { "content-type": contentType, authorization: `Bearer ${org.adminToken}` } });
      expect(res.status).toBe(status);
      await res.arrayBuffer();
      const after = await fetch(`${baseUrl}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${org.adminToken}` },
        body: JSON.stringify({ query: "{ viewer { id } }" }),
      });
      expect(((await after.json()) as { data: { viewer: { id: string } } }).data.viewer.id).toBe(org.adminId);
    });
  }
});

