// Browser checks shared by the dashboard's Chromium tests: axe-core run in the page, the page's
// width, and typing into GraphiQL's Monaco editors.
import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { expect } from "vitest";

const AXE = readFileSync(fileURLToPath(new URL("../../node_modules/axe-core/axe.min.js", import.meta.url)), "utf8");

export interface AxeViolation {
  id: string;
  impact: string | null;
  nodes: Array<{ target: string[]; summary?: string }>;
}

/** axe-core's run on the page as it is now (injected through the debugger, so the page's CSP is untouched). */
export async function axe(page: Page, disabledRules: string[] = []): Promise<AxeViolation[]> {
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(AXE);
  const rules = Object.fromEntries(disabledRules.map((r) => [r, { enabled: false }]));
  const result = await page.evaluate(async (rules) => {
    const axe = (window as unknown as { axe: { run(ctx: Document, o: unknown): Promise<{ violations: AxeViolation[] }> } }).axe;
    return (await axe.run(document, { rules, resultTypes: ["violations"] })).violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      nodes: v.nodes.map((n) => ({ target: n.target, summary: (n as unknown as { failureSummary?: string }).failureSummary })),
    }));
  }, rules);
  return result;
}

/** No violation at all on our own pages (serious, critical and the moderate ones alike). */
export async function expectAccessible(page: Page, view: string): Promise<void> {
  const violations = await axe(page);
  expect(violations.map((v) => `${view}: ${v.id} (${v.impact}) at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)).toEqual([]);
}

/** Nothing wider than the viewport: the page never scrolls sideways. */
export async function expectNoSidewaysScroll(page: Page, view: string): Promise<void> {
  const { scrollWidth, clientWidth } = await page.evaluate(() => ({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth }));
  expect(scrollWidth, `${view} is ${scrollWidth}px wide in a ${clientWidth}px viewport`).toBeLessThanOrEqual(clientWidth);
}

/** Replaces a Monaco editor's text (its auto-closed brackets after the cursor deleted too). */
export async function typeInto(page: Page, selector: string, text: string): Promise<void> {
  await page.locator(`${selector} .monaco-editor`).filter({ visible: true }).first().click();
  await page.keyboard.press("ControlOrMeta+A");
  await page.keyboard.press("Delete");
  await page.keyboard.insertText(text);
  await page.keyboard.press("ControlOrMeta+Shift+End");
  await page.keyboard.press("Delete");
}

export const flat = (text: string) => text.replace(/\s+/g, " ");


/**
 * With COUNTERSIGN_DOCS_IMAGES=1 (never in `npm test`), a screenshot the tests took is also kept
 * as docs/images/<name>, the picture docs/clients.md shows:
 * `COUNTERSIGN_DOCS_IMAGES=1 npx vitest run test/clients/dashboard.test.ts test/clients/dashboard-people.test.ts`.
 */
export function keepForDocs(screenshotPath: string, name: string): void {
  if (process.env.COUNTERSIGN_DOCS_IMAGES !== "1") return;
  const dir = fileURLToPath(new URL("../../docs/images/", import.meta.url));
  mkdirSync(dir, { recursive: true });
  copyFileSync(screenshotPath, `${dir}${name}`);
  console.log(`docs image: ${dir}${name}`);
}
