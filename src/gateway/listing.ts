import { liveKey, type GatewayDeps } from "./deps.js";
import { decide, gateRequest } from "./execute.js";
import type { ListedTool } from "./protocol.js";
import type { GatewayConnection } from "./store.js";
import { classifyTool, type UpstreamTool } from "./upstream.js";

// tools/list for a virtual key: its workspace's active connections' upstream tools.

export async function listTools(
  deps: GatewayDeps,
  input: { authorization: string | null | undefined },
  how: { tasks?: boolean } = {},
): Promise<{ ok: true; tools: ListedTool[] } | { ok: false; status: 401 }> {
  const { store, log } = deps;
  const key = await liveKey(deps, input.authorization);
  if (!key) return { ok: false, status: 401 };
  const connections = store.listConnections ? await store.listConnections(key.workspaceId) : [];
  const pool = deps.upstreams;
  const lists = await Promise.all(
    connections
      .filter((c): c is GatewayConnection & { name: string } => c.active && typeof c.name === "string" && Boolean(c.upstream?.url) && pool !== undefined)
      .map(async (c) => {
        try {
          const tools = await pool!.tools(c.upstream!);
          return Promise.all(
            tools.map(async (t) => {
              const override = c.overrides?.[t.name] ?? null;
              const listed = listedTool(c.name, t, override);
              // A tool the gate holds for this key runs as a task when the client asks (MCP tasks):
              // "optional", never "required", so a client without tasks still calls it and reads -32003.
              if (how.tasks && classifyTool(t, override).destructive && (await holds(deps, key, c, t.name, listed.name))) return { ...listed, execution: { taskSupport: "optional" as const } };
              return listed;
            }),
          );
        } catch (error) {
          log.warn({ connectionId: c.id, err: String(error) }, "upstream tools unreadable: left out of tools/list");
          return [];
        }
      }),
  );
  return { ok: true, tools: lists.flat() };
}

/** Whether the gate would hold this key's call of the tool now (destructive, and Cedar asks for approval). */
async function holds(deps: GatewayDeps, key: NonNullable<Awaited<ReturnType<typeof liveKey>>>, c: GatewayConnection, upstreamTool: string, logicalTool: string): Promise<boolean> {
  const decision = await decide(deps, key, gateRequest(key, { connectionId: c.id, tool: `${c.provider}.${upstreamTool}` }, logicalTool, false, true));
  return decision.decision === "approval_required";
}

function listedTool(connection: string, t: UpstreamTool, override: boolean | null): ListedTool {
  const c = classifyTool(t, override);
  // The annotations an agent sees say what the gate will do: an override shows as the hint.
  const annotations = c.source === "override" ? { ...t.annotations, destructiveHint: c.destructive, ...(c.destructive ? { readOnlyHint: false } : {}) } : t.annotations;
  return {
    name: `${connection}.${t.name}`,
    ...(t.title !== undefined ? { title: t.title } : {}),
    ...(t.description !== undefined ? { description: t.description } : {}),
    inputSchema: t.inputSchema,
    ...(t.outputSchema !== undefined ? { outputSchema: t.outputSchema } : {}),
    ...(annotations !== undefined ? { annotations } : {}),
  };
}
