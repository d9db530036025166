import type { SharedLimits } from "./shared-limits.js";

/**
 * Shared limits that say when one of their buckets refuses a take, by the bucket's name
 * ("graphql", "gateway", "integration", "personal-org", …): every limit made from them is counted
 * on /metrics (countersign_limit_refusals_total), the ones added later included.
 */
export interface CountedLimits extends SharedLimits {
  onRefused(listener: (bucket: string) => void): void;
}

export function countRefusals(limits: SharedLimits): CountedLimits {
  const listeners: Array<(bucket: string) => void> = [];
  return {
    get kind() {
      return limits.kind;
    },
    buckets(name, rps, burst) {
      const buckets = limits.buckets(name, rps, burst);
      return {
        enabled: buckets.enabled,
        async take(key) {
          const taken = await buckets.take(key);
          if (!taken.ok) for (const listener of listeners) listener(name);
          return taken;
        },
      };
    },
    openOperations: (name, cap) => limits.openOperations(name, cap),
    close: () => limits.close(),
    onRefused(listener) {
      listeners.push(listener);
    },
  };
}
