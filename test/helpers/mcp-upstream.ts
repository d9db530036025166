import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

// A real upstream MCP server for tests (the SDK's McpServer on a real HTTP port): tools with
// destructive, read-only and no annotations, an error result and a slow tool.

/** One tool call the upstream ran. */
export type UpstreamCall = { tool: string; arguments: Record<string, unknown>; path: string };

/** Sees each request an upstream receives: its headers and its JSON-RPC body. */
export type UpstreamRequestHook = (headers: IncomingHttpHeaders, body: unknown) => void;

export type Upstream = { url: string; calls: Map<string, number>; close(): Promise<void>; requests: () => number };

/**
 * An upstream MCP server on its own port: stateless, one McpServer per request. `onCall` sees every
 * tool call as it runs (the tool, its arguments and the request's path), before the tool answers.
 */
export async function startUpstream(
  options: { credential?: string; port?: number; onCall?: (call: UpstreamCall) => Promise<void> | void; onRequest?: UpstreamRequestHook } = {},
): Promise<Upstream> {
  const calls = new Map<string, number>();
  let requests = 0;
  const onCall = options.onCall ?? (() => {});
  const text = (value: Record<string, unknown>) => ({ content: [{ type: "text" as const, text: JSON.stringify(value) }], structuredContent: value });
  const build = (path: string) => {
    const count = async (tool: string, args: Record<string, unknown>) => {
      calls.set(tool, (calls.get(tool) ?? 0) + 1);
      await onCall({ tool, arguments: args, path });
    };
    const s = new McpServer({ name: "test-upstream", version: "1.0.0" });
    s.registerTool("delete_repo", { description: "Delete a repository.", inputSchema: z.looseObject({ repo: z.string() }), annotations: { destructiveHint: true, readOnlyHint: false } }, async (args) => {
      // Loose: the arguments arrive as the agent sent them (onCall sees them whole).
      await count("delete_repo", args);
      return text({ deleted: args.repo });
    });
    s.registerTool("list_repos", { description: "List repositories.", annotations: { readOnlyHint: true } }, async () => {
      await count("list_repos", {});
      return text({ repos: ["acme/api"] });
    });
    s.registerTool("wipe_org", { description: "Delete every repository.", annotations: { destructiveHint: true } }, async () => {
      await count("wipe_org", {});
      return text({ wiped: true });
    });
    s.registerTool("purge_cache", { description: "Purge a repository's cache.", inputSchema: z.looseObject({ repo: z.string() }), annotations: { destructiveHint: true } }, async (args) => {
      await count("purge_cache", args);
      return text({ purged: args.repo });
    });
    s.registerTool("delete_project", { description: "Delete a project.", inputSchema: z.looseObject({ project: z.string() }), annotations: { destructiveHint: true } }, async (args) => {
      await count("delete_project", args);
      return text({ deleted: args.project });
    });
    s.registerTool("read_file", { description: "Read a file.", inputSchema: { path: z.string() }, annotations: { readOnlyHint: true } }, async ({ path }) => {
      await count("read_file", { path });
      return text({ path, content: `contents of ${path}` });
    });
    // No hints at all: the fallback (destructive) applies.
    s.registerTool("plain_tool", { description: "No annotations.", inputSchema: { x: z.number() } }, async ({ x }) => {
      await count("plain_tool", { x });
      return text({ x });
    });
    s.registerTool("fails", { description: "Answers an error result.", annotations: { readOnlyHint: true } }, async () => {
      await count("fails", {});
      return { isError: true, content: [{ type: "text" as const, text: "the upstream says no" }] };
    });
    s.registerTool("slow", { description: "Takes a second.", annotations: { readOnlyHint: true } }, async () => {
      await count("slow", {});
      await new Promise((r) => setTimeout(r, 1_000));
      return text({ slow: true });
    });
    return s;
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    requests++;
    if (options.credential && req.headers.authorization !== options.credential) {
      res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({ error: "unauthorized" }));
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown) : undefined;
        options.onRequest?.(req.headers, body);
        const s = build(req.url ?? "/");
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        res.on("close", () => void Promise.all([transport.close(), s.close()]).catch(() => {}));
        await s.connect(transport);
        await transport.handleRequest(req, res, body);
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}


/** What a talking upstream's tool received when it asked its client something. */
export type Asked = { tool: string; method: string; answer?: unknown; error?: { code: number; message: string } };

export type TalkingUpstream = { url: string; runs: Map<string, number>; asked: Asked[]; close(): Promise<void> };

