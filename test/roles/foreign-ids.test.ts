// Foreign ids are NotFound (README: anything of another organization is
// NotFound). Generated from the schema: every mutation with an ID argument (top level or inside
// its input) is called by a member of another organization holding no permissions, with our
// ids in every ID position; each must answer NotFoundError — never PermissionDeniedError, never
// anything naming our objects.

import {
  buildSchema,
  getNamedType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  isUnionType,
  type GraphQLField,
  type GraphQLInputType,
} from "graphql";
import { readFileSync } from "node:fs";
import { createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg, type MemberFixture, type OrgFixture } from "../helpers/fixtures.js";
import { ops, person, role, seedStack, seedWorkspace, READ, PLAN } from "../gate/helpers.js";

const schema = buildSchema(readFileSync(new URL("../../schema.graphql", import.meta.url), "utf8"));

type Kind =
  | "role" | "user" | "workspace" | "stack" | "source" | "binding" | "policy" | "plan" | "reservation"
  | "token" | "approvalPolicy" | "connection" | "virtualKey" | "approvalRequest" | "webhook" | "webhookDelivery"
  | "prPreview" | "cloudIntegration" | "slackUserLink" | "hcpWorkspaceMapping" | "githubEnvironmentMapping";

/** Which of our objects an ID argument names: by argument name, and for `id` by the mutation's noun. */
function kindOf(mutation: string, leaf: string): Kind {
  const byName: Record<string, Kind> = {
    roleId: "role", roleIds: "role", approverRoleIds: "role",
    userId: "user", approverUserIds: "user",
    workspaceId: "workspace", workspaceIds: "workspace",
    stackId: "stack", identitySourceId: "source", planId: "plan", requestId: "approvalRequest", connectionId: "connection",
    deliveryId: "webhookDelivery",
  };
  if (byName[leaf]) return byName[leaf]!;
  if (leaf !== "id") throw new Error(`${mutation}: no mapping for ID argument ${leaf}; add one`);
  const nouns: [RegExp, Kind][] = [
    [/Workspace$/, "workspace"], [/ApprovalPolicy$/, "approvalPolicy"], [/GroupBinding$/, "binding"],
    [/IdentitySource$/, "source"], [/ResourcePolicy$/, "policy"], [/Role$/, "role"], [/Stack$/, "stack"],
    [/ToolConnection$/, "connection"], [/Reservation$/, "reservation"], [/ApiToken$/, "token"], [/VirtualKey$/, "virtualKey"],
    [/Webhook$/, "webhook"], [/PrPreview$/, "prPreview"], [/CloudIntegration$/, "cloudIntegration"], [/SlackUser$/, "slackUserLink"],
    [/HcpWorkspaceMapping$/, "hcpWorkspaceMapping"], [/GithubEnvironment$/, "githubEnvironmentMapping"],
  ];
  const hit = nouns.find(([re]) => re.test(mutation));
  if (!hit) throw new Error(`${mutation}: no object kind for its id; add one`);
  return hit[1];
}

function valueFor(mutation: string, name: string, type: GraphQLInputType, ids: Record<Kind, string>, fillOptionalIds: boolean): unknown {
  if (isNonNullType(type)) return valueFor(mutation, name, type.ofType, ids, fillOptionalIds);
  if (isListType(type)) return [valueFor(mutation, name, type.ofType, ids, fillOptionalIds)];
  const named = getNamedType(type);
  if (named.name === "ID") return ids[kindOf(mutation, name)];
  if (isEnumType(named)) return named.getValues()[0]!.value;
  if (isInputObjectType(named)) {
    const out: Record<string, unknown> = {};
    for (const f of Object.values(named.getFields())) {
      const idInside = hasId(f.type);
      if (isNonNullType(f.type) || (fillOptionalIds && idInside)) out[f.name] = valueFor(mutation, f.name, f.type, ids, fillOptionalIds);
    }
    return out;
  }
  if (isScalarType(named)) {
    switch (named.name) {
      case "Int": return 1;
      case "Float": return 1;
      case "Boolean": return false;
      case "DateTime": return new Date(Date.now() + 86_400_000).toISOString();
      case "JSON": return {};
      default:
        if (name === "email") return "someone@example.com";
        if (name === "address") return "aws_db_instance.main";
        return "value-1";
    }
  }
  return null;
}

function hasId(type: GraphQLInputType, depth = 0): boolean {
  const named = getNamedType(type);
  if (named.name === "ID") return true;
  return isInputObjectType(named) && depth < 3 && Object.values(named.getFields()).some((f) => hasId(f.type, depth + 1));
}

