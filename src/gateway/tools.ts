import type { OutboundPolicy } from "../domain/address-policy.js";
import { classifyTool, createUpstreamPool, UpstreamError, type DestructiveSource, type UpstreamConnection, type UpstreamPool, type UpstreamTool } from "./upstream.js";

/**
 * A connection's tools as an admin reads them (GraphQL `ToolConnection.tools`): the upstream's
 * own list, each tool namespaced by the connection, with its annotations and what the gate
 * makes of them.
 */
export type ConnectionToolInfo = {
  /** `<connection>.<tool>`: the name agents call. */
  name: string;
  /** The upstream's own name (what an override names). */
  upstreamName: string;
  title: string | null;
  description: string | null;
  inputSchema: UpstreamTool["inputSchema"];
  readOnlyHint: boolean | null;
  destructiveHint: boolean | null;
  /** Whether the gate treats a call as destructive. */
  destructive: boolean;
  /** Why: an admin's override, the upstream's annotations, or the fallback for a tool without either hint. */
  destructiveSource: DestructiveSource;
};

export { UpstreamError };

/**
 * Reads the upstream's tools now (or from the pool's cache, fresh for its TTL). Fails with
 * `UpstreamError` (`code`: upstream_not_configured | upstream_unavailable | upstream_timeout |
 * upstream_error) when the upstream cannot be read.
 *
 * `connection` is the Prisma row (or anything with its fields); `overrides` its
 * connection_tool_overrides rows. Without `upstreams`, a pool is made for the one read and
 * closed (it needs `approvalSecret` to open a sealed credential).
 */
export async function listConnectionTools(
  connection: UpstreamConnection & { name: string },
  opts: {
    upstreams?: UpstreamPool | null;
    approvalSecret?: string | undefined;
    /** The outbound address policy of a pool made for this read (default: public addresses only). */
    addresses?: OutboundPolicy;
    overrides?: readonly { tool: string; destructive: boolean }[];
  } = {},
): Promise<ConnectionToolInfo[]> {
  const overrides = new Map((opts.overrides ?? []).map((o) => [o.tool, o.destructive]));
  const pool = opts.upstreams ?? createUpstreamPool({ approvalSecret: opts.approvalSecret, ...(opts.addresses ? { addresses: opts.addresses } : {}) });
  try {
    const tools = await pool.tools(connection);
    return tools.map((t) => {
      const c = classifyTool(t, overrides.get(t.name) ?? null);
      return {
        name: `${connection.name}.${t.name}`,
        upstreamName: t.name,
        title: t.title ?? t.annotations?.title ?? null,
        description: t.description ?? null,
        inputSchema: t.inputSchema,
        readOnlyHint: typeof t.annotations?.readOnlyHint === "boolean" ? t.annotations.readOnlyHint : null,
        destructiveHint: typeof t.annotations?.destructiveHint === "boolean" ? t.annotations.destructiveHint : null,
        destructive: c.destructive,
        destructiveSource: c.source,
      };
    });
  } finally {
    if (!opts.upstreams) await pool.close();
  }
}
