import { STRIPE_INTAKE_KINDS } from '../../domain/stripe/intake.js';
import type { StripeIntakeCount, StripeIntakeKind } from '../../domain/stripe/intake.js';
import type { Queryable } from '../db/db.js';
import type { StripeIntakeDay, StripeIntakeSummary } from './types.js';

/**
 * The SQL of the Stripe intake counters (migration 016). Each process counts in memory and
 * adds its counts here in one statement per flush; several processes add to the same rows.
 */

/** Retention: at most $2 rows of the days before the UTC day of $1, oldest first. */
export const PRUNE_STRIPE_INTAKE_SQL = `WITH doomed AS (
    SELECT tenant_id, day, kind FROM stripe_intake WHERE day < ($1::timestamptz AT TIME ZONE 'UTC')::date ORDER BY day LIMIT $2)
  DELETE FROM stripe_intake s USING doomed d WHERE s.tenant_id = d.tenant_id AND s.day = d.day AND s.kind = d.kind RETURNING 1 AS n`;

const byKey = (a: StripeIntakeCount, b: StripeIntakeCount): number =>
  a.tenantId - b.tenantId ||
  (a.day < b.day ? -1 : a.day > b.day ? 1 : 0) ||
  (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0);

/**
 * One upsert for every (tenant, day, kind) given. The rows are taken in key order, so that
 * two processes flushing at once lock the rows they share in the same order (no deadlock).
 * A tenant deleted since it was counted is left out by the join rather than failing the batch.
 */
export async function addStripeIntake(q: Queryable, counts: readonly StripeIntakeCount[]): Promise<void> {
  if (counts.length === 0) return;
  const rows = [...counts].sort(byKey);
  await q.query(
    `INSERT INTO stripe_intake (tenant_id, day, kind, count, last_at)
     SELECT u.tenant_id, u.day, u.kind, u.count, u.last_at
     FROM unnest($1::int[], $2::date[], $3::text[], $4::bigint[], $5::timestamptz[]) AS u (tenant_id, day, kind, count, last_at)
     JOIN tenants t ON t.id = u.tenant_id
     ORDER BY u.tenant_id, u.day, u.kind
     ON CONFLICT (tenant_id, day, kind) DO UPDATE SET
       count = stripe_intake.count + EXCLUDED.count,
       last_at = GREATEST(stripe_intake.last_at, EXCLUDED.last_at)`,
    [
      rows.map((r) => r.tenantId),
      rows.map((r) => r.day),
      rows.map((r) => r.kind),
      rows.map((r) => r.count),
      rows.map((r) => r.lastAt),
    ],
  );
}

const zeroCounts = (): Record<StripeIntakeKind, number> =>
  Object.fromEntries(STRIPE_INTAKE_KINDS.map((k) => [k, 0])) as Record<StripeIntakeKind, number>;

/**
 * The tenant's days from `since` on, and the latest of each kind among all its rows kept
 * (at most four a day for the retention's days): both through the primary key.
 */
export async function readStripeIntake(q: Queryable, tenantId: number, since: Date): Promise<StripeIntakeSummary> {
  const rows = await q.query<{ day: string; kind: StripeIntakeKind; count: string }>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day, kind, count::text AS count FROM stripe_intake
     WHERE tenant_id = $1 AND day >= ($2::timestamptz AT TIME ZONE 'UTC')::date ORDER BY day, kind`,
    [tenantId, since],
  );
  const days: StripeIntakeDay[] = [];
  for (const r of rows) {
    let last = days.at(-1);
    if (last === undefined || last.day !== r.day) {
      last = { day: r.day, counts: zeroCounts() };
      days.push(last);
    }
    last.counts[r.kind] += Number(r.count);
  }
  const latest = await q.query<{ kind: StripeIntakeKind; last_at: Date | string }>(
    'SELECT kind, max(last_at) AS last_at FROM stripe_intake WHERE tenant_id = $1 GROUP BY kind',
    [tenantId],
  );
  const lastAt = Object.fromEntries(STRIPE_INTAKE_KINDS.map((k) => [k, null])) as Record<StripeIntakeKind, Date | null>;
  for (const r of latest) lastAt[r.kind] = new Date(r.last_at);
  return { days, lastAt };
}
