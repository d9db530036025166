import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: {
    // graphql 16 ships CJS (main) and ESM (module); Node loads the CJS one for Pothos and
    // yoga, so our own imports must get the same copy or instanceof checks fail.
    alias: [{ find: /^graphql$/, replacement: "graphql/index.js" }],
  },
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    setupFiles: ["test/setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: files run in parallel, each database-backed file in its own schema.
    maxWorkers: 2,
  },
});
