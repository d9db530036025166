// docs/ci.md cannot rot: the block of countersign commands it documents (the ```sh block after
// `<!-- ci:commands -->`) is run here with bash, line for line, against a listening Countersign,
// and the GitHub Actions and GitLab CI jobs there must carry the same lines.
//
// What stands in for the CI machine: `terraform` is a script on PATH that answers `plan`,
// `show -json` (a real terraform-show document this file writes) and `apply`; `npx countersign`
// is a script that runs the CLI compiled once with esbuild (as test/clients/cli.test.ts does; the
// `npx countersign` path through bin/countersign.js is proven there).
import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createConnection, createServer, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { addMember } from "../helpers/fixtures.js";
import { approveAs, seedGate, type GateSeed } from "./seed.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const doc = readFileSync(fileURLToPath(new URL("../../docs/ci.md", import.meta.url)), "utf8");
const work = fileURLToPath(new URL(`../../test-output/ci-doc-${process.pid}/`, import.meta.url));
const binDir = `${work}bin/`;

/** The documented block: the ```sh fence right after the marker. */
function documentedBlock(): string {
  const match = /<!-- ci:commands -->\s*```sh\n([\s\S]*?)```/.exec(doc);
  if (!match) throw new Error("docs/ci.md has no ```sh block after <!-- ci:commands -->");
  return match[1]!;
}

const lines = (text: string) => text.split("\n").map((l) => l.trim()).filter(Boolean);

// terraform show -json output of a plan that deletes a database and replaces a bucket, with the
// no-op and read entries real plans carry (ignored by the server).
const SHOW_JSON = {
  format_version: "1.2",
  terraform_version: "1.9.8",
  planned_values: { root_module: {} },
  resource_changes: [
    { address: "aws_db_instance.main", mode: "managed", type: "aws_db_instance", name: "main", provider_name: "registry.terraform.io/hashicorp/aws", change: { actions: ["delete"], before: { id: "db-1" }, after: null } },
    { address: "aws_s3_bucket.logs", mode: "managed", type: "aws_s3_bucket", name: "logs", provider_name: "registry.terraform.io/hashicorp/aws", change: { actions: ["delete", "create"], before: { bucket: "logs" }, after: { bucket: "logs" } } },
    { address: "aws_iam_role.ci", mode: "managed", type: "aws_iam_role", name: "ci", provider_name: "registry.terraform.io/hashicorp/aws", change: { actions: ["no-op"], before: {}, after: {} } },
    { address: "data.aws_caller_identity.me", mode: "data", type: "aws_caller_identity", name: "me", provider_name: "registry.terraform.io/hashicorp/aws", change: { actions: ["read"], before: null, after: {} } },
  ],
  configuration: { root_module: {} },
};

const TERRAFORM = `#!/usr/bin/env bash
# terraform, as far as the documented job uses it
case "$1" in
  plan) echo "Plan: 1 to add, 0 to change, 2 to destroy."; : > tfplan ;;
  show) [ "$2" = "-json" ] || exit 64; cat "$TF_SHOW_JSON" ;;
  apply) echo "terraform apply"; exit "\${TF_APPLY_EXIT:-0}" ;;
  *) echo "unexpected terraform $*" >&2; exit 64 ;;
esac
`;

let t: TestApp;
let url: string;

beforeAll(async () => {
  mkdirSync(binDir, { recursive: true });
  const [app] = await Promise.all([
    startTestApp(),
    build({ entryPoints: ["src/cli/client.ts"], absWorkingDir: root, outdir: work, bundle: true, platform: "node", format: "esm", target: "node20", packages: "external", logLevel: "warning" }),
  ]);
  t = app;
  url = await t.listen();
  writeFileSync(`${work}main.mjs`, 'const { run } = await import("./client.js");\nconst [command, ...rest] = process.argv.slice(2);\nprocess.exitCode = await run([command ?? "help", ...rest]);\n');
  writeFileSync(`${binDir}npx`, `#!/usr/bin/env bash\n[ "$1" = countersign ] || { echo "npx $1: not the countersign CLI" >&2; exit 127; }\nshift\nexec "${process.execPath}" "${work}main.mjs" "$@"\n`);
  writeFileSync(`${binDir}terraform`, TERRAFORM);
  chmodSync(`${binDir}npx`, 0o755);
  chmodSync(`${binDir}terraform`, 0o755);
  writeFileSync(`${work}show.json`, JSON.stringify(SHOW_JSON, null, 2));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));
afterAll(() => t?.close());

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

let jobs = 0;

