import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { verifyApprovalToken } from "../src/gateway/approval-token.js";

/**
 * The newcomer's path (README quick start), as a real process: `npm start` with no DATABASE_URL
 * and no REDIS_URL prints the MCP gateway's URL and the demo agent's key; a held call goes onto
 * the in-process approval stream, shows up in `npm run cli -- inbox`, is voted on with
 * `npm run cli -- vote`, and is executed once by the process itself. The secrets it generated
 * are the same after a restart on the same data folder.
 */
const root = path.resolve(import.meta.dirname, "..");
const tsx = path.join(root, "node_modules/tsx/dist/cli.mjs");
let child: ChildProcess | null = null;
let dataDir = "";

afterAll(async () => {
  await stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

function baseEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, COUNTERSIGN_DATA_DIR: dataDir, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "info", COUNTERSIGN_DELIVERY_INTERVAL_MS: "250", COUNTERSIGN_DRAIN_UNREADY_MS: "0" };
  for (const name of ["DATABASE_URL", "DATABASE_SCHEMA", "REDIS_URL", "COUNTERSIGN_APPROVAL_SECRET", "COUNTERSIGN_GATEWAY_SERVICE_TOKEN", "COUNTERSIGN_GATEWAY_EMBEDDED", "COUNTERSIGN_GATEWAY_URL"]) delete env[name];
  return env;
}

