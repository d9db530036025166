import { randomUUID } from "node:crypto";
import type { Logger } from "./logger.js";

/**
 * The last guard of a long-running process (the API's and the worker's): every route answers its
 * own failures (500 with an error id, src/edge/http.ts) and every worker catches each round; a
 * rejection that still escapes is logged, with an id, and does not end the process and everyone's
 * requests or rounds with it (Node's default). A synchronous uncaught exception keeps Node's
 * default: the process state is then unknown.
 */
export function logEscapedRejections(logger: Logger): void {
  process.on("unhandledRejection", (reason) => {
    logger.error({ err: reason, errorId: randomUUID() }, "unhandled rejection");
  });
}
