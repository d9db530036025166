// The hostile requests every mounted route receives: the bodies, and for one route of the route
// table (app.routes) each way of sending them (its methods and one it does not take, with and
// without its credential, with the MCP Accept header where the route takes a virtual key).
// One matrix for test/edge/routes.test.ts (every request is answered; the server keeps serving)
// and bench/hostile.ts (what the costliest of them costs beside a valid request of the cap's size).

import { randomBytes } from "node:crypto";
import type { HttpRoute } from "../../src/edge/http.js";
import { MCP_HEADERS, type EdgeWorld } from "./world.js";

export const DEPTH = 20_000;
export const deepArrays = "[".repeat(DEPTH) + "]".repeat(DEPTH);
export const deepObjects = '{"a":'.repeat(DEPTH) + "1" + "}".repeat(DEPTH);
export const rpc = (method: string, params: string) => `{"jsonrpc":"2.0","id":1,"method":"${method}","params":${params}}`;
export const batchOf = (n: number, item: string) => `[${new Array(n).fill(item).join(",")}]`;

export type Payload = { name: string; body: Buffer | null; contentType?: string; truncate?: boolean };
export const utf8 = (s: string) => Buffer.from(s, "utf8");

/** The hostile bodies, each by name. */
export const PAYLOADS: Payload[] = [
  { name: "20,000 nested arrays", body: utf8(deepArrays) },
  { name: "20,000 nested objects", body: utf8(deepObjects) },
  { name: "a tools/call whose arguments nest 20,000 deep", body: utf8(rpc("tools/call", `{"name":"github.list_repos","arguments":${deepObjects}}`)) },
  { name: "a tools/list whose params nest 20,000 deep", body: utf8(rpc("tools/list", deepObjects)) },
  { name: "a GraphQL JSON variable nested 20,000 deep", body: utf8(`{"query":"mutation($l: JSON) { createStack(input: { name: \\"edge\\", labels: $l }) { __typename } }","variables":{"l":${deepObjects}}}`) },
  { name: "a GraphQL query nested 20,000 deep", body: utf8(JSON.stringify({ query: `{ ${"viewer { ".repeat(DEPTH)} name ${"} ".repeat(DEPTH)}}` })) },
  { name: "1 MiB of random bytes", body: randomBytes(1024 * 1024), contentType: "application/octet-stream" },
  { name: "1 MiB of random bytes labelled JSON", body: randomBytes(1024 * 1024) },
  { name: "invalid UTF-8 inside JSON", body: Buffer.concat([utf8('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"'), Buffer.from([0xff, 0xfe, 0xc3]), utf8('"}}')]) },
  { name: "a tools/call as text/plain", body: utf8(rpc("tools/call", '{"name":"github.list_repos","arguments":{}}')), contentType: "text/plain" },
  { name: "a form post", body: utf8("query=%7B%20viewer%20%7B%20name%20%7D%20%7D"), contentType: "application/x-www-form-urlencoded" },
  { name: "a multipart body", body: utf8('--x\r\nContent-Disposition: form-data; name="operations"\r\n\r\n{"query":"{ viewer { name } }"}\r\n--x--\r\n'), contentType: "multipart/form-data; boundary=x" },
  { name: "an empty body", body: Buffer.alloc(0) },
  { name: "no body at all", body: null },
  { name: "JSON cut off mid-object", body: utf8('{"jsonrpc":"2.0","id":1,"method":"tools/ca') },
  { name: "a body shorter than its Content-Length (the client goes away)", body: utf8(rpc("tools/list", "{}")), truncate: true },
  { name: "JSON null", body: utf8("null") },
  { name: "a bare number", body: utf8("42") },
  { name: "a JSON-RPC batch of 5,000 tools/call", body: utf8(batchOf(5_000, rpc("tools/call", '{"name":"github.list_repos","arguments":{}}'))) },
  { name: "a JSON-RPC batch of 5,000 tools/list", body: utf8(batchOf(5_000, rpc("tools/list", "{}"))) },
  { name: "a batch of 5,000 nulls", body: utf8(batchOf(5_000, "null")) },
  { name: "a GraphQL batch of 5,000 operations", body: utf8(batchOf(5_000, '{"query":"{ viewer { name } }"}')) },
];

/** Where a route is reached: its path, or a name under its prefix. */
export const target = (route: HttpRoute) => (route.prefix ? `${route.path}edge-probe-0123` : route.path);
/** A method the route does not take, to reach its 405. */
export const foreign = (route: HttpRoute) => ["DELETE", "PUT", "PATCH", "POST", "GET"].find((m) => !route.methods.includes(m))!;

/** One way of sending one hostile body to one route. */
export interface HostileRequest {
  method: string;
  headers: Record<string, string>;
  payload: Payload;
  label: string;
}

/** Every hostile request for `route`: each body, on each method it takes and one it does not, with and without its credential. */
export function* hostileRequests(w: EdgeWorld, route: HttpRoute): Generator<HostileRequest> {
  const methods = [...route.methods.filter((m) => m !== "HEAD" && m !== "OPTIONS"), foreign(route)];
  const bearer = w.credential(route.credential);
  const auths: Array<Record<string, string>> = [{}, ...(bearer ? [{ authorization: `Bearer ${bearer}` }] : [])];
  // The gateway's tools path serves the MCP transport (Accept: text/event-stream) and the plain POST.
  const accepts: Array<Record<string, string>> = route.credential === "virtual-key" ? [{}, { accept: MCP_HEADERS.accept, "mcp-protocol-version": MCP_HEADERS["mcp-protocol-version"] }] : [{}];
  for (const payload of PAYLOADS) {
    for (const method of methods) {
      for (const auth of auths) {
        for (const accept of accepts) {
          const headers = { "content-type": payload.contentType ?? "application/json", ...auth, ...accept };
          const label = `${method} ${target(route)} ${payload.name} ${auth.authorization ? "with" : "without"} credential ${accept.accept ? "(MCP accept)" : ""}`;
          yield { method, headers, payload, label };
        }
      }
    }
  }
}
