// Personal organizations through the API (seed 004, Notes). A signed-in person opens
// one for themselves: they become its owner (admin implicitly) under their own email and name,
// and get a token for it, shown once. Users belong to one organization, so the owner is a new
// user row of the new organization; nothing of the caller's organization goes with it.

import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { Authz } from "../authz/authz.js";
import { InvalidStateError } from "../errors.js";
import type { Database } from "../infra/db.js";
import { createPersonalOrganization, slugify } from "./accounts.js";
import { DisplayName } from "./input-rules.js";
import { parseInput } from "./parse.js";

export const CreatePersonalOrganizationInput = z.object({ name: DisplayName });

/**
 * The slug is the name's, plus a random suffix chosen here: a caller never picks a slug, so a
 * taken one can never tell them that some other organization exists.
 */
const personalSlug = (name: string) => `${slugify(name).slice(0, 48)}-${randomBytes(4).toString("hex")}`;

export async function createOwnPersonalOrganization(db: Database, authz: Authz, raw: unknown) {
  const input = parseInput(CreatePersonalOrganizationInput, raw);
  await authz.requireMember();
  const viewer = authz.viewer!;
  if (viewer.isServiceAccount) {
    throw new InvalidStateError(
      "User",
      "service_account",
      "A service account cannot own a personal organization: a personal organization's owner is a person.",
    );
  }
  return createPersonalOrganization(db.prisma, {
    orgName: input.name,
    slug: personalSlug(input.name),
    owner: { email: viewer.email, name: viewer.name },
  });
}
