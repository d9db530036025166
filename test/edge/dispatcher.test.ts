import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDispatcher, type HttpRoute } from "../../src/edge/http.js";
import { raw } from "./world.js";

/**
 * The dispatcher the server runs (src/edge/http.ts), on a real port, with routes that fail the
 * ways a bug would: a handler that throws before answering is answered 500 with an error id that
 * the log line carries too; one that throws mid-answer has its connection closed; neither reaches
 * the process, and the next request is served.
 */

const logged: Array<{ errorId: string; owner?: string; err: unknown }> = [];
const escaped: unknown[] = [];
const onEscape = (e: unknown) => escaped.push(e);
let server: Server;
let base: string;

const routes: HttpRoute[] = [
  { owner: "sync-throw", methods: ["GET"], path: "/sync", credential: "none", handle: () => { throw new RangeError("Maximum call stack size exceeded"); } },
  { owner: "async-throw", methods: ["POST"], path: "/async", credential: "none", handle: async () => { await new Promise((r) => setTimeout(r, 5)); throw new Error("boom"); } },
  {
    owner: "mid-answer",
    methods: ["GET"],
    path: "/mid",
    credential: "none",
    handle: async (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain", "content-length": "100" });
      res.write("partial");
      throw new Error("after the head");
    },
  },
  { owner: "declines", methods: ["GET"], path: "/declines/", prefix: true, credential: "none", handle: () => false },
  { owner: "ok", methods: ["GET", "HEAD"], path: "/ok", credential: "none", handle: (_req, res) => (res.writeHead(200).end("ok"), true) },
];

beforeAll(async () => {
  process.on("unhandledRejection", onEscape);
  process.on("uncaughtException", onEscape);
  server = createServer(createDispatcher(routes, { error: (obj) => logged.push(obj as (typeof logged)[number]) }));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  process.off("unhandledRejection", onEscape);
  process.off("uncaughtException", onEscape);
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe("the dispatcher contains every handler failure", () => {
  it("a throw before the answer (sync or async) is 500 with an error id, the same id logged with the error", async () => {
    for (const [method, path, message] of [["GET", "/sync", "Maximum call stack size exceeded"], ["POST", "/async", "boom"]] as const) {
      const answer = await raw(base, method, path, {}, method === "POST" ? Buffer.from("{}") : null);
      if (answer.status === null) throw new Error(answer.error);
      expect(answer.status).toBe(500);
      const body = JSON.parse(answer.body) as { error: string; error_id: string; message: string };
      expect(body).toMatchObject({ error: "internal_error" });
      expect(body.message).toContain(body.error_id);
      const line = logged.find((l) => l.errorId === body.error_id);
      expect(line).toBeDefined();
      expect((line!.err as Error).message).toBe(message);
      // The error's own message never reaches the client.
      expect(answer.body).not.toContain(message);
    }
  });

  it("a throw after the answer began closes that connection; the next request is served", async () => {
    const cut = await raw(base, "GET", "/mid", {}, null);
    expect(cut.status === null || cut.status === 200).toBe(true);
    if (cut.status === 200) expect(cut.body.length).toBeLessThan(100);
    expect(logged.some((l) => l.owner === "mid-answer")).toBe(true);
    expect((await raw(base, "GET", "/ok", {}, null)).status).toBe(200);
  });

  it("a path no route names is 404, a method a route does not take is 405 with Allow, a route that declines is 404", async () => {
    expect((await raw(base, "GET", "/nowhere", {}, null)).status).toBe(404);
    const wrong = await raw(base, "DELETE", "/ok", {}, null);
    expect(wrong.status).toBe(405);
    expect(wrong.status !== null && wrong.headers.allow).toBe("GET, HEAD");
    expect((await raw(base, "GET", "/declines/anything", {}, null)).status).toBe(404);
    expect(escaped).toEqual([]);
  });
});
