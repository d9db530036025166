import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * The request-body cap for /graphql (COUNTERSIGN_MAX_BODY_BYTES, 1 MiB by default), applied
 * before anything is parsed: a declared Content-Length over the cap is refused at once, and a
 * body without one (chunked) is counted as it arrives and refused the moment it passes the cap.
 * Either way the answer is HTTP 413 with a GraphQL-style JSON error, and the rest of the body is
 * read and discarded (never buffered) so the client can read the answer.
 *
 * A body within the cap is handed to yoga already read, as `req.body` (the framework's own
 * path for a consumed body: @whatwg-node/server uses it instead of the stream).
 */
/** True with the body read; false when it answered 413, or when the client went away mid-body (nothing to answer). */
export async function readBodyWithinLimit(req: IncomingMessage, res: ServerResponse, maxBytes: number): Promise<boolean> {
  if (req.method === "GET" || req.method === "HEAD" || req.method === "OPTIONS") return true;
  const declared = req.headers["content-length"];
  if (declared !== undefined && Number(declared) > maxBytes) {
    refuse(req, res, maxBytes);
    return false;
  }
  const chunks: Buffer[] = [];
  let total = 0;
  if (declared !== undefined) {
    // Node's parser delivers exactly Content-Length bytes (no more), and it is within the cap:
    // nothing to count. The callbacks stay inline: tsx names every arrow kept in a variable, per call.
    const complete = await new Promise<boolean>((resolve) => {
      req.on("data", (chunk: Buffer) => {
        total += chunk.length;
        chunks.push(chunk);
      });
      req.once("end", () => resolve(true));
      // The client went away mid-body: there is no one to answer (not a server failure).
      req.once("error", () => resolve(false));
      req.once("aborted", () => resolve(false));
    });
    if (!complete) return false;
    (req as IncomingMessage & { body?: Buffer }).body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
    return true;
  }
  let gone = false;
  const within = await new Promise<boolean>((resolve) => {
    const onData = (chunk: Buffer) => {
      total += chunk.length;
      if (total > maxBytes) {
        req.off("data", onData);
        req.off("end", onEnd);
        chunks.length = 0;
        resolve(false);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => resolve(true);
    const onGone = () => {
      gone = true;
      resolve(false);
    };
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onGone);
    req.once("aborted", onGone);
  });
  if (gone) return false;
  if (!within) {
    refuse(req, res, maxBytes);
    return false;
  }
  (req as IncomingMessage & { body?: Buffer }).body = Buffer.concat(chunks, total);
  return true;
}

function refuse(req: IncomingMessage, res: ServerResponse, maxBytes: number): void {
  const body = JSON.stringify({
    errors: [
      {
        message: `The request body is larger than the limit of ${maxBytes} bytes.`,
        extensions: { code: "PAYLOAD_TOO_LARGE", maxBytes },
      },
    ],
  });
  res.writeHead(413, { "content-type": "application/json; charset=utf-8", connection: "close" }).end(body);
  // Discard what is still coming, so the client finishes sending and reads the 413.
  req.resume();
}
