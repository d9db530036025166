import { createCedarGate, DEFAULT_GATEWAY_POLICIES, type CedarGate } from "./cedar-gate.js";
import type { GatewayKey, GatewayStore } from "./store.js";

/**
 * Which Cedar gate decides a workspace's calls: the workspace's newest saved policy set, or the
 * built-in default when it has none (docs/held-tool-calls.md, "Policy sets per workspace").
 *
 * Fail closed: a set that cannot be read (the database is down) or parsed (it was stored by
 * hand, or a Cedar upgrade refuses it) denies the call. Never an allow, and never the default
 * set once a version exists: the default would quietly undo whatever the owner saved.
 *
 * Parsed gates are cached per workspace under the version they were parsed from. The key lookup
 * reads the workspace's newest version number in the same statement as the key
 * (`policyVersion`), so a set saved by any process takes effect on the next call without an
 * invalidation message; the text is read again only when that number moved.
 */
export type GateChoice =
  | { ok: true; gate: CedarGate; version: number }
  | { ok: false; reason: "policy_set_unavailable" | "policy_set_invalid"; version: number | null };

export type GateSource = { gateFor(key: GatewayKey): Promise<GateChoice> };

/** One gate for every workspace, ignoring saved sets (an embedder with its own policy source). */
export function fixedGate(gate: CedarGate): GateSource {
  const choice: GateChoice = { ok: true, gate, version: 0 };
  return { gateFor: async () => choice };
}

type Logger = { warn(obj: object, msg?: string): void };

export function workspaceGates(
  store: Pick<GatewayStore, "loadPolicySet">,
  options: { defaultPolicies?: string; maxWorkspaces?: number; logger?: Logger } = {},
): GateSource {
  const load = store.loadPolicySet?.bind(store);
  if (!load) throw new Error("workspaceGates needs a store with loadPolicySet (or pass the gateway a fixed gate)");
  const defaultChoice: GateChoice = { ok: true, gate: createCedarGate(options.defaultPolicies ?? DEFAULT_GATEWAY_POLICIES), version: 0 };
  const max = options.maxWorkspaces ?? 1_000;
  const cache = new Map<string, GateChoice & { version: number }>();

  function remember(workspaceId: string, choice: GateChoice & { version: number }): GateChoice {
    cache.delete(workspaceId); // re-inserted last: the Map's order is least recently parsed first
    cache.set(workspaceId, choice);
    if (cache.size > max) cache.delete(cache.keys().next().value!);
    return choice;
  }

  return {
    async gateFor(key) {
      const workspaceId = key.workspaceId;
      const known = key.workspace.policyVersion;
      if (known === 0) return defaultChoice;
      const cached = cache.get(workspaceId);
      if (cached && known !== undefined && cached.version === known) return cached;

      let set;
      try {
        set = await load(workspaceId);
      } catch (error) {
        options.logger?.warn({ workspaceId, err: String(error) }, "gate policy set unreadable: the call is denied");
        return { ok: false, reason: "policy_set_unavailable", version: known ?? null };
      }
      // No version: the default set, unless the key's read saw one (versions are never deleted).
      if (!set) return known === undefined ? defaultChoice : { ok: false, reason: "policy_set_unavailable", version: known };
      if (known !== undefined && set.version < known) return { ok: false, reason: "policy_set_unavailable", version: known };
      if (cached && cached.version === set.version) return cached;
      try {
        return remember(workspaceId, { ok: true, gate: createCedarGate(set.policies), version: set.version });
      } catch (error) {
        options.logger?.warn({ workspaceId, version: set.version, err: String(error) }, "gate policy set does not parse: every call is denied");
        return remember(workspaceId, { ok: false, reason: "policy_set_invalid", version: set.version });
      }
    },
  };
}
