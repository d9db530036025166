// npm run cli -- <command>   (also `npx countersign <command>`)
//   admin …   organizations, users and tokens, directly in the configured database
//   anything else: the chatops client against COUNTERSIGN_URL (src/cli/client.ts)
import { run } from "./client.js";

const [command, ...rest] = process.argv.slice(2);

// Loaded only when asked for: the admin commands pull in Prisma, the client does not.
process.exitCode = command === "admin" ? await (await import("./admin.js")).runAdmin(rest) : await run([command ?? "help", ...rest]);
