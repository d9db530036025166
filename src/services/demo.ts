import type { PrismaClient } from "../infra/db.js";
import { createOrganizationWithAdmin, issueToken } from "./accounts.js";
import { systemRoleId } from "./system-roles.js";

export interface DemoSeed {
  orgSlug: string;
  tokens: { name: string; email: string; role: string; token: string }[];
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
  const tokens: DemoSeed["tokens"] = [{ name: alice.name, email: alice.email, role: "admin, super_admin", token: aliceToken }];
  const people = [
    { email: "bob@acme.test", name: "Bob", role: "stack-admin" },
    { email: "carol@acme.test", name: "Carol", role: "workspace-approver" },
    { email: "dave@acme.test", name: "Dave", role: "stack-reader" },
    { email: "ci-bot@acme.test", name: "CI bot", role: "workspace-runner", serviceAccount: true },
  ];
  for (const p of people) {
    const user = await prisma.user.create({ data: { email: p.email, name: p.name, isServiceAccount: p.serviceAccount ?? false } });
    await prisma.membership.create({ data: { orgId: org.id, userId: user.id } });
    await prisma.roleAssignment.create({ data: { orgId: org.id, userId: user.id, roleId: systemRoleId(p.role) } });
    const { token } = await issueToken(prisma, { userId: user.id, orgId: org.id, name: "demo" });
    tokens.push({ name: p.name, email: p.email, role: p.role, token });
  }
  const stacks = [
    { name: "payments-api", authzGroups: ["team-payments", "env-prod"], labels: { env: "prod", team: "payments" } },
    { name: "payments-staging", authzGroups: ["team-payments"], labels: { env: "staging", team: "payments" } },
    { name: "team-a-network", authzGroups: ["env-prod"], labels: { env: "prod", team: "a" } },
    { name: "status-page", authzGroups: [], labels: { team: "sre" } },
  ];
  for (const s of stacks) {
    await prisma.stack.create({
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
  }
  await prisma.organization.update({ where: { id: org.id }, data: { protectedLabelKeys: ["env"] } });
  return { orgSlug: org.slug, tokens };
}
