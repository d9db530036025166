// The pure part of approving from Slack (src/domain/slack.ts): the signature against Slack's own
// published example, the five-minute window at its edges, and every button Countersign draws
// read back (generated from SLACK_ACTIONS), with the values a tampered button could carry.

import { describe, expect, it } from "vitest";
import {
  parseSlackAction,
  planActionsBlock,
  requestActionsBlock,
  SLACK_ACTIONS,
  SLACK_MAX_SKEW_SECONDS,
  slackSignature,
  verifySlackSignature,
} from "../../src/domain/slack.js";

// Slack's documented example ("Verifying requests from Slack"): its vector, not one made here, so
// a base string assembled differently from Slack's could not agree with itself.
const SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const TIMESTAMP = "1531420618";
const BODY =
  "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
const NOW = Number(TIMESTAMP);
const body = Buffer.from(BODY, "utf8");

describe("the request signature", () => {
  it("reproduces Slack's published example, and verifies it", () => {
    expect(slackSignature(SECRET, TIMESTAMP, BODY)).toBe(SIGNATURE);
    expect(verifySlackSignature(SECRET, { signature: SIGNATURE, timestamp: TIMESTAMP }, body, NOW)).toEqual({ ok: true });
  });

  it.each([
    ["five minutes old", NOW + SLACK_MAX_SKEW_SECONDS, true],
    ["five minutes and a second old", NOW + SLACK_MAX_SKEW_SECONDS + 1, false],
    ["five minutes ahead", NOW - SLACK_MAX_SKEW_SECONDS, true],
    ["five minutes and a second ahead", NOW - SLACK_MAX_SKEW_SECONDS - 1, false],
  ])("a timestamp %s is %s", (_name, now, ok) => {
    expect(verifySlackSignature(SECRET, { signature: SIGNATURE, timestamp: TIMESTAMP }, body, now)).toEqual(ok ? { ok: true } : { ok: false, reason: "stale_timestamp" });
  });

  it.each([
    ["another secret", "8f742231b10e8888abcd99yyyzzz85a6", SIGNATURE, TIMESTAMP, BODY, "bad_signature"],
    ["a body changed by one byte", SECRET, SIGNATURE, TIMESTAMP, BODY.replace("roadrunner", "roadrunnex"), "bad_signature"],
    ["the signature upper-cased", SECRET, SIGNATURE.toUpperCase(), TIMESTAMP, BODY, "bad_signature"],
    ["the signature without v0=", SECRET, SIGNATURE.slice(3), TIMESTAMP, BODY, "bad_signature"],
    ["a signature one character short", SECRET, SIGNATURE.slice(0, -1), TIMESTAMP, BODY, "bad_signature"],
    ["another version", SECRET, SIGNATURE.replace("v0=", "v1="), TIMESTAMP, BODY, "bad_signature"],
    ["a timestamp that is not a number", SECRET, SIGNATURE, "1531420618.0", BODY, "bad_timestamp"],
    ["a negative timestamp", SECRET, SIGNATURE, "-1531420618", BODY, "bad_timestamp"],
    ["no signature", SECRET, undefined, TIMESTAMP, BODY, "missing_headers"],
    ["no timestamp", SECRET, SIGNATURE, undefined, BODY, "missing_headers"],
  ])("%s is refused", (_name, secret, signature, timestamp, raw, reason) => {
    expect(verifySlackSignature(secret, { signature, timestamp }, Buffer.from(raw, "utf8"), NOW)).toEqual({ ok: false, reason });
  });
});

describe("the buttons, read back", () => {
  const blocks = [planActionsBlock("3f0c8a8e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"), requestActionsBlock("apr_01HZX", 7)];
  const buttons = blocks.flatMap((b) => (b as { elements: { action_id: string; value: string }[] }).elements);

  it("every action Countersign defines is drawn on some button", () => {
    expect(new Set(buttons.map((b) => b.action_id))).toEqual(new Set(Object.values(SLACK_ACTIONS)));
  });

  it.each(buttons.map((b) => [b.action_id, b.value] as const))("%s with its own value names its object: %s", (actionId, value) => {
    const target = parseSlackAction(actionId, value);
    expect(target).not.toBeNull();
    if (target!.kind === "plan") expect(value).toBe(`plan:${target!.planId}`);
    else expect(target).toMatchObject({ requestId: "apr_01HZX", revision: 7, decision: actionId === SLACK_ACTIONS.denyRequest ? "deny" : "approve" });
  });

  // A button's value under an action of another kind (Approve and Deny on a held call share one
  // value), and values a tampered button could carry.
  const cross = buttons.flatMap((b) => Object.values(SLACK_ACTIONS).filter((a) => parseSlackAction(a, b.value)?.kind !== parseSlackAction(b.action_id, b.value)?.kind).map((a) => [a, b.value] as const));
  const tampered = Object.values(SLACK_ACTIONS).flatMap((a) =>
    ["", "plan:", "plan:a:b", "plan:has space", "plan:a%2Fb", "request:apr:0", "request:apr:-1", "request:apr:1.5", "request:apr:1e3", "request:apr", "request:a:b:1", "request:apr:1:extra", `request:${"x".repeat(101)}:1`, `plan:${"x".repeat(101)}`].map((v) => [a, v] as const),
  );
  it.each([...cross, ...tampered, ["countersign_plan_apply", "plan:abc"] as const, ["", "plan:abc"] as const])("%s with value %j names nothing", (actionId, value) => {
    expect(parseSlackAction(actionId, value)).toBeNull();
  });
});
