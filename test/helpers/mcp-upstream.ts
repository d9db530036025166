import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

// A real upstream MCP server for tests (the SDK's McpServer on a real HTTP port): tools with
// destructive, read-only and no annotations, an error result and a slow tool.

/** One tool call the upstream ran. */
export type UpstreamCall = { tool: string; arguments: Record<string, unknown>; path: string };

export type Upstream = { url: string; calls: Map<string, number>; close(): Promise<void>; requests: () => number };

/**
 * An upstream MCP server on its own port: stateless, one McpServer per request. `onCall` sees every
 * tool call as it runs (the tool, its arguments and the request's path), before the tool answers.
 */
export async function startUpstream(options: { credential?: string; port?: number; onCall?: (call: UpstreamCall) => Promise<void> | void } = {}): Promise<Upstream> {
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

