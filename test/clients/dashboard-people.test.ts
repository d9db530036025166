// The dashboard and the explorer as each person meets them, in real headless Chromium at 1280 px
// and 390 px: axe-core on every view, no sideways scroll, buttons only where the API says the
// viewer may act, empty views that say what to do, a token the server stops accepting returning
// to sign-in with the reason, a subscription ended by an outage resumed, the server being down
// said in words. (The explorer's subscriptions: dashboard.test.ts, which boots GraphiQL already.)
// One server and one browser for the file; a context per viewport.
import { existsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { fileURLToPath } from "node:url";
import type { AddressInfo } from "node:net";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember } from "../helpers/fixtures.js";
import { approveAs, op, reserveFor, seedGate, type GateSeed } from "./seed.js";
import { createDashboardHttp } from "../../src/dashboard/http.js";
import { unavailableGraphQLError } from "../../src/infra/faults.js";
import { WithdrawApprovalDocument } from "../../src/generated/graphql/graphql.js";
import { expectAccessible, expectNoSidewaysScroll, keepForDocs } from "./browser.js";

const CHROMIUM = "/usr/bin/chromium";

const VIEWPORTS = { desktop: { width: 1280, height: 860 }, phone: { width: 390, height: 844 } } as const;
type Viewport = keyof typeof VIEWPORTS;

let t: TestApp;
let url: string;
let browser: Browser;
const contexts = {} as Record<Viewport, BrowserContext>;
let s: GateSeed;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium is not installed at ${CHROMIUM}: run \`apt-get update && apt-get install -y chromium\` (.ci/browser does this in CI).`);
  [t, browser] = await Promise.all([
    startTestApp(),
    chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"] }),
  ]);
  url = await t.listen();
  for (const [name, viewport] of Object.entries(VIEWPORTS)) {
    contexts[name as Viewport] = await browser.newContext({ viewport });
    // A locator waiting for an element that never comes fails within the test's time.
    contexts[name as Viewport].setDefaultTimeout(15_000);
  }
  s = await seedGate(t);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

const poll = <T>(read: () => Promise<T> | T) => expect.poll(read, { timeout: 15_000, interval: 50 });

async function open(viewport: Viewport, path: string): Promise<{ page: Page; problems: string[] }> {
  const page = await contexts[viewport].newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  await page.goto(`${url}${path}`);
  return { page, problems };
}