function typeString(type: GraphQLInputType): string {
  return type.toString();
}

function selection(field: GraphQLField<unknown, unknown>): string {
  const ret = getNamedType(field.type);
  if (isUnionType(ret)) {
    const validation = ret.getTypes().some((t) => t.name === "ValidationError") ? " ... on ValidationError { issues { field code } }" : "";
    return `{ __typename ... on Error { code message }${validation} }`;
  }
  if (isObjectType(ret)) return `{ __typename }`;
  return "";
}

/** Inputs whose shape is checked before any lookup get a well-formed value, so the ids are reached. */
const OVERRIDES: Record<string, (vars: any, ids: Record<Kind, string>) => void> = {
  submitPlan: (vars) => void (vars.input.changes = [{ address: "aws_db_instance.main", action: "DELETE" }]),
  createCloudIntegration: (vars) => void (vars.input.identity = "arn:aws:iam::123456789012:role/deployer"),
  requestPrPreview: (vars) => void (vars.input.commitSha = "abcdef1"),
  mapGithubEnvironment: (vars) => void (vars.input.repository = "acme/infra"),
  createApprovalPolicy: (vars, ids) =>
    void (vars.input.rules = [{ id: "r1", effect: "ALLOW", environments: ["*"], tools: ["*"], userIds: [ids.user], roleIds: [ids.role] }]),
};

const MUTATIONS = Object.values(schema.getMutationType()!.getFields()).filter((f) => f.args.some((a) => hasId(a.type)));

let t: TestApp;
let ours: OrgFixture;
let ids: Record<Kind, string>;
let ourNames: string[];
let outsider: MemberFixture;

beforeAll(async () => {
  t = await startTestApp();
  ours = await createOrg(t.db);
  const o = ops(t);
  const stack = await seedStack(t, ours.orgId);
  const ws = await seedWorkspace(t, ours.orgId, stack.id);
  const custom = await role(t, ours.orgId, "ours");
  const member = await person(t, ours.orgId, "ourmember", [READ, PLAN]);
  const source = await t.db.prisma.identitySource.create({ data: { orgId: ours.orgId, name: `sso-${randomBytes(3).toString("hex")}` } });
  const binding = await t.db.prisma.identityGroupBinding.create({
    data: { orgId: ours.orgId, identitySourceId: source.id, groupKey: "devs", roles: { create: [{ roleId: custom.id }] } },
  });
  const policy = await o.policy(ours.adminToken, { workspaceIds: [ws.id], addressPatterns: ["aws_db_instance.*"] });
  const plan = await o.submit(member.token, ws.id, [{ address: "aws_db_instance.main", action: "DELETE" }]);
  const reservation = await o.reserve(ours.adminToken, ws.id);
  const token = await t.db.prisma.apiToken.findFirstOrThrow({ where: { orgId: ours.orgId, userId: member.userId } });
  const approvalPolicy = await t.db.prisma.approvalPolicy.create({ data: { orgId: ours.orgId, workspaceId: ws.id, name: "ours-approval", rules: [] } });
  const connection = await t.db.prisma.connection.create({ data: { orgId: ours.orgId, workspaceId: ws.id, name: "ours-conn", provider: "github" } });
  const virtualKey = await t.db.prisma.virtualKey.create({
    data: { orgId: ours.orgId, workspaceId: ws.id, name: "ours-key", keyHash: createHash("sha256").update(randomBytes(8)).digest("hex"), prefix: "vk_", createdById: ours.adminId },
  });
  const webhook = await t.db.prisma.webhook.create({
    data: { orgId: ours.orgId, url: "https://hooks.example.test/ours", events: ["plan.approval_added"], format: "json", secretSealed: "sealed" },
  });
  const delivery = await t.db.prisma.webhookDelivery.create({
    data: { orgId: ours.orgId, webhookId: webhook.id, eventId: randomBytes(8).toString("hex"), eventType: "plan.approval_added", payload: {} },
  });
  const prPreview = await t.db.prisma.prPreview.create({
    data: { orgId: ours.orgId, stackId: stack.id, pullRequest: 1, commitSha: "abcdef1", status: "awaiting_confirmation", requestedById: ours.adminId },
  });
  const cloudIntegration = await t.db.prisma.cloudIntegration.create({
    data: { orgId: ours.orgId, stackId: stack.id, name: "ours-cloud", provider: "aws", identity: "arn:aws:iam::123456789012:role/ours" },
  });
  const slack = await t.db.prisma.slackIntegration.create({ data: { orgId: ours.orgId, slackTeam: "T0OURS", signingSecretSealed: "sealed", configuredById: ours.adminId } });
  const slackUserLink = await t.db.prisma.slackUserLink.create({ data: { orgId: ours.orgId, integrationId: slack.id, slackTeam: "T0OURS", slackUser: "U0OURS", userId: member.userId } });
  const hcpRunTask = await t.db.prisma.hcpRunTask.create({ data: { orgId: ours.orgId, hmacKeySealed: "sealed", configuredById: ours.adminId } });
  const hcpWorkspaceMapping = await t.db.prisma.hcpWorkspaceMapping.create({
    data: { orgId: ours.orgId, runTaskId: hcpRunTask.id, hcpOrganization: "ours-hcp", hcpWorkspace: "ours-hcp-ws", workspaceId: ws.id, createdById: ours.adminId },
  });
  const github = await t.db.prisma.githubIntegration.create({
    data: { orgId: ours.orgId, appId: "1", privateKeySealed: "sealed", webhookSecretSealed: "sealed", configuredById: ours.adminId },
  });
  const githubEnvironmentMapping = await t.db.prisma.githubEnvironmentMapping.create({
    data: { orgId: ours.orgId, integrationId: github.id, repository: "ours/infra", environment: "ours-production", workspaceId: ws.id, createdById: ours.adminId },
  });
  ids = {
    hcpWorkspaceMapping: hcpWorkspaceMapping.id, githubEnvironmentMapping: githubEnvironmentMapping.id,
    prPreview: prPreview.id, cloudIntegration: cloudIntegration.id, slackUserLink: slackUserLink.id,
    role: custom.id, user: member.userId, workspace: ws.id, stack: stack.id, source: source.id, binding: binding.id, policy: policy.id,
    plan: plan.id, reservation: reservation.data?.id ?? reservation.id, token: token.id, approvalPolicy: approvalPolicy.id,
    connection: connection.id, virtualKey: virtualKey.id, webhook: webhook.id, webhookDelivery: delivery.id,
    // No held call in this organization: an id of the right shape that names nothing anywhere.
    approvalRequest: `req_${randomBytes(8).toString("hex")}`,
  };
  ourNames = [stack.name, ws.name, custom.name, member.name, source.name, "ours-approval", "ours-conn", "ours-key", "ours-cloud", "ours-hcp", "ours/infra", "ours-production"];
  const theirs = await createOrg(t.db);
  outsider = await addMember(t.db, theirs.orgId); // a member of another organization, no role
});
afterAll(() => t.close());

