// Seed 000, "Who can reserve" and "Releasing", exactly: approve to reserve for yourself; approve
// and membership for a role; super_admin any role; a role already holding is not offered again;
// only roles of your own organization; release by the holder, any current member, a super_admin;
// a role's deletion releases with the deleting admin recorded; releases are recorded.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { releaseReservationsOfRole } from "../../src/services/reservations.js";
import { PLAN, READ, memberOf, ops, person, role, seedStack, seedWorkspace } from "./helpers.js";

let t: TestApp;
let org: OrgFixture;
let o: ReturnType<typeof ops>;
let stackId: string;

beforeAll(async () => {
  t = await startTestApp();
  org = await createOrg(t.db);
  o = ops(t);
  stackId = (await seedStack(t, org.orgId)).id;
});
afterAll(() => t.close());

const ws = () => seedWorkspace(t, org.orgId, stackId);
const RESERVABLE = `query($w: ID!) { reservableRoles(workspaceId: $w) { id name } workspace(id: $w) { viewerCanReserveForSelf } }`;

describe("who can reserve", () => {
  it("reserving for yourself requires the approve permission on the workspace", async () => {
    const w = await ws();
    const reader = await person(t, org.orgId, "reader", [READ]);
    expect(await o.reserve(reader.token, w.id)).toMatchObject({ __typename: "PermissionDeniedError", missing: { action: "approve", matchValue: w.name } });
    const approver = await person(t, org.orgId, "approver");
    const res = await o.reserve(approver.token, w.id);
    expect(res.data).toMatchObject({ holderKind: "USER", active: true, holderUser: { id: approver.userId }, placedBy: { id: approver.userId } });
    expect((await o.reserve(approver.token, w.id)).__typename).toBe("ConflictError");
  });

  it("reserving for a role requires approve on the workspace and membership of that role", async () => {
    const w = await ws();
    const devops = await role(t, org.orgId, "DevOps");
    const readers = await role(t, org.orgId, "Readers", [READ]);
    const member = await memberOf(t, org.orgId, devops.id, "member");
    const outsider = await person(t, org.orgId, "outsider");
    expect((await o.reserve(outsider.token, w.id, devops.id)).__typename).toBe("PermissionDeniedError");
    const readerMember = await memberOf(t, org.orgId, readers.id, "reader");
    expect((await o.reserve(readerMember.token, w.id, readers.id)).missing).toMatchObject({ action: "approve" });
    const res = await o.reserve(member.token, w.id, devops.id);
    expect(res.data).toMatchObject({ holderKind: "ROLE", holderRole: { id: devops.id }, placedBy: { id: member.userId } });
  });

  it("a super_admin can reserve for any role, member or not", async () => {
    const w = await ws();
    const sre = await role(t, org.orgId, "SRE");
    expect((await o.reserve(org.adminToken, w.id, sre.id)).__typename).toBe("MutationReserveWorkspaceSuccess");
  });

  it("a role that already holds a reservation on the workspace is not offered again", async () => {
    const w = await ws();
    const devops = await role(t, org.orgId, "DevOps");
    const member = await memberOf(t, org.orgId, devops.id, "member");
    let offered = (await t.gql(RESERVABLE, { w: w.id }, member.token)).data;
    expect(offered).toEqual({ reservableRoles: [{ id: devops.id, name: devops.name }], workspace: { viewerCanReserveForSelf: true } });
    await o.reserve(member.token, w.id, devops.id);
    offered = (await t.gql(RESERVABLE, { w: w.id }, member.token)).data;
    expect(offered.reservableRoles).toEqual([]);
    expect((await o.reserve(member.token, w.id, devops.id)).__typename).toBe("ConflictError");
    // A super_admin is offered every role except the one holding.
    const all = (await t.gql(RESERVABLE, { w: w.id }, org.adminToken)).data.reservableRoles.map((r: { id: string }) => r.id);
    expect(all).not.toContain(devops.id);
    expect(all.length).toBeGreaterThan(0);
  });

  it("only roles of your own organization can be chosen", async () => {
    const w = await ws();
    const other = await createOrg(t.db);
    const foreign = await role(t, other.orgId, "Foreign");
    expect(await o.reserve(org.adminToken, w.id, foreign.id)).toMatchObject({ __typename: "NotFoundError" });
    const offered = (await t.gql(RESERVABLE, { w: w.id }, org.adminToken)).data.reservableRoles.map((r: { id: string }) => r.id);
    expect(offered).not.toContain(foreign.id);
  });

  it("a reservation is workspace-scoped: it answers for every plan there, and none elsewhere", async () => {
    const [w1, w2] = await Promise.all([ws(), ws()]);
    const alice = await person(t, org.orgId, "alice");
    await o.reserve(alice.token, w1.id);
    const runner = await person(t, org.orgId, "runner", [READ, PLAN]);
    const p1 = await o.submit(runner.token, w1.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    const p2 = await o.submit(runner.token, w2.id, [{ address: "aws_s3_bucket.a", action: "CREATE" }]);
    expect((await o.gate(alice.token, p1.id)).evaluation.reservations).toHaveLength(1);
    expect((await o.gate(alice.token, p2.id)).evaluation.reservations).toHaveLength(0);
  });
});

describe("releasing", () => {
  it("anyone holding a personal reservation may release their own; someone else may not", async () => {
    const w = await ws();
    const [alice, bob] = await Promise.all([person(t, org.orgId, "alice"), person(t, org.orgId, "bob")]);
    const r = (await o.reserve(alice.token, w.id)).data;
    expect((await o.release(bob.token, r.id)).__typename).toBe("PermissionDeniedError");
    const released = await o.release(alice.token, r.id);
    expect(released.data).toMatchObject({ active: false, releasedBy: { id: alice.userId }, releaseReason: "released" });
    expect((await o.release(alice.token, r.id)).__typename).toBe("InvalidStateError");
  });

  it("any current member of a role may release the role's reservation", async () => {
    const w = await ws();
    const devops = await role(t, org.orgId, "DevOps");
    const placer = await memberOf(t, org.orgId, devops.id, "placer");
    const other = await memberOf(t, org.orgId, devops.id, "other");
    const r = (await o.reserve(placer.token, w.id, devops.id)).data;
    expect((await o.release(other.token, r.id)).data.releasedBy).toEqual({ id: other.userId });
  });

  it("a super_admin can release any reservation in their organization", async () => {
    const w = await ws();
    const alice = await person(t, org.orgId, "alice");
    const r = (await o.reserve(alice.token, w.id)).data;
    expect((await o.release(org.adminToken, r.id)).data.releasedBy).toEqual({ id: org.adminId });
    const other = await createOrg(t.db);
    const r2 = (await o.reserve(alice.token, w.id)).data;
    expect((await o.release(other.adminToken, r2.id)).__typename).toBe("NotFoundError");
  });

  it("Reservation.viewerCanRelease answers what releasing would: holder, other person, role member, non-member, super_admin", async () => {
    const w = await ws();
    const devops = await role(t, org.orgId, "DevOps-release");
    const [holder, stranger, member] = await Promise.all([
      person(t, org.orgId, "holder"),
      person(t, org.orgId, "stranger"),
      memberOf(t, org.orgId, devops.id, "member"),
    ]);
    const callers = { holder: holder.token, stranger: stranger.token, member: member.token, superAdmin: org.adminToken };
    const kinds = { personal: () => o.reserve(holder.token, w.id), role: () => o.reserve(member.token, w.id, devops.id) };
    const READ_FLAG = `query($w: ID!) { workspace(id: $w) { reservations { id viewerCanRelease } } }`;
    const seen: string[] = [];
    for (const [kind, place] of Object.entries(kinds)) {
      for (const [who, token] of Object.entries(callers)) {
        const r = (await place()).data;
        const flag = (await t.gql<{ workspace: { reservations: { id: string; viewerCanRelease: boolean }[] } }>(READ_FLAG, { w: w.id }, token)).data.workspace.reservations.find((x) => x.id === r.id)!.viewerCanRelease;
        const result = await o.release(token, r.id);
        if (result.__typename !== "MutationReleaseReservationSuccess") await o.release(org.adminToken, r.id);
        expect(flag, `${kind} reservation, ${who}`).toBe(result.__typename === "MutationReleaseReservationSuccess");
        seen.push(`${kind}:${who}:${flag}`);
      }
    }
    expect(seen).toEqual([
      "personal:holder:true", "personal:stranger:false", "personal:member:false", "personal:superAdmin:true",
      "role:holder:false", "role:stranger:false", "role:member:true", "role:superAdmin:true",
    ]);
    // Released: nobody may release it again.
    const r = (await o.reserve(holder.token, w.id)).data;
    await o.release(holder.token, r.id);
    const all = (await t.gql<{ workspace: { reservations: { id: string; viewerCanRelease: boolean }[] } }>(
      `query($w: ID!) { workspace(id: $w) { reservations(includeReleased: true) { id viewerCanRelease } } }`, { w: w.id }, org.adminToken)).data.workspace.reservations;
    expect(all.find((x) => x.id === r.id)!.viewerCanRelease).toBe(false);
  });

  it("releases are recorded, not deleted: the workspace page shows who held, placed and released it", async () => {
    const w = await ws();
    const alice = await person(t, org.orgId, "alice");
    const r = (await o.reserve(alice.token, w.id)).data;
    await o.release(alice.token, r.id);
    const page = await t.gql(
      `query($id: ID!) { workspace(id: $id) { active: reservations { id } all: reservations(includeReleased: true) { id holderUser { id } placedBy { id } releasedBy { id } releasedAt } } }`,
      { id: w.id },
      org.adminToken,
    );
    expect(page.data.workspace.active).toEqual([]);
    expect(page.data.workspace.all).toMatchObject([{ id: r.id, holderUser: { id: alice.userId }, placedBy: { id: alice.userId }, releasedBy: { id: alice.userId } }]);
  });

  it("deleting a role releases every reservation it holds, recording the deleting admin as releaser", async () => {
    const [w1, w2] = await Promise.all([ws(), ws()]);
    const doomed = await role(t, org.orgId, "Doomed");
    await o.reserve(org.adminToken, w1.id, doomed.id);
    await o.reserve(org.adminToken, w2.id, doomed.id);
    const listed = await t.gql(`query($r: ID!) { roleReservations(roleId: $r) { workspace { id } } }`, { r: doomed.id }, org.adminToken);
    expect(listed.data.roleReservations.map((x: { workspace: { id: string } }) => x.workspace.id).sort()).toEqual([w1.id, w2.id].sort());
    const deleted = await t.gql(`mutation($id: ID!) { deleteRole(id: $id) { __typename } }`, { id: doomed.id }, org.adminToken);
    expect(deleted.data.deleteRole.__typename).toBe("MutationDeleteRoleSuccess");
    const rows = await t.db.prisma.reservation.findMany({ where: { holderRoleId: doomed.id } });
    expect(rows).toHaveLength(2);
    for (const row of rows) expect(row).toMatchObject({ releasedById: org.adminId, releaseReason: "role_deleted" });
    expect(rows.every((r) => r.releasedAt !== null)).toBe(true);
  });

  it("releaseReservationsOfRole releases only the role's active reservations and names the workspaces", async () => {
    const [w1, w2] = await Promise.all([ws(), ws()]);
    const target = await role(t, org.orgId, "Target");
    const keep = await role(t, org.orgId, "Keep");
    const admin2 = await person(t, org.orgId, "admin2", [], { superAdmin: true });
    const a = await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: w1.id, holderRoleId: target.id, placedById: org.adminId } });
    const earlier = await t.db.prisma.reservation.create({
      data: { orgId: org.orgId, workspaceId: w2.id, holderRoleId: target.id, placedById: org.adminId, releasedAt: new Date(0), releasedById: org.adminId, releaseReason: "released" },
    });
    const other = await t.db.prisma.reservation.create({ data: { orgId: org.orgId, workspaceId: w2.id, holderRoleId: keep.id, placedById: org.adminId } });
    const result = await t.db.prisma.$transaction((tx) => releaseReservationsOfRole(tx, target.id, admin2.userId));
    expect(result.workspaceIds).toEqual([w1.id]);
    expect(await t.db.prisma.reservation.findUniqueOrThrow({ where: { id: a.id } })).toMatchObject({ releasedById: admin2.userId, releaseReason: "role_deleted" });
    expect(await t.db.prisma.reservation.findUniqueOrThrow({ where: { id: earlier.id } })).toMatchObject({ releasedById: org.adminId, releaseReason: "released" });
    expect((await t.db.prisma.reservation.findUniqueOrThrow({ where: { id: other.id } })).releasedAt).toBeNull();
  });
});
