// Personal organizations (seed 004, Notes): opened by a signed-in person, owned by them.
import { builder } from "../builder.js";
import { COMMON_ERRORS } from "./errors.js";
import { InvalidStateError, LimitExceededError } from "../../errors.js";
import { OrganizationRef } from "./organization.js";
import { createOwnPersonalOrganization } from "../../services/personal-organizations.js";
import type { Organization } from "../../generated/prisma/client.js";
import { SIGNED_IN } from "../helpers.js";

const CreatedPersonalOrganizationRef = builder
  .objectRef<{ org: Organization; token: string }>("CreatedPersonalOrganization")
  .implement({
    description: "A new personal organization and its owner's first token in it.",
    fields: (t) => ({
      organization: t.field({ type: OrganizationRef, resolve: (p) => p.org }),
      token: t.exposeString("token", {
        description: "The owner's token for the new organization (tokens act in one organization). Shown once: store it now.",
      }),
    }),
  });

const CreatePersonalOrganizationInputRef = builder.inputType("CreatePersonalOrganizationInput", {
  fields: (t) => ({ name: t.string({ required: true }) }),
});

builder.mutationField("createPersonalOrganization", (t) =>
  t.withAuth(SIGNED_IN).field({
    type: CreatedPersonalOrganizationRef,
    errors: { types: [...COMMON_ERRORS, InvalidStateError, LimitExceededError] },
    description:
      "Opens a personal organization owned by the caller (a person, not a service account), under the caller's email and name. " +
      "The owner is admin implicitly; the organization refuses manual role assignments, group bindings and custom roles (seed 004). " +
      "Its slug is derived from the name with a random suffix. One person (one email, across every organization they open " +
      "them from) owns at most COUNTERSIGN_PERSONAL_ORGS_PER_PERSON live personal organizations and opens them at a limited rate: " +
      "LimitExceededError says which limit, and when to retry.",
    args: { input: t.arg({ type: CreatePersonalOrganizationInputRef, required: true }) },
    resolve: (_root, args, ctx) => createOwnPersonalOrganization(ctx.db, ctx.authz, args.input, ctx.config.personalOrganizations),
  }),
);
