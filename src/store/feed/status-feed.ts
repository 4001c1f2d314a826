import { snapshotAhead } from '../../domain/feed-cursor.js';
import type { FeedCursor, ListCursor } from '../../domain/feed-cursor.js';
import type { SubscriberStatus } from '../../domain/types.js';
import type { Db } from '../db/db.js';
import { CursorNotIssuedError, readingCursor } from '../db/errors.js';
import { forgetForeignRows } from '../changes/lookup-changes.js';
import type { StatusChanges, StatusEntry, StatusFeed, StatusListPage } from './types.js';

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
 * Each read is one statement: one statement sees one snapshot, the one
 * `pg_current_snapshot()` names inside it, so the rows and the position handed out agree
 * without a transaction around them, in one round trip (a wait woken by a change reads
 * here; its delay is the feed's). These read the primary (the store), like the read
 * model's catch-ups.
 */

interface EntryRow {
  processor_customer_id: string;
  status: SubscriberStatus;
  lockout_s: string | null;
  pay_url: string | null;
}

type Nullable<T> = { [K in keyof T]: T[K] | null };

/** `lockout_at` as the lookup holds it: epoch seconds, rounded up. */
const ENTRY_COLUMNS =
  'processor_customer_id, status, ceil(extract(epoch FROM lockout_at))::bigint::text AS lockout_s, pay_url';

function toEntry(row: EntryRow): StatusEntry {
  return {
    customerId: row.processor_customer_id,
    status: row.status,
    // The lookup's rules: a scheduled lockout only while warning, a pay link only while not active.
    lockoutAtS: row.status === 'warning' && row.lockout_s !== null ? Number(row.lockout_s) : null,
    payUrl: row.status === 'active' ? null : row.pay_url,
  };
}

/** The snapshot of the statement, and its rows (none: one row of nulls beside it). */
const LIST_SQL = `SELECT h.position, s.* FROM (SELECT pg_current_snapshot()::text AS position) h
  LEFT JOIN LATERAL (
    SELECT ${ENTRY_COLUMNS} FROM subscribers
    WHERE tenant_id = $1 AND status <> 'active' AND processor_customer_id > $2
    ORDER BY processor_customer_id LIMIT $3
  ) s ON true
  ORDER BY s.processor_customer_id`;

/**
 * A page of the tenant's subscribers answered other than `active`, in customer id order
 * (the partial index subscribers_answered_not_active). The first page's snapshot is where
 * the feed continues; later pages carry it on. Later pages read the rows as they are then:
 * a change made meanwhile may show in them already, and comes in the feed too, so a reader
 * that applies the list then every change, in order, ends where the service is.
 */
export async function listStatuses(
  db: Db,
  tenantId: number,
  cursor: ListCursor | null,
  limit: number,
): Promise<StatusListPage> {
  const rows = await db.query<{ position: string } & Nullable<EntryRow>>(LIST_SQL, [
    tenantId,
    cursor?.after ?? '',
    limit + 1,
  ]);
  const head = rows[0];
  if (!head) throw new Error('no snapshot');
  // A list cursor's position ahead of the database's: never handed out here.
  if (cursor !== null && snapshotAhead(cursor.feed, head.position)) throw new CursorNotIssuedError();
  const feed = cursor?.feed ?? head.position;
  const found = rows.filter((r): r is { position: string } & EntryRow => r.processor_customer_id !== null);
  const entries = found.slice(0, limit).map(toEntry);
  const last = entries.at(-1);
  return {
    entries,
    next: found.length > limit && last !== undefined ? { feed, after: last.customerId } : null,
    feedCursor: { since: feed, within: null },
  };
}

/**
 * The changes of up to two sets, in one statement: set 1, the rest of the set a page ended
 * inside ($3 upto, after $4; only when the cursor says so); set 2, what the position (upto
 * when there is one, else $2 since) had not seen and this statement's snapshot sees. Each
 * set is the changes of transactions its `since` had not seen and its `upto` had, in `seq`
 * order; at most $5 in all, set 1 first. Nothing is read when the cursor expired (pruning
 * deleted changes it had not seen: the horizon reaches its xmin), nor when it is ahead: it
 * names transactions this database has not begun, a cursor it never handed out (refused
 * 400 `invalid_cursor`; a client lists again, as after a restore).
 *
 * The horizon is read as the one row it is (`LIMIT 1`): a table that small is never analyzed,
 * and PostgreSQL then guesses 2,200 rows for it, which multiplied by a page of 1,000 put this
 * statement's cost at about 740,000, past `jit_above_cost` (100,000) and the inlining and
 * optimizing thresholds (500,000). Every read of the feed was then compiled by the JIT, 0.5 to
 * 1 s of LLVM work before a row was read, on every instance of a database not yet analyzed:
 * that was the delay of a change reaching `@dunwall/node`. Planned as one row, it costs under
 * 20 on a fresh database and about 6,000 over a million changes.
 */
export const STATUS_CHANGES_SQL = `WITH head AS (
    SELECT pg_current_snapshot() AS now,
      h.pruned_through >= pg_snapshot_xmin($2::pg_snapshot) AS expired,
      pg_snapshot_xmax($2::pg_snapshot) > pg_snapshot_xmax(pg_current_snapshot())
        OR pg_snapshot_xmax(COALESCE($3::pg_snapshot, $2::pg_snapshot)) > pg_snapshot_xmax(pg_current_snapshot()) AS ahead
    FROM (SELECT pruned_through FROM status_changes_horizon LIMIT 1) h
  ), sets AS (
    SELECT 1 AS n, $2::pg_snapshot AS since, $3::pg_snapshot AS upto, $4::bigint AS after FROM head
    WHERE $3::pg_snapshot IS NOT NULL AND NOT head.expired AND NOT head.ahead
    UNION ALL
    SELECT 2, COALESCE($3::pg_snapshot, $2::pg_snapshot), head.now, 0 FROM head WHERE NOT head.expired AND NOT head.ahead
  )
  SELECT head.now::text AS now, head.expired, head.ahead, c.n, c.seq::text AS seq, c.processor_customer_id, c.status, c.lockout_s, c.pay_url, c.occurred_at
  FROM head LEFT JOIN LATERAL (
    SELECT s.n, x.* FROM sets s CROSS JOIN LATERAL (
      SELECT seq, ${ENTRY_COLUMNS}, occurred_at FROM status_changes
      WHERE tenant_id = $1
        AND xid >= pg_snapshot_xmin(s.since) AND xid < pg_snapshot_xmax(s.upto)
        AND NOT pg_visible_in_snapshot(xid, s.since) AND pg_visible_in_snapshot(xid, s.upto)
        AND seq > s.after
      ORDER BY seq LIMIT $5
    ) x
    ORDER BY s.n, x.seq LIMIT $5
  ) c ON true
  ORDER BY c.n, c.seq`;

interface ChangeRow extends EntryRow {
  n: 1 | 2;
  seq: string;
  occurred_at: Date;
}

type ChangesRow = { now: string; expired: boolean; ahead: boolean } & Nullable<ChangeRow>;

/**
 * What came after `cursor`: first the rest of the set a page ended inside (when the cursor
 * says so), then what the cursor's position had not seen and the current snapshot sees. A
 * page that fills up inside a set ends with a cursor into that set, so the next read takes
 * the same set on from there; one that does not ends at the current snapshot. `expired`
 * when the changes after the cursor may be gone: the reader lists again.
 */
export async function statusChangesAfter(
  db: Db,
  tenantId: number,
  cursor: FeedCursor,
  limit: number,
): Promise<StatusChanges> {
  const rows = await readingCursor(() =>
    db.query<ChangesRow>(STATUS_CHANGES_SQL, [
      tenantId,
      cursor.since,
      cursor.within?.upto ?? null,
      cursor.within?.afterSeq ?? null,
      limit + 1,
    ]),
  );
  const head = rows[0];
  if (!head) throw new Error('status_changes_horizon is empty');
  // Transaction ids this database has not begun: a cursor it never handed out.
  if (head.ahead) throw new CursorNotIssuedError();
  if (head.expired) return { expired: true };
  const sets = {
    1: { since: cursor.since, upto: cursor.within?.upto ?? head.now },
    2: { since: cursor.within?.upto ?? cursor.since, upto: head.now },
  };
  const found = rows.filter((r): r is ChangesRow & ChangeRow => r.seq !== null);
  const changes = found.slice(0, limit).map((r) => ({
    ...toEntry(r),
    occurredAt: new Date(r.occurred_at),
    cursor: { since: sets[r.n].since, within: { upto: sets[r.n].upto, afterSeq: r.seq } },
  }));
  const last = found[limit - 1];
  const following = found[limit];
  if (last === undefined || following === undefined)
    return { expired: false, changes, next: { since: head.now, within: null } };
  // Full: inside the last change's set, the next read takes that set on after it; at a set's
  // very end, it starts the next set.
  return {
    expired: false,
    changes,
    next:
      following.n === last.n
        ? { since: sets[last.n].since, within: { upto: sets[last.n].upto, afterSeq: last.seq } }
        : { since: sets[following.n].since, within: null },
  };
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
 * The feed's foreign rows (`forgetForeignRows`): left, they would never be read, then be read
 * as new once this database's ids caught up. Cursors of the old database whose ids are ahead
 * of this one's are refused as expired.
 */
export function forgetForeignStatusChanges(db: Db): Promise<number> {
  return forgetForeignRows(db, 'status_changes');
}

/** The status feed in SQL. */
export class SqlStatusFeed implements StatusFeed {
  constructor(private readonly db: Db) {}

  listStatuses(tenantId: number, cursor: ListCursor | null, limit: number): Promise<StatusListPage> {
    return listStatuses(this.db, tenantId, cursor, limit);
  }

  statusChangesAfter(tenantId: number, cursor: FeedCursor, limit: number): Promise<StatusChanges> {
    return statusChangesAfter(this.db, tenantId, cursor, limit);
  }
}
