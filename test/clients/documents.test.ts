// The operation documents are the clients' contract with the API (operations/*.graphql): every
// one must be named, uniquely, and valid against the checked-in schema.graphql, so a schema
// change that breaks the CLI, the dashboard or a bot fails here first. The generated typed
// documents (src/generated/graphql/, made by `npm install` / `npm run generate`) must be current.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  buildSchema,
  Kind,
  NoUnusedFragmentsRule,
  parse,
  specifiedRules,
  validate,
  type DefinitionNode,
  type DocumentNode,
  type OperationDefinitionNode,
} from "graphql";
import { describe, expect, it } from "vitest";
import { CODEGEN_OUTPUT } from "../../codegen.js";
import { generateDocuments } from "../../scripts/codegen.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const schema = buildSchema(readFileSync(join(root, "schema.graphql"), "utf8"));
const files = readdirSync(join(root, "operations")).filter((f) => f.endsWith(".graphql")).sort();
const documents = new Map(files.map((f) => [f, parse(readFileSync(join(root, "operations", f), "utf8"))] as const));
const allDefinitions: DefinitionNode[] = [...documents.values()].flatMap((d) => d.definitions);
const fragmentsFrom = (file: string) =>
  [...documents].filter(([f]) => f !== file).flatMap(([, d]) => d.definitions.filter((x) => x.kind === Kind.FRAGMENT_DEFINITION));

describe("operation documents", () => {
  it("there are operation documents to check", () => {
    expect(files.length).toBeGreaterThan(0);
  });

  // Each file with the fragments the others define (codegen sees them as one set).
  it.each(files)("%s validates against schema.graphql", (file) => {
    const document: DocumentNode = { kind: Kind.DOCUMENT, definitions: [...documents.get(file)!.definitions, ...fragmentsFrom(file)] };
    const rules = specifiedRules.filter((rule) => rule !== NoUnusedFragmentsRule);
    const errors = validate(schema, document, rules).map((e) => `${file}: ${e.message}`);
    expect(errors).toEqual([]);
  });

  it("all documents together validate, every fragment used, with every rule", () => {
    const errors = validate(schema, { kind: Kind.DOCUMENT, definitions: allDefinitions }).map((e) => e.message);
    expect(errors).toEqual([]);
  });

  it("every operation is named, and no name is used twice", () => {
    const names: string[] = [];
    for (const [file, document] of documents) {
      for (const definition of document.definitions) {
        if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
        const name = (definition as OperationDefinitionNode).name?.value;
        expect(name, `an anonymous operation in ${file}`).toBeTruthy();
        names.push(name!);
      }
    }
    expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
  });

  it("the generated typed documents are current (run `npm run generate`)", async () => {
    const outputs = await generateDocuments(root);
    expect(outputs.length).toBeGreaterThan(0);
    for (const output of outputs) {
      expect(output.filename.startsWith(CODEGEN_OUTPUT), output.filename).toBe(true);
      const onDisk = readFileSync(join(root, output.filename), "utf8");
      expect(onDisk, `${output.filename} is stale: run npm run generate`).toBe(output.content);
    }
  });
});
