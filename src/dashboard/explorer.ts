// The GraphQL explorer at /graphql: yoga's GraphiQL, served from our own origin
// (@graphql-yoga/render-graphiql's bundle instead of a CDN, so no third-party script runs in a
// page that holds a token, and it works where only this server is reachable). It opens with
// - the token header prefilled: from `?token=` (then dropped from the address bar) or the value
//   the dashboard keeps in this tab's sessionStorage; and
// - one tab per file of operations/ (the typed documents the CLI and dashboard use), each with
//   exactly the fragments its operations need and example variables.
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  Kind,
  parse,
  print,
  visit,
  type DefinitionNode,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type TypeNode,
} from "graphql";
import type { GraphiQLOptions } from "graphql-yoga";

/** Bumped with the render-graphiql version, so browsers may cache the assets for long. */
export const EXPLORER_ASSETS = "/explorer/5.24.1";
export { TOKEN_STORAGE_KEY } from "./session.js";

const OPERATIONS_DIR = fileURLToPath(new URL("../../operations/", import.meta.url));

interface Tab {
  query: string;
  variables?: string | null;
  headers?: string | null;
}

/** Example variables for an operation: placeholders naming what to paste. */
function exampleVariables(operation: OperationDefinitionNode): Record<string, unknown> | null {
  const variables: Record<string, unknown> = {};
  for (const v of operation.variableDefinitions ?? []) {
    if (v.type.kind !== Kind.NON_NULL_TYPE || v.defaultValue) continue;
    const name = v.variable.name.value;
    variables[name] = placeholder(name, v.type.type);
  }
  return Object.keys(variables).length ? variables : null;
}

function placeholder(name: string, type: TypeNode): unknown {
  if (type.kind === Kind.NAMED_TYPE && type.name.value === "ID") return `<${name}>`;
  if (type.kind === Kind.NAMED_TYPE && name === "input") {
    if (type.name.value === "VoteOnApprovalRequestInput") return { requestId: "<request id>", decision: "APPROVE", expectedRevision: 0 };
    if (type.name.value === "SubmitPlanInput") return { workspaceId: "<workspace id>", changes: [{ address: "aws_s3_bucket.logs", action: "CREATE" }] };
    if (type.name.value === "CreateWorkspaceInput") return { stackId: "<stack id>", name: "my-workspace", requiredApprovals: 1 };
    if (type.name.value === "ReportPlanResultInput") return { planId: "<plan id>", outcome: "APPLIED" };
  }
  return `<${name}>`;
}

/** Every fragment a definition uses, transitively. */
function fragmentsUsed(definition: DefinitionNode, fragments: Map<string, FragmentDefinitionNode>, into = new Set<string>()): Set<string> {
  visit(definition, {
    FragmentSpread(node) {
      const name = node.name.value;
      if (into.has(name)) return;
      into.add(name);
      const fragment = fragments.get(name);
      if (fragment) fragmentsUsed(fragment, fragments, into);
    },
  });
  return into;
}

const TAB_ORDER = ["viewer.graphql", "workspaces.graphql", "gate.graphql", "plan.graphql", "reservations.graphql", "approvals.graphql"];

/** One explorer tab per operations/*.graphql file that holds operations. */
export function exampleTabs(dir = OPERATIONS_DIR): Tab[] {
  // The order a newcomer needs them in; any other file follows by name.
  const rank = (f: string) => {
    const i = TAB_ORDER.indexOf(f);
    return i < 0 ? TAB_ORDER.length : i;
  };
  const files = readdirSync(dir).filter((f) => f.endsWith(".graphql")).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const documents = files.map((f) => {
    const text = readFileSync(dir + f, "utf8");
    return { file: f, text, document: parse(text) };
  });
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const { document } of documents) {
    for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  }
  const tabs: Tab[] = [];
  for (const { file, text, document } of documents) {
    const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
    if (!operations.length) continue;
    const used = new Set<string>();
    for (const op of operations) fragmentsUsed(op, fragments, used);
    const ownFragments = new Set(document.definitions.filter((d) => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => (d as FragmentDefinitionNode).name.value));
    // The file as written (its comments explain each operation), then the borrowed fragments.
    const borrowed = [...used].filter((n) => !ownFragments.has(n)).sort().map((n) => print(fragments.get(n)!));
    const variables = Object.assign({}, ...operations.map((op) => exampleVariables(op) ?? {}));
    tabs.push({
      query: `# operations/${file}\n${text.trim()}\n${borrowed.length ? `\n# Fragments from operations/fragments.graphql\n${borrowed.join("\n\n")}\n` : ""}`,
      variables: Object.keys(variables).length ? JSON.stringify(variables, null, 2) : null,
    });
  }
  return tabs;
}

/**
 * Our corrections to GraphiQL's styles, loaded after its own, for WCAG AA contrast (axe's
 * color-contrast rule) in the light theme: the editor's line numbers, and the token colours
 * under 4.5:1 on GraphiQL's panes (Monaco's "vs" theme numbers, #098658; teal types, #008080;
 * the second bracket-pair colour, #319331). The mtk classes are Monaco's colour map for the
 * render-graphiql version in EXPLORER_ASSETS; its path changes with the version, so a new
 * version is checked again by test/clients/dashboard-people.test.ts.
 */
export const EXPLORER_STYLE = `body:not(.graphiql-dark) .monaco-editor .line-numbers { color: #5c6370 !important; }
body:not(.graphiql-dark) .monaco-editor .line-numbers.active-line-number { color: #1f2328 !important; }
body:not(.graphiql-dark) .monaco-editor .mtk8 { color: #05704a !important; }
body:not(.graphiql-dark) .monaco-editor .mtk23 { color: #006666 !important; }
body:not(.graphiql-dark) .monaco-editor .bracket-highlighting-1 { color: #1f7a1f !important; }
`;

export function explorerOptions(): GraphiQLOptions {
  const tabs = exampleTabs();
  const headers = JSON.stringify({ Authorization: "Bearer <token>" }, null, 2);
  return {
    title: "Countersign explorer",
    subscriptionsProtocol: "WS",
    defaultQuery: tabs[0]?.query ?? "{ viewer { name } }",
    defaultTabs: tabs.map((t) => ({ ...t, headers })),
    headers,
    defaultHeaders: headers,
    defaultEditorToolsVisibility: "headers",
    isHeadersEditorEnabled: true,
    shouldPersistHeaders: false,
  };
}

/** JSON inside a <script> element: nothing in it can close the element. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, "\\u003c").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** yoga's `renderGraphiQL`: a small page loading the explorer's assets from this server. */
export function renderExplorer(options: GraphiQLOptions): string {
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>${escapeHtml(options.title ?? "Countersign explorer")}</title>
    <link rel="icon" href="data:," />
    <link rel="stylesheet" href="${EXPLORER_ASSETS}/graphiql.css" />
    <link rel="stylesheet" href="${EXPLORER_ASSETS}/countersign.css" />
  </head>
  <body id="body" class="no-focus-outline">
    <noscript>You need to enable JavaScript to run the explorer.</noscript>
    <div id="root"></div>
    <script type="application/json" id="explorer-options">${scriptJson(options)}</script>
    <script src="${EXPLORER_ASSETS}/start.js" data-assets="${EXPLORER_ASSETS}"></script>
  </body>
</html>`;
}
