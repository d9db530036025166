// The dashboard's and explorer's routes beside /graphql, and the explorer's example tabs: each
// tab is a document that runs as is (its operations plus exactly the fragments they use).
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { buildSchema, parse, validate } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exampleTabs, EXPLORER_ASSETS } from "../../src/dashboard/explorer.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";

const schema = buildSchema(readFileSync(fileURLToPath(new URL("../../schema.graphql", import.meta.url)), "utf8"));

let t: TestApp;
let url: string;
beforeAll(async () => {
  t = await startTestApp();
  url = await t.listen();
});
afterAll(() => t.close());

describe("dashboard and explorer routes", () => {
  it("serves the dashboard at / with a strict content security policy, and its bundle and styles", async () => {
    const page = await fetch(`${url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(await page.text()).toContain('<script type="module" src="/dashboard/app.js">');
    const app = await fetch(`${url}/dashboard/app.js`, { headers: { "accept-encoding": "gzip" } });
    expect(app.status).toBe(200);
    expect(app.headers.get("content-type")).toContain("javascript");
    expect(await app.text()).toContain("workspaceGates");
    expect((await fetch(`${url}/dashboard/style.css`)).status).toBe(200);
  });

  it("leaves /graphql, /healthz and /readyz as they were", async () => {
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    const res = await fetch(`${url}/graphql`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ query: "{ __typename }" }) });
    expect(await res.json()).toEqual({ data: { __typename: "Query" } });
    expect((await fetch(`${url}/nothing-here`)).status).toBe(404);
  });

  it("the explorer page loads its assets from this server, never a CDN, and never echoes the query string", async () => {
    const html = await (await fetch(`${url}/graphql?token=</script><script>alert(1)</script>`, { headers: { accept: "text/html" } })).text();
    expect(html).toContain(`${EXPLORER_ASSETS}/start.js`);
    expect(html).not.toMatch(/unpkg|jsdelivr|https?:\/\//);
    expect(html).not.toContain("alert(1)");
    for (const asset of ["start.js", "countersign.css", "graphiql.js", "graphiql.css", "editor.worker.js", "json.worker.js", "graphql.worker.js"]) {
      const res = await fetch(`${url}${EXPLORER_ASSETS}/${asset}`);
      expect(res.status, asset).toBe(200);
      expect(res.headers.get("cache-control"), asset).toContain(["start.js", "countersign.css"].includes(asset) ? "no-cache" : "immutable");
    }
  });

  it("every explorer tab validates against schema.graphql with every rule", () => {
    const tabs = exampleTabs();
    expect(tabs.length).toBeGreaterThan(3);
    expect(tabs[0]!.query).toContain("query Viewer");
    for (const tab of tabs) expect(validate(schema, parse(tab.query)).map((e) => e.message), tab.query.split("\n")[0]).toEqual([]);
  });
});
