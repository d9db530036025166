// Cloud integrations (seed 004, cloud_integration): the cloud identity a stack's runs
// assume. Created, read, updated and deleted under the cloud_integration family, matched by the
// integration's name, and passing its stack's authz groups (seed: "a cloud integration passes
// its stack's"), so (cloud_integration, update, authz_group = env-prod) reaches the integrations
// of every stack carrying env-prod.
//
// Countersign stores an OIDC federation target (a role ARN, a service account, an application
// id), never a credential: there is no secret to seal or to read back.

import { z } from "zod";
import type { SignedInAuthz } from "../authz/authz.js";
import { namePageQuery } from "../authz/list-filter.js";
import type { Target } from "../domain/catalog/index.js";
import { ConflictError, NotFoundError, ValidationError } from "../errors.js";
import type { Database } from "../infra/db.js";
import { txSql } from "../infra/db.js";
import { uniqueViolation } from "./prisma-errors.js";
import { findReadableStack, ResourceName } from "./stacks.js";
import { parseInput } from "./parse.js";

export const CLOUD_PROVIDERS = ["aws", "gcp", "azure"] as const;
export type CloudProvider = (typeof CLOUD_PROVIDERS)[number];

/** What `identity` is for each provider, and its shape. */
const IDENTITY: Record<CloudProvider, { what: string; shape: RegExp }> = {
  aws: { what: "an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)", shape: /^arn:aws(-[a-z]+)*:iam::\d{12}:role\/[A-Za-z0-9+=,.@_/-]{1,512}$/ },
  gcp: {
    what: "a service account email (<name>@<project>.iam.gserviceaccount.com)",
    shape: /^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com$/,
  },
  azure: { what: "an application (client) id, a UUID", shape: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i },
};

function identityOrThrow(provider: CloudProvider, identity: string): string {
  const rule = IDENTITY[provider];
  if (!rule.shape.test(identity)) {
    throw ValidationError.field("input.identity", "invalid_identity", `For ${provider}, identity is ${rule.what}.`);
  }
  return identity;
}

type WithStack = { name: string; stack: { authzGroups: string[] } };

/** The check target of an integration: its name, and its stack's groups. */
export const cloudIntegrationTarget = (ci: WithStack, action: Target["action"]): Target => ({
  resourceType: "cloud_integration",
  action,
  matchValue: ci.name,
  groups: ci.stack.authzGroups,
});

/** What the read rule needs, loaded with the integration. */
export const CLOUD_INTEGRATION_RULE_INPUTS = { stack: { select: { authzGroups: true } } } as const;

/** An integration of the viewer's org the viewer may read, or NotFound (never "forbidden"). */
export async function findReadableCloudIntegration(db: Database, authz: SignedInAuthz, id: string) {
  await authz.requireMember();
  const ci = await db.prisma.cloudIntegration.findFirst({ where: { id, orgId: authz.viewer.orgId }, include: CLOUD_INTEGRATION_RULE_INPUTS });
  if (!ci || !(await authz.can(cloudIntegrationTarget(ci, "read")))) throw new NotFoundError("CloudIntegration", id);
  return ci;
}

/** A stack has a few cloud identities, not an unbounded list (its edge lists them all). */
export const MAX_CLOUD_INTEGRATIONS_PER_STACK = 50;

export const CreateCloudIntegrationInput = z.object({
  stackId: z.string().min(1),
  name: ResourceName,
  provider: z.enum(CLOUD_PROVIDERS),
  identity: z.string().min(1, "An identity is required.").max(600),
});

/**
 * (cloud_integration, create, <name>): "pattern matching applies at create time too". The stack
 * it attaches to must be one the caller can read (NotFound otherwise, as everywhere).
 */
