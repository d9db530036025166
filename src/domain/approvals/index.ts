export * from "./policy.js";
