import { validateApprovalRules } from "../domain/approvals/policy.js";
import { generateVirtualKey, hashVirtualKey, virtualKeyPrefix } from "../gateway/keys.js";
import type { Prisma } from "../generated/prisma/client.js";
import type { PrismaClient, Tx } from "../infra/db.js";
import { createOrganizationWithAdmin, issueToken } from "./accounts.js";
import { systemRoleId } from "./system-roles.js";
import { DEMO_UPSTREAM_URL } from "../gateway/demo-upstream.js";

export interface DemoSeed {
  orgSlug: string;
  tokens: { name: string; email: string; role: string; token: string }[];
  /** The demo agent's virtual key for the MCP gateway (payments-prod), shown once like the tokens. */
  agentKey?: string;
}

/**
 * A small demo organization for the embedded default, so a newcomer sees the whole product:
 * members holding different roles, a custom role, stacks carrying authz groups.
 */
export async function seedDemo(prisma: PrismaClient): Promise<DemoSeed> {
  const { org, user: alice, token: aliceToken } = await createOrganizationWithAdmin(prisma, {
    orgName: "Acme Platform",
    slug: "acme",
    admin: { email: "alice@acme.test", name: "Alice (super admin)" },
  });
  // The rest in one transaction: one commit instead of ~40 on the embedded database (part of a
  // first start). The timeout leaves room for a loaded machine.
  return prisma.$transaction(
    async (tx) => {
      const tokens: DemoSeed["tokens"] = [{ name: alice.name, email: alice.email, role: "admin, super_admin", token: aliceToken }];
      const userIds = new Map<string, string>();
      const people = [
        { email: "bob@acme.test", name: "Bob", role: "stack-admin" },
        { email: "carol@acme.test", name: "Carol", role: "workspace-approver" },
        { email: "dave@acme.test", name: "Dave", role: "stack-reader" },
        { email: "ci-bot@acme.test", name: "CI bot", role: "workspace-runner", serviceAccount: true },
      ];
      for (const p of people) {
        const user = await tx.user.create({ data: { email: p.email, name: p.name, isServiceAccount: p.serviceAccount ?? false } });
        await tx.membership.create({ data: { orgId: org.id, userId: user.id } });
        await tx.roleAssignment.create({ data: { orgId: org.id, userId: user.id, roleId: systemRoleId(p.role) } });
        const { token } = await issueToken(tx, { userId: user.id, orgId: org.id, name: "demo" });
        tokens.push({ name: p.name, email: p.email, role: p.role, token });
        userIds.set(p.email, user.id);
      }
      const stacks = [
        { name: "payments-api", authzGroups: ["team-payments", "env-prod"], labels: { env: "prod", team: "payments" } },
        { name: "payments-staging", authzGroups: ["team-payments"], labels: { env: "staging", team: "payments" } },
        { name: "team-a-network", authzGroups: ["env-prod"], labels: { env: "prod", team: "a" } },
        { name: "status-page", authzGroups: [], labels: { team: "sre" } },
      ];
      const stackIds = new Map<string, string>();
      for (const s of stacks) {
        const stack = await tx.stack.create({
          data: {
            orgId: org.id,
            name: s.name,
            labels: s.labels,
            authzGroups: s.authzGroups,
            outputs: [
              { name: "endpoint", value: `https://${s.name}.acme.test`, sensitive: false },
              { name: "db_password", value: "hunter2", sensitive: true },
            ],
            groupMembers: { create: s.authzGroups.map((g) => ({ orgId: org.id, groupName: g, stackName: s.name })) },
          },
        });
        stackIds.set(s.name, stack.id);
      }
      await tx.organization.update({ where: { id: org.id }, data: { protectedLabelKeys: ["env"] } });
      tokens.push(...(await seedApplyGateDemo(tx, org.id, alice.id, stackIds, userIds)));
      const agentKey = await seedGatewayDemo(tx, org.id, alice.id);
      return { orgSlug: org.slug, tokens, agentKey };
    },
    { maxWait: 10_000, timeout: 120_000 },
  );
}

/**
 * The apply gate, ready to look at (seed 000): payments-prod has a baseline of 2, a resource
 * policy over its databases (a delete needs 2 approvals, one from DevOps), a reservation for
 * the DevOps role placed by Alice, and an open plan from the CI bot that Carol has approved —
 * so `gate(planId)` explains what is still missing, and approving as Erin (DevOps) moves it.
 */
