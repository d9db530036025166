// What every outbound delivery kept as a leased row shares (webhook deliveries, GitHub's
// deployment protection answers): the retry backoff, and how an attempt's outcome settles the row
// — delivered, queued again after the backoff, or failed for good — fenced, so a worker whose
// lease was taken over writes nothing.
import type { Database } from "../infra/db.js";

/** The wait before attempt `attempt + 1`: doubling from `baseMs`, at most an hour. */
export function backoffMs(attempt: number, baseMs: number): number {
  return Math.min(baseMs * 2 ** Math.max(attempt - 1, 0), 3_600_000);
}

/** One attempt's outcome. */
export interface DeliveryOutcome {
  ok: boolean;
  status: number | null;
  error: string | null;
  /** Retrying will not help (the address is refused, the secret cannot be opened). */
  permanent: boolean;
  /** Nothing was sent, by decision (the owner may not read it): closed `skipped`, never retried. */
  skipped?: boolean;
}

/** A row leased for an attempt: its fence guards every write of the outcome. */
export interface LeasedDelivery {
  id: string;
  fence: number;
  attempts: number;
}

/**
 * The tables whose rows are deliveries under a lease, each with `status`, `responseCode`,
 * `lastError`, `deliveredAt`, `nextRunAt`, `leaseOwner`, `leaseExpiresAt`, `fence`, `updatedAt`.
 */
export type LeasedDeliveryTable = "webhook_deliveries" | "github_protection_requests";

/** Settles a leased row with its attempt's outcome; past `maxAttempts`, or a permanent failure, it is failed; a skip is skipped. */
export async function settleDelivery(
  db: Database,
  table: LeasedDeliveryTable,
  job: LeasedDelivery,
  outcome: DeliveryOutcome,
  settings: { maxAttempts: number; retryBaseMs: number },
): Promise<void> {
  if (outcome.ok) {
    await db.sql.query(
      `UPDATE ${table} SET status = 'delivered', "responseCode" = $3, "lastError" = NULL, "deliveredAt" = now(),
              "leaseOwner" = NULL, "leaseExpiresAt" = NULL, "updatedAt" = now()
        WHERE id = $1 AND fence = $2`,
      [job.id, job.fence, outcome.status],
    );
    return;
  }
  const giveUp = outcome.skipped || outcome.permanent || job.attempts >= settings.maxAttempts;
  await db.sql.query(
    `UPDATE ${table} SET status = $3, "responseCode" = $4, "lastError" = $5,
            "nextRunAt" = now() + ($6::int * interval '1 millisecond'), "leaseOwner" = NULL, "leaseExpiresAt" = NULL, "updatedAt" = now()
      WHERE id = $1 AND fence = $2`,
    [job.id, job.fence, outcome.skipped ? "skipped" : giveUp ? "failed" : "queued", outcome.status, outcome.error, giveUp ? 0 : backoffMs(job.attempts, settings.retryBaseMs)],
  );
}
