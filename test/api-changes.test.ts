// Breaking changes to the GraphQL API are named in CHANGELOG.md: schema.graphql against the last
// release's SDL (api/released/schema.graphql), through graphql-js's findBreakingChanges, each
// change's coordinate required at the start of a line under ## [Unreleased] → ### Breaking.
// The rule for authors is the paragraph at the top of CHANGELOG.md.
import { readFileSync } from "node:fs";
import { BreakingChangeType, buildSchema, DangerousChangeType } from "graphql";
import { describe, expect, it } from "vitest";
import {
  type ChangeKind,
  checkChangelog,
  coordinateOf,
  explain,
  latestRelease,
  MUST_NAME_DANGEROUS,
  readReleased,
  releaseChangelog,
  schemaChanges,
  unreleasedBreaking,
} from "../scripts/api-changes.js";

const read = (name: string) => readFileSync(new URL(`../${name}`, import.meta.url), "utf8");

/** A changelog whose Unreleased Breaking list is these lines. */
function changelog(breaking: string[], rest = ""): string {
  return ["# Changelog", "", "## [Unreleased]", "", "### Breaking", "", ...breaking, "", "### Added", "", "### Changed", "", "### Fixed", "", rest].join("\n");
}

const problems = (before: string, after: string, breaking: string[]) => explain(checkChangelog(before, after, changelog(breaking)), "0.1.0");

// ── The repository as it is ──────────────────────────────────────────────────────────────

describe("the API against its last release", () => {
  const released = readReleased(read("api/released/schema.graphql"));

  it("names under ## [Unreleased] → ### Breaking every breaking change schema.graphql makes to the released schema, and nothing else", () => {
    // Both are printed by graphql-js from a built schema (test/schema.test.ts holds
    // schema.graphql to it; the release step copies it): validating them again costs time only.
    const build = (sdl: string) => buildSchema(sdl, { assumeValidSDL: true });
    expect(explain(checkChangelog(build(released.sdl), build(read("schema.graphql")), read("CHANGELOG.md")), released.version)).toEqual([]);
  });

  it("keeps one version for the release: the released SDL's first line, CHANGELOG.md's newest ## [x.y.z] - date, package.json", () => {
    const { version } = JSON.parse(read("package.json")) as { version: string };
    expect(latestRelease(read("CHANGELOG.md")), "CHANGELOG.md's newest release section").toEqual({ version: released.version, date: released.date });
    expect(version, "package.json was bumped without `npm run release:schema`").toBe(released.version);
  });
});

// ── The matcher, on small schemas ────────────────────────────────────────────────────────

const BASE = `
type Query { stack(id: ID!): Stack, workspaces(first: Int = 50, includeArchived: Boolean = false): [Workspace!]! }
type Stack { id: ID!, name: String!, labels: [String!]! }
type Workspace { id: ID!, environment: Environment! }
enum Environment { PRODUCTION STAGING }
`;

