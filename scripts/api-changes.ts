/**
 * Is every breaking change to the GraphQL API named in CHANGELOG.md? Tooling, not runtime: the
 * server never imports this file (it sits outside src/).
 *
 * graphql-js's findBreakingChanges compares the last release's SDL (api/released/schema.graphql)
 * with schema.graphql; each change it reports is turned into a schema coordinate (`Type`,
 * `Type.field`, `Type.field(arg:)`, `Enum.VALUE`, `@directive`, `@directive(arg:)`), and the
 * `## [Unreleased]` → `### Breaking` list must name that coordinate at the start of a line.
 * A coordinate leading a Breaking line that nothing breaks any more is stale.
 *
 * Of findDangerousChanges, one kind must be named too: an argument's default changing or going
 * away. A client that omits the argument sends the same operation, passes validation, and gets
 * other data (`workspaces(includeArchived: Boolean = false)` turned to true hands it archived
 * workspaces) — nothing at build time tells it. The other dangerous kinds only add (an enum
 * value, a union member, an optional argument or input field, an interface): a client that
 * handles `__typename` and enum values it does not know, as the `Error` interface and its
 * `code` invite, keeps working. They may be named under Breaking (an author who knows clients
 * switch exhaustively on an enum), never must.
 *
 * graphql 16 reports a change as { type, description } with no coordinate; the coordinate is
 * read from the description, one pattern per change kind. A description no pattern reads throws
 * (a graphql upgrade reworded it): the check fails closed, never silently matches nothing.
 */
import {
  BreakingChangeType,
  buildSchema,
  DangerousChangeType,
  findBreakingChanges,
  findDangerousChanges,
  type GraphQLSchema,
} from "graphql";

export type ChangeKind = BreakingChangeType | DangerousChangeType;

export interface SchemaChange {
  coordinate: string;
  kind: ChangeKind;
  /** graphql-js's sentence, e.g. "Stack.name was removed." */
  description: string;
}

// ── Coordinates ──────────────────────────────────────────────────────────────────────────

const N = "([_A-Za-z][_0-9A-Za-z]*)";

/** One pattern per kind and how its groups make the coordinate. Keyed by every kind graphql
 *  declares, so a kind a graphql upgrade adds fails the type check until it is given one. */
