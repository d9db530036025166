// The chatops CLI as a script would run it: `src/cli/index.ts` in a child process against a
// listening Countersign, branching on exit codes (0 success / gate passed, 3 gate not passed,
// 1 error, 2 usage) and reading --json.
//
// tsx compiles the CLI on every start, and src/cli/index.ts loads the admin commands (Prisma)
// before dispatching: seconds per call on two busy cores. So this file compiles
// src/cli/client.ts once with esbuild and runs its `run(argv)` under node, exactly what
// index.ts calls for every non-admin command; one test goes through `bin/countersign.js` (the
// `npx countersign` path: tsx, index.ts, client.ts) to prove the shipped entry works.
import { spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/harness.js";
import { applyAs, approveAs, reportApplied, reserveFor, seedGate, type GateSeed } from "./seed.js";
import { createWorld, heldAndFiled, type World } from "../approvals/world.js";
import { startUpstream, type Upstream } from "../helpers/mcp-upstream.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const bin = fileURLToPath(new URL("../../bin/countersign.js", import.meta.url));
const builtDir = fileURLToPath(new URL(`../../test-output/cli-${process.pid}/`, import.meta.url));

let t: TestApp;
let url: string;

beforeAll(async () => {
  const [app] = await Promise.all([
    startTestApp(),
    build({
      entryPoints: ["src/cli/client.ts"],
      absWorkingDir: root,
      outdir: builtDir,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      logLevel: "warning",
    }),
  ]);
  // index.ts's dispatch for a client command: run([command ?? "help", ...rest]) as the exit code.
  writeFileSync(`${builtDir}main.js`, 'const { run } = await import("./client.js");\nconst [command, ...rest] = process.argv.slice(2);\nprocess.exitCode = await run([command ?? "help", ...rest]);\n');
  t = app;
  url = await t.listen();
});
afterAll(() => rmSync(builtDir, { recursive: true, force: true }));
afterAll(() => t.close());

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function start(args: string[], env: Record<string, string | undefined>, options: { viaBin?: boolean } = {}) {
  const entry = options.viaBin ? bin : `${builtDir}main.js`;
  const child = spawn(process.execPath, [entry, ...args], {
    cwd: root,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: "test", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  const done = new Promise<Run>((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
  return {
    done,
    output: () => stdout,
    async waitFor(text: string | RegExp, timeoutMs = 15_000): Promise<void> {
      const started = Date.now();
      while (!(typeof text === "string" ? stdout.includes(text) : text.test(stdout))) {
        if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${text}; stdout:\n${stdout}\nstderr:\n${stderr}`);
        if (child.exitCode !== null) throw new Error(`exited ${child.exitCode} before ${text}; stdout:\n${stdout}\nstderr:\n${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    kill: () => child.kill(),
  };
}

const cli = (args: string[], token: string | undefined, extraEnv: Record<string, string> = {}) =>
  start(args, { COUNTERSIGN_URL: url, COUNTERSIGN_TOKEN: token, ...extraEnv }).done;

/** The exit code, with the output in the failure message. */
function exits(run: Run, code: number): void {
  expect(run.code, `exit ${run.code}, expected ${code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`).toBe(code);
}

describe("countersign CLI", { timeout: 60_000 }, () => {
  let s: GateSeed;
  beforeAll(async () => {
    s = await seedGate(t);
    // Reserved for the approver personally, placed by the admin: the list shows both.
    await reserveFor(t, s.workspaceId, s.approver.token);
  });

  it("workspaces lists each workspace with who it is reserved for, who placed it, and its open plans (npx countersign)", async () => {
    const run = await start(["workspaces"], { COUNTERSIGN_URL: url, COUNTERSIGN_TOKEN: s.admin.token }, { viaBin: true }).done;
    expect(run.stderr).toBe("");
    exits(run, 0);
    expect(run.stdout).toContain(s.workspaceName);
    expect(run.stdout).toMatch(new RegExp(`reserved for: ${s.approver.name} \\(placed by ${s.approver.name}`));
    expect(run.stdout).toContain(`plan ${s.planId}  planned  2 changes`);

    const json = await cli(["workspaces", "--json"], s.admin.token);
    exits(json, 0);
    const list = JSON.parse(json.stdout) as Array<{ name: string; reservations: Array<{ holderUser: { name: string } }>; openPlans: Array<{ id: string }> }>;
    const w = list.find((x) => x.name === s.workspaceName)!;
    expect(w.reservations.map((r) => r.holderUser.name)).toEqual([s.approver.name]);
    expect(w.openPlans.map((p) => p.id)).toEqual([s.planId]);
  });

  it("control characters stored before the input rules are printed escaped, never raw; --json still parses to the stored value", async () => {
    const seeded = await t.db.prisma.workspace.findUniqueOrThrow({ where: { id: s.workspaceId } });
    const name = `evil-\u001b[2J-\u009b31m-\u202e-${seeded.id.slice(0, 6)}`;
    await t.db.prisma.workspace.create({ data: { orgId: seeded.orgId, stackId: seeded.stackId, name, environment: "prod\r" } });
    const text = await cli(["workspaces"], s.admin.token);
    exits(text, 0);
    expect(text.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/);
    expect(text.stdout).toContain("evil-\\u001b[2J-\\u009b31m-\\u202e-");
    const json = await cli(["workspaces", "--json"], s.admin.token);
    exits(json, 0);
    expect(json.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/);
    const list = JSON.parse(json.stdout) as Array<{ name: string; environment: string }>;
    expect(list.find((w) => w.name === name)).toMatchObject({ name, environment: "prod\r" });
  });

  it("gate explains what is missing and from whom, exiting 3 until it passes; approve makes it pass (exit 0)", async () => {
    const [held, heldJson] = await Promise.all([cli(["gate", s.planId], s.admin.token), cli(["gate", s.planId, "--json"], s.admin.token)]);
    exits(held, 3);
    expect(held.stdout).toContain("gate NOT PASSED");
    expect(held.stdout).toContain("0 of 1 approval from holders of approve");
    expect(held.stdout).toContain(`from: ${s.approver.name}`);

    exits(heldJson, 3);
    const gate = JSON.parse(heldJson.stdout) as { passed: boolean; evaluation: { reasons: Array<{ code: string }> } };
    expect(gate.passed).toBe(false);
    expect(gate.evaluation.reasons.map((r) => r.code)).toEqual(["BASELINE_NOT_MET", "RESERVATION_UNANSWERED"]);

    const approved = await cli(["approve", s.planId], s.approver.token);
    exits(approved, 0);
    expect(approved.stdout).toContain(`Approved plan ${s.planId} as ${s.approver.name}`);
    expect(approved.stdout).toContain("gate PASSED");

    const passed = await cli(["gate", s.planId, "--json"], s.admin.token);
    exits(passed, 0);
    expect(JSON.parse(passed.stdout)).toMatchObject({ passed: true, planStatus: "PLANNED" });
  });

  it("watch prints each gate change as it arrives and exits 0 when the plan applies", async () => {
    const w = await seedGate(t);
    const watch = start(["watch", w.planId], { COUNTERSIGN_URL: url, COUNTERSIGN_TOKEN: w.admin.token });
    await watch.waitFor("gate NOT PASSED");
    await approveAs(t, w.planId, w.approver.token);
    await watch.waitFor("planned · gate PASSED");
    expect((await applyAs(t, w.planId, w.approver.token)).__typename).toBe("MutationApplyPlanSuccess");
    await watch.waitFor("applying · gate PASSED");
    await reportApplied(t, w.planId, w.runner.token);
    const run = await watch.done;
    exits(run, 0);
    expect(run.stdout).toContain(`Plan ${w.planId} reached applied.`);
    const order = ["planned · gate NOT PASSED", "planned · gate PASSED", "applying · gate PASSED", "applied · gate PASSED"].map((x) => run.stdout.indexOf(x));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it("watch --json prints one gate per line and --until passed exits 0 as soon as the gate passes", async () => {
    const w = await seedGate(t);
    const watch = start(["watch", w.planId, "--until", "passed", "--json"], { COUNTERSIGN_URL: url, COUNTERSIGN_TOKEN: w.admin.token });
    await watch.waitFor('"passed":false');
    await approveAs(t, w.planId, w.approver.token);
    const run = await watch.done;
    exits(run, 0);
    const lines = run.stdout.trim().split("\n").map((l) => JSON.parse(l) as { passed: boolean; version: number });
    expect(lines.map((l) => l.passed)).toEqual([false, true]);
    expect(lines[1]!.version).toBeGreaterThan(lines[0]!.version);
  });

  it("watch --workspace follows every open plan there and exits 0 when one reaches --until", async () => {
    const w = await seedGate(t);
    const watch = start(["watch", "--workspace", w.workspaceName, "--until", "passed"], { COUNTERSIGN_URL: url, COUNTERSIGN_TOKEN: w.admin.token });
    await watch.waitFor("1 open plan");
    await approveAs(t, w.planId, w.approver.token);
    const run = await watch.done;
    exits(run, 0);
    expect(run.stdout).toContain(`Plan ${w.planId} on ${w.workspaceName} reached passed.`);
  });

  it("apply refuses a plan whose gate has not passed with exit 3 and the explanation", async () => {
    const w = await seedGate(t);
    const run = await cli(["apply", w.planId], w.approver.token);
    exits(run, 3);
    expect(run.stdout).toContain("Not applied: the gate has not passed.");
    expect(run.stdout).toContain("0 of 1 approval");
  });

  it("reserve for yourself, then release by workspace name", async () => {
    const w = await seedGate(t);
    const reserved = await cli(["reserve", w.workspaceName], w.approver.token);
    exits(reserved, 0);
    expect(reserved.stdout).toContain(`Reserved ${w.workspaceName} for ${w.approver.name}`);
    const held = await cli(["gate", w.planId, "--json"], w.admin.token);
    expect((JSON.parse(held.stdout) as { evaluation: { reasons: Array<{ code: string }> } }).evaluation.reasons.map((r) => r.code)).toContain("RESERVATION_UNANSWERED");
    const released = await cli(["release", w.workspaceName, "--json"], w.approver.token);
    exits(released, 0);
    expect(JSON.parse(released.stdout)).toMatchObject({ active: false, releasedBy: { id: w.approver.userId } });
  });

  it("errors say what to do next, with exit 1 for errors and 2 for usage", async () => {
    const [noToken, badToken, unreachable, usage, badUntil, denied] = await Promise.all([
      cli(["workspaces"], undefined),
      cli(["workspaces"], "cs_not-a-real-token"),
      cli(["workspaces"], s.admin.token, { COUNTERSIGN_URL: "http://127.0.0.1:9" }),
      cli(["frobnicate"], s.admin.token),
      cli(["watch", s.planId, "--until", "sometime"], s.admin.token),
      cli(["approve", s.planId], s.runner.token),
    ]);
    // Arguments are checked before the token is needed.
    const usageFirst = await cli(["watch"], undefined);
    exits(usageFirst, 2);
    expect(usageFirst.stderr).toContain("Missing <planId>");
    exits(noToken, 1);
    expect(noToken.stderr).toContain("COUNTERSIGN_TOKEN is not set");
    expect(noToken.stderr).toContain("admin create-token");
    exits(badToken, 1);
    expect(badToken.stderr).toContain("did not accept COUNTERSIGN_TOKEN");
    exits(unreachable, 1);
    expect(unreachable.stderr).toContain("Cannot reach Countersign at http://127.0.0.1:9");
    expect(unreachable.stderr).toContain("npm start");
    exits(usage, 2);
    expect(usage.stderr).toContain("Unknown command: frobnicate");
    exits(badUntil, 2);
    expect(badUntil.stderr).toContain("--until takes one of");
    exits(denied, 1);
    expect(denied.stderr).toMatch(/You lack \(workspace, approve/);
  });
});

describe("held tool calls from the CLI", { timeout: 60_000 }, () => {
  let w: World;
  let worldUrl: string;
  let upstream: Upstream;
  beforeAll(async () => {
    w = await createWorld();
    worldUrl = await w.t.listen();
    // `policies simulate` reads a tool's annotations from the connection's upstream MCP server.
    upstream = await startUpstream();
    await w.db.prisma.connection.update({ where: { id: w.connection.id }, data: { url: upstream.url } });
  });
  afterAll(async () => {
    await w?.close();
    await upstream?.close();
  });

  const as = (args: string[], token: string) => start(args, { COUNTERSIGN_URL: worldUrl, COUNTERSIGN_TOKEN: token }).done;

  it("policies shows the set in force classified, saves the next version from a file, and simulates a call", async () => {
    const shown = await as(["policies", "payments-prod"], w.org.adminToken);
    exits(shown, 0);
    expect(shown.stdout).toContain("the default set (nothing saved)");
    expect(shown.stdout).toContain("prod-destructive-needs-approval: needs approval (makes tickets)");
    expect(shown.stdout).toContain("A forbid whose @id ends in needs-approval makes tickets");

    const file = `${builtDir}policies.cedar`;
    writeFileSync(file, '@id("permit-all") permit (principal, action, resource);\n@id("no-wipes") forbid (principal, action, resource == Tool::"github.wipe_org");\n');
    const saved = await as(["policies", "save", "payments-prod", file, "--note", "no org wipes"], w.org.adminToken);
    exits(saved, 0);
    expect(saved.stdout).toBe("Saved version 1 on payments-prod: permit-all (permit), no-wipes (deny).\n");

    const sim = await as(["policies", "simulate", "payments-prod", "github.wipe_org", "--args", '{"org":"acme"}'], w.org.adminToken);
    exits(sim, 0);
    expect(sim.stdout).toContain("github.wipe_org on payments-prod: deny (forbidden) by no-wipes");
    const refused = await as(["policies", "save", "payments-prod", file], w.reviewers[0]!.token);
    exits(refused, 1);
  });

  it("inbox lists what the reviewer may decide; vote approves at the current revision and it leaves the inbox", async () => {
    const requestId = await heldAndFiled(w);
    const [reviewer] = w.reviewers;
    const inbox = await as(["inbox"], reviewer!.token);
    exits(inbox, 0);
    expect(inbox.stdout).toContain(requestId);
    expect(inbox.stdout).toContain("github.delete_repo");
    expect(inbox.stdout).toContain(`vote: countersign vote ${requestId} approve|deny`);

    const voted = await as(["vote", requestId, "approve", "--comment", "checked the repo", "--json"], reviewer!.token);
    exits(voted, 0);
    expect(JSON.parse(voted.stdout)).toMatchObject({ vote: { decision: "APPROVE", comment: "checked the repo" }, request: { id: requestId, status: "PENDING" } });

    const after = await as(["inbox", "--json"], reviewer!.token);
    exits(after, 0);
    expect((JSON.parse(after.stdout) as Array<{ id: string }>).map((r) => r.id)).not.toContain(requestId);

    const again = await as(["vote", requestId, "approve"], reviewer!.token);
    exits(again, 1);
    const usage = await as(["vote", requestId, "maybe"], reviewer!.token);
    exits(usage, 2);
  });
});

describe("countersign withdraw", { timeout: 60_000 }, () => {
  it("withdraw takes back your own approval and prints the gate it left; with no active approval it fails with exit 1", async () => {
    const s = await seedGate(t);
    await approveAs(t, s.planId, s.approver.token);
    const approved = await cli(["workspaces"], s.admin.token);
    expect(approved.stdout).toContain(`approved by ${s.approver.name}`);

    const run = await cli(["withdraw", s.planId], s.approver.token);
    exits(run, 0);
    expect(run.stdout).toContain(`Withdrew ${s.approver.name}'s approval of plan ${s.planId}`);
    expect(run.stdout).toContain("gate NOT PASSED");
    const listed = await cli(["workspaces"], s.admin.token);
    expect(listed.stdout).toContain(`plan ${s.planId}  planned  2 changes`);
    expect(listed.stdout).not.toContain(`approved by ${s.approver.name}`);

    const again = await cli(["withdraw", s.planId, "--json"], s.approver.token);
    exits(again, 1);
    expect(again.stderr).toContain("no active approval");
    exits(await cli(["withdraw"], s.approver.token), 2);
  });
});
