export * from "./approval-token.js";
export * from "../domain/canonical.js";
export * from "./cedar-gate.js";
export * from "./errors.js";
