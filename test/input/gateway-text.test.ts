// The gateway's HTTP edge applies the same storable-text rule to its JSON bodies: a NUL in a
// tool call's arguments is a 400 naming the place, never a held call that cannot be stored.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorld, type World } from "../approvals/world.js";

let w: World;
beforeAll(async () => {
  w = await createWorld();
});
afterAll(() => w?.close());

async function post(body: unknown) {
  const res = await fetch(`${w.gatewayUrl}/v1/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${w.keyPlaintext}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as any };
}

const call = (args: Record<string, unknown>) => ({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: args } });

describe("gateway bodies", () => {
  it("a NUL or an unpaired surrogate in a tool call's arguments is a 400 naming the path; nothing is held", async () => {
    const before = await w.streamLength();
    for (const bad of ["acme/\u0000x", "acme/\ud800x"]) {
      const res = await post(call({ repo: bad }));
      expect(res.status).toBe(400);
      expect(res.json).toMatchObject({ error: "unstorable_text", path: "params.arguments.repo" });
    }
    const key = await post(call({ ["re\u001bpo"]: "acme/x" }));
    expect(key.status).toBe(400);
    expect(await w.streamLength()).toBe(before);
  });

  it("control characters inside argument values are data and pass the edge", async () => {
    const res = await post(call({ repo: "acme/payments", note: "line\u001b[1m" }));
    expect(res.status).not.toBe(400);
  });
});
