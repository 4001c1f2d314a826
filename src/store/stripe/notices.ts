import { expiryText, noticeSupersedes } from '../../domain/notices.js';
import type { CardFact, StoredNotice } from '../../domain/notices.js';
import type { Queryable } from '../db/db.js';
import { cardLink, spaceLinkBase } from '../links/tokens.js';
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
  if (!noticeSupersedes(before, event.created.getTime(), fact.kind === 'ended')) return 'stale';
  if (fact.kind === 'ended' && before === null) return 'unchanged';
  const expires = fact.kind === 'expiring' ? expiryText(fact.expiry) : null;
  const until = fact.kind === 'expiring' ? new Date(fact.untilMs) : null;
  // The card link the notice carries when the space's links go through Dunwall (docs/links.md).
  const base = fact.kind === 'expiring' ? await spaceLinkBase(tx, tenantId) : null;
  const cardUrl = base === null ? null : await cardLink(tx, tenantId, fact.customerId, base, now);
  await tx.query(
    `INSERT INTO card_notices (tenant_id, processor_customer_id, expires, until_at, ended_by, event_id, event_created, updated_at, card_url)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (tenant_id, processor_customer_id) DO UPDATE SET expires = EXCLUDED.expires, until_at = EXCLUDED.until_at,
       card_url = EXCLUDED.card_url, ended_by = EXCLUDED.ended_by, event_id = EXCLUDED.event_id, event_created = EXCLUDED.event_created, updated_at = EXCLUDED.updated_at`,
    [
      tenantId,
      fact.customerId,
      expires,
      until,
      fact.kind === 'ended' ? fact.why : null,
      event.eventId,
      event.created,
      now,
      cardUrl,
    ],
  );
  const same = before !== null && before.expires === expires && before.untilMs === (until?.getTime() ?? null);
  if (same) return 'unchanged';
  return fact.kind === 'expiring' ? 'started' : 'ended';
}

/**
 * Gives the space's holding notices (all, or those of `customerIds`) the card link the space's
 * links are made with now: a new one when the key or the public address changed or the link is
 * close to its end, none when the space has no key any more. Returns how many changed.
 */
export async function relinkNotices(
  tx: Queryable,
  spaceId: number,
  now: Date,
  customerIds: readonly string[] | null = null,
): Promise<number> {
  const notices = await tx.query<{ processor_customer_id: string; card_url: string | null }>(
    `SELECT processor_customer_id, card_url FROM card_notices
     WHERE tenant_id = $1 AND expires IS NOT NULL AND ($2::text[] IS NULL OR processor_customer_id = ANY($2::text[]))
     ORDER BY processor_customer_id FOR UPDATE`,
    [spaceId, customerIds],
  );
  if (notices.length === 0) return 0;
  const base = await spaceLinkBase(tx, spaceId);
  let changed = 0;
  for (const n of notices) {
    const cardUrl = base === null ? null : await cardLink(tx, spaceId, n.processor_customer_id, base, now);
    if (cardUrl === n.card_url) continue;
    await tx.query('UPDATE card_notices SET card_url = $3 WHERE tenant_id = $1 AND processor_customer_id = $2', [
      spaceId,
      n.processor_customer_id,
      cardUrl,
    ]);
    changed += 1;
  }
  return changed;
}