describe("the breaking-change matcher", () => {
  it("a removed field must be named as `Type.field`", () => {
    const after = BASE.replace("name: String!, ", "");
    const [message] = problems(BASE, after, []);
    expect(message).toContain("`Stack.name` is a breaking change against 0.1.0 (FIELD_REMOVED: Stack.name was removed.)");
    expect(message).toContain("a line starting with `Stack.name`");
    expect(problems(BASE, after, ["- `Stack.name`: removed; read `Stack.id`."])).toEqual([]);
  });

  it("a field whose type changed must be named as `Type.field`", () => {
    const after = BASE.replace("labels: [String!]!", "labels: String");
    expect(problems(BASE, after, [])).toEqual([expect.stringContaining("`Stack.labels` is a breaking change against 0.1.0 (FIELD_CHANGED_KIND: Stack.labels changed type from [String!]! to String.)")]);
    expect(problems(BASE, after, ["- `Stack.labels` is one comma-separated string."])).toEqual([]);
  });

  it("a removed enum value must be named as `Enum.VALUE`", () => {
    const after = BASE.replace("PRODUCTION STAGING", "PRODUCTION");
    expect(problems(BASE, after, [])).toEqual([expect.stringContaining("`Environment.STAGING` is a breaking change against 0.1.0 (VALUE_REMOVED_FROM_ENUM")]);
    expect(problems(BASE, after, ["- `Environment.STAGING`: gone, staging workspaces read `PRODUCTION`."])).toEqual([]);
  });

  it("an argument made required must be named as `Type.field(arg:)`", () => {
    const after = BASE.replace("first: Int = 50", "first: Int!");
    expect(problems(BASE, after, [])).toEqual([expect.stringContaining("`Query.workspaces(first:)` is a breaking change against 0.1.0 (ARG_CHANGED_KIND: Query.workspaces arg first has changed type from Int to Int!.)")]);
    expect(problems(BASE, after, ["- `Query.workspaces(first:)` is required."])).toEqual([]);
  });

  it("a removed type must be named as `Type`, and naming its field instead is no substitute", () => {
    const after = BASE.replace("stack(id: ID!): Stack, ", "").replace(/type Stack \{[^}]*\}/, "");
    const found = problems(BASE, after, ["- `Query.stack`: removed."]);
    expect(found).toEqual([expect.stringContaining("`Stack` is a breaking change against 0.1.0 (TYPE_REMOVED: Stack was removed.)")]);
    expect(problems(BASE, after, ["- `Query.stack`, `Stack`: removed; list stacks through workspaces."])).toEqual([]);
  });

  it("a named coordinate nothing changes is stale; one that only leads to the real change points at it", () => {
    expect(problems(BASE, BASE, ["- `Stack.name`: removed."])).toEqual([
      "CHANGELOG.md:7 names `Stack.name` under ### Breaking, but schema.graphql does not change it against 0.1.0: a stale entry, delete it (or move the prose to ### Changed)",
    ]);
    const after = BASE.replace("stack(id: ID!)", "stack");
    expect(problems(BASE, after, ["- `Query.stack`: takes no id."])).toEqual([
      expect.stringContaining("`Query.stack(id:)` is a breaking change against 0.1.0 (ARG_REMOVED"),
      "CHANGELOG.md:7 names `Query.stack` under ### Breaking, but schema.graphql does not change it against 0.1.0: name the coordinate that breaks instead (`Query.stack(id:)`)",
    ]);
  });

  it("an argument whose default changed or went away must be named; an addition may be, and need not", () => {
    const flipped = BASE.replace("includeArchived: Boolean = false", "includeArchived: Boolean = true");
    expect(problems(BASE, flipped, [])).toEqual([expect.stringContaining("`Query.workspaces(includeArchived:)` is a breaking change against 0.1.0 (ARG_DEFAULT_VALUE_CHANGE")]);
    expect(problems(BASE, BASE.replace("first: Int = 50", "first: Int"), [])).toEqual([expect.stringContaining("`Query.workspaces(first:)`")]);
    const added = BASE.replace("PRODUCTION STAGING", "PRODUCTION STAGING PREVIEW").replace("labels:", "description: String, labels:");
    expect(problems(BASE, added, [])).toEqual([]);
    expect(problems(BASE, added, ["- `Environment.PREVIEW`: dashboards that switch over every environment need a branch."])).toEqual([]);
  });

  it("reads only the coordinates leading a Breaking line of ## [Unreleased], each rooted in a type or directive of the schemas", () => {
    const after = BASE.replace("name: String!, ", "");
    const notNaming = [
      "- Removed `Stack.name`.", // the coordinate does not lead
      "- `countersign apply` takes `--workspace`; `plan.applied` webhooks carry `Stack.name` no more.", // not schema names
      "- `Stak.name`: removed.", // no such type: not read as a coordinate
    ];
    expect(problems(BASE, after, notNaming)).toEqual([expect.stringContaining("`Stack.name` is a breaking change")]);
    const elsewhere = changelog([], "## [0.1.0] - 2026-12-03\n\n### Breaking\n\n- `Stack.name`: removed.\n").replace("### Changed\n", "### Changed\n\n- `Stack.name`: removed.\n");
    expect(explain(checkChangelog(BASE, after, elsewhere), "0.1.0")).toEqual([expect.stringContaining("`Stack.name` is a breaking change")]);
    expect(unreleasedBreaking(changelog(["- `Stack.name` and `Stack.labels`, `@auth(role:)`: prose `Query.stack`", "* `Workspace`", "  - `Environment.STAGING` (a nested item)"])).map((e) => e.leading)).toEqual([
      ["Stack.name", "Stack.labels", "@auth(role:)"],
      ["Workspace"],
      ["Environment.STAGING"],
    ]);
  });

  it("a leading name rooted in the schema that is no coordinate is an error that shows the forms", () => {
    const after = BASE.replace("stack(id: ID!)", "stack");
    expect(problems(BASE, after, ["- `Query.stack(id)`: removed."])).toEqual([
      expect.stringContaining("`Query.stack(id:)` is a breaking change"),
      "CHANGELOG.md:7 leads with `Query.stack(id)`, which is no schema coordinate: write `Type`, `Type.field`, `Type.field(arg:)`, `Enum.VALUE` or `@directive(arg:)`",
    ]);
  });

  it("fails closed: no ## [Unreleased] section, or a change description it cannot read, throws", () => {
    expect(() => checkChangelog(BASE, BASE, "# Changelog\n\n## [0.1.0] - 2026-12-03\n")).toThrow("no `## [Unreleased]` section");
    expect(() => coordinateOf(BreakingChangeType.FIELD_REMOVED, "The field Stack.name is gone.")).toThrow("cannot read the schema coordinate of FIELD_REMOVED");
  });
});

