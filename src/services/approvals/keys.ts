import { z } from "zod";
import type { SignedInAuthz } from "../../authz/authz.js";
import { ConflictError, InvalidStateError, NotFoundError, UpstreamUnavailableError } from "../../errors.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../gateway/keys.js";
import type { Database } from "../../infra/db.js";
import { uniqueViolation } from "../prisma-errors.js";
import { parseInput } from "../parse.js";
import { LOCKING_TX_OPTIONS } from "../../infra/db.js";
import { lockWorkspace, workspaceInViewerOrg } from "./workspaces.js";
import { workspaceFamilyTarget } from "../../authz/targets.js";
import { endpointUrlProblem } from "../../domain/endpoint-url.js";
import { sealConnectionCredential } from "../../gateway/connection-credential.js";
import { listConnectionTools, UpstreamError, type ConnectionToolInfo } from "../../gateway/tools.js";
import type { UpstreamPool } from "../../gateway/upstream.js";
import type { Config } from "../../infra/config.js";
import type { Tx } from "../../infra/db.js";
import { urlHost, type HoldLiftingKind } from "../../domain/hold-authority.js";
import { recordHoldAuthorityChange, requireHoldAuthority } from "../hold-authority.js";

/**
 * The agent gateway's identities for a workspace (seed 003): virtual keys (stored as a hash,
 * the plaintext returned once), connections (an upstream MCP server, active or not, with its
 * credential sealed and per-tool destructive overrides), and the workspace freeze that stops
 * every delivery in it.
 */

type Deps = { db: Database; authz: SignedInAuthz };
type ConnectionDeps = Deps & { config: Pick<Config, "approvalSecret" | "upstreams"> };

const Name = z
  .string()
  .trim()
  .min(1, "A name is required.")
  .max(100, "A name is at most 100 characters.");

/** Connection names are the first segment of a logical tool name (`github.delete_repo`): no dots. */
const ConnectionName = z
  .string()
  .min(1, "A name is required.")
  .max(64, "A connection name is at most 64 characters.")
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]*$/, "A connection name uses letters, digits, '_' and '-' (no dots: it prefixes tool names).");

const Provider = z
  .string()
  .min(1, "A provider is required.")
  .max(64, "A provider is at most 64 characters.")
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]*$/, "A provider uses letters, digits, '_' and '-'.");

/** The upstream MCP server's Streamable HTTP endpoint, on an address the operator allows. */
const upstreamUrl = (config: Pick<Config, "upstreams">) => z.string().superRefine((url, ctx) => {
  const problem = endpointUrlProblem(url, "set it as the connection's credential", config.upstreams);
  if (problem) ctx.addIssue({ code: "custom", message: `The upstream URL ${problem}.` });
});

/** Sent as the upstream's Authorization header: one line of printable ASCII. */
const Credential = z
  .string()
  .min(1, "A credential is not empty (send null to remove it).")
  .max(4096, "A credential is at most 4,096 characters.")
  .regex(/^[\x20-\x7e]+$/, "A credential is one line of printable ASCII (an Authorization header value, e.g. `Bearer …`).");

const TimeoutMs = z
  .number()
  .int("A timeout is a whole number of milliseconds.")
  .min(100, "A timeout is at least 100 ms.")
  .max(300_000, "A timeout is at most 300,000 ms (5 minutes).");

/** The upstream's own tool name, as its tools/list names it (no connection namespace). */
const UpstreamToolName = z
  .string()
  .min(1, "A tool name is required.")
  .max(128, "A tool name is at most 128 characters.")
  .regex(/^[A-Za-z0-9_][A-Za-z0-9_./-]*$/, "A tool name is the upstream's own name: letters, digits, '_', '-', '.', '/'.");

/** Seals a credential; refused without the approval secret the gateway opens it with. */
function sealedCredential(config: ConnectionDeps["config"], credential: string | null | undefined): { credentialSealed?: string | null } {
  if (credential === undefined) return {};
  if (credential === null) return { credentialSealed: null };
  if (!config.approvalSecret) {
    throw new InvalidStateError("Connection", "no_secret", "Storing an upstream credential needs COUNTERSIGN_APPROVAL_SECRET (it is sealed under it).");
  }
  return { credentialSealed: sealConnectionCredential(config.approvalSecret, credential) };
}

// ─── virtual keys ─────────────────────────────────────────────────────────────────────────────

export async function listVirtualKeys({ db, authz }: Deps, workspaceId: string) {
  const workspace = await workspaceInViewerOrg(db, authz, workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "virtual_key", "read"));
  return db.prisma.virtualKey.findMany({ where: { workspaceId }, orderBy: [{ createdAt: "desc" }, { id: "asc" }] });
}

