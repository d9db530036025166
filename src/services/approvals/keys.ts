import { z } from "zod";
import type { Authz } from "../../authz/authz.js";
import { ConflictError, InvalidStateError, NotFoundError } from "../../errors.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../../gateway/keys.js";
import type { Database } from "../../infra/db.js";
import { uniqueViolation } from "../prisma-errors.js";
import { parseInput } from "../parse.js";
import { LOCKING_TX_OPTIONS } from "../../infra/db.js";
import { lockWorkspace, workspaceInViewerOrg } from "./workspaces.js";
import { workspaceFamilyTarget } from "../../authz/targets.js";

/**
 * The agent gateway's identities for a workspace (seed 003): virtual keys (stored as a hash,
 * the plaintext returned once), connections (a tool provider, active or not), and the
 * workspace freeze that stops every delivery in it.
 */

type Deps = { db: Database; authz: Authz };

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
      createdById: authz.viewer!.userId,
    },
  });
  return { virtualKey, plaintextKey: plaintext };
}

export async function revokeVirtualKey({ db, authz }: Deps, raw: unknown) {
  const input = parseInput(z.object({ id: z.string().min(1) }), raw);
  await authz.requireMember();
  const key = await db.prisma.virtualKey.findFirst({ where: { id: input.id, orgId: authz.viewer!.orgId } });
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

export async function createConnection({ db, authz }: Deps, raw: unknown) {
  const input = parseInput(
    z.object({ workspaceId: z.string().min(1), name: ConnectionName, provider: Provider, active: z.boolean().default(true) }),
    raw,
  );
  const workspace = await workspaceInViewerOrg(db, authz, input.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "connection", "create"));
  try {
    return await db.prisma.connection.create({
      data: { orgId: workspace.orgId, workspaceId: workspace.id, name: input.name, provider: input.provider, active: input.active },
    });
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A connection named ${input.name} already exists in this workspace.`);
    throw error;
  }
}

async function connectionInOrg(db: Database, authz: Authz, id: string) {
  await authz.requireMember();
  const connection = await db.prisma.connection.findFirst({ where: { id, orgId: authz.viewer!.orgId } });
  if (!connection) throw new NotFoundError("Connection", id);
  return connection;
}

export async function updateConnection({ db, authz }: Deps, raw: unknown) {
  const input = parseInput(
    z.object({ id: z.string().min(1), name: ConnectionName.optional(), provider: Provider.optional(), active: z.boolean().optional() }),
    raw,
  );
  const connection = await connectionInOrg(db, authz, input.id);
  const workspace = await workspaceInViewerOrg(db, authz, connection.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "connection", "update"));
  try {
    return await db.prisma.connection.update({
      where: { id: connection.id },
      data: {
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.provider !== undefined ? { provider: input.provider } : {}),
        ...(input.active !== undefined ? { active: input.active } : {}),
      },
    });
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A connection named ${input.name ?? ""} already exists in this workspace.`);
    throw error;
  }
}

export async function deleteConnection({ db, authz }: Deps, raw: unknown) {
  const input = parseInput(z.object({ id: z.string().min(1) }), raw);
  const connection = await connectionInOrg(db, authz, input.id);
  const workspace = await workspaceInViewerOrg(db, authz, connection.workspaceId);
  await authz.require(workspaceFamilyTarget(workspace, "connection", "delete"));
  await db.prisma.connection.delete({ where: { id: connection.id } });
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
