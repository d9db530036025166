// Per-request loaders live in the context's one registry (src/graphql/request-loaders.ts): made
// once per request, never shared across requests, forgotten by a subscription on each event.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { perRequest, RequestLoaders } from "../../src/graphql/request-loaders.js";

const GRAPHQL_DIR = join(import.meta.dirname, "../../src/graphql");
const filesUnder = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []));

/** WeakMaps in the GraphQL layer that are not per-request state, and what they are keyed by. */
const NOT_PER_REQUEST: Record<string, string> = {
  "shared-events.ts: sharedText": "a parsed document: whether its selection is shareable, across requests",
  "shared-events.ts: results": "an event object: one execution shared by every subscriber of that event",
  "shared-events.ts: subscribeFns": "a subscribe function envelop hands the plugin (its own, the same for every operation): the one set in its place",
  "plugins/storable-text.ts: plans": "an input type: how to walk it, made once per type for every request",
};

describe("per-request loaders", () => {
  it("the GraphQL layer keeps no per-request state in a WeakMap of its own: every one is in the context's registry", () => {
    const found: string[] = [];
    for (const file of filesUnder(GRAPHQL_DIR)) {
      for (const m of readFileSync(file, "utf8").matchAll(/const (\w+)\s*=\s*new WeakMap\b/g)) found.push(`${relative(GRAPHQL_DIR, file)}: ${m[1]}`);
    }
    expect(found.sort()).toEqual(Object.keys(NOT_PER_REQUEST).sort());
  });

  it("a loader is made once per request, and each request has its own", () => {
    let made = 0;
    const counter = perRequest((_ctx: { loaders: RequestLoaders }) => ({ n: ++made }));
    const one = { loaders: new RequestLoaders() };
    const two = { loaders: new RequestLoaders() };
    expect(counter.of(one)).toBe(counter.of(one));
    expect(counter.of(two)).not.toBe(counter.of(one));
    expect(made).toBe(2);
  });

  it("clearing (a subscription, on each event) makes the next read start anew, for every loader", () => {
    const a = perRequest((_ctx: { loaders: RequestLoaders }) => ({}));
    const b = perRequest((_ctx: { loaders: RequestLoaders }) => new Map<string, number>());
    const ctx = { loaders: new RequestLoaders() };
    const [firstA, firstB] = [a.of(ctx), b.of(ctx)];
    ctx.loaders.clear();
    expect(a.of(ctx)).not.toBe(firstA);
    expect(b.of(ctx)).not.toBe(firstB);
  });
});
