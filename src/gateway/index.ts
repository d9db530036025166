export * from "./approval-token.js";
export * from "./canonical.js";
export * from "./cedar-gate.js";
export * from "./errors.js";
