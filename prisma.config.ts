import { fileURLToPath } from "node:url";
import { defineConfig } from "prisma/config";
import { PrismaPg } from "@prisma/adapter-pg";

// No native engine is ever used (DESIGN.md, Prisma section): the CLI's engine check is
// pointed at a file that exists, and every command runs through the JS/WASM engines.
process.env.PRISMA_QUERY_ENGINE_LIBRARY ??= fileURLToPath(new URL("./prisma/schema.prisma", import.meta.url));

export default defineConfig({
  experimental: { adapter: true },
  engine: "js",
  schema: "prisma/schema.prisma",
  adapter: async () =>
    new PrismaPg({ connectionString: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres" }),
});
