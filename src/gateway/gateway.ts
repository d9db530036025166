import { gatewayDeps, liveKey } from "./deps.js";
import { handleToolCall } from "./hold.js";
import { listTools } from "./listing.js";
import type { Gateway, GatewayOptions } from "./protocol.js";
import { authenticateService, resume } from "./resume.js";
import { approvalStatus } from "./status.js";
import { createTasks } from "./tasks.js";

/**
 * The gateway's half of held tool calls (seed 003), as a library: a tool gateway embeds it,
 * hands it each `tools/call`, and mounts its resume handler. Countersign mounts it too, so one
 * process can demo the whole flow (src/workers/runtime.ts).
 *
 * - Tools come from real upstream MCP servers (`upstreams`, src/gateway/upstream.ts): a connection
 *   with a url serves its upstream's tools as `<connection>.<tool>`, destructive by the tool's
 *   annotations unless an admin override says otherwise. A connection without a url serves
 *   nothing: its calls fail upstream_unavailable (upstream_not_configured), never held or run.
 * - `handleToolCall`: Cedar gate → execute, deny, or hold. Holding writes the ticket to the
 *   approval stream and awaits the write BEFORE committing the held record; a failed write
 *   holds nothing and answers not_ready. The agent-side re-issue (the two approval headers)
 *   counts as approved only when the token verifies and every bound claim matches.
 * - `resume`: the service-authenticated `POST /internal/v1/approvals/resume`.
 *
 * The parts, each a function of the gateway's dependencies (deps.ts, `GatewayDeps`) and its input:
 * hold.ts (the tools/call: gate, execute, deny or hold), resume.ts (control's resume), status.ts
 * (the agent's status read), listing.ts (tools/list); execute.ts is what hold and resume share,
 * and mcp.ts is the MCP transport over them.
 */

export {
  APPROVAL_ID_HEADER,
  APPROVAL_TOKEN_HEADER,
  GATEWAY_JSONRPC,
  IDEMPOTENCY_KEY_HEADER,
  RESUME_PATH,
  resumeBodySchema,
  type ApprovalStatusBody,
  type ApprovalStatusOutcome,
  type AnswerRelay,
  type ApprovalStreamWriter,
  type Gateway,
  type GatewayLogger,
  type GatewayOptions,
  type GatewayResponse,
  type ListedTool,
  type RelayedAnswer,
  type ResumeBody,
  type ResumeOutcome,
  type ToolCallInput,
  type ToolCallOutcome,
} from "./protocol.js";
export { derivedIdempotencyKey } from "./hold.js";
export type { CallResult } from "./respond.js";
export type { GatewayDeps } from "./deps.js";
export type { GatewayTasks } from "./protocol.js";
export type { McpTask, RpcAnswer, TaskOptions, TaskRow, TaskStore, TaskWake } from "./task-types.js";

export function createGateway(options: GatewayOptions): Gateway {
  const deps = gatewayDeps(options);
  return {
    handleToolCall: (input) => handleToolCall(deps, input),
    listTools: (input) => listTools(deps, input, { tasks: Boolean(options.tasks) }),
    authenticate: async (input) => (await liveKey(deps, input.authorization)) !== null,
    resume: (input) => resume(deps, input),
    authenticateService: (input) => authenticateService(deps, input),
    approvalStatus: (input) => approvalStatus(deps, input),
    tasks: options.tasks ? createTasks(deps, options.tasks) : null,
    streamKey: deps.streamKey,
    answers: options.answers ?? null,
  };
}
