// The plan page does the whole job, in real headless Chromium (playwright-core): the CI run's
// link, what changes (Terraform's summary line and the attribute diff, sensitive values masked and
// unknown-after-apply said as such — no secret anywhere in the page), approve with a comment,
// apply, the runner's result message arriving live, discard; the buttons follow the viewer's
// permissions. The inbox keeps decided held calls with their outcome. Screenshots go to
// docs/images/ (the ones docs/clients.md shows) when UPDATE_SCREENSHOTS=1, else test-output/.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember } from "../helpers/fixtures.js";
import { op, seedGate, type GateSeed } from "./seed.js";
import { expectAccessible, expectNoSidewaysScroll } from "./browser.js";
import { ReportPlanResultDocument, SubmitPlanDocument } from "../../src/generated/graphql/graphql.js";
import { SHOW_JSON } from "../gate/show-json.js";

const CHROMIUM = "/usr/bin/chromium";
const OUTPUT = fileURLToPath(new URL(process.env.UPDATE_SCREENSHOTS ? "../../docs/images/" : "../../test-output/", import.meta.url));
const RUN_URL = "https://ci.example.com/acme/infra/actions/runs/4242";

let t: TestApp;
let url: string;
let context: BrowserContext;
let profile: string;
let s: GateSeed;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium is not installed at ${CHROMIUM}: run \`apt-get update && apt-get install -y chromium\`.`);
  mkdirSync(OUTPUT, { recursive: true });
  profile = mkdtempSync(join(tmpdir(), "countersign-chromium-"));
  [t, context] = await Promise.all([
    startTestApp(),
    chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
      viewport: { width: 1280, height: 860 },
    }),
  ]);
  url = await t.listen();
  s = await seedGate(t, { approverName: `Quinn ${process.pid}` });
}, 60_000);

