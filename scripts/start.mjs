// `npm start`: the server from its bundle (scripts/bundle.mjs), rebuilt first when the sources
// changed since it was built, so what runs is always the sources as they are. If the bundle
// cannot be built (esbuild missing, say), the sources run through tsx as before.
import { pathToFileURL } from "node:url";
import { currentBundle } from "./bundle.mjs";

let entry = null;
try {
  entry = (await currentBundle()).file;
} catch (error) {
  process.stderr.write(`countersign: the server bundle could not be built (${error.message.split("\n")[0]}); running the sources through tsx\n`);
}
if (entry) {
  // Stack traces name the bundle's lines (each module is headed by its src/ path there);
  // NODE_OPTIONS=--enable-source-maps maps them back to src/ through the bundle's .map file, at
  // a tenth of a second per start, which is why it is not on by default.
  await import(pathToFileURL(entry).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../src/main.ts");
}