/** A process in its own working directory, with the stand-ins first on PATH. */
function start(command: string, args: string[], env: Record<string, string | undefined>, stdin?: string) {
  const cwd = `${work}job-${++jobs}/`;
  mkdirSync(cwd, { recursive: true });
  const child = spawn(command, args, {
    cwd,
    env: { PATH: `${binDir}:${process.env.PATH}`, HOME: process.env.HOME, NODE_ENV: "test", COUNTERSIGN_URL: url, TF_SHOW_JSON: `${work}show.json`, ...env },
    stdio: [stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  if (stdin !== undefined) child.stdin!.end(stdin);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (b: Buffer) => (stdout += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (stderr += b.toString()));
  const done = new Promise<Run>((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
  return {
    done,
    cwd,
    async waitFor(text: string | RegExp, timeoutMs = 20_000): Promise<string> {
      const started = Date.now();
      const all = () => `${stdout}\n${stderr}`;
      for (;;) {
        const m = typeof text === "string" ? (all().includes(text) ? [text] : null) : text.exec(all());
        if (m) return m[1] ?? m[0]!;
        if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${text}; stdout:\n${stdout}\nstderr:\n${stderr}`);
        if (child.exitCode !== null) throw new Error(`exited ${child.exitCode} before ${text}; stdout:\n${stdout}\nstderr:\n${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

/** The documented block, as the CI job runs it. */
const job = (env: Record<string, string>) => start("bash", ["-c", documentedBlock()], env);
const countersign = (args: string[], token: string, stdin?: string) => start(`${binDir}npx`, ["countersign", ...args], { COUNTERSIGN_TOKEN: token }, stdin).done;

/** A TCP proxy in front of the server whose connections the test can cut. */
async function cuttableProxy() {
  const target = new URL(url);
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port) });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => sockets.size,
    cut: () => sockets.forEach((s) => s.destroy()),
    close: () => new Promise<void>((resolve) => { sockets.forEach((s) => s.destroy()); server.close(() => resolve()); }),
  };
}

function exits(run: Run, code: number): void {
  expect(run.code, `exit ${run.code}, expected ${code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`).toBe(code);
}

const SUBMITTED = /Submitted plan ([0-9a-f-]{36})/;

/** A service account as docs/ci.md sets it up: workspace-runner, plus approve on the workspace. */
async function serviceAccount(s: GateSeed) {
  return addMember(t.db, s.orgId, {
    name: `Terraform CI ${s.workspaceName}`,
    grants: [
      { resourceType: "workspace", action: "read" },
      { resourceType: "workspace", action: "plan" },
      { resourceType: "workspace", action: "approve", resourcePattern: s.workspaceName },
    ],
  });
}

async function planRow(id: string) {
  return t.db.prisma.plan.findUniqueOrThrow({ where: { id }, include: { changes: { orderBy: { address: "asc" } }, approvals: true } });
}

describe("docs/ci.md", { timeout: 90_000 }, () => {
  it("the GitHub Actions and GitLab CI jobs carry the documented block line for line", () => {
    const block = lines(documentedBlock());
    const commands = block.flatMap((l) => /npx countersign (plan \w+)/.exec(l)?.[1] ?? []);
    expect(commands).toEqual(["plan submit", "plan wait", "plan apply", "plan report", "plan report"]);
    const yamls = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);
    expect(yamls).toHaveLength(2);
    for (const yaml of yamls) {
      const yamlLines = lines(yaml);
      const start = yamlLines.indexOf(block[0]!);
      expect(start, `a job in docs/ci.md lacks "${block[0]}"`).toBeGreaterThanOrEqual(0);
      expect(yamlLines.slice(start, start + block.length)).toEqual(block);
    }
  });

  it("the documented sequence submits, waits for the approval, applies and reports: the plan ends applied, every command exiting 0", async () => {
    const s = await seedGate(t);
    const ci = await serviceAccount(s);
    const run = job({ COUNTERSIGN_TOKEN: ci.token, COUNTERSIGN_WORKSPACE: s.workspaceName });
    const planId = await run.waitFor(SUBMITTED);
    // Waiting, it says what is missing and from whom.
    await run.waitFor("gate NOT PASSED");
    // …in the words of the sample output in docs/ci.md (its terraform-show changes are these).
    const sample = /✗ .*/.exec(/```\nWatching plan[\s\S]*?```/.exec(doc)![0])![0];
    await run.waitFor(sample);
    expect((await planRow(planId)).status).toBe("planned");
    await approveAs(t, planId, s.approver.token);
    const done = await run.done;
    exits(done, 0);
    expect(done.stdout).toContain(`Plan ${planId} reached passed.`);
    expect(done.stdout).toContain("terraform apply");
    expect(done.stdout).toContain(`Plan ${planId} is applied.`);
    const plan = await planRow(planId);
    expect(plan).toMatchObject({ status: "applied", submittedById: ci.userId, applyStartedById: ci.userId, targeted: false, originKind: "cli" });
    // The terraform-show document's changes: no-op and read ignored, delete+create is replace.
    expect(plan.changes.map((c) => [c.address, c.action])).toEqual([
      ["aws_db_instance.main", "delete"],
      ["aws_s3_bucket.logs", "replace"],
    ]);
    // Superseding the older planned plan of the seed is part of submitting.
    expect((await planRow(s.planId)).status).toBe("discarded");
    expect(plan.approvals.map((a) => a.userId)).toEqual([s.approver.userId]);
  });

  it("terraform apply failing reports failed and fails the job", async () => {
    const s = await seedGate(t);
    const ci = await serviceAccount(s);
    const run = job({ COUNTERSIGN_TOKEN: ci.token, COUNTERSIGN_WORKSPACE: s.workspaceName, TF_APPLY_EXIT: "1" });
    const planId = await run.waitFor(SUBMITTED);
    await run.waitFor("gate NOT PASSED");
    await approveAs(t, planId, s.approver.token);
    exits(await run.done, 1);
    expect(await planRow(planId)).toMatchObject({ status: "failed", resultMessage: "terraform apply failed; see the job log" });
  });

  it("a plan discarded while the job waits ends the wait with exit 3, and the job stops before applying", async () => {
    const s = await seedGate(t);
    const ci = await serviceAccount(s);
    const run = job({ COUNTERSIGN_TOKEN: ci.token, COUNTERSIGN_WORKSPACE: s.workspaceName });
    const planId = await run.waitFor(SUBMITTED);
    await run.waitFor("gate NOT PASSED");
    const discarded = await countersign(["plan", "discard", planId], s.approver.token);
    exits(discarded, 0);
    expect(discarded.stdout).toContain(`Plan ${planId} is discarded`);
    const done = await run.done;
    exits(done, 3);
    expect(done.stdout).toContain(`Plan ${planId} ended discarded without reaching passed.`);
    expect(done.stdout).not.toContain("terraform apply");
    expect((await planRow(planId)).status).toBe("discarded");
  });

  it("a newer plan superseding the one waited for ends the wait with exit 3, naming the newer plan", async () => {
    const s = await seedGate(t);
    const ci = await serviceAccount(s);
    const run = job({ COUNTERSIGN_TOKEN: ci.token, COUNTERSIGN_WORKSPACE: s.workspaceName });
    const planId = await run.waitFor(SUBMITTED);
    await run.waitFor("gate NOT PASSED");
    const newer = await countersign(["plan", "submit", "--workspace", s.workspaceName, "-"], ci.token, JSON.stringify([{ address: "aws_s3_bucket.logs", action: "update" }]));
    exits(newer, 0);
    const newerId = newer.stdout.trim();
    const done = await run.done;
    exits(done, 3);
    expect(done.stdout).toContain(`Plan ${planId} ended superseded by plan ${newerId} without reaching passed.`);
  });
});

describe("countersign plan …", { timeout: 60_000 }, () => {
  it("plan wait reconnects when its connection drops and still sees the approval given meanwhile", async () => {
    const s = await seedGate(t);
    const proxy = await cuttableProxy();
    try {
      const run = start(`${binDir}npx`, ["countersign", "plan", "wait", s.planId, "--timeout", "40s"], { COUNTERSIGN_TOKEN: s.runner.token, COUNTERSIGN_URL: proxy.url });
      await run.waitFor("gate NOT PASSED");
      proxy.cut();
      await approveAs(t, s.planId, s.approver.token);
      const done = await run.done;
      exits(done, 0);
      // The approval was pushed while no connection was open: the resubscription read it.
      expect(done.stdout).toContain("planned · gate PASSED");
      expect(done.stdout).toContain(`Plan ${s.planId} reached passed.`);
    } finally {
      await proxy.close();
    }
  });

  it("plan wait --timeout ends with exit 3 once the duration passes, saying where the plan is", async () => {
    const s = await seedGate(t);
    const started = Date.now();
    const run = await countersign(["plan", "wait", s.planId, "--timeout", "2s"], s.runner.token);
    exits(run, 3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
    expect(run.stdout).toContain("gate NOT PASSED");
    expect(run.stdout).toContain(`Timed out after 2s: plan ${s.planId} did not reach passed (it is planned, gate not passed).`);
  });

  it("plan wait exits 0 at once for a plan already past the state, and checks its options before it needs a token", async () => {
    const s = await seedGate(t);
    await approveAs(t, s.planId, s.approver.token);
    exits(await countersign(["plan", "wait", s.planId, "--timeout", "30s"], s.runner.token), 0);
    const [badTimeout, badUntil, noWorkspace] = await Promise.all([
      countersign(["plan", "wait", s.planId, "--timeout", "soon"], ""),
      countersign(["plan", "wait", s.planId, "--until", "failed"], ""),
      countersign(["plan", "submit", "plan.json"], ""),
    ]);
    exits(badTimeout, 2);
    expect(badTimeout.stderr).toContain("--timeout takes a duration such as 30s, 10m or 2h");
    exits(badUntil, 2);
    expect(badUntil.stderr).toContain("plan wait --until takes one of: passed, applying, applied, finished");
    exits(noWorkspace, 2);
    expect(noWorkspace.stderr).toContain("Missing --workspace");
    // An unknown plan fails at once, before any reconnection attempt.
    const unknown = await countersign(["plan", "wait", "00000000-0000-4000-8000-000000000000", "--timeout", "1m"], s.runner.token);
    exits(unknown, 1);
    expect(unknown.stderr).toContain("No plan 00000000-0000-4000-8000-000000000000 that you can read.");
  });

  it("plan submit --target records a targeted plan; --json prints the whole plan", async () => {
    const s = await seedGate(t);
    const path = `${work}targeted.json`;
    writeFileSync(path, JSON.stringify(SHOW_JSON));
    const run = await countersign(["plan", "submit", "--workspace", s.workspaceId, "--target", "aws_db_instance.main", "--target", "aws_s3_bucket.logs", path, "--json"], s.runner.token);
    exits(run, 0);
    const plan = JSON.parse(run.stdout) as { id: string; status: string; targeted: boolean; targets: string[]; workspace: { name: string }; changes: Array<{ address: string; action: string }> };
    expect(plan).toMatchObject({ status: "PLANNED", targeted: true, targets: ["aws_db_instance.main", "aws_s3_bucket.logs"], workspace: { name: s.workspaceName } });
    expect(plan.changes).toEqual([
      { address: "aws_db_instance.main", action: "DELETE" },
      { address: "aws_s3_bucket.logs", action: "REPLACE" },
    ]);
    expect((await planRow(plan.id)).targets).toEqual(["aws_db_instance.main", "aws_s3_bucket.logs"]);
  });

  it("plan submit refuses a malformed plan with the path of each problem and stores nothing; a missing file is exit 1", async () => {
    const s = await seedGate(t);
    const before = await t.db.prisma.plan.count({ where: { workspaceId: s.workspaceId } });
    const bad = { ...SHOW_JSON, resource_changes: [{ address: "aws_db_instance.main", change: { actions: ["explode"] } }] };
    const run = await countersign(["plan", "submit", "--workspace", s.workspaceName, "-"], s.runner.token, JSON.stringify(bad));
    exits(run, 1);
    expect(run.stderr).toMatch(/resource_changes\[0\]\.change\.actions/);
    const missing = await countersign(["plan", "submit", "--workspace", s.workspaceName, "no-such-plan.json"], s.runner.token);
    exits(missing, 1);
    expect(missing.stderr).toContain("Cannot read no-such-plan.json (ENOENT)");
    expect(await t.db.prisma.plan.count({ where: { workspaceId: s.workspaceId } })).toBe(before);
    expect((await planRow(s.planId)).status).toBe("planned");
  });

  it("plan report and plan discard refuse a plan in the wrong state or a caller without the permission, with exit 1", async () => {
    const s = await seedGate(t);
    const [reportPlanned, discardByStranger] = await Promise.all([
      countersign(["plan", "report", s.planId, "applied"], s.runner.token),
      addMember(t.db, s.orgId, { grants: [{ resourceType: "workspace", action: "read" }] }).then((m) => countersign(["plan", "discard", s.planId], m.token)),
    ]);
    exits(reportPlanned, 1);
    expect(reportPlanned.stderr).toMatch(/only an applying plan has a result to report/);
    exits(discardByStranger, 1);
    expect(discardByStranger.stderr).toMatch(/You lack \(workspace, (plan|approve)/);
    exits(await countersign(["plan", "discard", s.planId], s.runner.token), 0);
    const again = await countersign(["plan", "discard", s.planId], s.runner.token);
    exits(again, 1);
    expect((await planRow(s.planId)).status).toBe("discarded");
    exits(await countersign(["plan", "report", s.planId, "maybe"], s.runner.token), 2);
  });
});