// ── Every kind of change graphql-js reports has a coordinate ─────────────────────────────

const Q = "type Query { f(x: Int = 1, y: Int): Int }\n";
/** Per change kind graphql-js declares: a released SDL, a current one, the coordinate. */
const KINDS: Record<ChangeKind, { before: string; after: string; coordinate: string }> = {
  [BreakingChangeType.TYPE_REMOVED]: { before: `${Q}type Gone { a: Int }`, after: Q, coordinate: "Gone" },
  [BreakingChangeType.TYPE_CHANGED_KIND]: { before: `${Q}type T { a: Int }`, after: `${Q}input T { a: Int }`, coordinate: "T" },
  [BreakingChangeType.TYPE_REMOVED_FROM_UNION]: { before: `${Q}type A { a: Int } type B { b: Int } union U = A | B`, after: `${Q}type A { a: Int } type B { b: Int } union U = A`, coordinate: "U" },
  [BreakingChangeType.VALUE_REMOVED_FROM_ENUM]: { before: `${Q}enum E { X Y }`, after: `${Q}enum E { X }`, coordinate: "E.Y" },
  [BreakingChangeType.REQUIRED_INPUT_FIELD_ADDED]: { before: `${Q}input I { a: Int }`, after: `${Q}input I { a: Int, b: Int! }`, coordinate: "I.b" },
  [BreakingChangeType.IMPLEMENTED_INTERFACE_REMOVED]: { before: `${Q}interface Node { id: ID } type T implements Node { id: ID }`, after: `${Q}interface Node { id: ID } type T { id: ID }`, coordinate: "T" },
  [BreakingChangeType.FIELD_REMOVED]: { before: `${Q}input I { a: Int, b: Int }`, after: `${Q}input I { a: Int }`, coordinate: "I.b" },
  [BreakingChangeType.FIELD_CHANGED_KIND]: { before: `${Q}type T { a: Int }`, after: `${Q}type T { a: String }`, coordinate: "T.a" },
  [BreakingChangeType.REQUIRED_ARG_ADDED]: { before: Q, after: "type Query { f(x: Int = 1, y: Int, z: ID!): Int }", coordinate: "Query.f(z:)" },
  [BreakingChangeType.ARG_REMOVED]: { before: Q, after: "type Query { f(x: Int = 1): Int }", coordinate: "Query.f(y:)" },
  [BreakingChangeType.ARG_CHANGED_KIND]: { before: Q, after: "type Query { f(x: Int = 1, y: Int!): Int }", coordinate: "Query.f(y:)" },
  [BreakingChangeType.DIRECTIVE_REMOVED]: { before: `${Q}directive @d on FIELD`, after: Q, coordinate: "@d" },
  [BreakingChangeType.DIRECTIVE_ARG_REMOVED]: { before: `${Q}directive @d(a: Int) on FIELD`, after: `${Q}directive @d on FIELD`, coordinate: "@d(a:)" },
  [BreakingChangeType.REQUIRED_DIRECTIVE_ARG_ADDED]: { before: `${Q}directive @d on FIELD`, after: `${Q}directive @d(b: Int!) on FIELD`, coordinate: "@d(b:)" },
  [BreakingChangeType.DIRECTIVE_REPEATABLE_REMOVED]: { before: `${Q}directive @d repeatable on FIELD`, after: `${Q}directive @d on FIELD`, coordinate: "@d" },
  [BreakingChangeType.DIRECTIVE_LOCATION_REMOVED]: { before: `${Q}directive @d on FIELD | QUERY`, after: `${Q}directive @d on FIELD`, coordinate: "@d" },
  [DangerousChangeType.VALUE_ADDED_TO_ENUM]: { before: `${Q}enum E { X }`, after: `${Q}enum E { X Z }`, coordinate: "E.Z" },
  [DangerousChangeType.TYPE_ADDED_TO_UNION]: { before: `${Q}type A { a: Int } type B { b: Int } union U = A`, after: `${Q}type A { a: Int } type B { b: Int } union U = A | B`, coordinate: "U" },
  [DangerousChangeType.OPTIONAL_INPUT_FIELD_ADDED]: { before: `${Q}input I { a: Int }`, after: `${Q}input I { a: Int, c: Int }`, coordinate: "I.c" },
  [DangerousChangeType.OPTIONAL_ARG_ADDED]: { before: Q, after: "type Query { f(x: Int = 1, y: Int, w: Int): Int }", coordinate: "Query.f(w:)" },
  [DangerousChangeType.IMPLEMENTED_INTERFACE_ADDED]: { before: `${Q}interface Node { id: ID } type T { id: ID }`, after: `${Q}interface Node { id: ID } type T implements Node { id: ID }`, coordinate: "T" },
  [DangerousChangeType.ARG_DEFAULT_VALUE_CHANGE]: { before: Q, after: "type Query { f(x: Int = 2, y: Int): Int }", coordinate: "Query.f(x:)" },
};