export async function createVirtualKey({ db, authz }: Deps, raw: unknown) {
  const input = parseInput(z.object({ workspaceId: z.string().min(1), name: Name }), raw);
  const workspace = await workspaceInViewerOrg(db, authz, input.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "virtual_key", "create"));
  if (workspace.archivedAt) throw new InvalidStateError("Workspace", "archived", "An archived workspace takes no new keys.");
  const plaintext = generateVirtualKey();
  const virtualKey = await db.prisma.virtualKey.create({
    data: {
      orgId: workspace.orgId,
      workspaceId: workspace.id,
      name: input.name,
      keyHash: hashVirtualKey(plaintext),
      prefix: virtualKeyPrefix(plaintext),
      createdById: authz.viewer.userId,
    },
  });
  return { virtualKey, plaintextKey: plaintext };
}

export async function revokeVirtualKey({ db, authz }: Deps, raw: unknown) {
  const input = parseInput(z.object({ id: z.string().min(1) }), raw);
  await authz.requireMember();
  const key = await db.prisma.virtualKey.findFirst({ where: { id: input.id, orgId: authz.viewer.orgId } });
  if (!key) throw new NotFoundError("VirtualKey", input.id);
  const workspace = await workspaceInViewerOrg(db, authz, key.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "virtual_key", "revoke"));
  // Conditional update: two concurrent revokes cannot both succeed.
  const { count } = await db.prisma.virtualKey.updateMany({ where: { id: key.id, revokedAt: null }, data: { revokedAt: new Date() } });
  if (count === 0) throw new InvalidStateError("VirtualKey", "revoked", "The key is already revoked.");
  return db.prisma.virtualKey.findUniqueOrThrow({ where: { id: key.id } });
}

// ─── connections ──────────────────────────────────────────────────────────────────────────────

export async function listConnections({ db, authz }: Deps, workspaceId: string) {
  const workspace = await workspaceInViewerOrg(db, authz, workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "connection", "read"));
  return db.prisma.connection.findMany({ where: { workspaceId }, orderBy: [{ name: "asc" }] });
}

