// The permission catalog: the validity matrix, patterns, validation, the check, and the
// built-in roles. Pure TypeScript, no I/O. Spec: seeds/004; decisions: docs/permissions.md.
export * from "./matrix.js";
export * from "./pattern.js";
export * from "./validate.js";
export * from "./check.js";
export * from "./decide.js";
export * from "./system-roles.js";
export * from "./targeting.js";
