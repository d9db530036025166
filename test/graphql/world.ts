// A populated organization for the generated tests: the demo org (stacks with groups, workspaces,
// a resource policy, a role reservation, a plan with an approval), plus an identity source with a
// binding, an approval policy, a virtual key, a tool connection and a held tool call with a vote;
// and a second organization whose admin must never see any of it.
import { randomUUID } from "node:crypto";
import type { TestApp } from "../helpers/harness.js";
import { addMember, createOrg } from "../helpers/fixtures.js";
import { seedDemo } from "../../src/services/demo.js";

type Grants = NonNullable<NonNullable<Parameters<typeof addMember>[2]>["grants"]>;

export interface World {
  orgId: string;
  admin: string;
  /** Another organization's super admin. */
  foreignAdmin: string;
  stackName: string;
  ids: {
    stack: string;
    workspace: string;
    plan: string;
    resourcePolicy: string;
    role: string;
    approvalRequest: string;
    approvalPolicy: string;
    identitySource: string;
    binding: string;
    webhook: string;
    cloudIntegration: string;
    prPreview: string;
  };
  /** A member holding the given grants (custom role), by token. */
  member(grants: Grants): Promise<string>;
  /** The same, with the member's own role ids (a role one holds is readable without (role, read)). */
  memberWithRoles(grants: Grants): Promise<{ token: string; roleIds: string[] }>;
}

export async function createWorld(t: TestApp): Promise<World> {
  const demo = await seedDemo(t.db.prisma);
  const prisma = t.db.prisma;
  const org = await prisma.organization.findUniqueOrThrow({ where: { slug: demo.orgSlug } });
  const alice = await prisma.user.findUniqueOrThrow({ where: { orgId_email: { orgId: org.id, email: "alice@acme.test" } } });
  const workspace = await prisma.workspace.findFirstOrThrow({ where: { orgId: org.id, name: "payments-prod" }, include: { stack: true } });
  const plan = await prisma.plan.findFirstOrThrow({ where: { workspaceId: workspace.id } });
  const policy = await prisma.resourcePolicy.findFirstOrThrow({ where: { orgId: org.id } });
  const devops = await prisma.role.findFirstOrThrow({ where: { orgId: org.id, key: "devops" } });
  await prisma.resourcePolicyAssignment.create({ data: { policyId: policy.id, workspaceId: workspace.id, address: "aws_s3_bucket.receipts" } });
  await prisma.roleAssignment.upsert({
    where: { orgId_userId: { orgId: org.id, userId: alice.id } },
    update: {},
    create: { orgId: org.id, userId: alice.id, roleId: "system:admin" },
  });

  const source = await prisma.identitySource.create({ data: { orgId: org.id, name: "okta" } });
  const binding = await prisma.identityGroupBinding.create({
    data: { orgId: org.id, identitySourceId: source.id, groupKey: "platform", roles: { create: [{ roleId: devops.id }] } },
  });
  const rules = [{ id: "r1", effect: "allow", tools: ["github.*"], environments: ["*"], roles: [devops.id], userIds: [], count: 1 }];
  const approvalPolicy = await prisma.approvalPolicy.create({ data: { orgId: org.id, workspaceId: workspace.id, name: "github", rules } });
  // A saved gateway policy set, so its versions are reachable too.
  await prisma.gatewayPolicyVersion.create({
    data: { orgId: org.id, workspaceId: workspace.id, version: 1, policies: `@id("permit-all") permit (principal, action, resource);`, authorId: alice.id, note: "v1" },
  });
  // A recorded hold-lifting change, so the record is reachable too.
  await prisma.holdAuthorityChange.create({
    data: { orgId: org.id, workspaceId: workspace.id, kind: "workspace.tier_off", subject: workspace.name, before: { production: true }, after: { production: false }, actorUserId: alice.id },
  });
  const key = await prisma.virtualKey.create({
    data: { orgId: org.id, workspaceId: workspace.id, name: "agent", keyHash: randomUUID(), prefix: "csk_test", createdById: alice.id },
  });
  const connection = await prisma.connection.create({ data: { orgId: org.id, workspaceId: workspace.id, name: "gh", provider: "github" } });
  const request = await prisma.approvalRequest.create({
    data: {
      id: randomUUID(),
      orgId: org.id,
      workspaceId: workspace.id,
      virtualKeyId: key.id,
      connectionId: connection.id,
      tool: "github.delete_repo",
      environment: "prod",
      invocationId: randomUUID(),
      idempotencyKey: randomUUID(),
      argumentHash: "a",
      payloadHash: "p",
      requestSnapshot: {},
      policyRevisions: { [approvalPolicy.id]: 1 },
      matchedRules: rules.map((r) => ({ ...r, policyId: approvalPolicy.id, policyRevision: 1, ruleId: r.id })),
      policySetHash: "h",
      expiresAt: new Date(Date.now() + 3_600_000),
    },
  });
  await prisma.vote.create({ data: { requestId: request.id, userId: alice.id, decision: "approve" } });
  const webhook = await prisma.webhook.create({
    data: { orgId: org.id, url: "https://hooks.example.com/world", events: ["plan.gate_passed"], format: "json", secretSealed: "v1.unused" },
  });
  await prisma.webhookDelivery.create({
    data: { orgId: org.id, webhookId: webhook.id, eventId: randomUUID(), eventType: "plan.gate_passed", payload: { type: "plan.gate_passed" } },
  });

  const cloudIntegration = await prisma.cloudIntegration.create({
    data: { orgId: org.id, stackId: workspace.stackId, name: "payments-aws", provider: "aws", identity: "arn:aws:iam::123456789012:role/payments" },
  });
  const prPreview = await prisma.prPreview.create({
    data: { orgId: org.id, stackId: workspace.stackId, pullRequest: 12, commitSha: "abcdef1", status: "awaiting_confirmation", requestedById: alice.id },
  });

  const foreign = await createOrg(t.db);
  const adminToken = demo.tokens[0]!.token;
  return {
    orgId: org.id,
    admin: adminToken,
    foreignAdmin: foreign.adminToken,
    stackName: workspace.stack.name,
    ids: {
      stack: workspace.stackId,
      workspace: workspace.id,
      plan: plan.id,
      resourcePolicy: policy.id,
      role: devops.id,
      approvalRequest: request.id,
      approvalPolicy: approvalPolicy.id,
      identitySource: source.id,
      binding: binding.id,
      webhook: webhook.id,
      cloudIntegration: cloudIntegration.id,
      prPreview: prPreview.id,
    },
    member: async (grants) => (await addMember(t.db, org.id, { grants })).token,
    memberWithRoles: async (grants) => {
      const m = await addMember(t.db, org.id, { grants });
      const held = await prisma.roleAssignment.findMany({ where: { orgId: org.id, userId: m.userId }, select: { roleId: true } });
      return { token: m.token, roleIds: held.map((a) => a.roleId) };
    },
  };
}
