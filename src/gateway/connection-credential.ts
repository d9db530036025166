import { seal, unseal } from "../domain/seal.js";

/**
 * A connection's upstream credential (the Authorization header value the gateway presents to the
 * upstream MCP server) is stored sealed under the approval secret, and never read back through
 * the API: only the gateway opens it, to call the upstream.
 */
const CONNECTION_CREDENTIAL_SEAL = "connection-credential-seal-v1";

export const sealConnectionCredential = (secret: string, credential: string): string => seal(CONNECTION_CREDENTIAL_SEAL, secret, credential);

/** The credential, or null when it was sealed under another secret (or altered): never a guess. */
export const openConnectionCredential = (secret: string, sealed: string): string | null => unseal(CONNECTION_CREDENTIAL_SEAL, secret, sealed);