export async function createConnection({ db, authz, config }: ConnectionDeps, raw: unknown) {
  const input = parseInput(
    z.object({
      workspaceId: z.string().min(1),
      name: ConnectionName,
      provider: Provider,
      active: z.boolean().default(true),
      url: upstreamUrl(config).nullish(),
      credential: Credential.nullish(),
      timeoutMs: TimeoutMs.nullish(),
    }),
    raw,
  );
  const workspace = await workspaceInViewerOrg(db, authz, input.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "connection", "create"));
  const credential = sealedCredential(config, input.credential);
  try {
    return await db.prisma.connection.create({
      data: {
        orgId: workspace.orgId,
        workspaceId: workspace.id,
        name: input.name,
        provider: input.provider,
        active: input.active,
        url: input.url ?? null,
        timeoutMs: input.timeoutMs ?? null,
        ...credential,
      },
    });
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A connection named ${input.name} already exists in this workspace.`);
    throw error;
  }
}

/** The viewer's org's connection, once `(connection, action)` on its workspace holds; another org's (or none): NotFound. */
async function connectionFor(db: Database, authz: SignedInAuthz, id: string, action: "update" | "delete") {
  await authz.requireMember();
  const connection = await db.prisma.connection.findFirst({ where: { id, orgId: authz.viewer.orgId } });
  if (!connection) throw new NotFoundError("Connection", id);
  const workspace = await workspaceInViewerOrg(db, authz, connection.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "connection", action));
  return connection;
}

/** connectionFor with the connection's workspace, for the changes that need its hold authority. */
async function connectionInWorkspaceFor(db: Database, authz: SignedInAuthz, id: string, action: "update") {
  const connection = await connectionFor(db, authz, id, action);
  const workspace = await workspaceInViewerOrg(db, authz, connection.workspaceId);
  return { connection, workspace };
}

type RouteFields = { name: string; provider: string; url: string | null };

/**
 * The hold-lifting changes (src/domain/hold-authority.ts) an update of a connection's route
 * makes: each moves where a logical tool `<connection>.<tool>` runs, so a call the gate holds
 * today could run somewhere that answers "not destructive".
 */
function routeChanges(current: RouteFields, input: { name?: string | undefined; provider?: string | undefined; url?: string | null | undefined }) {
  const changes: { kind: HoldLiftingKind; before: Record<string, unknown>; after: Record<string, unknown> }[] = [];
  if (input.url !== undefined && input.url !== current.url) {
    changes.push({ kind: "connection.url_changed", before: { urlHost: urlHost(current.url) }, after: { urlHost: urlHost(input.url) } });
  }
  if (input.provider !== undefined && input.provider !== current.provider) {
    changes.push({ kind: "connection.provider_changed", before: { provider: current.provider }, after: { provider: input.provider } });
  }
  if (input.name !== undefined && input.name !== current.name) {
    changes.push({ kind: "connection.renamed", before: { name: current.name }, after: { name: input.name } });
  }
  return changes;
}

/**
 * Changing a connection's provider or upstream URL moves where its tools run: calls held before
 * the change stay pinned to the old route and are refused at resume (route_changed).
 * `url`, `credential` and `timeoutMs` take null to remove them.
 *
 * A new URL, provider or name needs the hold authority (owner-only) and is recorded. A new URL
 * never takes the stored credential along: without `credential` in the same call it is cleared
 * (a secret is sent only where it was given for); with one, that one is stored.
 */
export async function updateConnection({ db, authz, config }: ConnectionDeps, raw: unknown) {
  const input = parseInput(
    z.object({
      id: z.string().min(1),
      name: ConnectionName.optional(),
      provider: Provider.optional(),
      active: z.boolean().optional(),
      url: upstreamUrl(config).nullish(),
      credential: Credential.nullish(),
      timeoutMs: TimeoutMs.nullish(),
    }),
    raw,
  );
  const { connection, workspace } = await connectionInWorkspaceFor(db, authz, input.id, "update");
  const credential = sealedCredential(config, input.credential);
  try {
    return await db.prisma.$transaction(async (tx) => {
      await lockWorkspace(tx, workspace.id);
      const current = await tx.connection.findUnique({ where: { id: connection.id } });
      if (!current) throw new NotFoundError("Connection", input.id);
      const changes = routeChanges(current, input);
      if (changes.length > 0) await requireHoldAuthority(authz, workspace);
      const urlChanged = input.url !== undefined && input.url !== current.url;
      const sealed = urlChanged && input.credential === undefined ? { credentialSealed: null } : credential;
      const row = await tx.connection.update({
        where: { id: connection.id },
        data: {
          ...(input.name !== undefined ? { name: input.name } : {}),
          ...(input.provider !== undefined ? { provider: input.provider } : {}),
          ...(input.active !== undefined ? { active: input.active } : {}),
          ...(input.url !== undefined ? { url: input.url } : {}),
          ...(input.timeoutMs !== undefined ? { timeoutMs: input.timeoutMs } : {}),
          ...sealed,
        },
      });
      for (const change of changes) {
        const after =
          change.kind === "connection.url_changed"
            ? { ...change.after, credential: row.credentialSealed === null ? (current.credentialSealed === null ? "none" : "cleared") : "replaced" }
            : change.after;
        await recordConnectionChange(tx, workspace, current.name, { ...change, after }, authz.viewer.userId);
      }
      return row;
    }, LOCKING_TX_OPTIONS);
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A connection named ${input.name ?? ""} already exists in this workspace.`);
    throw error;
  }
}

function recordConnectionChange(
  tx: Tx,
  workspace: { id: string; orgId: string; name: string },
  subject: string,
  change: { kind: HoldLiftingKind; before: Record<string, unknown>; after: Record<string, unknown> },
  actorUserId: string,
) {
  return recordHoldAuthorityChange(tx, { orgId: workspace.orgId, workspace, subject, actorUserId, ...change });
}

export async function deleteConnection({ db, authz }: Deps, raw: unknown) {
  const input = parseInput(z.object({ id: z.string().min(1) }), raw);
  const connection = await connectionFor(db, authz, input.id, "delete");
  await db.prisma.connection.delete({ where: { id: connection.id } });
  return connection;
}

// ─── a connection's upstream tools ────────────────────────────────────────────────────────────

/** The gateway's upstream clients when it is mounted in this process (the demo upstream is reachable only through them). */
export type GatewayUpstreams = UpstreamPool;

/**
 * The connection's tools as its upstream lists them now, with what the gate makes of each
 * (override, annotations, or the fail-closed fallback). The caller has read the connection.
 */
export async function connectionTools(
  deps: { db: Database; config: Pick<Config, "approvalSecret" | "upstreams">; upstreams: GatewayUpstreams | null },
  connection: Parameters<typeof listConnectionTools>[0],
  overrides: readonly { tool: string; destructive: boolean }[],
): Promise<ConnectionToolInfo[]> {
  try {
    return await listConnectionTools(connection, { upstreams: deps.upstreams, approvalSecret: deps.config.approvalSecret, addresses: deps.config.upstreams, overrides });
  } catch (error) {
    if (error instanceof UpstreamError) throw new UpstreamUnavailableError(error.code, error.message);
    throw error;
  }
}