const READ: Record<ChangeKind, [RegExp, (g: string[]) => string]> = {
  [BreakingChangeType.TYPE_REMOVED]: [new RegExp(`^(?:Standard scalar )?${N} was removed(?: because it is not referenced anymore)?\\.$`), ([t]) => t!],
  [BreakingChangeType.TYPE_CHANGED_KIND]: [new RegExp(`^${N} changed from `), ([t]) => t!],
  [BreakingChangeType.TYPE_REMOVED_FROM_UNION]: [new RegExp(`^${N} was removed from union type ${N}\\.$`), ([, u]) => u!],
  [BreakingChangeType.VALUE_REMOVED_FROM_ENUM]: [new RegExp(`^${N} was removed from enum type ${N}\\.$`), ([v, e]) => `${e}.${v}`],
  [BreakingChangeType.REQUIRED_INPUT_FIELD_ADDED]: [new RegExp(`^A required field ${N} on input type ${N} was added\\.$`), ([f, t]) => `${t}.${f}`],
  [BreakingChangeType.IMPLEMENTED_INTERFACE_REMOVED]: [new RegExp(`^${N} no longer implements interface ${N}\\.$`), ([t]) => t!],
  [BreakingChangeType.FIELD_REMOVED]: [new RegExp(`^${N}\\.${N} was removed\\.$`), ([t, f]) => `${t}.${f}`],
  [BreakingChangeType.FIELD_CHANGED_KIND]: [new RegExp(`^${N}\\.${N} changed type from `), ([t, f]) => `${t}.${f}`],
  [BreakingChangeType.REQUIRED_ARG_ADDED]: [new RegExp(`^A required arg ${N} on ${N}\\.${N} was added\\.$`), ([a, t, f]) => `${t}.${f}(${a}:)`],
  [BreakingChangeType.ARG_REMOVED]: [new RegExp(`^${N}\\.${N} arg ${N} was removed\\.$`), ([t, f, a]) => `${t}.${f}(${a}:)`],
  [BreakingChangeType.ARG_CHANGED_KIND]: [new RegExp(`^${N}\\.${N} arg ${N} has changed type from `), ([t, f, a]) => `${t}.${f}(${a}:)`],
  [BreakingChangeType.DIRECTIVE_REMOVED]: [new RegExp(`^${N} was removed\\.$`), ([d]) => `@${d}`],
  [BreakingChangeType.DIRECTIVE_ARG_REMOVED]: [new RegExp(`^${N} was removed from ${N}\\.$`), ([a, d]) => `@${d}(${a}:)`],
  [BreakingChangeType.REQUIRED_DIRECTIVE_ARG_ADDED]: [new RegExp(`^A required arg ${N} on directive ${N} was added\\.$`), ([a, d]) => `@${d}(${a}:)`],
  [BreakingChangeType.DIRECTIVE_REPEATABLE_REMOVED]: [new RegExp(`^Repeatable flag was removed from ${N}\\.$`), ([d]) => `@${d}`],
  [BreakingChangeType.DIRECTIVE_LOCATION_REMOVED]: [new RegExp(`^${N} was removed from ${N}\\.$`), ([, d]) => `@${d}`],
  [DangerousChangeType.VALUE_ADDED_TO_ENUM]: [new RegExp(`^${N} was added to enum type ${N}\\.$`), ([v, e]) => `${e}.${v}`],
  [DangerousChangeType.TYPE_ADDED_TO_UNION]: [new RegExp(`^${N} was added to union type ${N}\\.$`), ([, u]) => u!],
  [DangerousChangeType.OPTIONAL_INPUT_FIELD_ADDED]: [new RegExp(`^An optional field ${N} on input type ${N} was added\\.$`), ([f, t]) => `${t}.${f}`],
  [DangerousChangeType.OPTIONAL_ARG_ADDED]: [new RegExp(`^An optional arg ${N} on ${N}\\.${N} was added\\.$`), ([a, t, f]) => `${t}.${f}(${a}:)`],
  [DangerousChangeType.IMPLEMENTED_INTERFACE_ADDED]: [new RegExp(`^${N} added to interfaces implemented by ${N}\\.$`), ([, t]) => t!],
  [DangerousChangeType.ARG_DEFAULT_VALUE_CHANGE]: [
    new RegExp(`^${N}\\.${N} arg ${N} (?:defaultValue was removed\\.|has changed defaultValue from )`),
    ([t, f, a]) => `${t}.${f}(${a}:)`,
  ],
};

/** The dangerous kinds a Breaking line must name, besides every breaking kind (see the top). */
export const MUST_NAME_DANGEROUS: ReadonlySet<DangerousChangeType> = new Set([DangerousChangeType.ARG_DEFAULT_VALUE_CHANGE]);

export function coordinateOf(kind: ChangeKind, description: string): string {
  const [pattern, make] = READ[kind];
  const m = pattern.exec(description);
  if (!m) throw new Error(`cannot read the schema coordinate of ${kind} "${description}" (did a graphql upgrade reword it? update READ in scripts/api-changes.ts)`);
  return make(m.slice(1));
}

const toSchema = (sdl: string | GraphQLSchema) => (typeof sdl === "string" ? buildSchema(sdl) : sdl);

/** Between two SDLs: the changes a Breaking line must name, and those it may name. */
export function schemaChanges(released: string | GraphQLSchema, current: string | GraphQLSchema): { mustName: SchemaChange[]; mayName: SchemaChange[] } {
  const before = toSchema(released);
  const after = toSchema(current);
  const read = (c: { type: ChangeKind; description: string }): SchemaChange => ({ coordinate: coordinateOf(c.type, c.description), kind: c.type, description: c.description });
  const dangerous = findDangerousChanges(before, after).map(read);
  return {
    mustName: [...findBreakingChanges(before, after).map(read), ...dangerous.filter((c) => MUST_NAME_DANGEROUS.has(c.kind as DangerousChangeType))],
    mayName: dangerous.filter((c) => !MUST_NAME_DANGEROUS.has(c.kind as DangerousChangeType)),
  };
}

// ── The changelog ────────────────────────────────────────────────────────────────────────

