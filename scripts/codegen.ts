/**
 * Generates the typed operation documents (codegen.ts) with graphql-codegen's client preset,
 * driven through @graphql-codegen/core exactly as the codegen CLI drives a preset: the schema
 * and the documents are local files, so none of the CLI's loaders are needed.
 *
 *   tsx scripts/codegen.ts          writes src/generated/graphql/
 *   generateDocuments(root)         returns the files without writing (the staleness test)
 */
import { mkdir, readFile, readdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildASTSchema, parse, print } from "graphql";
import { codegen } from "@graphql-codegen/core";
import { preset } from "@graphql-codegen/client-preset";
import { normalizeImportExtension } from "@graphql-codegen/plugin-helpers";
import { CODEGEN_CONFIG, CODEGEN_DOCUMENTS_DIR, CODEGEN_OUTPUT, CODEGEN_PRESET_CONFIG, CODEGEN_SCHEMA } from "../codegen.js";

export interface GeneratedFile {
  /** Relative to the project root, starting with CODEGEN_OUTPUT. */
  filename: string;
  content: string;
}

export async function generateDocuments(root: string): Promise<GeneratedFile[]> {
  const schema = parse(await readFile(path.join(root, CODEGEN_SCHEMA), "utf8"));
  const dir = path.join(root, CODEGEN_DOCUMENTS_DIR);
  const files = (await readdir(dir)).filter((f) => f.endsWith(".graphql")).sort();
  if (files.length === 0) throw new Error(`no operation documents in ${CODEGEN_DOCUMENTS_DIR}/`);
  const documents = await Promise.all(
    files.map(async (f) => {
      const location = path.join(dir, f);
      // As the CLI's file loader hands them over: parsed and printed again (no comments).
      const document = parse(await readFile(location, "utf8"));
      return { location, rawSDL: print(document), document };
    }),
  );
  const config = {
    ...CODEGEN_CONFIG,
    importExtension: normalizeImportExtension({ emitLegacyCommonJSImports: CODEGEN_CONFIG.emitLegacyCommonJSImports, importExtension: undefined }),
  };
  const outputs = await preset.buildGeneratesSection({
    baseOutputDir: CODEGEN_OUTPUT,
    presetConfig: CODEGEN_PRESET_CONFIG,
    plugins: [],
    pluginMap: {},
    schema,
    schemaAst: buildASTSchema(schema),
    documents,
    config,
    documentTransforms: [],
  });
  return Promise.all(
    outputs.map(async (output) => ({
      filename: output.filename,
      content: await codegen({ ...output, emitLegacyCommonJSImports: CODEGEN_CONFIG.emitLegacyCommonJSImports } as Parameters<typeof codegen>[0]),
    })),
  );
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = fileURLToPath(new URL("..", import.meta.url));
  for (const file of await generateDocuments(root)) {
    const target = path.join(root, file.filename);
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, file.content);
  }
}