// ─── per-tool destructive overrides ───────────────────────────────────────────────────────────

/** Each connection's overrides, by upstream tool name. */
export function listToolOverrides(db: Database, connectionIds: readonly string[]) {
  return db.prisma.connectionToolOverride.findMany({ where: { connectionId: { in: [...connectionIds] } }, orderBy: [{ tool: "asc" }] });
}

/**
 * An admin's word on whether one upstream tool is destructive, over its MCP annotations (the
 * gate holds destructive calls in production). Needs (connection, update); declaring a tool NOT
 * destructive lets its calls through unheld, so it also needs the hold authority (owner-only)
 * and is recorded. Returns the connection.
 */
export async function setToolOverride({ db, authz }: Deps, raw: unknown) {
  const input = parseInput(z.object({ connectionId: z.string().min(1), tool: UpstreamToolName, destructive: z.boolean() }), raw);
  const { connection, workspace } = await connectionInWorkspaceFor(db, authz, input.connectionId, "update");
  const by = authz.viewer.userId;
  await db.prisma.$transaction(async (tx) => {
    await lockWorkspace(tx, workspace.id);
    const previous = await tx.connectionToolOverride.findUnique({ where: { connectionId_tool: { connectionId: connection.id, tool: input.tool } } });
    if (!input.destructive) await requireHoldAuthority(authz, workspace);
    await tx.connectionToolOverride.upsert({
      where: { connectionId_tool: { connectionId: connection.id, tool: input.tool } },
      create: { orgId: connection.orgId, connectionId: connection.id, tool: input.tool, destructive: input.destructive, updatedById: by },
      update: { destructive: input.destructive, updatedById: by },
    });
    if (!input.destructive) {
      await recordConnectionChange(
        tx,
        workspace,
        `${connection.name}.${input.tool}`,
        { kind: "tool_override.not_destructive", before: { override: previous?.destructive ?? null }, after: { override: false } },
        by,
      );
    }
  }, LOCKING_TX_OPTIONS);
  return connection;
}

/**
 * Removes an override: the tool's own annotations decide again. NotFound when there was none.
 * Clearing a `destructive: true` override can let the tool's calls through unheld (its
 * annotations may say otherwise): that needs the hold authority (owner-only) and is recorded.
 */
export async function clearToolOverride({ db, authz }: Deps, raw: unknown) {
  const input = parseInput(z.object({ connectionId: z.string().min(1), tool: UpstreamToolName }), raw);
  const { connection, workspace } = await connectionInWorkspaceFor(db, authz, input.connectionId, "update");
  await db.prisma.$transaction(async (tx) => {
    await lockWorkspace(tx, workspace.id);
    const previous = await tx.connectionToolOverride.findUnique({ where: { connectionId_tool: { connectionId: connection.id, tool: input.tool } } });
    if (!previous) throw new NotFoundError("ToolAnnotationOverride", input.tool);
    if (previous.destructive) await requireHoldAuthority(authz, workspace);
    await tx.connectionToolOverride.delete({ where: { id: previous.id } });
    if (previous.destructive) {
      await recordConnectionChange(
        tx,
        workspace,
        `${connection.name}.${input.tool}`,
        { kind: "tool_override.cleared", before: { override: true }, after: { override: null } },
        authz.viewer.userId,
      );
    }
  }, LOCKING_TX_OPTIONS);
  return connection;
}

// ─── freeze ───────────────────────────────────────────────────────────────────────────────────

/**
 * Freezing stops every delivery in the workspace: the delivery preflight fails with
 * workspace_frozen. It takes the workspace lock, so a preflight already holding it finishes
 * first (an operation already dispatched cannot be retracted).
 */
export async function setWorkspaceFrozen({ db, authz }: Deps, raw: unknown, frozen: boolean) {
  const input = parseInput(z.object({ workspaceId: z.string().min(1) }), raw);
  const workspace = await workspaceInViewerOrg(db, authz, input.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "workspace", "freeze"));
  const updated = await db.prisma.$transaction(async (tx) => {
    await lockWorkspace(tx, workspace.id);
    return tx.workspace.update({ where: { id: workspace.id }, data: { frozen }, select: { id: true, name: true, frozen: true } });
  }, LOCKING_TX_OPTIONS);
  return updated;
}
