import type { FeedCursor, ListCursor, SnapshotText } from '../domain/feed-cursor.js';
import type { SubscriberStatus } from '../domain/types.js';
import type { Db, Queryable } from './db.js';
import { atOneSnapshot } from './lookup-changes.js';
import type { StatusChange, StatusChanges, StatusEntry, StatusListPage } from './store.js';

/**
 * The status feed's reads (migration 014, docs/feed.md): list a tenant's subscribers
 * answered other than `active`, then follow their changes from the list's position, as a
 * Kubernetes informer lists then watches.
 *
 * Positions are snapshots, never "the last seq seen": a change's row is written before its
 * transaction commits, and transactions commit in any order, so a row with a lower `seq`
 * may become visible after one with a higher. A reader at snapshot S next reads the rows S
 * had not seen and the current snapshot sees; ordered by `seq` among themselves, which for
 * one subscriber is the order its changes committed in.
 *
 * These read the primary (the store), like the read model's catch-ups.
 */

interface EntryRow {
  processor_customer_id: string;
  status: SubscriberStatus;
  lockout_s: string | null;
  pay_url: string | null;
}

interface ChangeRow extends EntryRow {
  seq: string;
  occurred_at: Date;
}

/** `lockout_at` as the lookup holds it: epoch seconds, rounded up. */
const ENTRY_COLUMNS = 'processor_customer_id, status, ceil(extract(epoch FROM lockout_at))::bigint::text AS lockout_s, pay_url';

/** Sequence values start at 1: "after 0" is the start of a set. */
const BEFORE_ANY_SEQ = '0';

function toEntry(row: EntryRow): StatusEntry {
  return {
    customerId: row.processor_customer_id,
    status: row.status,
    // The lookup's rules: a scheduled lockout only while warning, a pay link only while not active.
    lockoutAtS: row.status === 'warning' && row.lockout_s !== null ? Number(row.lockout_s) : null,
    payUrl: row.status === 'active' ? null : row.pay_url,
  };
}

/**
 * A page of the tenant's subscribers answered other than `active`, in customer id order
 * (the partial index subscribers_answered_not_active). The first page takes its snapshot's
 * position as where the feed continues; later pages carry it on. Later pages read the rows
 * as they are then: a change made meanwhile may show in them already, and comes in the feed
 * too, so a reader that applies the list then every change, in order, ends where the
 * service is.
 */
export async function listStatuses(db: Db, tenantId: number, cursor: ListCursor | null, limit: number): Promise<StatusListPage> {
  const page = async (q: Queryable, feed: SnapshotText, after: string): Promise<StatusListPage> => {
    const rows = await q.query<EntryRow>(
      `SELECT ${ENTRY_COLUMNS} FROM subscribers
       WHERE tenant_id = $1 AND status <> 'active' AND processor_customer_id > $2
       ORDER BY processor_customer_id LIMIT $3`,
      [tenantId, after, limit + 1],
    );
    const entries = rows.slice(0, limit).map(toEntry);
    const last = entries.at(-1);
    return {
      entries,
      next: rows.length > limit && last !== undefined ? { feed, after: last.customerId } : null,
      feedCursor: { since: feed, within: null },
    };
  };
  if (cursor !== null) return page(db, cursor.feed, cursor.after);
  // The first page and its position: one snapshot.
  return atOneSnapshot(db, async (tx) => {
    const [row] = await tx.query<{ position: string }>('SELECT pg_current_snapshot()::text AS position');
    if (!row) throw new Error('no snapshot');
    return page(tx, row.position, '');
  });
}

/**
 * The tenant's changes written by transactions `since` had not seen and `upto` had, after
 * `afterSeq`, in `seq` order: at most `limit`. `upto` is a snapshot this transaction's own
 * includes (the current one, or an older one), so its set never grows once read.
 */
async function changesBetween(tx: Queryable, tenantId: number, since: SnapshotText, upto: SnapshotText, afterSeq: string, limit: number): Promise<ChangeRow[]> {
  return tx.query<ChangeRow>(
    `SELECT seq::text AS seq, ${ENTRY_COLUMNS}, occurred_at FROM status_changes
     WHERE tenant_id = $1
       AND xid >= pg_snapshot_xmin($2::pg_snapshot) AND xid < pg_snapshot_xmax($3::pg_snapshot)
       AND NOT pg_visible_in_snapshot(xid, $2::pg_snapshot) AND pg_visible_in_snapshot(xid, $3::pg_snapshot)
       AND seq > $4::bigint
     ORDER BY seq LIMIT $5`,
    [tenantId, since, upto, afterSeq, limit],
  );
}

