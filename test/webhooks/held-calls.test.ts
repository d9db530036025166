// Held tool calls' webhook events: a request filed for review, and its decision, are queued in
// the ingest's and the vote's own transactions, carrying the reviewer view (no arguments).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorld, heldAndFiled, vote, type World } from "../approvals/world.js";

let w: World;
beforeAll(async () => {
  w = await createWorld();
  // Queuing needs no signing key: the webhook row is written as createWebhook would.
  await w.db.prisma.webhook.create({
    data: { orgId: w.org.orgId, url: "https://hooks.example.com/held", events: ["approval_request.filed", "approval_request.decided"], format: "json", secretSealed: "v1.unused" },
  });
});
afterAll(() => w.close());

const queued = (requestId: string) =>
  w.db.prisma.webhookDelivery.findMany({ where: { orgId: w.org.orgId }, orderBy: { createdAt: "asc" } }).then((rows) =>
    rows.filter((r) => (r.payload as any).data.request.id === requestId),
  );

describe("held tool call events", () => {
  it("a filed request queues approval_request.filed; the vote reaching quorum queues approval_request.decided; never the arguments", async () => {
    const id = await heldAndFiled(w, { repo: "acme/secret-repo-name" });
    expect((await queued(id)).map((r) => r.eventType)).toEqual(["approval_request.filed"]);
    await vote(w, w.reviewers[0]!, id);
    expect((await queued(id)).map((r) => r.eventType)).toEqual(["approval_request.filed"]);
    await vote(w, w.reviewers[1]!, id);
    const rows = await queued(id);
    expect(rows.map((r) => r.eventType)).toEqual(["approval_request.filed", "approval_request.decided"]);
    expect((rows[1]!.payload as any).data.request).toMatchObject({ id, status: "approved" });
    for (const r of rows) expect(JSON.stringify(r.payload)).not.toContain("secret-repo-name");
  });
});