describe.each(Object.keys(VIEWPORTS) as Viewport[])("every view at %s width", (viewport) => {
  it("sign-in, list with the inbox, plan page and history: axe finds nothing, nothing scrolls sideways, focus follows the view, Escape closes it", { timeout: 60_000 }, async () => {
    const { page, problems } = await open(viewport, "/");
    await poll(() => page.locator("#signin").isVisible()).toBe(true);
    expect(await page.title()).toBe("Sign in · Countersign");
    await expectAccessible(page, "sign-in");
    await expectNoSidewaysScroll(page, "sign-in");
    // The skip link is the first thing the keyboard reaches, shows when focused, and takes the
    // keyboard to the main content.
    expect(await page.evaluate(() => document.querySelector<HTMLElement>("a[href], button, input, select, textarea, [tabindex]:not([tabindex='-1'])")?.className)).toBe("skip-link");
    await page.focus(".skip-link");
    expect((await page.locator(".skip-link").boundingBox())!.y).toBeGreaterThanOrEqual(0);
    await page.keyboard.press("Enter");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("content");

    await page.fill("#token", s.admin.token);
    await page.click("#signin-form button[type=submit]");
    const card = page.locator(`section.workspace[data-workspace="${s.workspaceName}"]`);
    await poll(() => card.locator("[data-testid=gate-verdict]").first().textContent()).toBe("NOT PASSED");
    await poll(() => page.locator("#live").getAttribute("data-state")).toBe("live");
    await poll(() => page.locator("#inbox").innerText()).toContain("Nothing waits for your decision");
    // Sign out stays inside the header, on screen.
    const header = (await page.locator("header.top").boundingBox())!;
    const signOut = (await page.locator("[data-action=sign-out]").boundingBox())!;
    expect(signOut.x + signOut.width).toBeLessThanOrEqual(Math.min(header.x + header.width, VIEWPORTS[viewport].width));
    expect(signOut.y + signOut.height).toBeLessThanOrEqual(header.y + header.height);
    await expectAccessible(page, "list");
    await expectNoSidewaysScroll(page, "list");
    const shot = fileURLToPath(new URL(`../../test-output/list-${viewport}.png`, import.meta.url));
    await page.screenshot({ path: shot });
    if (viewport === "phone") keepForDocs(shot, "dashboard-phone.png");

    await card.locator("a[data-action=details]").first().click();
    const detail = page.locator(`#plan-detail[data-plan-id="${s.planId}"]`);
    await poll(() => detail.locator("tr[data-address]").count()).toBe(2);
    await poll(() => page.evaluate(() => document.activeElement?.id)).toBe("view-title");
    expect(await page.title()).toContain(`Plan ${s.planId.slice(0, 8)} on ${s.workspaceName}`);
    await expectAccessible(page, "plan page");
    await expectNoSidewaysScroll(page, "plan page");
    await page.keyboard.press("Escape");
    await poll(() => detail.count()).toBe(0);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("list-title");
    expect(await page.title()).toMatch(/^Workspaces/);

    await card.locator("a[data-action=history]").click();
    const history = page.locator(`#history[data-workspace-id="${s.workspaceId}"]`);
    await poll(() => history.locator("h2").textContent()).toBe(`History of ${s.workspaceName}`);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("view-title");
    // History is not a held gate: no "held" stripe.
    const stripe = await history.evaluate((el) => getComputedStyle(el).borderLeftColor);
    const held = await page.evaluate(() => {
      const probe = document.createElement("span");
      probe.style.color = "var(--held)";
      document.body.append(probe);
      const color = getComputedStyle(probe).color;
      probe.remove();
      return color;
    });
    expect(stripe).not.toBe(held);
    await expectAccessible(page, "history");
    await expectNoSidewaysScroll(page, "history");
    await page.keyboard.press("Escape");
    await poll(() => history.count()).toBe(0);
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe("acting where you read", { timeout: 60_000 }, () => {
  it("buttons follow what the API says each member may do: the CI bot reads, the approver approves, Release only for who may", async () => {
    const fresh = await seedGate(t);
    await reserveFor(t, fresh.workspaceId, fresh.admin.token);
    const card = (page: Page) => page.locator(`section.workspace[data-workspace="${fresh.workspaceName}"]`);

    const bot = await open("phone", `/?token=${encodeURIComponent(fresh.runner.token)}`);
    await poll(() => card(bot.page).locator("[data-testid=gate-verdict]").first().textContent()).toBe("NOT PASSED");
    expect(await card(bot.page).locator("button").count()).toBe(0);
    expect(await card(bot.page).locator("[data-testid=cannot-approve]").innerText()).toContain(`(workspace, approve, ${fresh.workspaceName})`);
    await bot.page.close();

    const approver = await open("desktop", `/?token=${encodeURIComponent(fresh.approver.token)}`);
    const c = card(approver.page);
    await poll(() => c.locator("button[data-action=approve]").count()).toBe(1);
    // The admin's reservation: only its holder (or a super_admin) may release it.
    expect(await c.locator(".reservations li").count()).toBe(1);
    expect(await c.locator("button[data-action=release]").count()).toBe(0);
    // The tab says what waits for this person.
    await poll(() => approver.page.title()).toContain("1 plan waiting for you");
    // A gate change is announced in the live region.
    await approveAs(t, fresh.planId, fresh.admin.token);
    await approveAs(t, fresh.planId, fresh.approver.token);
    await poll(() => approver.page.locator("#announcer").innerText()).toContain(`Plan ${fresh.planId.slice(0, 8)} on ${fresh.workspaceName}: gate passed`);
    await poll(() => c.locator("button[data-action=withdraw]").count()).toBe(1);
    await approver.page.close();

    const admin = await open("desktop", `/?token=${encodeURIComponent(fresh.admin.token)}`);
    const a = card(admin.page);
    await poll(() => a.locator("button[data-action=release]").count()).toBe(1);
    // The role picker starts empty, and its button waits for a choice.
    const picker = a.locator("select[data-action=pick-role]");
    expect(await picker.inputValue()).toBe("");
    expect(await a.locator("button[data-action=reserve-role]").isDisabled()).toBe(true);
    await picker.selectOption({ index: 1 });
    expect(await a.locator("button[data-action=reserve-role]").isDisabled()).toBe(false);
    expect(admin.problems).toEqual([]);
    await admin.page.close();
    await op(t, WithdrawApprovalDocument, { planId: fresh.planId }, fresh.approver.token);
  });

  it("an empty list explains itself: the stacks a stack reader can see, and which permission shows workspaces", async () => {
    const reader = await addMember(t.db, s.orgId, { role: "stack-reader", name: "Dave" });
    for (const viewport of Object.keys(VIEWPORTS) as Viewport[]) {
      const { page, problems } = await open(viewport, `/?token=${encodeURIComponent(reader.token)}`);
      const note = page.locator("#empty-note");
      await poll(() => note.count()).toBe(1);
      const text = await note.innerText();
      expect(text).toContain("No workspaces you can read.");
      expect(text).toContain("(workspace, read)");
      await poll(() => note.locator("[data-testid=visible-stacks] li").allInnerTexts()).toEqual([expect.stringContaining(`payments-${s.workspaceName.replace("payments-prod-", "")}`)]);
      await expectAccessible(page, `empty list (${viewport})`);
      await expectNoSidewaysScroll(page, `empty list (${viewport})`);
      expect(problems).toEqual([]);
      await page.close();
    }
  });
});

describe("when the token or the server goes away", { timeout: 60_000 }, () => {
  async function tokenFor(userToken: string, expiresAt?: Date): Promise<{ id: string; token: string }> {
    const res = await t.gql<{ createApiToken: { __typename: string; data?: { token: string; apiToken: { id: string } }; message?: string } }>(
      `mutation($input: CreateApiTokenInput!) { createApiToken(input: $input) { __typename ... on MutationCreateApiTokenSuccess { data { token apiToken { id } } } ... on Error { message } } }`,
      { input: { name: `dashboard-${Date.now()}`, expiresAt: expiresAt?.toISOString() ?? null } },
      userToken,
    );
    const data = res.data.createApiToken.data;
    if (!data) throw new Error(JSON.stringify(res));
    return { id: data.apiToken.id, token: data.token };
  }

  async function expectSignedOutSayingWhy(page: Page): Promise<void> {
    await poll(() => page.locator("#signin").isVisible()).toBe(true);
    expect(await page.locator("#signin-error").innerText()).toContain("revoked or has expired");
    expect(await page.locator("#app").isHidden()).toBe(true);
    expect(await page.locator("#live").count()).toBe(0);
    expect(await page.evaluate(() => sessionStorage.getItem("countersign.token"))).toBeNull();
    expect(await page.title()).toBe("Sign in · Countersign");
    // One clear message, not a toast per stopped subscription.
    expect(await page.locator(".toast.error").count()).toBe(0);
  }

  it("a revoked token returns the open page to sign-in, saying why", async () => {
    const mine = await tokenFor(s.approver.token);
    const { page, problems } = await open("desktop", `/?token=${encodeURIComponent(mine.token)}`);
    await poll(() => page.locator("#live").getAttribute("data-state")).toBe("live");
    const revoked = await t.gql<{ revokeApiToken: { __typename: string } }>(`mutation($id: ID!) { revokeApiToken(id: $id) { __typename } }`, { id: mine.id }, s.approver.token);
    expect(revoked.data.revokeApiToken.__typename).toMatch(/Success$/);
    await expectSignedOutSayingWhy(page);
    expect(problems).toEqual([]);
    await page.close();
  });

  it("an expired token does the same when it expires, with the page open", async () => {
    // Long enough to sign in on a busy machine first; the page then waits for it, event-driven.
    const mine = await tokenFor(s.approver.token, new Date(Date.now() + 6000));
    const { page } = await open("phone", `/?token=${encodeURIComponent(mine.token)}`);
    await poll(() => page.locator("#app").isVisible()).toBe(true);
    await expectSignedOutSayingWhy(page);
    await page.close();
  });

  it("a subscription ended with SERVICE_UNAVAILABLE is resumed with backoff, and the page is live again", async () => {
    const fresh = await seedGate(t);
    const page = await contexts.desktop.newPage();
    // The server's own outage answer (infra/faults.ts), given to the first workspaceGates
    // subscribe on the real socket; everything else passes through to the server.
    const outage = unavailableGraphQLError(1, { http: false }).toJSON();
    let refused = 0;
    let resubscribed = 0;
    await page.routeWebSocket(/\/graphql$/, (socket) => {
      const server = socket.connectToServer();
      socket.onMessage((raw) => {
        const message = JSON.parse(String(raw)) as { id?: string; type: string; payload?: { query?: string } };
        if (message.type === "subscribe" && message.payload?.query?.includes("workspaceGates")) {
          if (refused === 0) {
            refused++;
            socket.send(JSON.stringify({ id: message.id, type: "error", payload: [outage] }));
            return;
          }
          resubscribed++;
        }
        server.send(raw);
      });
    });
    await page.goto(`${url}/?token=${encodeURIComponent(fresh.admin.token)}`);
    const verdict = page.locator(`article.plan[data-plan-id="${fresh.planId}"] [data-testid=gate-verdict]`);
    await poll(() => refused).toBe(1);
    await poll(() => resubscribed).toBe(1);
    await poll(() => verdict.textContent()).toBe("NOT PASSED");
    await poll(() => page.locator("#live").getAttribute("data-state")).toBe("live");
    // Resumed for real: a vote elsewhere reaches the page with no reload.
    await approveAs(t, fresh.planId, fresh.approver.token);
    await poll(() => verdict.textContent()).toBe("PASSED");
    expect(await page.locator(".toast.error").count()).toBe(0);
    await page.close();
  });

  it("the server down is said in words, not \"Failed to fetch\"", async () => {
    // A server that serves the page and then goes away.
    const assets = createDashboardHttp();
    const server: Server = createServer((req, res) => {
      void (async () => {
        if (!(await assets(req, res, new URL(req.url ?? "/", "http://x")))) res.writeHead(404).end();
      })();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const page = await contexts.phone.newPage();
    await page.goto(`${base}/`);
    await poll(() => page.locator("#signin").isVisible()).toBe(true);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await page.fill("#token", "cs_anything");
    await page.click("#signin-form button[type=submit]");
    await poll(() => page.locator("#signin-error").innerText()).toContain("Countersign is not reachable");
    expect(await page.locator("#signin-error").innerText()).not.toContain("Failed to fetch");
    await page.close();
  });
});
