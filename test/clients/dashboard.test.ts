// The dashboard in real headless Chromium (Debian's `chromium`, driven by playwright-core): sign
// in with a token, watch a gate, approve from a second client, and see the page change with no
// reload; the dashboard's own buttons reserve and approve. The explorer opens with the token
// header and the example operations. Screenshots go to test-output/ (printed).
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { approveAs, op, reserveFor, seedGate, type GateSeed } from "./seed.js";
import { ApplyPlanDocument, CreateWorkspaceDocument, ReleaseReservationDocument, ReportPlanResultDocument, SubmitPlanDocument } from "../../src/generated/graphql/graphql.js";
import { createWorld, heldAndFiled, type World } from "../approvals/world.js";
import { axe, expectAccessible, expectNoSidewaysScroll, flat, keepForDocs, typeInto } from "./browser.js";

const CHROMIUM = "/usr/bin/chromium";
const OUTPUT = fileURLToPath(new URL("../../test-output/", import.meta.url));

let t: TestApp;
let url: string;
let context: BrowserContext;
let profile: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    // Not a skip: CI installs it (.ci/browser), and a developer should too.
    throw new Error(`Chromium is not installed at ${CHROMIUM}: run \`apt-get update && apt-get install -y chromium\` (.ci/browser does this in CI).`);
  }
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
});