/**
 * An upstream that talks during a call (the SDK's McpServer with sessions, answering tools/call
 * as an SSE stream): its tools send progress and log messages, ping their client, and ask it for
 * an elicitation, a sampling or its roots — with `extra.sendRequest`, on the call's own stream,
 * whatever the client declared (an upstream that asks anyway). Each answer or error is recorded
 * in `asked` and returned as the tool's result.
 */
export async function startTalkingUpstream(): Promise<TalkingUpstream> {
  const { ElicitResultSchema, CreateMessageResultSchema, ListRootsResultSchema, EmptyResultSchema, McpError } = await import("@modelcontextprotocol/sdk/types.js");
  const runs = new Map<string, number>();
  const asked: Asked[] = [];
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const ran = (tool: string) => runs.set(tool, (runs.get(tool) ?? 0) + 1);
  const text = (value: unknown) => ({ content: [{ type: "text" as const, text: JSON.stringify(value) }] });
  type Extra = { sendRequest: (r: { method: string; params?: Record<string, unknown> }, schema: never) => Promise<unknown>; sendNotification: (n: { method: string; params: Record<string, unknown> }) => Promise<void>; _meta?: { progressToken?: string | number } };
  const ask = async (tool: string, extra: Extra, method: string, params: Record<string, unknown> | undefined, schema: unknown) => {
    try {
      const answer = await extra.sendRequest({ method, ...(params ? { params } : {}) }, schema as never);
      asked.push({ tool, method, answer });
      return { method, answer };
    } catch (error) {
      const e = error instanceof McpError ? { code: error.code, message: error.message } : { code: 0, message: String(error) };
      asked.push({ tool, method, error: e });
      return { method, error: e };
    }
  };
  const questions: Record<string, [string, Record<string, unknown> | undefined, unknown]> = {
    elicit: ["elicitation/create", { mode: "form", message: "Which branch?", requestedSchema: { type: "object", properties: { branch: { type: "string" } }, required: ["branch"] } }, ElicitResultSchema],
    sample: ["sampling/createMessage", { messages: [{ role: "user", content: { type: "text", text: "Summarize the diff" } }], maxTokens: 50 }, CreateMessageResultSchema],
    roots: ["roots/list", undefined, ListRootsResultSchema],
  };
  const build = () => {
    const s = new McpServer({ name: "talking-upstream", version: "1.0.0" }, { capabilities: { logging: {} } });
    s.registerTool("progress", { description: "Reports progress three times.", annotations: { readOnlyHint: true } }, async (extra) => {
      ran("progress");
      const token = (extra as unknown as Extra)._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (token !== undefined) await (extra as unknown as Extra).sendNotification({ method: "notifications/progress", params: { progressToken: token, progress, total: 100 } });
        await (extra as unknown as Extra).sendNotification({ method: "notifications/message", params: { level: "info", data: `at ${progress}` } });
      }
      return text({ done: true });
    });
    s.registerTool("pinger", { description: "Pings its client, then answers.", annotations: { readOnlyHint: true } }, async (extra) => {
      ran("pinger");
      await (extra as unknown as Extra).sendRequest({ method: "ping" }, EmptyResultSchema as never);
      return text({ pinged: true });
    });
    for (const [tool, [method, params, schema]] of Object.entries(questions)) {
      s.registerTool(tool, { description: `Asks its client (${method}).`, annotations: { readOnlyHint: true } }, async (extra) => {
        ran(tool);
        return text(await ask(tool, extra as unknown as Extra, method, params, schema));
      });
    }
    // Destructive (held in prod): pings and asks for an elicitation, then does its work.
    s.registerTool("deploy", { description: "Deploys after a ping and a question.", annotations: { destructiveHint: true } }, async (extra) => {
      await (extra as unknown as Extra).sendRequest({ method: "ping" }, EmptyResultSchema as never);
      const question = await ask("deploy", extra as unknown as Extra, ...questions.elicit!);
      ran("deploy");
      return text({ deployed: true, question });
    });
    return s;
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown) : undefined;
        const id = req.headers["mcp-session-id"];
        if (typeof id === "string") {
          const known = sessions.get(id);
          if (!known) return void res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
          return known.handleRequest(req, res, body);
        }
        const s = build();
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => crypto.randomUUID(), onsessioninitialized: (sid) => void sessions.set(sid, transport) });
        await s.connect(transport);
        await transport.handleRequest(req, res, body);
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    runs,
    asked,
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of sessions.values()) void t.close().catch(() => {});
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
