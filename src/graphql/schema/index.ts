import { lexicographicSortSchema, printSchema } from "graphql";
import { builder } from "../builder.js";
// Each module registers its types, queries, mutations and subscriptions on the builder.
import "./errors.js";
import "./catalog.js";
import "./organization.js";
import "./stack.js";
import "./access.js";
import "./approvals.js";
import "./gate.js";
import "./workspace.js";
import "./gateway-policies.js";
import "./hold-authority.js";
import "./plan.js";
import "./reservation.js";
import "./resource-policy.js";
import "./webhook.js";
import "./workspace-live.js";
import "./permission-check.js";
import "./personal-organization.js";
import "./pr-preview.js";
import "./cloud-integration.js";
import "./slack.js";
import "./hcp-run-task.js";
import "./github.js";

export const schema = builder.toSchema({ sortSchema: true });

/** The SDL checked in as schema.graphql; test/schema.test.ts fails when they drift. */
export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}
