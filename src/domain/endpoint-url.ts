import { hostProblem, type OutboundPolicy } from "./address-policy.js";

/**
 * The URL of an endpoint Countersign calls out to (a webhook receiver, a connection's upstream
 * MCP server): absolute http(s), a host, no credentials in it (they would be readable wherever
 * the URL is shown), no fragment, and a host the outbound address policy allows as written (an
 * IP address in any spelling the URL parser accepts, `localhost`). What a name resolves to is
 * checked again on every connection (src/gateway/outbound.ts): DNS can change after the save.
 */
export const MAX_ENDPOINT_URL_LENGTH = 2048;

/** Why the URL is refused, or null. `credentialHint` says where a credential goes instead. */
export function endpointUrlProblem(raw: string, credentialHint: string, policy: OutboundPolicy): string | null {
  if (raw.length > MAX_ENDPOINT_URL_LENGTH) return `must be at most ${MAX_ENDPOINT_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "is not an absolute URL";
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return "must be http or https";
  if (url.username || url.password) return `must not carry credentials (${credentialHint})`;
  if (!url.hostname) return "has no host";
  if (url.hash) return "must not have a fragment";
  return hostProblem(url.hostname, policy);
}
