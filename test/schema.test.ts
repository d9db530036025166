import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { printedSchema } from "../src/graphql/schema/index.js";

describe("schema.graphql", () => {
  it("is the printed SDL of the schema the server builds (run `npm run schema:print` after a change)", () => {
    const checkedIn = readFileSync(new URL("../schema.graphql", import.meta.url), "utf8");
    expect(printedSchema()).toBe(checkedIn);
  });
});
