// npm run cli -- <command>   (also `npx countersign <command>`)
//   admin …   organizations, users and tokens, directly in the configured database
//   anything else: the chatops client against COUNTERSIGN_URL (src/cli/client.ts)
import { ADMIN_USAGE, runAdmin } from "./admin.js";

const CLIENT_MODULE = "./client.js";
const [command, ...rest] = process.argv.slice(2);

async function main(): Promise<number> {
  if (command === "admin") return runAdmin(rest);
  try {
    const client: { run(argv: string[]): Promise<number> } = await import(CLIENT_MODULE);
    return await client.run([command ?? "help", ...rest]);
  } catch (error) {
    if ((error as { code?: string }).code === "ERR_MODULE_NOT_FOUND" && !command) {
      console.log(ADMIN_USAGE);
      return 0;
    }
    throw error;
  }
}

process.exitCode = await main();
