// What can let a held tool call (or a plan) through without approval, as data: the product's
// list of hold-lifting changes. Each one needs (hold_authority, change) on its workspace, which is
// owner-only (src/domain/catalog/matrix.ts): a hold is lifted only by the authority that places
// holds. Each one made is recorded in hold_authority_changes and sent as the webhook event
// hold_authority.changed (docs/held-tool-calls.md, "Hold authority").
//
// Changes that only make the gate hold MORE (the tier turned on, a tool declared destructive, an
// override of `false` cleared) stay with the ordinary permissions.

/** One kind of change that can let a held call through, and the mutation that makes it. */
export interface HoldLiftingChange {
  readonly mutation: string;
  /** One line for docs and the record's readers. */
  readonly description: string;
}

export const HOLD_LIFTING_CHANGES = {
  "workspace.tier_off": {
    mutation: "updateWorkspace",
    description: "The production tier turned off (production true → false): destructive calls run unheld.",
  },
  "workspace.created_unheld": {
    mutation: "createWorkspace",
    description: "A workspace created with a prod environment and production: false.",
  },
  "workspace.environment_unheld": {
    mutation: "updateWorkspace",
    description: "A workspace's environment changed to prod while it stays production: false.",
  },
  "workspace.self_approval_allowed": {
    mutation: "updateWorkspace",
    description: "Self-approval allowed again (preventSelfApproval true → false): a plan's submitter's approval counts, so plans apply with fewer approvals from others.",
  },
  "tool_override.not_destructive": {
    mutation: "setToolAnnotationOverride",
    description: "A tool declared not destructive over its annotations (destructive: false).",
  },
  "tool_override.cleared": {
    mutation: "clearToolAnnotationOverride",
    description: "An override that declared a tool destructive cleared: the upstream's annotations decide again.",
  },
  "gateway_policy.saved": {
    mutation: "saveGatewayPolicySet",
    description: "A new version of the gate's Cedar policy set (it may drop the needs-approval forbid).",
  },
  "approval_policy.disabled": {
    mutation: "updateApprovalPolicy",
    description: "An approval policy disabled.",
  },
  "approval_policy.deleted": {
    mutation: "deleteApprovalPolicy",
    description: "An approval policy deleted.",
  },
  "connection.url_changed": {
    mutation: "updateToolConnection",
    description: "A connection's upstream URL changed: its tools run elsewhere (the stored credential is cleared unless the same call sets one).",
  },
  "connection.provider_changed": {
    mutation: "updateToolConnection",
    description: "A connection's provider changed.",
  },
  "connection.renamed": {
    mutation: "updateToolConnection",
    description: "A connection renamed: the logical tool names `<connection>.<tool>` it serves move with it.",
  },
} as const satisfies Record<string, HoldLiftingChange>;

export type HoldLiftingKind = keyof typeof HOLD_LIFTING_CHANGES;
export const HOLD_LIFTING_KINDS = Object.freeze(Object.keys(HOLD_LIFTING_CHANGES) as HoldLiftingKind[]);

/**
 * Whether an environment's name says production: `prod` or `production`, in any case — the
 * spelling the tier's backfill migration (20261203061250) read. A workspace with such an
 * environment is production unless an owner says otherwise.
 */
export function isProductionEnvironment(environment: string): boolean {
  const e = environment.toLowerCase();
  return e === "prod" || e === "production";
}

/** The host (with port) of an upstream URL, for the record; never the path, query or a secret. */
export function urlHost(url: string | null): string | null {
  if (url === null) return null;
  try {
    return new URL(url).host;
  } catch {
    return null;
  }
}