/**
 * What came after `cursor`, in one snapshot: first the rest of the set a page ended inside
 * (when the cursor says so), then what the cursor's position had not seen and this snapshot
 * sees. A page that fills up inside a set ends with a cursor into that set, so the next read
 * takes the same set on from there; one that does not ends at this snapshot.
 *
 * `expired`: pruning deleted changes the cursor had not seen (its horizon reaches the
 * cursor's xmin), or the cursor names transactions this database has not begun (a cursor of
 * another database, as after a restore): the reader lists again.
 */
export async function statusChangesAfter(db: Db, tenantId: number, cursor: FeedCursor, limit: number): Promise<StatusChanges> {
  return atOneSnapshot(db, async (tx) => {
    const [head] = await tx.query<{ now: string; expired: boolean }>(
      `SELECT pg_current_snapshot()::text AS now,
         h.pruned_through >= pg_snapshot_xmin($1::pg_snapshot)
           OR pg_snapshot_xmax($1::pg_snapshot) > pg_snapshot_xmax(pg_current_snapshot())
           OR pg_snapshot_xmax($2::pg_snapshot) > pg_snapshot_xmax(pg_current_snapshot()) AS expired
       FROM status_changes_horizon h`,
      [cursor.since, cursor.within?.upto ?? cursor.since],
    );
    if (!head) throw new Error('status_changes_horizon is empty');
    if (head.expired) return { expired: true };
    const changes: StatusChange[] = [];
    // The rest of the set a page ended inside, if any, then what the position had not seen and this snapshot sees.
    const sets = cursor.within === null ? [] : [{ since: cursor.since, upto: cursor.within.upto, afterSeq: cursor.within.afterSeq }];
    sets.push({ since: cursor.within?.upto ?? cursor.since, upto: head.now, afterSeq: BEFORE_ANY_SEQ });
    for (const set of sets) {
      const room = limit - changes.length;
      if (room === 0) return { expired: false, changes, next: { since: set.since, within: null } };
      const rows = await changesBetween(tx, tenantId, set.since, set.upto, set.afterSeq, room + 1);
      for (const row of rows.slice(0, room)) {
        changes.push({ ...toEntry(row), occurredAt: new Date(row.occurred_at), cursor: { since: set.since, within: { upto: set.upto, afterSeq: row.seq } } });
      }
      const last = rows[room - 1];
      // Full inside this set: the next read takes the same set on after the last change given.
      if (rows.length > room && last !== undefined) return { expired: false, changes, next: { since: set.since, within: { upto: set.upto, afterSeq: last.seq } } };
    }
    return { expired: false, changes, next: { since: head.now, within: null } };
  });
}

/**
 * Retention's batch (`pruneOld`): at most $2 changes that happened before $1, of
 * transactions every snapshot now sees, deleted oldest first; the highest transaction id
 * deleted becomes the horizon, so that a cursor that had not seen it answers 410.
 */
export const PRUNE_STATUS_CHANGES_SQL = `WITH doomed AS (
    SELECT seq FROM status_changes
    WHERE occurred_at < $1 AND xid < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY occurred_at LIMIT $2
  ), gone AS (
    DELETE FROM status_changes c USING doomed d WHERE c.seq = d.seq RETURNING c.xid
  ), horizon AS (
    UPDATE status_changes_horizon SET pruned_through = GREATEST(pruned_through, (SELECT max(xid) FROM gone))
    WHERE EXISTS (SELECT 1 FROM gone)
  )
  SELECT 1 AS n FROM gone`;

/**
 * Forgets feed rows and a horizon no transaction of this database can have written (ids at
 * or past the next one), as `forgetForeignLookupChanges` does for the change log: what a
 * dump restored into another cluster brings along; left, they would never be read, then be
 * read as new once this database's ids caught up. Cursors of the old database whose ids are
 * ahead of this one's are refused as expired.
 */
export async function forgetForeignStatusChanges(db: Db): Promise<number> {
  return db.transaction(async (tx) => {
    const [row] = await tx.query<{ n: string }>(
      `WITH next AS (SELECT pg_snapshot_xmax(pg_current_snapshot()) AS xid),
       gone AS (DELETE FROM status_changes WHERE xid >= (SELECT xid FROM next) RETURNING 1),
       horizon AS (UPDATE status_changes_horizon SET pruned_through = '0' WHERE pruned_through >= (SELECT xid FROM next))
       SELECT count(*) AS n FROM gone`,
    );
    return Number(row?.n ?? 0);
  });
}