describe("every change kind graphql-js declares", () => {
  const kinds: ChangeKind[] = [...Object.values(BreakingChangeType), ...Object.values(DangerousChangeType)];
  const mustName = (kind: ChangeKind) => (Object.values(BreakingChangeType) as string[]).includes(kind) || MUST_NAME_DANGEROUS.has(kind as DangerousChangeType);

  it("has a case here", () => {
    expect(kinds.filter((k) => !(k in KINDS))).toEqual([]);
    expect(kinds.length).toBe(22);
  });

  for (const kind of kinds) {
    it(`${kind} is read as its schema coordinate, ${mustName(kind) ? "which a Breaking line must name" : "which a Breaking line may name"}`, () => {
      const { before, after, coordinate } = KINDS[kind];
      const { mustName: must, mayName: may } = schemaChanges(before, after);
      expect([...must, ...may].filter((c) => c.kind === kind).map((c) => c.coordinate)).toEqual([coordinate]);
      const unnamed = checkChangelog(before, after, changelog([])).unnamed.map((u) => u.coordinate);
      expect(unnamed.includes(coordinate)).toBe(mustName(kind));
      const named = checkChangelog(before, after, changelog([`- \`${coordinate}\`: changed.`]));
      expect(named.unnamed.map((u) => u.coordinate)).not.toContain(coordinate);
      expect(named.stale).toEqual([]);
    });
  }

  it("a standard scalar no field uses any more is a removed type too", () => {
    const { mustName } = schemaChanges("type Query { f: Float }", "type Query { f: Int }");
    expect(mustName.map((c) => [c.kind, c.coordinate])).toEqual([
      [BreakingChangeType.TYPE_REMOVED, "Float"],
      [BreakingChangeType.FIELD_CHANGED_KIND, "Query.f"],
    ]);
  });
});

// ── The release step ─────────────────────────────────────────────────────────────────────

describe("releasing (npm run release:schema)", () => {
  it("turns ## [Unreleased] into the version's section under a fresh one, after which the new baseline names nothing", () => {
    const after = BASE.replace("name: String!, ", "");
    const before = changelog(["- `Stack.name`: removed."], "## [0.1.0] - 2026-12-03\n\n### Added\n\n- The API.\n").replace("### Fixed\n", "### Fixed\n\n- Lists page.\n");
    const released = releaseChangelog(before, "0.2.0", "2027-01-15");
    expect(released).toBe(
      [
        "# Changelog",
        "",
        "## [Unreleased]",
        "",
        "### Breaking",
        "",
        "### Added",
        "",
        "### Changed",
        "",
        "### Fixed",
        "",
        "## [0.2.0] - 2027-01-15",
        "",
        "### Breaking",
        "",
        "- `Stack.name`: removed.",
        "",
        "### Fixed",
        "",
        "- Lists page.",
        "",
        "## [0.1.0] - 2026-12-03",
        "",
        "### Added",
        "",
        "- The API.",
        "",
      ].join("\n"),
    );
    expect(latestRelease(released)).toEqual({ version: "0.2.0", date: "2027-01-15" });
    expect(explain(checkChangelog(after, after, released), "0.2.0")).toEqual([]);
  });
});
