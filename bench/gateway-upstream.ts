// The gateway bench's upstream, in a process of its own so the bench can tell its CPU from the
// gateway's: the SDK's McpServer, stateless Streamable HTTP, one server per request (as the
// gateway serves). Prints its URL on stdout; answers `cpu` on stdin with its CPU time so far (µs).

import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    void (async () => {
      const mcp = new McpServer({ name: "bench-upstream", version: "1.0.0" });
      mcp.registerTool("read_file", { description: "Read a file.", inputSchema: { path: z.string() }, annotations: { readOnlyHint: true } }, async ({ path }) => ({
        content: [{ type: "text", text: `contents of ${path}` }],
        structuredContent: { path, size: path.length },
      }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on("close", () => void Promise.all([transport.close(), mcp.close()]).catch(() => {}));
      await mcp.connect(transport);
      await transport.handleRequest(req, res, chunks.length ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown) : undefined);
    })();
  });
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`url http://127.0.0.1:${(server.address() as { port: number }).port}/mcp\n`);
});
createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() !== "cpu") return;
  const used = process.cpuUsage();
  process.stdout.write(`cpu ${used.user + used.system}\n`);
});
process.stdin.on("end", () => process.exit(0));
