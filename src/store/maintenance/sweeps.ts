import type { Queryable } from '../db/db.js';

/**
 * Starts the policy clock's sweep of each space that `spaces` selects (SQL returning one
 * `tenant_id` column, with `now` as `$1` and the caller's parameters after it) from its first
 * subscriber, or starts it again: its next pass answers every subscriber of those spaces anew,
 * as after a policy change, a Stripe API key set or removed, or a new public address.
 */
export function sweepSpacesAgain(
  tx: Queryable,
  spaces: string,
  now: Date,
  params: readonly unknown[] = [],
): Promise<unknown> {
  return tx.query(
    `INSERT INTO policy_sweeps (tenant_id, after, started_at)
     SELECT s.tenant_id, '', $1 FROM (${spaces}) AS s
     ON CONFLICT (tenant_id) DO UPDATE SET after = '', started_at = EXCLUDED.started_at`,
    [now, ...params],
  );
}