export async function createCloudIntegration(db: Database, authz: SignedInAuthz, raw: unknown) {
  const input = parseInput(CreateCloudIntegrationInput, raw);
  const identity = identityOrThrow(input.provider, input.identity);
  const stack = await findReadableStack(db, authz, input.stackId);
  await authz.require(cloudIntegrationTarget({ name: input.name, stack }, "create"));
  try {
    return await db.prisma.$transaction(async (tx) => {
      // The stack row held while counting: two creates cannot both take the last place.
      await txSql(tx).query(`SELECT id FROM stacks WHERE id = $1 FOR UPDATE`, [stack.id]);
      const attached = await tx.cloudIntegration.count({ where: { stackId: stack.id } });
      if (attached >= MAX_CLOUD_INTEGRATIONS_PER_STACK) {
        throw new ConflictError(`Stack ${stack.name} already has ${MAX_CLOUD_INTEGRATIONS_PER_STACK} cloud integrations, the most a stack carries.`);
      }
      return tx.cloudIntegration.create({
        data: { orgId: stack.orgId, stackId: stack.id, name: input.name, provider: input.provider, identity },
        include: CLOUD_INTEGRATION_RULE_INPUTS,
      });
    });
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A cloud integration named ${input.name} already exists.`);
    throw error;
  }
}

export const UpdateCloudIntegrationInput = z.object({
  id: z.string().min(1),
  name: ResourceName.optional(),
  provider: z.enum(CLOUD_PROVIDERS).optional(),
  identity: z.string().min(1, "An identity is required.").max(600).optional(),
  /** The revision read; a stale one is a ConflictError. */
  revision: z.number().int().positive().optional(),
});

/**
 * (cloud_integration, update) on the integration as it is; a rename re-checks update against the
 * new name without groups (seed 004: "the same rule keeps a rename honest"). Its stack never
 * changes: moving it would hand it another stack's groups, so that is a new integration.
 * Written only over the revision that was read and authorized.
 */
export async function updateCloudIntegration(db: Database, authz: SignedInAuthz, raw: unknown) {
  const input = parseInput(UpdateCloudIntegrationInput, raw);
  const ci = await findReadableCloudIntegration(db, authz, input.id);
  const stale = (current: number) =>
    new ConflictError(`Cloud integration ${ci.name} is at revision ${current}, not ${input.revision ?? ci.revision}: reload it and edit again.`, current);
  if (input.revision !== undefined && input.revision !== ci.revision) throw stale(ci.revision);
  await authz.require(cloudIntegrationTarget(ci, "update"));
  const name = input.name ?? ci.name;
  if (name !== ci.name) await authz.require({ resourceType: "cloud_integration", action: "update", matchValue: name, groups: null });
  const provider = input.provider ?? ci.provider;
  const identity = input.identity ?? (input.provider !== undefined ? undefined : ci.identity);
  if (identity === undefined) {
    throw ValidationError.field("input.identity", "required", `Changing the provider needs the identity for ${provider}: ${IDENTITY[provider].what}.`);
  }
  identityOrThrow(provider, identity);
  try {
    const written = await db.prisma.cloudIntegration.updateMany({
      where: { id: ci.id, revision: ci.revision },
      data: { name, provider, identity, revision: { increment: 1 } },
    });
    if (written.count === 0) {
      const current = await db.prisma.cloudIntegration.findUnique({ where: { id: ci.id }, select: { revision: true } });
      if (!current) throw new NotFoundError("CloudIntegration", ci.id);
      throw stale(current.revision);
    }
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`A cloud integration named ${name} already exists.`);
    throw error;
  }
  return db.prisma.cloudIntegration.findUniqueOrThrow({ where: { id: ci.id }, include: CLOUD_INTEGRATION_RULE_INPUTS });
}

/** (cloud_integration, delete). */
export async function deleteCloudIntegration(db: Database, authz: SignedInAuthz, id: string) {
  const ci = await findReadableCloudIntegration(db, authz, id);
  await authz.require(cloudIntegrationTarget(ci, "delete"));
  await db.prisma.cloudIntegration.delete({ where: { id: ci.id } });
  return ci;
}

/**
 * One ordered page of the integrations the viewer may read, filtered in SQL by the same
 * semantics as the check (src/authz/list-filter.ts): by name pattern, or by a group of their
 * stack.
 */
export async function listCloudIntegrations(db: Database, authz: SignedInAuthz, options: { first: number; after: string | null }) {
  const scope = await authz.scope("cloud_integration", "read");
  const query = namePageQuery("cloud_integration", authz.viewer.orgId, scope, options.after, options.first + 1);
  if (!query) return { rows: [], hasNextPage: false };
  const found = await db.sql.query<{ id: string }>(query.text, query.params);
  const rows = await db.prisma.cloudIntegration.findMany({
    where: { id: { in: found.map((r) => r.id) } },
    include: CLOUD_INTEGRATION_RULE_INPUTS,
    orderBy: { name: "asc" },
  });
  return { rows: rows.slice(0, options.first), hasNextPage: rows.length > options.first };
}