afterAll(async () => {
  await context?.close();
  await t?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/** Waits for the page to get there; generous, since CI runs the other test files beside this one. */
const poll = <T>(read: () => Promise<T> | T) => expect.poll(read, { timeout: 15_000, interval: 50 });

async function newPage(): Promise<{ page: Page; problems: string[] }> {
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  return { page, problems };
}

async function screenshot(page: Page, name: string): Promise<string> {
  const path = join(OUTPUT, name);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
  return path;
}

describe("the live gate dashboard", { timeout: 60_000 }, () => {
  let s: GateSeed;
  beforeAll(async () => {
    s = await seedGate(t);
    // Held twice: the baseline (1) and a reservation for the approver, placed by the approver.
    await reserveFor(t, s.workspaceId, s.approver.token);
  });

  it("signs in with a token, shows the gate explained, and updates live when another client approves (no reload)", async () => {
    const { page, problems } = await newPage();
    await page.goto(`${url}/`);
    await page.fill("#token", s.admin.token);
    await page.click("#signin-form button[type=submit]");

    const card = page.locator(`section.workspace[data-workspace="${s.workspaceName}"]`);
    const plan = card.locator(`article.plan[data-plan-id="${s.planId}"]`);
    await poll(() => plan.locator("[data-testid=gate-verdict]").textContent()).toBe("NOT PASSED");
    await poll(() => page.locator("#live").getAttribute("data-state")).toBe("live");
    const held = await plan.innerText();
    expect(held).toContain("0 of 1 approval from holders of approve");
    expect(held).toContain(`from: ${s.approver.name}`);
    expect(await card.locator(".reservations").innerText()).toContain(s.approver.name);
    expect(await page.evaluate(() => sessionStorage.getItem("countersign.token"))).toBe(s.admin.token);

    // Any reload would lose this marker.
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
    const versionBefore = Number(await plan.getAttribute("data-version"));

    await approveAs(t, s.planId, s.approver.token); // the second client

    await poll(() => plan.locator("[data-testid=gate-verdict]").textContent()).toBe("PASSED");
    expect(Number(await plan.getAttribute("data-version"))).toBeGreaterThan(versionBefore);
    expect(await plan.innerText()).toContain(`1 approval counted: ${s.approver.name}`);
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);
    await screenshot(page, "dashboard.png");
    expect(problems).toEqual([]);
    await page.close();
  });

  it("the page's own buttons: reserve for me holds the gate again, approve answers it", async () => {
    const { page, problems } = await newPage();
    // A link carrying ?token= signs in once; the token then lives in sessionStorage, not the URL.
    await page.goto(`${url}/?token=${encodeURIComponent(s.admin.token)}`);
    expect(new URL(page.url()).search).toBe("");
    const card = page.locator(`section.workspace[data-workspace="${s.workspaceName}"]`);
    const verdict = card.locator(`article.plan[data-plan-id="${s.planId}"] [data-testid=gate-verdict]`);
    await poll(() => verdict.textContent()).toBe("PASSED");

    await card.locator("button[data-action=reserve-self]").click();
    await poll(() => verdict.textContent()).toBe("NOT PASSED");
    await poll(() => card.locator(".reservations li").count()).toBe(2);

    await card.locator("button[data-action=approve]").click();
    await poll(() => verdict.textContent()).toBe("PASSED");
    await poll(() => card.locator(".mine").textContent()).toBe("You approved");

    // Release the admin's own reservation from the page.
    const mine = card.locator(".reservations li", { hasText: "Admin" });
    await mine.locator("button[data-action=release]").click();
    await poll(() => card.locator(".reservations li").count()).toBe(1);
    expect(problems).toEqual([]);
    await page.close();
  });

  it("a bad token is refused with a way forward", async () => {
    const { page } = await newPage();
    await page.goto(`${url}/`);
    await page.evaluate(() => sessionStorage.clear());
    await page.reload();
    await page.fill("#token", "cs_not-a-token");
    await page.click("#signin-form button[type=submit]");
    await poll(() => page.locator("#signin-error").textContent()).toContain("not accepted");
    await page.close();
  });
});

describe("the workspace list, live", { timeout: 90_000 }, () => {
  it("a new workspace and a new plan on it appear without a reload; another organization's never do", async () => {
    const s = await seedGate(t);
    const other = await seedGate(t);
    const { page, problems } = await newPage();
    await page.goto(`${url}/?token=${encodeURIComponent(s.admin.token)}`);
    await poll(() => page.locator(`section.workspace[data-workspace="${s.workspaceName}"]`).count()).toBe(1);
    await poll(() => page.locator("#live").getAttribute("data-state")).toBe("live");
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 9));

    const stackId = (await t.db.prisma.workspace.findUniqueOrThrow({ where: { id: s.workspaceId } })).stackId;
    const name = `checkout-${process.pid}-live`;
    const created = (await op(t, CreateWorkspaceDocument, { input: { stackId, name, environment: "staging", requiredApprovals: 0 } }, s.admin.token)).createWorkspace;
    expect(created.__typename).toBe("MutationCreateWorkspaceSuccess");
    const card = page.locator(`section.workspace[data-workspace="${name}"]`);
    await poll(() => card.count()).toBe(1);

    const submitted = (
      await op(t, SubmitPlanDocument, { input: { workspaceId: (created as { data: { id: string } }).data.id, changes: [{ address: "aws_sqs_queue.orders", action: "CREATE" }] } }, s.runner.token)
    ).submitPlan as { data: { id: string } };
    await poll(() => card.locator(`article.plan[data-plan-id="${submitted.data.id}"]`).count()).toBe(1);
    // Another organization's new workspace is never shown.
    const otherStack = (await t.db.prisma.workspace.findUniqueOrThrow({ where: { id: other.workspaceId } })).stackId;
    const otherName = `elsewhere-${process.pid}`;
    await op(t, CreateWorkspaceDocument, { input: { stackId: otherStack, name: otherName, environment: "prod", requiredApprovals: 0 } }, other.admin.token);
    const probe = `probe-${process.pid}`;
    await op(t, CreateWorkspaceDocument, { input: { stackId, name: probe, environment: "dev", requiredApprovals: 0 } }, s.admin.token);
    await poll(() => page.locator(`section.workspace[data-workspace="${probe}"]`).count()).toBe(1);
    expect(await page.locator(`section.workspace[data-workspace="${otherName}"]`).count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(9);
    await screenshot(page, "dashboard-live-list.png");
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe("the plan page", { timeout: 90_000 }, () => {
  let s: GateSeed;
  let policyName: string;
  beforeAll(async () => {
    s = await seedGate(t, { approverName: `Pat ${process.pid}` });
    policyName = `databases-${process.pid}`;
    const res = await t.gql<{ createResourcePolicy: { __typename: string; message?: string } }>(
      `mutation($input: CreateResourcePolicyInput!) { createResourcePolicy(input: $input) { __typename ... on Error { message } } }`,
      { input: { name: policyName, workspaceIds: [s.workspaceId], addressPatterns: ["aws_db_instance.*"], requirements: [{ action: "DELETE", count: 2 }] } },
      s.admin.token,
    );
    expect(res.data.createResourcePolicy.__typename).toBe("MutationCreateResourcePolicySuccess");
    await approveAs(t, s.planId, s.approver.token);
  });

  it("shows every change with its action, governing policies and count or the baseline, the approvals, and withdraws the viewer's own", async () => {
    const { page, problems } = await newPage();
    await page.goto(`${url}/?token=${encodeURIComponent(s.approver.token)}#plan/${s.planId}`);
    const detail = page.locator(`#plan-detail[data-plan-id="${s.planId}"]`);
    await poll(() => detail.locator("[data-testid=gate-verdict]").textContent()).toBe("NOT PASSED");
    await poll(() => page.locator("#live").getAttribute("data-state")).toBe("live");
    const db = detail.locator('tr[data-address="aws_db_instance.main"]');
    const bucket = detail.locator('tr[data-address="aws_s3_bucket.logs"]');
    expect(await db.innerText()).toContain("delete");
    expect(await db.innerText()).toContain(`${policyName} (2)`);
    expect(await db.locator("td.count").textContent()).toBe("2");
    expect(await bucket.innerText()).toContain("create");
    expect(await bucket.innerText()).toContain("no policy");
    expect(await bucket.locator("td.count").textContent()).toBe("on the baseline (1)");
    const approvals = detail.locator("ul.approvals li");
    await poll(() => approvals.count()).toBe(1);
    expect(await approvals.first().innerText()).toContain(s.approver.name);
    await screenshot(page, "plan-detail.png");

    await detail.locator("button[data-action=withdraw]").click();
    await poll(() => detail.locator("ul.approvals li.withdrawn").count()).toBe(1);
    expect(await detail.locator("ul.approvals li.withdrawn").innerText()).toContain("withdrawn");
    await poll(() => detail.locator("button[data-action=withdraw]").count()).toBe(0);
    await poll(() => detail.locator("button[data-action=approve]").count()).toBe(1);
    await screenshot(page, "plan-detail-withdrawn.png");

    // Approving again adds a new approval beside the withdrawn one.
    await detail.locator("button[data-action=approve]").click();
    await poll(() => detail.locator("ul.approvals li.active").count()).toBe(1);
    expect(await detail.locator("ul.approvals li").count()).toBe(2);
    await poll(() => detail.locator("button[data-action=withdraw]").count()).toBe(1);
    expect(problems).toEqual([]);
    await page.close();
  });

  it("an applied plan shows the stored evaluation that allowed its apply", async () => {
    // A second approval (the admin) meets the policy's 2; the admin applies; the runner reports.
    await approveAs(t, s.planId, s.admin.token);
    const applied = (await op(t, ApplyPlanDocument, { planId: s.planId }, s.admin.token)).applyPlan;
    expect(applied.__typename).toBe("MutationApplyPlanSuccess");
    const reported = (await op(t, ReportPlanResultDocument, { input: { planId: s.planId, outcome: "APPLIED" } }, s.runner.token)).reportPlanResult;
    expect(reported.__typename).toBe("MutationReportPlanResultSuccess");

    const { page, problems } = await newPage();
    await page.goto(`${url}/?token=${encodeURIComponent(s.admin.token)}#plan/${s.planId}`);
    const detail = page.locator(`#plan-detail[data-plan-id="${s.planId}"]`);
    await poll(() => detail.locator("[data-testid=plan-status]").textContent()).toBe("applied");
    expect(await detail.locator("[data-testid=gate-verdict]").textContent()).toBe("PASSED");
    expect(await detail.locator("[data-testid=gate-source]").textContent()).toContain("Stored evaluation");
    expect(await detail.innerText()).toContain("apply started by Admin");
    expect(await detail.locator('tr[data-address="aws_db_instance.main"] td.count').textContent()).toBe("2");
    expect(await detail.locator("ul.approvals li").count()).toBe(3);
    expect(await detail.locator("ul.approvals li.withdrawn").count()).toBe(1);
    expect(await detail.locator("button[data-action=withdraw]").count()).toBe(0);
    await screenshot(page, "plan-detail-applied.png");
    expect(problems).toEqual([]);
    await page.close();
  });

  it("a workspace's history: finished plans with who approved and who applied, and released reservations", async () => {
    const reservation = await reserveFor(t, s.workspaceId, s.approver.token);
    const released = (await op(t, ReleaseReservationDocument, { id: reservation.id }, s.admin.token)).releaseReservation;
    expect(released.__typename).toBe("MutationReleaseReservationSuccess");

    const { page, problems } = await newPage();
    await page.goto(`${url}/?token=${encodeURIComponent(s.admin.token)}`);
    const card = page.locator(`section.workspace[data-workspace="${s.workspaceName}"]`);
    await card.locator("a[data-action=history]").click();
    const history = page.locator(`#history[data-workspace-id="${s.workspaceId}"]`);
    const row = history.locator(`tr[data-plan-id="${s.planId}"]`);
    await poll(() => row.count()).toBe(1);
    expect(await row.locator("td.outcome").textContent()).toBe("applied");
    const approvedBy = (await row.locator("td.approved-by").textContent()) ?? "";
    expect(approvedBy).toContain(s.approver.name);
    expect(approvedBy).toContain("Admin");
    expect(approvedBy).toContain(`${s.approver.name} (withdrawn)`);
    expect(await row.locator("td.applied-by").textContent()).toContain("Admin");
    const releasedItem = history.locator(`ul.released li[data-reservation-id="${reservation.id}"]`);
    await poll(() => releasedItem.count()).toBe(1);
    expect(await releasedItem.innerText()).toContain(s.approver.name);
    expect(await releasedItem.innerText()).toContain("released by Admin");
    await screenshot(page, "workspace-history.png");
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe("the held-tool-call inbox", { timeout: 90_000 }, () => {
  let w: World;
  let worldUrl: string;
  beforeAll(async () => {
    w = await createWorld();
    worldUrl = await w.t.listen();
  });
  afterAll(() => w?.close());

  it("a held call appears live for its reviewers, without its arguments; approve and deny decide it from the page", async () => {
    const [first, second] = w.reviewers;
    const { page, problems } = await newPage();
    await page.goto(`${worldUrl}/?token=${encodeURIComponent(first!.token)}`);
    const inbox = page.locator("#inbox");
    await poll(() => inbox.innerText()).toContain("Nothing waits for your decision.");
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 7));

    const approveId = await heldAndFiled(w, { repo: "acme/secret-arg-one" });
    const item = inbox.locator(`li.request[data-request-id="${approveId}"]`);
    await poll(() => item.count()).toBe(1);
    const text = await item.innerText();
    expect(text).toContain("github.delete_repo");
    expect(text).toContain("payments-prod");
    // The reviewer view: the call's arguments never reach the page.
    expect(await page.content()).not.toContain("secret-arg-one");
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(7);
    await screenshot(page, "inbox.png");
    // The inbox with a call in it, at 1280 px and at 390 px: axe finds nothing, nothing scrolls sideways.
    await expectAccessible(page, "inbox");
    await page.setViewportSize({ width: 390, height: 844 });
    await expectAccessible(page, "inbox at 390 px");
    await expectNoSidewaysScroll(page, "inbox at 390 px");
    await page.setViewportSize({ width: 1280, height: 860 });

    await item.locator("button[data-action=vote-approve]").click();
    // Voted: it leaves this reviewer's inbox (the second reviewer still has it).
    await poll(() => item.count()).toBe(0);
    const check = await w.t.db.prisma.vote.findMany({ where: { requestId: approveId } });
    expect(check.map((v) => [v.userId, v.decision.toLowerCase()])).toEqual([[first!.userId, "approve"]]);

    const denyId = await heldAndFiled(w, { repo: "acme/secret-arg-two" });
    const page2 = await newPage();
    await page2.page.goto(`${worldUrl}/?token=${encodeURIComponent(second!.token)}`);
    const denyItem = page2.page.locator(`#inbox li.request[data-request-id="${denyId}"]`);
    await poll(() => denyItem.count()).toBe(1);
    await denyItem.locator("button[data-action=vote-deny]").click();
    await poll(() => denyItem.count()).toBe(0);
    await poll(async () => (await w.t.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id: denyId } })).status).toBe("rejected");
    // The denied request left the first reviewer's inbox too, live.
    await poll(() => inbox.locator(`li.request[data-request-id="${denyId}"]`).count()).toBe(0);
    expect(await page2.page.content()).not.toContain("secret-arg-two");
    expect([...problems, ...page2.problems]).toEqual([]);
    await page.close();
    await page2.page.close();
  });
});

describe("the explorer", { timeout: 120_000 }, () => {
  it("opens with the token header from ?token=, the example operations as tabs, and runs them, subscriptions included", async () => {
    const s = await seedGate(t, { approverName: "Explorer Approver" });
    const { page, problems } = await newPage();
    const inits: unknown[] = [];
    page.on("websocket", (socket) =>
      socket.on("framesent", (f) => {
        const m = JSON.parse(String(f.payload)) as { type: string; payload?: unknown };
        if (m.type === "connection_init") inits.push(m.payload);
      }),
    );
    await page.goto(`${url}/graphql?token=${encodeURIComponent(s.admin.token)}`);
    await page.waitForSelector(".graphiql-container", { timeout: 30_000 });
    expect(new URL(page.url()).search).toBe("");
    const tabs = await page.locator(".graphiql-tab").allInnerTexts();
    expect(tabs.map((x) => x.trim())).toEqual(expect.arrayContaining(["Viewer", "Workspaces", "PlanGate", "ApprovePlan", "ReserveWorkspace", "ApprovalInbox"]));
    await page.locator(".graphiql-execute-button").click();
    const response = page.locator(".graphiql-response");
    await poll(() => response.innerText()).toContain('"viewer"');
    expect(await response.innerText()).toMatch(/"name":\s*"Admin"/);
    await screenshot(page, "explorer.png");

    // A subscription: the header editor's token is the connection_init payload, and a vote
    // elsewhere arrives in the result pane.
    await typeInto(page, ".graphiql-query-editor", `subscription WatchPlan { planGate(planId: "${s.planId}") { planId passed version evaluation { summary } } }`);
    await page.getByRole("button", { name: /^Prettify/ }).click();
    await page.locator(".graphiql-query-editor .monaco-editor").first().click();
    await page.keyboard.press("ControlOrMeta+Home"); // the start of the query in view
    await page.locator(".graphiql-execute-button").click();
    await poll(async () => flat(await response.innerText())).toMatch(/"passed": false/);
    expect(inits).toEqual([expect.objectContaining({ authorization: `Bearer ${s.admin.token}` })]);
    await approveAs(t, s.planId, s.approver.token);
    await poll(async () => flat(await response.innerText())).toMatch(/"passed": true/);
    // axe: nothing serious or critical; GraphiQL's tab markup trips nested-interactive, upstream's to fix (docs/clients.md).
    const violations = await axe(page, ["nested-interactive"]);
    expect(violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => `${v.id} at ${v.nodes.map((n) => `${n.target.join(" ")} (${n.summary})`).join(", ")}`)).toEqual([]);
    // The visible window only: a modest picture for docs/clients.md.
    const shot = join(OUTPUT, "explorer-subscription.png");
    await page.screenshot({ path: shot, mask: [page.locator(".graphiql-editor-tool")], maskColor: "#e4e7ec" });
    keepForDocs(shot, "explorer-subscription.png");

    // Another token in the header editor (open from the start): a socket of its own, refused,
    // and the pane says why instead of {"isTrusted":true}.
    await page.locator(".graphiql-execute-button").click(); // stops the running subscription
    await typeInto(page, ".graphiql-editor-tool", `{ "Authorization": "Bearer cs_not-a-token" }`);
    await page.locator(".graphiql-execute-button").click();
    await poll(async () => flat(await response.innerText())).toContain("refused the subscription's connection (4401");
    expect(await response.innerText()).not.toContain("isTrusted");
    expect(inits).toHaveLength(2);
    expect(problems).toEqual([]);
    await page.close();
  });
});
