import { describe, expect, it } from "vitest";
import { getDatamodel } from "../src/generated/pothos-types.js";

/**
 * Every id column that names a row is a Prisma relation (and so a foreign key), so the API reads
 * the row through the model instead of loading it by id behind a cast. Generated from the data
 * model itself: a new `…Id` column without a relation fails here unless it is listed below with
 * the reason it names no row of this database (or is left to a later change).
 */
const NOT_RELATIONS: Record<string, string> = {
  "User.orgId": "the organization that created the row, for email scoping; older rows have none (not read through the API)",
  "StackAuthzGroupMember.orgId": "a copy of its stack's organization, part of the key; the stack relation covers it",
  "ApprovalRequest.virtualKeyId": "the gateway's ticket as filed from the stream, kept as the ticket named it",
  "ApprovalRequest.connectionId": "the gateway's ticket as filed from the stream, kept as the ticket named it",
  "ApprovalRequest.invocationId": "an MCP invocation, not a row",
  "GatewayInvocation.approvalId": "its own key: the gateway's approval id",
  "GatewayInvocation.workspaceId": "the gateway's held record, written by the gateway on its own path",
  "GatewayInvocation.virtualKeyId": "the gateway's held record, written by the gateway on its own path",
  "GatewayInvocation.connectionId": "the gateway's held record, written by the gateway on its own path",
  "GatewayInvocation.invocationId": "an MCP invocation, not a row",
  "GatewayExecution.virtualKeyId": "part of the execute-once key, written by the gateway on its own path",
  "GatewayExecution.approvalId": "the gateway's approval id, written by the gateway on its own path",
  "GatewayExecution.invocationId": "an MCP invocation, not a row",
  "WebhookDelivery.eventId": "an event's id (X-Countersign-Event-Id), not a row",
  "HcpRunTaskRequest.taskResultId": "HCP Terraform's task result id (taskrs-…), not a row",
  "HcpRunTaskRequest.runId": "HCP Terraform's run id (run-…), not a row",
  "HcpRunTaskRequest.hcpWorkspaceId": "HCP Terraform's workspace id (ws-…), not a row",
  "GithubIntegration.appId": "the GitHub App's id, not a row",
  "GithubProtectionRequest.deliveryId": "GitHub's delivery id (X-GitHub-Delivery), not a row",
  "GithubProtectionRequest.installationId": "the GitHub App installation's id, not a row",
  "GithubProtectionRequest.runId": "a GitHub Actions run id, not a row",
};

const models = Object.entries(getDatamodel().datamodel.models);
const idColumns = models.flatMap(([model, { fields }]) => {
  const related = new Set(fields.flatMap((f) => f.relationFromFields ?? []));
  return fields.filter((f) => f.kind === "scalar" && /Id$/.test(f.name)).map((f) => ({ column: `${model}.${f.name}`, related: related.has(f.name) }));
});

describe("every id column that names a row is a relation", () => {
  it.each(idColumns.map((c) => [c.column, c.related] as const))("%s", (column, related) => {
    if (column in NOT_RELATIONS) expect(related, `${column} is listed as no relation but has one: take it off the list`).toBe(false);
    else expect(related, `${column} names a row but has no Prisma relation`).toBe(true);
  });

  it("the list of columns that are not relations names only columns that exist", () => {
    const columns = new Set(idColumns.map((c) => c.column));
    expect(Object.keys(NOT_RELATIONS).filter((c) => !columns.has(c))).toEqual([]);
  });
});
