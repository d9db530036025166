// The /graphql body cap and the WebSocket message cap, against a real listening server.
import { request } from "node:http";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";

const MiB = 1024 * 1024;

let t: TestApp;
let org: OrgFixture;
let baseUrl: string;
beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  baseUrl = await t.listen();
});
afterAll(() => t?.close());

/** A query whose body is about `bytes` long (the padding is an unused variable). */
function bodyOf(bytes: number): string {
  const shell = JSON.stringify({ query: "{ viewer { id } }", variables: { pad: "" } });
  return JSON.stringify({ query: "{ viewer { id } }", variables: { pad: "x".repeat(Math.max(0, bytes - shell.length)) } });
}

/** POST without Content-Length: the body goes out chunked, in 64 KiB pieces. */
function postChunked(url: string, body: string): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/graphql`,
      { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${org.adminToken}` } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode!, json: JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    const pieces = body.match(/[\s\S]{1,65536}/g) ?? [];
    Readable.from(pieces).pipe(req);
  });
}

describe("the /graphql request body is capped (COUNTERSIGN_MAX_BODY_BYTES, 1 MiB by default)", () => {
  it("the default cap is 1 MiB", () => {
    expect(t.config.maxBodyBytes).toBe(MiB);
  });

  it("a 2 MiB body with Content-Length answers 413 with a GraphQL-style JSON error, before parsing", async () => {
    const res = await fetch(`${baseUrl}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${org.adminToken}` },
      body: bodyOf(2 * MiB),
    });
    expect(res.status).toBe(413);
    expect(res.headers.get("content-type")).toMatch(/application\/json/);
    const json = (await res.json()) as any;
    expect(json.errors[0]).toMatchObject({ extensions: { code: "PAYLOAD_TOO_LARGE", maxBytes: MiB } });
  });

  it("a 2 MiB chunked body (no Content-Length) is counted as it arrives and answers 413", async () => {
    const res = await postChunked(baseUrl, bodyOf(2 * MiB));
    expect(res.status).toBe(413);
    expect(res.json.errors[0].extensions.code).toBe("PAYLOAD_TOO_LARGE");
  });

  it("a 900 KiB body is executed as usual, with Content-Length or chunked", async () => {
    const res = await fetch(`${baseUrl}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${org.adminToken}` },
      body: bodyOf(900 * 1024),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).data.viewer.id).toBe(org.adminId);
    const chunked = await postChunked(baseUrl, bodyOf(900 * 1024));
    expect(chunked.status).toBe(200);
    expect(chunked.json.data.viewer.id).toBe(org.adminId);
  });

  it("an empty POST body gets the ordinary GraphQL error, not a hang", async () => {
    const res = await fetch(`${baseUrl}/graphql`, { method: "POST", headers: { "content-type": "application/json" }, body: "" });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expect(((await res.json()) as any).errors.length).toBeGreaterThan(0);
  });

  it("the server keeps serving after refusing a body", async () => {
    await postChunked(baseUrl, bodyOf(3 * MiB));
    const res = await t.gql("{ viewer { id } }", {}, org.adminToken);
    expect(res.data.viewer.id).toBe(org.adminId);
  });

  it("the cap is configurable", async () => {
    const small = await startTestApp({ env: { COUNTERSIGN_MAX_BODY_BYTES: "4096" } });
    try {
      const url = await small.listen();
      const post = (body: string) =>
        fetch(`${url}/graphql`, { method: "POST", headers: { "content-type": "application/json" }, body });
      expect((await post(bodyOf(5000))).status).toBe(413);
      expect((await post(bodyOf(4000))).status).not.toBe(413);
    } finally {
      await small.close();
    }
  });
});

describe("a graphql-ws message is capped the same way", () => {
  function open(): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(`${baseUrl.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws");
      socket.once("open", () => resolve(socket));
      socket.once("error", reject);
    });
  }
  const closed = (socket: WebSocket) => new Promise<number>((resolve) => socket.once("close", (code) => resolve(code)));

  it("a 2 MiB message closes the socket with 1009 (message too big)", async () => {
    const socket = await open();
    const code = closed(socket);
    socket.send(JSON.stringify({ type: "connection_init", payload: { authorization: `Bearer ${org.adminToken}`, pad: "x".repeat(2 * MiB) } }));
    expect(await code).toBe(1009);
  });

  it("a 900 KiB message is handled as usual", async () => {
    const socket = await open();
    const acked = new Promise<string>((resolve) => socket.once("message", (data) => resolve(JSON.parse(String(data)).type)));
    socket.send(JSON.stringify({ type: "connection_init", payload: { authorization: `Bearer ${org.adminToken}`, pad: "x".repeat(900 * 1024) } }));
    expect(await acked).toBe("connection_ack");
    socket.close();
  });
});