export interface BreakingLine {
  /** 1-based line number in CHANGELOG.md. */
  line: number;
  text: string;
  /** The backticked names leading the line, before any other text. */
  leading: string[];
}

const UNRELEASED = /^## \[Unreleased\]\s*$/;

/** The entries under `## [Unreleased]` → `### Breaking`. No Unreleased section throws. */
export function unreleasedBreaking(changelog: string): BreakingLine[] {
  const lines = changelog.split("\n");
  const start = lines.findIndex((l) => UNRELEASED.test(l));
  if (start < 0) throw new Error("CHANGELOG.md has no `## [Unreleased]` section");
  const out: BreakingLine[] = [];
  let inBreaking = false;
  for (let i = start + 1; i < lines.length; i++) {
    const l = lines[i]!;
    if (/^## /.test(l)) break;
    if (/^### /.test(l)) {
      inBreaking = /^### Breaking\s*$/.test(l);
      continue;
    }
    if (!inBreaking) continue;
    const entry = /^\s*[-*]\s+(.*)$/.exec(l);
    if (!entry) continue;
    const lead = /^(?:`[^`\n]+`(?:\s*,\s*|\s+and\s+|\s*)?)+/.exec(entry[1]!);
    out.push({ line: i + 1, text: l, leading: lead ? [...lead[0].matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!) : [] });
  }
  return out;
}

// A schema coordinate (the GraphQL schema-coordinates form): Type, Type.member, Type.field(arg:),
// @directive, @directive(arg:).
const COORDINATE = /^(?:[_A-Za-z]\w*(?:\.[_A-Za-z]\w*(?:\([_A-Za-z]\w*:\))?)?|@[_A-Za-z]\w*(?:\([_A-Za-z]\w*:\))?)$/;

/** The type or `@directive` a leading name starts with, if it is one of the schemas'. */
function schemaRoot(name: string, schemas: GraphQLSchema[]): string | null {
  const root = /^@?[_A-Za-z]\w*/.exec(name)?.[0];
  if (!root) return null;
  const known = schemas.some((s) => (root.startsWith("@") ? s.getDirective(root.slice(1)) : s.getType(root)));
  return known ? root : null;
}

// ── The verdict ──────────────────────────────────────────────────────────────────────────

export interface Verdict {
  /** A coordinate a Breaking line must name and none does, with what changed there. */
  unnamed: { coordinate: string; changes: SchemaChange[] }[];
  /** A coordinate a Breaking line names that no change (breaking, default, additive) touches. */
  stale: { coordinate: string; line: number; under: string[] }[];
  /** A leading name that starts with a type or directive of the schema but is no coordinate. */
  malformed: { name: string; line: number }[];
}

/** The SDLs as text or built (a caller that knows its SDL is valid may skip validation). */
export function checkChangelog(releasedSdl: string | GraphQLSchema, currentSdl: string | GraphQLSchema, changelog: string): Verdict {
  const released = toSchema(releasedSdl);
  const current = toSchema(currentSdl);
  const { mustName, mayName } = schemaChanges(released, current);
  const entries = unreleasedBreaking(changelog);

  const named = new Map<string, number>();
  const malformed: Verdict["malformed"] = [];
  for (const entry of entries) {
    for (const name of entry.leading) {
      // Names of the CLI, HTTP, MCP or webhooks (`countersign apply`, `plan.applied`) lead
      // lines too; only a name rooted in a type or directive of either schema is checked.
      if (!schemaRoot(name, [released, current])) continue;
      if (!COORDINATE.test(name)) malformed.push({ name, line: entry.line });
      else if (!named.has(name)) named.set(name, entry.line);
    }
  }

  const byCoordinate = new Map<string, SchemaChange[]>();
  for (const c of mustName) byCoordinate.set(c.coordinate, [...(byCoordinate.get(c.coordinate) ?? []), c]);
  const touched = new Set([...mustName, ...mayName].map((c) => c.coordinate));

  return {
    unnamed: [...byCoordinate].filter(([coordinate]) => !named.has(coordinate)).map(([coordinate, changes]) => ({ coordinate, changes })).sort((a, b) => a.coordinate.localeCompare(b.coordinate)),
    stale: [...named]
      .filter(([coordinate]) => !touched.has(coordinate))
      .map(([coordinate, line]) => ({ coordinate, line, under: [...byCoordinate.keys()].filter((c) => c.startsWith(`${coordinate}.`) || c.startsWith(`${coordinate}(`)).sort() }))
      .sort((a, b) => a.line - b.line),
    malformed,
  };
}

/** One sentence per problem, saying what to write where. */
export function explain(verdict: Verdict, releasedVersion: string): string[] {
  return [
    ...verdict.unnamed.map(
      ({ coordinate, changes }) =>
        `\`${coordinate}\` is a breaking change against ${releasedVersion} (${changes.map((c) => `${c.kind}: ${c.description}`).join("; ")}): ` +
        `name it under CHANGELOG.md's ## [Unreleased] → ### Breaking, a line starting with \`${coordinate}\``,
    ),
    ...verdict.stale.map(
      ({ coordinate, line, under }) =>
        `CHANGELOG.md:${line} names \`${coordinate}\` under ### Breaking, but schema.graphql does not change it against ${releasedVersion}: ` +
        (under.length ? `name the coordinate that breaks instead (${under.map((c) => `\`${c}\``).join(", ")})` : "a stale entry, delete it (or move the prose to ### Changed)"),
    ),
    ...verdict.malformed.map(
      ({ name, line }) => `CHANGELOG.md:${line} leads with \`${name}\`, which is no schema coordinate: write \`Type\`, \`Type.field\`, \`Type.field(arg:)\`, \`Enum.VALUE\` or \`@directive(arg:)\``,
    ),
  ];
}

