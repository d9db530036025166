import { execute } from "graphql";
import type { Plugin } from "graphql-yoga";

/**
 * Queries and mutations run on graphql-js's own `execute`, not graphql-yoga's default
 * (@graphql-tools/executor's, which adds incremental delivery, `@defer` and `@stream`: the schema
 * declares neither directive). On the same schema and answer, graphql-js completes the dashboard's
 * workspace list (3,800 fields) in about three quarters of the time, and coerces a check batch's
 * variables once where the other also snapshots them (bench/http.ts; docs/benchmarks.md).
 * Subscriptions keep yoga's executor, which holds their event streams.
 */
export function useGraphqlJsExecute(): Plugin {
  return {
    onExecute({ setExecuteFn }) {
      setExecuteFn(execute);
    },
  };
}
