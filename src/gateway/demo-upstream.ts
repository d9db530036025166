import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { z } from "zod";

/**
 * The embedded default's upstream: a small MCP server (the SDK's McpServer, stateless Streamable
 * HTTP) standing in for a code host, so a newcomer's held call has something real to run on. It
 * lives in the Countersign process at a fixed in-process URL (`DEMO_UPSTREAM_URL`), reached
 * through `fetch` below without a socket, so the demo connection's url stays the same whatever
 * port the server listens on. Its state (the repositories) is in memory.
 *
 * Tools (annotations as an upstream would declare them):
 * - `list_repos`, `get_repo`: read-only.
 * - `create_issue`: writes, not destructive.
 * - `delete_repo`: destructive (held in production).
 */
export const DEMO_UPSTREAM_URL = "http://demo-upstream.in-process/mcp";

export type DemoUpstream = {
  /** Answers one Streamable HTTP request. */
  handle(request: Request): Promise<Response>;
  /** A fetch that answers DEMO_UPSTREAM_URL in process and passes every other URL to `base`. */
  fetch(base?: typeof fetch): typeof fetch;
  /** Every tools/call it ran, in order (the demo's proof that a call executed once). */
  readonly calls: { tool: string; arguments: Record<string, unknown>; at: string }[];
};

export function createDemoUpstream(): DemoUpstream {
  const repos = new Map<string, { name: string; visibility: "public" | "private"; issues: string[] }>([
    ["acme/old-service", { name: "acme/old-service", visibility: "private", issues: [] }],
    ["acme/api", { name: "acme/api", visibility: "private", issues: [] }],
    ["acme/website", { name: "acme/website", visibility: "public", issues: [] }],
  ]);
  const calls: DemoUpstream["calls"] = [];
  const record = (tool: string, args: Record<string, unknown>) => calls.push({ tool, arguments: args, at: new Date().toISOString() });
  const text = (value: Record<string, unknown>) => ({ content: [{ type: "text" as const, text: JSON.stringify(value) }], structuredContent: value });

  function server(): McpServer {
    const s = new McpServer({ name: "countersign-demo-upstream", version: "1.0.0" });
    s.registerTool(
      "list_repos",
      { description: "List the organization's repositories.", annotations: { title: "List repositories", readOnlyHint: true } },
      async () => {
        record("list_repos", {});
        return text({ repos: [...repos.values()].map((r) => ({ name: r.name, visibility: r.visibility })) });
      },
    );
    s.registerTool(
      "get_repo",
      { description: "Read one repository.", inputSchema: { repo: z.string().describe("owner/name") }, annotations: { title: "Get a repository", readOnlyHint: true } },
      async ({ repo }) => {
        record("get_repo", { repo });
        const r = repos.get(repo);
        if (!r) return { isError: true, content: [{ type: "text" as const, text: `no repository ${repo}` }] };
        return text({ name: r.name, visibility: r.visibility, open_issues: r.issues.length });
      },
    );
    s.registerTool(
      "create_issue",
      {
        description: "Open an issue on a repository.",
        inputSchema: { repo: z.string().describe("owner/name"), title: z.string().min(1) },
        annotations: { title: "Create an issue", readOnlyHint: false, destructiveHint: false, idempotentHint: false },
      },
      async ({ repo, title }) => {
        record("create_issue", { repo, title });
        const r = repos.get(repo);
        if (!r) return { isError: true, content: [{ type: "text" as const, text: `no repository ${repo}` }] };
        r.issues.push(title);
        return text({ repo, issue: r.issues.length, title });
      },
    );
    s.registerTool(
      "delete_repo",
      {
        description: "Delete a repository and everything in it. Cannot be undone.",
        inputSchema: { repo: z.string().describe("owner/name") },
        annotations: { title: "Delete a repository", readOnlyHint: false, destructiveHint: true, idempotentHint: true },
      },
      async ({ repo }) => {
        record("delete_repo", { repo });
        const existed = repos.delete(repo);
        return text({ deleted: repo, existed, deleted_at: new Date().toISOString() });
      },
    );
    return s;
  }

  async function handle(request: Request): Promise<Response> {
    // Stateless: one server and one transport per request.
    const s = server();
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await s.connect(transport);
    try {
      return await transport.handleRequest(request);
    } finally {
      void s.close().catch(() => {});
    }
  }

  const origin = new URL(DEMO_UPSTREAM_URL).origin;
  return {
    handle,
    calls,
    fetch(base = globalThis.fetch) {
      return async (input, init) => {
        const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
        if (new URL(url).origin !== origin) return base(input, init);
        return handle(new Request(url, init));
      };
    },
  };
}
