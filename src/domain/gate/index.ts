// The apply gate: plain TypeScript, no GraphQL, no database. How the gate is decided lives in
// evaluate.ts; docs/apply-gate.md explains it in prose.

export * from "./types.js";
export {
  MAX_ADDRESS_PATTERN_LENGTH,
  addressMatches,
  addressPatternToSqlLike,
  buildAddressIndex,
  compileAddressPattern,
  validateAddressPattern,
  type AddressIndex,
  type AddressIndexEntry,
  type AddressPatternValidation,
  type CompiledAddressPattern,
} from "./address-pattern.js";
export { compareStrings, evaluateGate, scopePolicies, type ChangeCount, type PolicyScope } from "./evaluate.js";
export {
  TOTAL_CAN_RISE_NOTE,
  pickTargets,
  type PickTargetsInput,
  type PickTargetsResult,
  type PickedPolicy,
  type PickedResource,
} from "./picker.js";
export {
  MAX_ADDRESS_LENGTH,
  MAX_PLAN_CHANGES,
  MAX_PLAN_ISSUES,
  MAX_RESOURCE_CHANGE_ENTRIES,
  mapTerraformActions,
  parsePlanChanges,
  resourceAddressProblem,
  type ParsedPlanChanges,
  type PlanIssue,
  type PlanSource,
} from "./terraform-plan.js";
export {
  MAX_ATTRIBUTES_PER_RESOURCE,
  MAX_PLAN_DIFF_BYTES,
  MAX_VALUE_CHARS,
  PLAN_DIFF_VERSION,
  diffChange,
  planDiffOf,
  readAttribute,
  storedPlanDiffOf,
  type AttributeDiff,
  type StoredAttribute,
  type StoredPlanDiff,
  type StoredResourceDiff,
} from "./plan-diff.js";
