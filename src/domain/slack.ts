import { z } from "zod";
import { hmacHex, sameSecret } from "./signing.js";

/**
 * Approving from Slack (docs/integrations.md), the pure part: the request signature Slack sends,
 * the buttons a message carries, and the click payload as Countersign reads it.
 *
 * Slack signs each request with the app's signing secret: `X-Slack-Signature` is `v0=` + the hex
 * HMAC-SHA256 of `v0:<X-Slack-Request-Timestamp>:<raw body>`. A timestamp more than five minutes
 * from now (either way) is refused, and the compare is constant-time.
 */

export const SLACK_SIGNATURE_HEADER = "x-slack-signature";
export const SLACK_TIMESTAMP_HEADER = "x-slack-request-timestamp";
/** How far a request's timestamp may be from now, in seconds (Slack's documented five minutes). */
export const SLACK_MAX_SKEW_SECONDS = 5 * 60;

export function slackSignature(signingSecret: string, timestamp: string, rawBody: Buffer | string): string {
  return `v0=${hmacHex("sha256", signingSecret, `v0:${timestamp}:`, rawBody)}`;
}

export type SignatureVerdict =
  | { ok: true }
  | { ok: false; reason: "missing_headers" | "bad_timestamp" | "stale_timestamp" | "bad_signature" };

/** Whether a request carries a valid signature under `signingSecret`, with a fresh timestamp. */
export function verifySlackSignature(
  signingSecret: string,
  headers: { signature: string | undefined; timestamp: string | undefined },
  rawBody: Buffer,
  nowSeconds: number = Math.floor(Date.now() / 1000),
): SignatureVerdict {
  const { signature, timestamp } = headers;
  if (!signature || !timestamp) return { ok: false, reason: "missing_headers" };
  if (!/^\d{1,12}$/.test(timestamp)) return { ok: false, reason: "bad_timestamp" };
  if (Math.abs(nowSeconds - Number(timestamp)) > SLACK_MAX_SKEW_SECONDS) return { ok: false, reason: "stale_timestamp" };
  if (!sameSecret(signature, slackSignature(signingSecret, timestamp, rawBody))) return { ok: false, reason: "bad_signature" };
  return { ok: true };
}

// ── Buttons ──────────────────────────────────────────────────────────────────────────────

/** The action ids Countersign's buttons carry; a click is one of these or it is refused. */
export const SLACK_ACTIONS = {
  approvePlan: "countersign_plan_approve",
  approveRequest: "countersign_request_approve",
  denyRequest: "countersign_request_deny",
} as const;

/**
 * What a button names (its `value`): the object and, for a held call, the revision it was shown
 * at. Identifiers, never secrets: whoever clicks acts as the member their Slack user is linked to.
 */
export type SlackTarget = { kind: "plan"; planId: string } | { kind: "request"; requestId: string; revision: number; decision: "approve" | "deny" };

const ID = /^[A-Za-z0-9_-]{1,100}$/;

export function planButtonValue(planId: string): string {
  return `plan:${planId}`;
}

export function requestButtonValue(requestId: string, revision: number): string {
  return `request:${requestId}:${revision}`;
}

/** The target a clicked button names, or null when it is not one of Countersign's. */
export function parseSlackAction(actionId: string, value: string): SlackTarget | null {
  const parts = value.split(":");
  if (actionId === SLACK_ACTIONS.approvePlan) {
    if (parts.length !== 2 || parts[0] !== "plan" || !ID.test(parts[1]!)) return null;
    return { kind: "plan", planId: parts[1]! };
  }
  if (actionId === SLACK_ACTIONS.approveRequest || actionId === SLACK_ACTIONS.denyRequest) {
    if (parts.length !== 3 || parts[0] !== "request" || !ID.test(parts[1]!) || !/^[1-9]\d{0,8}$/.test(parts[2]!)) return null;
    return { kind: "request", requestId: parts[1]!, revision: Number(parts[2]), decision: actionId === SLACK_ACTIONS.approveRequest ? "approve" : "deny" };
  }
  return null;
}