// ── Releases ─────────────────────────────────────────────────────────────────────────────

/** The first line of api/released/schema.graphql. */
export const releasedHeader = (version: string, date: string) =>
  `# Countersign API ${version}, released ${date}. Written by \`npm run release:schema\`; edit schema.graphql, never this file.\n`;

export function readReleased(text: string): { version: string; date: string; sdl: string } {
  const m = /^# Countersign API (\d+\.\d+\.\d+), released (\d{4}-\d{2}-\d{2})\b.*\n/.exec(text);
  if (!m) throw new Error("api/released/schema.graphql must start with `# Countersign API <version>, released <YYYY-MM-DD>`");
  return { version: m[1]!, date: m[2]!, sdl: text.slice(m[0].length) };
}

/** The newest `## [x.y.z] - YYYY-MM-DD` section of the changelog, or null. */
export function latestRelease(changelog: string): { version: string; date: string } | null {
  const m = /^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})\s*$/m.exec(changelog);
  return m ? { version: m[1]!, date: m[2]! } : null;
}

export const UNRELEASED_TEMPLATE = "## [Unreleased]\n\n### Breaking\n\n### Added\n\n### Changed\n\n### Fixed\n";

/** `## [Unreleased]` becomes `## [version] - date` (its empty subsections dropped) under a fresh,
 *  empty Unreleased section. */
export function releaseChangelog(changelog: string, version: string, date: string): string {
  const lines = changelog.split("\n");
  const start = lines.findIndex((l) => UNRELEASED.test(l));
  if (start < 0) throw new Error("CHANGELOG.md has no `## [Unreleased]` section");
  let end = lines.findIndex((l, i) => i > start && /^## /.test(l));
  if (end < 0) end = lines.length;
  const kept: string[] = [];
  let heading: string | null = null;
  let body: string[] = [];
  const flush = () => {
    const text = body.join("\n").trim();
    if (heading && text) kept.push(heading, "", text, "");
    else if (!heading && text) kept.push(text, "");
  };
  for (const l of lines.slice(start + 1, end)) {
    if (/^### /.test(l)) {
      flush();
      heading = l.trim();
      body = [];
    } else body.push(l);
  }
  flush();
  const released = [`## [${version}] - ${date}`, "", ...kept];
  const rest = lines.slice(end);
  return [...lines.slice(0, start), ...UNRELEASED_TEMPLATE.split("\n"), ...released, ...rest].join("\n").replace(/\n{3,}/g, "\n\n").replace(/\n*$/, "\n");
}

export function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return (pa[i] ?? 0) - (pb[i] ?? 0);
  return 0;
}
