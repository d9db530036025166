// Typed operation documents for the clients (CLI, dashboard, tests): graphql-codegen's client
// preset over the printed SDL and the named operations in operations/. Runs on `npm install`
// (scripts/generate.mjs) and `npm run generate`; test/clients/documents.test.ts fails when an
// operation no longer validates against schema.graphql or the generated code is stale.
import type { CodegenConfig } from "@graphql-codegen/cli";

export const CODEGEN_OUTPUT = "src/generated/graphql/";

const config: CodegenConfig = {
  schema: "schema.graphql",
  documents: ["operations/*.graphql"],
  ignoreNoDocuments: false,
  silent: true,
  generates: {
    [CODEGEN_OUTPUT]: {
      preset: "client",
      presetConfig: { fragmentMasking: false },
      config: {
        // Each document is a string subclass carrying its types: the CLI posts it with fetch and
        // the dashboard sends it over graphql-ws without bundling graphql-js's printer.
        documentMode: "string",
        useTypeImports: true,
        emitLegacyCommonJSImports: false,
        enumsAsTypes: true,
        skipTypename: false,
        avoidOptionals: { field: true, inputValue: false, object: false, defaultValue: false },
        scalars: { DateTime: "string", JSON: "unknown", ID: "string" },
      },
    },
  },
};

export default config;