describe("a member of another organization gets NotFoundError for every mutation on our ids", () => {
  it("covers every mutation taking an ID", () => {
    expect(MUTATIONS.length).toBeGreaterThan(30);
  });

  for (const field of MUTATIONS) {
    // Every ID position filled, optional ones too: each is one of ours.
    for (const fillOptionalIds of [true]) {
      it(field.name, async () => {
        const vars: Record<string, unknown> = {};
        for (const a of field.args) {
          if (isNonNullType(a.type) || hasId(a.type)) vars[a.name] = valueFor(field.name, a.name, a.type, ids, fillOptionalIds);
        }
        OVERRIDES[field.name]?.(vars, ids);
        const decl = field.args.filter((a) => a.name in vars).map((a) => `$${a.name}: ${typeString(a.type)}`).join(", ");
        const call = field.args.filter((a) => a.name in vars).map((a) => `${a.name}: $${a.name}`).join(", ");
        const query = `mutation${decl ? `(${decl})` : ""} { ${field.name}${call ? `(${call})` : ""} ${selection(field)} }`;
        const res = await t.gql(query, vars, outsider.token);
        const text = JSON.stringify(res);
        for (const name of ourNames) expect(text).not.toContain(name);
        const answer = res.data?.[field.name];
        const code = answer?.__typename ?? res.errors?.[0]?.extensions?.code;
        // A create whose input names our objects answers as it does for any unknown reference:
        // a ValidationError whose every issue is not_found, naming the field.
        const allNotFound = code === "ValidationError" && answer.issues.length > 0 && answer.issues.every((i: any) => i.code === "not_found");
        expect([allNotFound ? "NotFoundError" : code, text]).toEqual([expect.stringMatching(/^(NotFoundError|NOT_FOUND)$/), expect.any(String)]);
      });
    }
  }
});