afterAll(async () => {
  await context?.close();
  await t?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/** Accessible (axe: no violation) and no sideways scroll, at 1280 px and at 390 px. */
async function expectEveryWidth(page: Page, view: string): Promise<void> {
  await expectAccessible(page, `${view} at 1280 px`);
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await expectNoSidewaysScroll(page, `${view} at 390 px`);
    await expectAccessible(page, `${view} at 390 px`);
  } finally {
    await page.setViewportSize({ width: 1280, height: 860 });
  }
}

const poll = <T>(read: () => Promise<T> | T) => expect.poll(read, { timeout: 15_000, interval: 50 });

async function open(token: string, hash: string): Promise<{ page: Page; problems: string[] }> {
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  await page.goto(`${url}/?token=${encodeURIComponent(token)}${hash}`);
  return { page, problems };
}

/** Submitted as the CLI submits it (origin CLI, with the run's link), or through the bare API without a link. */
async function submitShowJson(runUrl: string | null = RUN_URL): Promise<string> {
  const input = { workspaceId: s.workspaceId, plan: SHOW_JSON, ...(runUrl ? { runUrl, origin: "CLI" as const } : {}) };
  const r = (await op(t, SubmitPlanDocument, { input }, s.runner.token)).submitPlan;
  if (r.__typename !== "MutationSubmitPlanSuccess") throw new Error(JSON.stringify(r));
  return r.data.id;
}

describe("the plan page", { timeout: 60_000 }, () => {
  it("shows the run link and what changes, masked as Terraform masks it; approve with a comment, apply, and the result arrives live", async () => {
    const planId = await submitShowJson();
    const { page, problems } = await open(s.approver.token, `#plan/${planId}`);
    const detail = page.locator(`#plan-detail[data-plan-id="${planId}"]`);
    await poll(() => detail.locator("[data-testid=change-summary]").textContent()).toBe("Plan: 2 to add, 1 to change, 2 to destroy.");
    expect(await detail.locator("[data-testid=origin]").innerText()).toBe(`From the CLI: ${RUN_URL}`);
    expect(await detail.locator("[data-testid=run-link]").getAttribute("href")).toBe(RUN_URL);

    const db = detail.locator('details.resource[data-address="aws_db_instance.main"]');
    expect(await db.locator('tr[data-path="instance_class"]').innerText()).toMatch(/"db\.t3\.micro"\s*→\s*"db\.t3\.large"/);
    expect(await db.locator('tr[data-path="password"]').innerText()).toMatch(/\(sensitive value\)\s*→\s*\(sensitive value\)/);
    const bucket = detail.locator('details.resource[data-address="aws_s3_bucket.logs"]');
    expect(await bucket.locator('tr[data-path="arn"]').innerText()).toContain("(known after apply)");
    expect(await page.content()).not.toContain("hunter2");
    await expectEveryWidth(page, "plan page with its diff and actions");

    // Approve with a comment: the gate passes, the comment shows, Apply appears.
    await detail.locator("#approve-comment").fill("Checked the instance size with the data team.");
    await detail.locator("button[data-action=approve]").click();
    await poll(() => detail.locator("[data-testid=gate-verdict]").textContent()).toBe("PASSED");
    await poll(() => detail.locator(".comments").innerText()).toContain("Checked the instance size with the data team.");
    await screenshot(page, "plan-page.png");
    // Once the gate passed, a reader may apply too (the API's rule), so the reader sees Apply.
    const reader = await addMember(t.db, s.orgId, { name: `apply reader ${process.pid}`, grants: [{ resourceType: "workspace", action: "read" }, { resourceType: "stack", action: "read" }] });
    const readerPage = await open(reader.token, `#plan/${planId}`);
    await poll(() => readerPage.page.locator(`#plan-detail[data-plan-id="${planId}"] #plan-page button[data-action]`).evaluateAll((els) => els.map((e) => e.getAttribute("data-action")))).toEqual(["apply"]);
    await readerPage.page.close();

    await detail.locator("button[data-action=apply]").click();
    await poll(() => detail.locator("[data-testid=plan-status]").textContent()).toBe("applying");
    // The runner reports from elsewhere: the page shows the result message without a reload.
    await op(t, ReportPlanResultDocument, { input: { planId, outcome: "FAILED", message: "Error: creating RDS instance: InvalidParameterCombination" } }, s.runner.token);
    await poll(() => detail.locator("[data-testid=result-message]").textContent()).toContain("Apply failed: Error: creating RDS instance");
    expect(problems).toEqual([]);
    await page.close();
  });

  it("discard asks once more, then the plan is discarded", async () => {
    const planId = await submitShowJson(null);
    const { page, problems } = await open(s.runner.token, `#plan/${planId}`);
    const detail = page.locator(`#plan-detail[data-plan-id="${planId}"]`);
    await poll(() => detail.locator("button[data-action=discard]").count()).toBe(1);
    expect(await detail.locator("[data-testid=origin]").innerText()).toBe("From the API");
    expect(await detail.locator("[data-testid=run-link]").count()).toBe(0);
    await detail.locator("button[data-action=discard]").click();
    await detail.locator("button[data-action=discard-confirm]").click();
    await poll(() => detail.locator("[data-testid=plan-status]").textContent()).toBe("discarded");
    await poll(() => detail.locator("[data-testid=plan-actions]").count()).toBe(0);
    expect(problems).toEqual([]);
    await page.close();
  });

  it("the buttons follow permissions: the runner may discard but not approve or apply; a reader sees no action", async () => {
    const planId = await submitShowJson();
    const reader = await addMember(t.db, s.orgId, { name: `reader ${process.pid}`, grants: [{ resourceType: "workspace", action: "read" }, { resourceType: "stack", action: "read" }] });
    await t.db.prisma.workspace.update({ where: { id: s.workspaceId }, data: { preventSelfApproval: true } });
    for (const [who, token, expected] of [
      ["runner", s.runner.token, ["discard"]],
      ["reader", reader.token, []],
      ["approver", s.approver.token, ["approve", "discard"]],
    ] as const) {
      const { page } = await open(token, `#plan/${planId}`);
      const detail = page.locator(`#plan-detail[data-plan-id="${planId}"]`);
      await poll(() => detail.locator("[data-testid=change-summary]").count()).toBe(1);
      const actions = await detail.locator("#plan-page button[data-action]").evaluateAll((els) => els.map((e) => e.getAttribute("data-action")));
      expect(actions, who).toEqual(expected);
      expect(await detail.locator("[data-testid=self-approval]").innerText(), who).toContain("prevents self-approval");
      await page.close();
    }
    await t.db.prisma.workspace.update({ where: { id: s.workspaceId }, data: { preventSelfApproval: false } });
  });
});

describe("the inbox's decided calls", { timeout: 60_000 }, () => {
  it("decided calls stay with their outcome, told apart by time, key, amount and id", async () => {
    const base = {
      orgId: s.orgId,
      workspaceId: s.workspaceId,
      virtualKeyId: randomUUID(),
      connectionId: randomUUID(),
      tool: "github.delete_repo",
      environment: "prod",
      argumentHash: "h",
      payloadHash: "p",
      requestSnapshot: {},
      policyRevisions: {},
      matchedRules: [],
      policySetHash: "x",
    };
    const rows = [
      { status: "approved", executionStatus: "executed", amountUsd: 120 },
      { status: "rejected", executionStatus: "none", amountUsd: 45 },
      { status: "expired", executionStatus: "none", amountUsd: null },
    ] as const;
    const ids: string[] = [];
    for (const [i, r] of rows.entries()) {
      const id = `apr_${randomUUID()}`;
      ids.push(id);
      await t.db.prisma.approvalRequest.create({
        data: { ...base, id, invocationId: `inv-${i}`, idempotencyKey: `k-${id}`, status: r.status, executionStatus: r.executionStatus, amountUsd: r.amountUsd, expiresAt: new Date(Date.now() - 1000), decidedAt: new Date() },
      });
    }
    const { page, problems } = await open(s.admin.token, "");
    const decided = page.locator("#decided-calls");
    await poll(() => decided.locator("li.decided-call").count()).toBeGreaterThanOrEqual(3);
    const outcome = (id: string) => decided.locator(`li[data-request-id="${id}"] [data-testid=outcome]`).textContent();
    expect(await outcome(ids[0]!)).toBe("executed");
    expect(await outcome(ids[1]!)).toBe("denied");
    expect(await outcome(ids[2]!)).toBe("expired");
    expect(await decided.locator(`li[data-request-id="${ids[0]}"]`).innerText()).toMatch(new RegExp(`held .*\\$120.* id ${ids[0]!.slice(0, 12)}`));
    await expectEveryWidth(page, "inbox with decided calls");
    await decided.scrollIntoViewIfNeeded();
    await screenshot(page, "inbox-decided.png");
    expect(problems).toEqual([]);
    await page.close();
  });
});

async function screenshot(page: Page, name: string): Promise<void> {
  const path = join(OUTPUT, name);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
}
