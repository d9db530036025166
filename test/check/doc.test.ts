// docs/permissions.md cannot rot: the runner's call to the check API it documents (the ```sh block
// after `<!-- check:commands -->`) is run here with bash, curl and jq against a listening
// Countersign, and must print exactly the output the page shows (after `<!-- check:output -->`).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember, createOrg } from "../helpers/fixtures.js";

const doc = readFileSync(fileURLToPath(new URL("../../docs/permissions.md", import.meta.url)), "utf8");

function fenceAfter(marker: string): string {
  const match = new RegExp(`<!-- ${marker} -->\\s*\`\`\`[a-z]*\\n([\\s\\S]*?)\`\`\``).exec(doc);
  if (!match) throw new Error(`docs/permissions.md has no fenced block after <!-- ${marker} -->`);
  return match[1]!;
}

let t: TestApp;
let url: string;
beforeAll(async () => {
  t = await startTestApp();
  url = await t.listen();
});
afterAll(() => t?.close());

describe("docs/permissions.md: a runner calling the check API", () => {
  it("the documented command prints the documented answer", async () => {
    const org = await createOrg(t.db);
    const stack = await t.db.prisma.stack.create({ data: { orgId: org.orgId, name: "payments-prod" } });
    const runner = await addMember(t.db, org.orgId, {
      // (role, read): the answer's role names are role data (docs/permissions.md, "The check API").
      grants: [{ resourceType: "member", action: "check" }, { resourceType: "stack", action: "read" }, { resourceType: "role", action: "read" }],
    });
    const member = await addMember(t.db, org.orgId, { role: "stack-triggerer" });
    // Asynchronously: the server answering curl runs in this very process.
    const run = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn("bash", ["--norc", "--noprofile", "-eo", "pipefail", "-c", fenceAfter("check:commands")], {
        env: { PATH: process.env.PATH, COUNTERSIGN_URL: url, COUNTERSIGN_TOKEN: runner.token, PRINCIPAL_ID: member.userId, STACK_ID: stack.id },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      child.on("error", reject);
      child.on("close", (status) => resolve({ status, stdout, stderr }));
    });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(fenceAfter("check:output"));
  });
});
