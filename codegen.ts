// Typed operation documents for the clients (CLI, dashboard, tests): graphql-codegen's client
// preset over the printed SDL and the named operations in operations/. Runs on `npm install`
// (scripts/generate.mjs) and `npm run generate`; test/clients/documents.test.ts fails when an
// operation no longer validates against schema.graphql or the generated code is stale.
//
// The preset is driven through @graphql-codegen/core (scripts/codegen.mjs) rather than the
// codegen CLI: the CLI's loaders (URL, GitHub, git, Apollo) pull packages that need Node 22
// and are never used here, since both inputs are local files.
export const CODEGEN_OUTPUT = "src/generated/graphql/";

export const CODEGEN_SCHEMA = "schema.graphql";
export const CODEGEN_DOCUMENTS_DIR = "operations";

export const CODEGEN_CONFIG = {
  // Each document is a string subclass carrying its types: the CLI posts it with fetch and
  // the dashboard sends it over graphql-ws without bundling graphql-js's printer.
  documentMode: "string",
  useTypeImports: true,
  emitLegacyCommonJSImports: false,
  enumsAsTypes: true,
  skipTypename: false,
  avoidOptionals: { field: true, inputValue: false, object: false, defaultValue: false },
  scalars: { DateTime: "string", JSON: "unknown", ID: "string" },
} as const;

export const CODEGEN_PRESET_CONFIG = { fragmentMasking: false } as const;
