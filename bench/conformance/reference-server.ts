// A reference MCP server for the conformance suite's `tools-*` scenarios, written from the
// scenarios' own requirements (`conformance list --server`; each scenario's description names the
// tool and what it must do). The suite's npm package ships the scenarios, not a server. The SDK's
// McpServer with sessions, answering calls as SSE streams — as a stateful upstream does — so
// progress, log messages, sampling and elicitation travel on the call's stream.

import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CreateMessageResultSchema, ElicitResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

/** A 1×1 PNG and a minimal WAV (44-byte header, no samples). */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const WAV = Buffer.from("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=", "base64").toString("base64");

type Extra = {
  _meta?: { progressToken?: string | number };
  sendNotification(n: { method: string; params: Record<string, unknown> }): Promise<void>;
  sendRequest<T>(r: { method: string; params: Record<string, unknown> }, schema: unknown): Promise<T>;
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// Harmless tools: the gateway's default policies allow read-only calls in production.
const harmless = { readOnlyHint: true } as const;

function build(): McpServer {
  const s = new McpServer({ name: "countersign-conformance-reference", version: "1.0.0" }, { capabilities: { logging: {} } });
  s.registerTool("test_simple_text", { description: "Returns simple text.", annotations: harmless }, async () => ({ content: [{ type: "text", text: "This is a simple text response for testing." }] }));
  s.registerTool("test_image_content", { description: "Returns an image.", annotations: harmless }, async () => ({ content: [{ type: "image", data: PNG, mimeType: "image/png" }] }));
  s.registerTool("test_audio_content", { description: "Returns audio.", annotations: harmless }, async () => ({ content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] }));
  s.registerTool("test_embedded_resource", { description: "Returns an embedded resource.", annotations: harmless }, async () => ({
    content: [{ type: "resource", resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." } }],
  }));
  s.registerTool("test_multiple_content_types", { description: "Returns text, an image and a resource.", annotations: harmless }, async () => ({
    content: [
      { type: "text", text: "Multiple content types test:" },
      { type: "image", data: PNG, mimeType: "image/png" },
      { type: "resource", resource: { uri: "test://mixed-content-resource", mimeType: "application/json", text: JSON.stringify({ test: "data", value: 123 }) } },
    ],
  }));
  s.registerTool("test_tool_with_logging", { description: "Sends three log messages while it runs.", annotations: harmless }, async (extra) => {
    const e = extra as unknown as Extra;
    for (const [i, data] of ["Tool execution started", "Tool processing data", "Tool execution completed"].entries()) {
      if (i > 0) await sleep(50);
      await e.sendNotification({ method: "notifications/message", params: { level: "info", data } });
    }
    return { content: [{ type: "text", text: "Tool with logging executed successfully" }] };
  });
  s.registerTool("test_error_handling", { description: "Always fails.", annotations: harmless }, async () => ({
    isError: true,
    content: [{ type: "text", text: "This tool intentionally returns an error for testing" }],
  }));
  s.registerTool("test_tool_with_progress", { description: "Reports progress 0, 50, 100 of 100.", annotations: harmless }, async (extra) => {
    const e = extra as unknown as Extra;
    const token = e._meta?.progressToken;
    for (const [i, progress] of [0, 50, 100].entries()) {
      if (i > 0) await sleep(50);
      if (token !== undefined) await e.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress, total: 100 } });
    }
    return { content: [{ type: "text", text: String(token ?? "no progress token") }] };
  });
  s.registerTool("test_sampling", { description: "Asks the client's LLM.", inputSchema: { prompt: z.string() }, annotations: harmless }, async ({ prompt }, extra) => {
    const answer = await (extra as unknown as Extra).sendRequest<{ content: { type: string; text?: string } }>(
      { method: "sampling/createMessage", params: { messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens: 100 } },
      CreateMessageResultSchema,
    );
    return { content: [{ type: "text", text: `LLM response: ${answer.content.type === "text" ? answer.content.text : JSON.stringify(answer.content)}` }] };
  });
  s.registerTool("test_elicitation", { description: "Asks the user.", inputSchema: { message: z.string() }, annotations: harmless }, async ({ message }, extra) => {
    const answer = await (extra as unknown as Extra).sendRequest<{ action: string; content?: unknown }>(
      {
        method: "elicitation/create",
        params: {
          message,
          requestedSchema: {
            type: "object",
            properties: { username: { type: "string", description: "User's response" }, email: { type: "string", description: "User's email address" } },
            required: ["username", "email"],
          },
        },
      },
      ElicitResultSchema,
    );
    return { content: [{ type: "text", text: `User response: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}` }] };
  });
  return s;
}

/** The reference server on 127.0.0.1, at `<url>` (path /mcp), with sessions. */
export async function startReferenceServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown) : undefined;
        const id = req.headers["mcp-session-id"];
        if (typeof id === "string") {
          const known = sessions.get(id);
          if (!known) return void res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }));
          return known.handleRequest(req, res, body);
        }
        if (req.method !== "POST") return void res.writeHead(405).end();
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sid) => void sessions.set(sid, transport),
        });
        transport.onclose = () => void (transport.sessionId && sessions.delete(transport.sessionId));
        await build().connect(transport);
        await transport.handleRequest(req, res, body);
      })().catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`,
    close: async () => {
      await Promise.all([...sessions.values()].map((t) => t.close().catch(() => {})));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
