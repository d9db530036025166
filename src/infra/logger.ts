import { pino, type DestinationStream, type Logger } from "pino";

export type { Logger };

/** Structured JSON logs; every request logger is a child carrying its request id. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return destination ? pino({ level, base: { service: "countersign" } }, destination) : pino({ level, base: { service: "countersign" } });
}
