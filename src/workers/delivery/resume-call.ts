// Step 3 of a delivery attempt: the claim has committed; call the gateway's resume endpoint and
// say what its answer means for the attempt. No database here: ./settle.ts writes the outcome.

import type { ResumeBody } from "../../gateway/gateway.js";
import { injectTraceContext } from "../../infra/tracing.js";

export type ResumeCall = {
  /** `POST <gatewayUrl>/internal/v1/approvals/resume`. */
  url: string;
  /** The bearer token the gateway's resume endpoint expects. */
  serviceToken: string;
  timeoutMs: number;
  fetch: typeof fetch;
};

/** What the gateway's answer means for the attempt. */
export type ResumeAnswer =
  | { kind: "executed"; replayed: boolean }
  | { kind: "execution_failed" }
  /** Did not get through (unreachable, 5xx, 429, or an answer marked retryable): try again later. */
  | { kind: "retry"; reason: string }
  /** Any other refusal: final. */
  | { kind: "refused"; status: number; code: string };

export async function callResume(call: ResumeCall, body: ResumeBody): Promise<ResumeAnswer> {
  let status: number;
  let answer: { status?: string; error?: string; retryable?: boolean; replayed?: boolean } = {};
  try {
    const headers: Record<string, string> = { "content-type": "application/json", authorization: `Bearer ${call.serviceToken}` };
    // Traces on: the gateway's resume continues the delivery's trace (it takes a traceparent only with the service token).
    injectTraceContext(headers);
    const response = await call.fetch(call.url, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(call.timeoutMs),
    });
    status = response.status;
    answer = (await response.json().catch(() => ({}))) as typeof answer;
  } catch (error) {
    return { kind: "retry", reason: `gateway unreachable: ${error instanceof Error ? error.message : String(error)}` };
  }
  if (status === 200 && answer.status === "executed") return { kind: "executed", replayed: answer.replayed === true };
  if (answer.error === "execution_failed") return { kind: "execution_failed" };
  if (status >= 500 || status === 429 || answer.retryable === true) return { kind: "retry", reason: `gateway answered ${status} ${answer.error ?? ""}`.trim() };
  return { kind: "refused", status, code: `gateway_${answer.error ?? status}` };
}
