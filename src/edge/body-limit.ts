import { isUtf8 } from "node:buffer";
import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * The request-body cap for /graphql (COUNTERSIGN_MAX_BODY_BYTES, 1 MiB by default), applied
 * before anything is parsed: a declared Content-Length over the cap is refused at once, and a
 * body without one (chunked) is counted as it arrives and refused the moment it passes the cap.
 * Either way the answer is HTTP 413 with a GraphQL-style JSON error, and the rest of the body is
 * read and discarded (never buffered) so the client can read the answer.
 */
/** The body read within the cap (empty for GET, HEAD and OPTIONS); null when it answered 413, or when the client went away mid-body (nothing to answer). */
export async function readBodyWithinLimit(req: IncomingMessage, res: ServerResponse, maxBytes: number): Promise<Buffer | null> {
  if (req.method === "GET" || req.method === "HEAD" || req.method === "OPTIONS") return EMPTY;
  const declared = req.headers["content-length"];
  if (declared !== undefined && Number(declared) > maxBytes) {
    refuse(req, res, maxBytes);
    return null;
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
    if (!complete) return null;
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
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
  if (gone) return null;
  if (!within) {
    refuse(req, res, maxBytes);
    return null;
  }
  return Buffer.concat(chunks, total);
}

const EMPTY = Buffer.alloc(0);

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

// ── Handing a body already read to yoga ───────────────────────────────────────────────────────

/** A parsed JSON body with more top-level keys than this is handed as bytes: yoga reads four. */
const MAX_HANDED_KEYS = 16;

/**
 * Whether yoga reads a body of this content type as UTF-8 text: JSON (any `+json`), a GraphQL
 * document, a form. Other types it refuses unread (415) or reads as parts (multipart).
 */
export function readAsText(contentType: string | undefined): boolean {
  const type = contentType?.split(";", 1)[0]!.trim().toLowerCase() ?? "";
  return type.endsWith("json") || type === "application/graphql" || type === "application/x-www-form-urlencoded";
}

/**
 * Refuses a body that must be text (readAsText) and is not UTF-8: it can be neither JSON (RFC
 * 8259), a GraphQL document nor a form, and decoding it with replacement characters, as yoga
 * would, cost 16–20 ms for 1 MiB of random bytes, 80 times valid text. The gateway's routes
 * refuse such bodies too (invalid_utf8). True when it answered.
 */
export function refusedAsNotUtf8(req: IncomingMessage, res: ServerResponse, body: Buffer): boolean {
  // UTF-8 first: one native pass over the bytes, and the answer for nearly every request.
  if (body.length === 0 || isUtf8(body) || !readAsText(req.headers["content-type"])) return false;
  const answer = JSON.stringify({
    errors: [{ message: "The request body is not valid UTF-8: JSON, a GraphQL document or a form must be.", extensions: { code: "BAD_REQUEST" } }],
  });
  res.writeHead(400, { "content-type": "application/json; charset=utf-8" }).end(answer);
  return true;
}

/**
 * Hands yoga a body already read (readBodyWithinLimit), as `req.body`: the framework's path for a
 * consumed body. @whatwg-node/server (normalizeNodeRequest, through 0.13) takes `req.body` only
 * when `Object.keys(req.body).length > 0`, so it lists the keys of whatever it is given: of a
 * Buffer, one string per byte (a 1 MiB body cost 150–320 ms of the event loop and ~35 MB of
 * garbage before anything was parsed). What it gets here has a few keys, whatever was sent:
 * - a JSON body (a content type naming json) that parses to an object with at most
 *   MAX_HANDED_KEYS keys: the object, which yoga takes as already parsed (its `request.json()`
 *   answers it). Only such a content type: @whatwg-node sets application/json on a parsed body
 *   whose request names no json, which would accept a text/plain POST yoga refuses (415).
 * - anything else (other content types, bytes that are not UTF-8, invalid JSON, an array, a
 *   scalar, an empty object, an object of more keys): the bytes as a one-chunk async iterable
 *   with one key, read by yoga as it would read the socket.
 * An empty body is not handed: yoga reads the (finished) request itself, as before.
 */
export function handBodyToYoga(req: IncomingMessage, body: Buffer): void {
  if (body.length === 0) return;
  (req as IncomingMessage & { body?: unknown }).body = yogaBodyOf(body, req.headers["content-type"]);
}

/** What handBodyToYoga sets: exported for the test that holds every kind of body to a few keys. */
export function yogaBodyOf(body: Buffer, contentType: string | undefined): object {
  // Only what can be an object is parsed here: an array (a batch of 5,000, say), a scalar or a
  // byte order mark would be parsed again by yoga, which answers it. Bytes that are not UTF-8 are
  // not decoded here (refusedAsNotUtf8 answers them first on /graphql).
  if (contentType?.includes("json") && opensAnObject(body) && isUtf8(body)) {
    const parsed = parsedObject(body);
    if (parsed) return parsed;
  }
  return new BodyBytes(body);
}

/** Whether the first byte after JSON's whitespace is `{`. */
function opensAnObject(body: Buffer): boolean {
  for (const byte of body) {
    if (byte === 0x7b) return true;
    if (byte !== 0x20 && byte !== 0x0a && byte !== 0x0d && byte !== 0x09) return false;
  }
  return false;
}

function parsedObject(body: Buffer): object | null {
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch {
    return null; // yoga parses it again and answers its own error
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  let keys = 0;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (++keys > MAX_HANDED_KEYS) return null;
  }
  return keys > 0 ? value : null;
}

/** Bytes as a request body @whatwg-node reads like a stream: one own key, the bytes in one chunk. */
class BodyBytes implements AsyncIterable<Buffer> {
  constructor(readonly bytes: Buffer) {}
  async *[Symbol.asyncIterator](): AsyncIterator<Buffer> {
    yield this.bytes;
  }
}
