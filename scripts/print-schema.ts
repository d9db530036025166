// npm run schema:print — writes the printed SDL (sorted) to schema.graphql.
import { writeFileSync } from "node:fs";
import { printedSchema } from "../src/graphql/schema/index.js";

writeFileSync(new URL("../schema.graphql", import.meta.url), printedSchema());
console.log("wrote schema.graphql");
