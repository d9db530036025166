import type { IncomingMessage, ServerResponse } from "node:http";
import { APPROVAL_ID_HEADER, APPROVAL_TOKEN_HEADER, IDEMPOTENCY_KEY_HEADER, RESUME_PATH, type Gateway, type GatewayResponse } from "./gateway.js";
import { jsonTextProblem } from "../domain/text.js";
import { createMcpHandler } from "./mcp.js";

/**
 * The gateway's HTTP surface, for node:http servers. `<toolsPath>` serves two clients: a request
 * whose Accept lists `text/event-stream` (every MCP Streamable HTTP client must send it) is
 * served by the MCP transport (src/gateway/mcp.ts: initialize, ping, tools/list, tools/call);
 * any other POST is the plain JSON-RPC `tools/call` with HTTP statuses (423 for a held call).
 * `POST /internal/v1/approvals/resume` is the
 * service-authenticated resume. Returns false for any other path, so it composes with other
 * routes (Countersign mounts it through services.http).
 */
export type GatewayHttpOptions = {
  /** Where tools/call is served; null serves resume only. Default `/v1/mcp`. */
  toolsPath?: string | null;
  resumePath?: string;
  /**
   * Where the agent reads its requests: `GET <approvalsPath>/{approval_id}` with its virtual key.
   * Null serves none. Default `/v1/approvals`.
   */
  approvalsPath?: string | null;
  /** Request bodies above this are refused. Default 1 MiB. */
  maxBodyBytes?: number;
};

export type GatewayHttpHandler = (req: IncomingMessage, res: ServerResponse, url?: URL) => Promise<boolean>;

export function createGatewayHttpHandler(gateway: Gateway, options: GatewayHttpOptions = {}): GatewayHttpHandler {
  const toolsPath = options.toolsPath === undefined ? "/v1/mcp" : options.toolsPath;
  const resumePath = options.resumePath ?? RESUME_PATH;
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const approvalsPrefix = options.approvalsPath === undefined ? "/v1/approvals/" : options.approvalsPath === null ? null : `${options.approvalsPath.replace(/\/+$/, "")}/`;
  const mcp = createMcpHandler(gateway);

  return async (req, res, url = new URL(req.url ?? "/", "http://localhost")) => {
    if (approvalsPrefix !== null && url.pathname.startsWith(approvalsPrefix)) {
      if (req.method !== "GET" && req.method !== "HEAD") {
        send(res, { status: 405, headers: { allow: "GET" }, body: { error: "method_not_allowed" } });
        return true;
      }
      let approvalId: string;
      try {
        approvalId = decodeURIComponent(url.pathname.slice(approvalsPrefix.length));
      } catch {
        approvalId = "";
      }
      const authorization = req.headers.authorization;
      send(res, await gateway.approvalStatus({ authorization: Array.isArray(authorization) ? authorization[0] : authorization, approvalId }));
      return true;
    }
    const isResume = url.pathname === resumePath;
    const isTools = toolsPath !== null && url.pathname === toolsPath;
    if (!isResume && !isTools) return false;
    const streamable = isTools && /text\/event-stream/i.test(String(req.headers.accept ?? ""));
    if (req.method !== "POST") {
      // Stateless: no standalone stream to GET and no session to DELETE (the client expects 405).
      send(res, { status: 405, headers: { allow: "POST" }, body: { error: "method_not_allowed" } });
      return true;
    }
    const body = await readJson(req, maxBodyBytes);
    if (!body.ok) {
      send(res, { status: body.status, headers: {}, body: { error: body.error, ...body.detail } });
      return true;
    }
    if (streamable) {
      await mcp(req, res, body.value);
      return true;
    }
    const header = (name: string) => {
      const value = req.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const response = isResume
      ? await gateway.resume({ authorization: header("authorization"), body: body.value })
      : await gateway.handleToolCall({
          authorization: header("authorization"),
          approvalId: header(APPROVAL_ID_HEADER),
          approvalToken: header(APPROVAL_TOKEN_HEADER),
          idempotencyKey: header(IDEMPOTENCY_KEY_HEADER),
          body: body.value,
        });
    send(res, response);
    return true;
  };
}

function send(res: ServerResponse, response: GatewayResponse): void {
  res.writeHead(response.status, { "content-type": "application/json", "cache-control": "no-store", ...response.headers });
  res.end(JSON.stringify(response.body));
}

async function readJson(
  req: IncomingMessage,
  limit: number,
): Promise<{ ok: true; value: unknown } | { ok: false; status: number; error: string; detail?: Record<string, string> }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > limit) return { ok: false, status: 413, error: "payload_too_large" };
    chunks.push(buffer);
  }
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
  } catch {
    return { ok: false, status: 400, error: "invalid_json" };
  }
  // The one storable-text rule (src/domain/text.ts): a held call must be storable as jsonb.
  const found = jsonTextProblem(value);
  if (found) return { ok: false, status: 400, error: "unstorable_text", detail: { path: found.path.join("."), message: found.problem.message } };
  return { ok: true, value };
}
