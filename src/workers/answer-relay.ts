import type { AnswerRelay } from "../gateway/gateway.js";
import type { EventBus } from "../infra/events.js";
import type { Logger } from "../infra/logger.js";
import { topicListeners } from "./topic-listeners.js";

/**
 * The gateway's answer relay over the event bus (`gateway:answer`): an agent's answer POSTed to
 * one API process reaches the process whose call asked, so a balancer need not route the MCP
 * endpoint by session. Redis pub/sub carries it; when Redis cannot, the answer is lost and the
 * call that asked ends with an error when its wait does (nothing is let through for it).
 */
export function answerRelay(events: EventBus, logger?: Logger): AnswerRelay & { close(): Promise<void> } {
  return {
    publish: (answer) => events.publish("gateway:answer", answer),
    ...topicListeners(events, "gateway:answer", logger, "the gateway's answer relay stopped: answers reach only this process's calls"),
  };
}