async function seedApplyGateDemo(
  prisma: Tx,
  orgId: string,
  aliceId: string,
  stackIds: ReadonlyMap<string, string>,
  userIds: ReadonlyMap<string, string>,
): Promise<DemoSeed["tokens"]> {
  const carol = userIds.get("carol@acme.test")!;
  const ciBot = userIds.get("ci-bot@acme.test")!;
  const devops = await prisma.role.create({
    data: {
      orgId,
      key: "devops",
      name: "DevOps",
      description: "Approves production applies; holds reservations on production workspaces.",
      permissions: {
        create: [
          { resourceType: "workspace", action: "read" },
          { resourceType: "workspace", action: "approve" },
          { resourceType: "stack", action: "read" },
          { resourceType: "role", action: "read" },
        ],
      },
    },
  });
  const erin = await prisma.user.create({ data: { email: "erin@acme.test", name: "Erin (DevOps)" } });
  await prisma.membership.create({ data: { orgId, userId: erin.id } });
  await prisma.roleAssignment.create({ data: { orgId, userId: erin.id, roleId: devops.id } });
  const { token } = await issueToken(prisma, { userId: erin.id, orgId, name: "demo" });

  const prod = await prisma.workspace.create({
    data: { orgId, stackId: stackIds.get("payments-api")!, name: "payments-prod", environment: "prod", production: true, requiredApprovals: 2 },
  });
  await prisma.workspace.create({
    data: { orgId, stackId: stackIds.get("status-page")!, name: "status-page-prod", environment: "prod", production: true, requiredApprovals: 1 },
  });
  await prisma.resourcePolicy.create({
    data: {
      orgId,
      name: "prod-databases",
      description: "Deleting or replacing a production database needs two approvals, one from DevOps.",
      addressPatterns: ["aws_db_instance.*", "module.db.*"],
      workspaces: { create: [{ workspaceId: prod.id }] },
      requirements: {
        create: [
          { action: "create", count: null },
          { action: "update", count: 1 },
          { action: "delete", count: 2, approvers: { create: [{ roleId: devops.id }] } },
          { action: "replace", count: 2, approvers: { create: [{ roleId: devops.id }] } },
        ],
      },
    },
  });
  await prisma.reservation.create({ data: { orgId, workspaceId: prod.id, holderRoleId: devops.id, placedById: aliceId } });
  const plan = await prisma.plan.create({ data: { orgId, workspaceId: prod.id, submittedById: ciBot } });
  await prisma.resourceChange.createMany({
    data: [
      { planId: plan.id, address: "aws_db_instance.ledger", action: "replace" },
      { planId: plan.id, address: "aws_s3_bucket.receipts", action: "create" },
    ],
  });
  await prisma.approval.create({ data: { planId: plan.id, userId: carol } });
  return [{ name: erin.name, email: erin.email, role: "DevOps (custom)", token }];
}

/**
 * Held tool calls, ready to try (seed 003): the demo agent's virtual key on payments-prod, a
 * `github` connection there, and an approval policy letting one admin (Alice) review `github.*`
 * in prod. A destructive call (`github.delete_repo`) through the gateway is held; Alice sees it
 * in `countersign inbox`, votes, and delivery executes it once.
 */
async function seedGatewayDemo(prisma: Tx, orgId: string, aliceId: string): Promise<string> {
  const prod = await prisma.workspace.findFirstOrThrow({ where: { orgId, name: "payments-prod" } });
  // Its tools run on the demo upstream MCP server in the Countersign process (its fixed in-process URL).
  await prisma.connection.create({ data: { orgId, workspaceId: prod.id, name: "github", provider: "github", url: DEMO_UPSTREAM_URL } });
  const key = generateVirtualKey();
  await prisma.virtualKey.create({ data: { orgId, workspaceId: prod.id, name: "demo-agent", keyHash: hashVirtualKey(key), prefix: virtualKeyPrefix(key), createdById: aliceId } });
  const rules = validateApprovalRules([
    { id: "prod-github-one-admin", effect: "allow", tools: ["github.*"], environments: ["prod"], roles: [systemRoleId("admin")], userIds: [], count: 1 },
  ]);
  if (!rules.ok) throw new Error(`demo approval rules are invalid: ${JSON.stringify(rules.issues)}`);
  await prisma.approvalPolicy.create({
    data: { orgId, workspaceId: prod.id, name: "prod-github", rules: rules.rules as unknown as Prisma.InputJsonValue },
  });
  return key;
}