/** The block id of the buttons Countersign adds, and of the result line it writes on an update. */
export const SLACK_ACTIONS_BLOCK = "countersign-actions";
export const SLACK_RESULT_BLOCK = "countersign-result";

const button = (text: string, actionId: string, value: string, style?: "primary" | "danger") => ({
  type: "button",
  text: { type: "plain_text", text },
  action_id: actionId,
  value,
  ...(style ? { style } : {}),
});

/** The Approve button of a plan whose gate waits. */
export function planActionsBlock(planId: string): Record<string, unknown> {
  return { type: "actions", block_id: SLACK_ACTIONS_BLOCK, elements: [button("Approve", SLACK_ACTIONS.approvePlan, planButtonValue(planId), "primary")] };
}

/** Approve and Deny on a held call, at the revision shown. */
export function requestActionsBlock(requestId: string, revision: number): Record<string, unknown> {
  const value = requestButtonValue(requestId, revision);
  return {
    // A new block id per revision: Slack asks for one per iteration of a message.
    type: "actions",
    block_id: `${SLACK_ACTIONS_BLOCK}-${revision}`,
    elements: [button("Approve", SLACK_ACTIONS.approveRequest, value, "primary"), button("Deny", SLACK_ACTIONS.denyRequest, value, "danger")],
  };
}

export const escapeMrkdwn = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/**
 * The original message updated: its blocks without Countersign's buttons and earlier result line,
 * then `result`, then the buttons still valid (if any). Only what the original said, the result
 * and the buttons: nothing about the objects beyond it.
 */
export function updatedMessage(original: readonly unknown[], text: string, result: string, actions: Record<string, unknown> | null): { replace_original: true; text: string; blocks: unknown[] } {
  const kept = original.filter((b) => {
    const id = (b as { block_id?: unknown } | null)?.block_id;
    return !(typeof id === "string" && (id.startsWith(SLACK_ACTIONS_BLOCK) || id === SLACK_RESULT_BLOCK));
  });
  const blocks: unknown[] = [...kept, { type: "section", block_id: SLACK_RESULT_BLOCK, text: { type: "mrkdwn", text: result.slice(0, 3000) } }];
  if (actions) blocks.push(actions);
  return { replace_original: true, text: text.slice(0, 3000), blocks };
}

/** A reply only the clicking person sees; the message stays as it is. */
export function ephemeral(text: string): { response_type: "ephemeral"; replace_original: false; text: string } {
  return { response_type: "ephemeral", replace_original: false, text: text.slice(0, 3000) };
}

// ── The click ────────────────────────────────────────────────────────────────────────────

const SlackId = z.string().regex(/^[A-Z0-9]{2,40}$/, "a Slack id (upper-case letters and digits)");

/** A Slack team id as configured: T… (a workspace) or E… (an Enterprise Grid organization). */
export const SlackTeamId = z.string().regex(/^[TE][A-Z0-9]{2,39}$/, "a Slack team id such as T0123ABCD (Slack: workspace settings, or the team.id of a payload)");

/** The part of a `block_actions` payload Countersign reads; anything else in it is ignored. */
export const BlockActionsPayload = z.object({
  type: z.literal("block_actions"),
  team: z.object({ id: SlackId }),
  user: z.object({ id: SlackId }),
  response_url: z.string().min(1).max(2000),
  actions: z
    .array(z.object({ action_id: z.string().max(255), value: z.string().max(2000).optional() }))
    .min(1)
    .max(25),
  message: z.object({ text: z.string().max(40_000).optional(), blocks: z.array(z.unknown()).max(50).optional() }).optional(),
});
export type BlockActions = z.infer<typeof BlockActionsPayload>;

/** `payload=<JSON>` of an application/x-www-form-urlencoded body: the JSON, or why not. */
export function payloadOfForm(rawBody: Buffer): { ok: true; payload: unknown } | { ok: false; reason: string } {
  const params = new URLSearchParams(rawBody.toString("utf8"));
  const raw = params.get("payload");
  if (raw === null) return { ok: false, reason: "the body has no payload field" };
  try {
    return { ok: true, payload: JSON.parse(raw) };
  } catch {
    return { ok: false, reason: "the payload field is not JSON" };
  }
}
