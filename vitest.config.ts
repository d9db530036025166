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
    // A worker keeps the modules it loaded from one file to the next: re-importing the app for
    // every file (about 2.5 s of CPU each, ~140 files) was a third of the suite's CPU. Test
    // files share no state through modules: each builds its own app, database schema, Redis
    // keys and listeners, and removes what it adds to `process` (the whole suite passes either way).
    isolate: false,
  },
});
