import type { Config } from "./config.js";
import type { Database } from "./db.js";
import type { EventBus } from "./events.js";
import type { Logger } from "./logger.js";

/** The process's connections and settings, opened by main.ts (or a test) and handed to createApp. */
export interface Infra {
  config: Config;
  db: Database;
  events: EventBus;
  logger: Logger;
}
