import { expiryText, noticeSupersedes } from '../../domain/notices.js';
import type { CardFact, StoredNotice } from '../../domain/notices.js';
import type { Queryable } from '../db/db.js';
import type { CardNoticeChange } from './types.js';

/**
 * The SQL of the card-expiring notices (migration 025): one row per space and customer, set
 * by the latest Stripe event that tells of the card (by `created`, then event id), so that a
 * redelivery or a late older event changes nothing.
 */

interface NoticeRow {
  expires: string | null;
  until_at: Date | null;
  event_id: string;
  event_created: Date;
}

function stored(row: NoticeRow | undefined): StoredNotice | null {
  if (row === undefined) return null;
  return {
    expires: row.expires,
    untilMs: row.until_at === null ? null : new Date(row.until_at).getTime(),
    eventId: row.event_id,
    eventCreatedMs: new Date(row.event_created).getTime(),
  };
}

/**
 * Applies a started (`expiring`) or ended card fact of the event `eventId`, created at
 * `created`, in one statement's transaction; an end with no notice kept writes nothing (no
 * row per customer that never had one).
 */
export async function recordCardFact(
  tx: Queryable,
  tenantId: number,
  fact: Extract<CardFact, { kind: 'expiring' | 'ended' }>,
  event: { eventId: string; created: Date },
  now: Date,
): Promise<CardNoticeChange> {
  const [row] = await tx.query<NoticeRow>(
    `SELECT expires, until_at, event_id, event_created FROM card_notices
     WHERE tenant_id = $1 AND processor_customer_id = $2 FOR UPDATE`,
    [tenantId, fact.customerId],
  );
  const before = stored(row);
  if (before !== null && before.eventId === event.eventId) return 'duplicate';
  if (!noticeSupersedes(before, event.created.getTime(), event.eventId)) return 'stale';
  if (fact.kind === 'ended' && before === null) return 'unchanged';
  const expires = fact.kind === 'expiring' ? expiryText(fact.expiry) : null;
  const until = fact.kind === 'expiring' ? new Date(fact.untilMs) : null;
  await tx.query(
    `INSERT INTO card_notices (tenant_id, processor_customer_id, expires, until_at, ended_by, event_id, event_created, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (tenant_id, processor_customer_id) DO UPDATE SET expires = EXCLUDED.expires, until_at = EXCLUDED.until_at,
       ended_by = EXCLUDED.ended_by, event_id = EXCLUDED.event_id, event_created = EXCLUDED.event_created, updated_at = EXCLUDED.updated_at`,
    [
      tenantId,
      fact.customerId,
      expires,
      until,
      fact.kind === 'ended' ? fact.why : null,
      event.eventId,
      event.created,
      now,
    ],
  );
  const same = before !== null && before.expires === expires && before.untilMs === (until?.getTime() ?? null);
  if (same) return 'unchanged';
  return fact.kind === 'expiring' ? 'started' : 'ended';
}
