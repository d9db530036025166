// Keyset-paged connections: lists ordered by a unique string key (a name, or a creation time and
// an id), filtered in SQL, whose cursor is that key, opaque. Every such list pages the same way:
// `first` defaults to 50 and is held to 1..100, a cursor this API did not issue is an
// `invalid_cursor` validation error on `after` (raised before any query), `hasPreviousPage` says
// whether `after` was given, and a row added or removed between two pages moves no other row
// across the cursor: nothing is seen twice or skipped, as an offset would.
import { invalidCursor } from "../services/paging.js";

/** Opaque keyset cursors: the row's sort key, base64url. */
const encodeCursor = (key: string) => Buffer.from(`k:${key}`, "utf8").toString("base64url");

function decodeCursor(cursor: string, field = "after"): string {
  const decoded = Buffer.from(cursor, "base64url").toString("utf8");
  if (!decoded.startsWith("k:")) throw invalidCursor(field);
  return decoded.slice(2);
}

/** The page a list is asked for: its size, and the key it starts after (null: from the start). */
export interface KeysetRequest {
  first: number;
  after: string | null;
}

/** One page as a list read it. */
export interface KeysetPage<Node> {
  nodes: readonly Node[];
  hasNextPage: boolean;
  /** The key a scan stopped at short of a full page: the end cursor goes on from there. */
  lastScanned?: string | null;
}

export interface KeysetConnection<Node> {
  edges: { cursor: string; node: Node }[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
}

/** A connection over one page of `readPage`, each node's cursor being its key (`keyOf`). */
export async function keysetConnection<Node>(
  args: { first?: number | null; after?: string | null },
  keyOf: (node: Node) => string,
  readPage: (request: KeysetRequest) => Promise<KeysetPage<Node>>,
): Promise<KeysetConnection<Node>> {
  const first = Math.min(Math.max(args.first ?? 50, 1), 100);
  const page = await readPage({ first, after: args.after ? decodeCursor(args.after) : null });
  const cursorOf = (node: Node) => encodeCursor(keyOf(node));
  const [head] = page.nodes;
  const tail = page.nodes.at(-1);
  const endKey = page.lastScanned ?? (tail === undefined ? null : keyOf(tail));
  return {
    edges: page.nodes.map((node) => ({ cursor: cursorOf(node), node })),
    pageInfo: {
      hasNextPage: page.hasNextPage,
      hasPreviousPage: args.after != null,
      startCursor: head ? cursorOf(head) : null,
      endCursor: endKey === null ? null : encodeCursor(endKey),
    },
  };
}

/** The key of a list ordered by name. */
export const byName = (row: { readonly name: string }): string => row.name;