function start(waitFor: RegExp): Promise<{ port: number; output: string }> {
  const proc = spawn(process.execPath, [tsx, "src/main.ts"], { cwd: root, env: baseEnv() });
  child = proc;
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`start timed out:\n${out}`)), 240_000);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const serving = /"port":(\d+),"database":"pglite","eventBus":"memory"/.exec(out);
      if (serving && waitFor.test(out)) {
        clearTimeout(timer);
        resolve({ port: Number(serving[1]), output: out });
      }
    };
    proc.stdout!.on("data", onData);
    proc.stderr!.on("data", onData);
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code}:\n${out}`));
    });
  });
}

async function stop(): Promise<void> {
  const proc = child;
  child = null;
  if (!proc || proc.exitCode !== null) return;
  await new Promise<void>((resolve) => {
    proc.removeAllListeners("exit");
    proc.on("exit", () => resolve());
    proc.kill("SIGTERM");
  });
}

function cli(base: string, token: string, ...args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [tsx, "src/cli/index.ts", ...args], { cwd: root, env: { ...baseEnv(), COUNTERSIGN_URL: base, COUNTERSIGN_TOKEN: token } });
    let out = "";
    proc.stdout.on("data", (c: Buffer) => (out += c.toString()));
    proc.stderr.on("data", (c: Buffer) => (out += c.toString()));
    proc.on("exit", (code) => resolve({ code: code ?? -1, out }));
  });
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 200));
  }
}

type RpcAnswer = { status: number; body: { error?: { code: number; data: Record<string, unknown> }; result?: { structuredContent: Record<string, unknown>; _meta: Record<string, unknown> } } };

describe("the embedded default runs held tool calls end to end", () => {
  it("prints the gateway and agent key, holds a call, shows it in the CLI inbox, executes it once after the vote, and keeps its secrets across a restart", async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), "countersign-embedded-gw-"));
    const first = await start(/Agent key: /);
    const gatewayUrl = /^MCP gateway: (\S+)$/m.exec(first.output)?.[1];
    const agentKey = /^Agent key: (vk_[A-Za-z0-9_-]{43})$/m.exec(first.output)?.[1];
    const aliceToken = /cs_[A-Za-z0-9_-]{43}/.exec(first.output)?.[0];
    expect(gatewayUrl).toBe(`http://localhost:${first.port}/gateway/v1/mcp`);
    expect(agentKey).toBeDefined();
    expect(aliceToken).toBeDefined();
    const base = `http://127.0.0.1:${first.port}`;
    const mcp = `${base}/gateway/v1/mcp`;

    const secretFile = path.join(dataDir, "approval-secret");
    expect((await stat(secretFile)).mode & 0o777).toBe(0o600);
    expect((await stat(path.join(dataDir, "gateway-service-token"))).mode & 0o777).toBe(0o600);
    const secret = (await readFile(secretFile, "utf8")).trim();

    const call = async (headers: Record<string, string> = {}): Promise<RpcAnswer> => {
      const res = await fetch(mcp, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${agentKey}`, ...headers },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: "acme/old-service" } } }),
      });
      return { status: res.status, body: (await res.json()) as RpcAnswer["body"] };
    };
    const status = async (id: string) => (await fetch(`${base}/gateway/v1/approvals/${id}`, { headers: { authorization: `Bearer ${agentKey}` } })).json() as Promise<Record<string, unknown>>;

    // Any MCP client: the SDK's lists the demo upstream's tools and is held at delete_repo.
    const sdk = async (headers: Record<string, string> = {}) => {
      const client = new Client({ name: "newcomer", version: "1.0.0" });
      await client.connect(new StreamableHTTPClientTransport(new URL(gatewayUrl!.replace("localhost", "127.0.0.1")), { requestInit: { headers: { authorization: `Bearer ${agentKey}`, ...headers } } }));
      return client;
    };
    const client = await sdk();
    const tools = (await client.listTools()).tools;
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(["github.list_repos", "github.delete_repo", "github.create_issue"]));
    expect(tools.find((t) => t.name === "github.delete_repo")!.annotations).toMatchObject({ destructiveHint: true });
    expect((await client.callTool({ name: "github.list_repos", arguments: {} })).structuredContent).toMatchObject({ repos: expect.arrayContaining([{ name: "acme/old-service", visibility: "private" }]) });
    const mcpHeld = await client.callTool({ name: "github.delete_repo", arguments: { repo: "acme/old-service" } }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(mcpHeld).toBeInstanceOf(McpError);
    expect(mcpHeld).toMatchObject({ code: -32003, data: { error: "approval_required", tool: "github.delete_repo" } });
    await client.close();

    // Held: nothing runs; the ticket travels on the in-process stream into the inbox. The plain
    // POST's identical call gets the same ticket (HTTP 423).
    const held = await call();
    expect(held.status).toBe(423);
    const approvalId = String(held.body.error!.data["approval_id"]);
    expect(held.body.error).toMatchObject({ code: -32003, data: { error: "approval_required", tool: "github.delete_repo" } });
    expect((mcpHeld as McpError).data).toMatchObject({ approval_id: approvalId });

    const inbox = await until(() => cli(base, aliceToken!, "inbox"), (r) => r.out.includes(approvalId));
    expect(inbox.code).toBe(0);
    expect(inbox.out).toContain(approvalId);
    expect(inbox.out).toContain("github.delete_repo");
    expect(await status(approvalId)).toMatchObject({ status: "pending" });

    const voted = await cli(base, aliceToken!, "vote", approvalId, "approve");
    expect(voted.code, voted.out).toBe(0);

    // Delivery (in the same process) resumes it: executed once, on the demo upstream.
    const done = await until(() => status(approvalId), (s) => s["execution_status"] === "executed");
    expect(done).toMatchObject({ status: "approved", execution_status: "executed" });
    const token = String(done["approval_token"]);
    expect(await verifyApprovalToken(secret, token)).toMatchObject({ ok: true, claims: { approvalId } });
    // The agent's re-issue with the token, and the plain retry, replay the one execution.
    const reissued = await call({ "x-obol-approval-id": approvalId, "x-obol-approval-token": token });
    expect(reissued.status).toBe(200);
    expect(reissued.body.result!._meta).toMatchObject({ approval_id: approvalId, replayed: true });
    expect(reissued.body.result!.structuredContent).toMatchObject({ deleted: "acme/old-service", existed: true });
    const invocation = reissued.body.result!._meta["invocation_id"];
    const deletedAt = reissued.body.result!.structuredContent["deleted_at"];
    const retried = await call();
    expect(retried.body.result!._meta).toMatchObject({ replayed: true, invocation_id: invocation });
    expect(retried.body.result!.structuredContent["deleted_at"]).toBe(deletedAt);
    // The SDK client's re-issue with the two headers replays the same execution.
    const approvedClient = await sdk({ "x-obol-approval-id": approvalId, "x-obol-approval-token": token });
    const viaSdk = await approvedClient.callTool({ name: "github.delete_repo", arguments: { repo: "acme/old-service" } });
    expect(viaSdk._meta).toMatchObject({ replayed: true, approval_id: approvalId, invocation_id: invocation });
    await approvedClient.close();

    // Restart on the same folder: the same secrets (its tokens still verify), the same outcome.
    await stop();
    const second = await start(/Countersign is serving/);
    expect(second.output).not.toContain("generated the embedded default's secrets");
    expect((await readFile(secretFile, "utf8")).trim()).toBe(secret);
    const base2 = `http://127.0.0.1:${second.port}`;
    const after = (await (await fetch(`${base2}/gateway/v1/approvals/${approvalId}`, { headers: { authorization: `Bearer ${agentKey}` } })).json()) as Record<string, unknown>;
    expect(after).toMatchObject({ status: "approved", execution_status: "executed" });
    expect(await verifyApprovalToken(secret, String(after["approval_token"]))).toMatchObject({ ok: true });
    const again = await fetch(`${base2}/gateway/v1/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${agentKey}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "github.delete_repo", arguments: { repo: "acme/old-service" } } }),
    });
    const againBody = (await again.json()) as RpcAnswer["body"];
    expect(againBody.result!._meta["invocation_id"]).toBe(invocation);
    expect(againBody.result!.structuredContent["deleted_at"]).toBe(deletedAt);
  }, 600_000);
});
