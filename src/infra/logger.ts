import { pino, type Logger } from "pino";

export type { Logger };

/** Structured JSON logs; every request logger is a child carrying its request id. */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: "countersign" } });
}
