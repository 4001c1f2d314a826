import { STATUSES } from '../../domain/types.js';
import type { SubscriberStatus, TenantAuth } from '../../domain/types.js';
import type { SecretBox } from '../../secrets/cipher.js';
import { tryDeploymentLock, type Db, type Queryable } from '../db/db.js';
import { readTenantsChecked } from '../tenants/rows.js';
import type { ChangePosition, LookupChanges, LookupStateSink, SubscriberExtra, UnreadableTenant } from './types.js';

/** The notices that hold (migration 025), for a snapshot load. */
const HOLDING_NOTICES_ROWS = `SELECT tenant_id, processor_customer_id, expires, floor(extract(epoch FROM until_at))::bigint::text AS until_s, card_url
  FROM card_notices WHERE expires IS NOT NULL`;

/** Only one instance prunes at a time; any constant unique to Dunwall ("dunp"). */
const PRUNE_LOCK_KEY = 0x64756e70;

/** The answered status, and what a non-active answer carries: its scheduled lockout (epoch seconds), pay link and card link. */
const SUBSCRIBERS = `SELECT tenant_id, processor_customer_id, status, ceil(extract(epoch FROM lockout_at))::bigint, pay_url, card_url FROM subscribers`;
const TAB = 9;
const NEWLINE = 10;
const BACKSLASH = 92;
/** Each status starts with a byte of its own: the first byte of the COPY field tells which. */
const STATUS_BY_FIRST_BYTE: Readonly<Record<number, SubscriberStatus>> = Object.fromEntries(
  STATUSES.map((s) => [s.charCodeAt(0), s]),
);
if (Object.keys(STATUS_BY_FIRST_BYTE).length !== STATUSES.length)
  throw new Error('two statuses start with the same byte');

/** A COPY text field (`bytes[start..end)`) that is `\N`: SQL NULL. */
function isNull(rows: Buffer, start: number, end: number): boolean {
  return end - start === 2 && rows[start] === BACKSLASH && rows[start + 1] === 78;
}

/**
 * The optional fields after the status: `<lockout epoch>\t<pay url>\t<card url>`, each `\N`
 * when NULL. Links are stored only without backslashes, tabs or newlines (`hostedInvoiceUrl`,
 * Dunwall's own links), so their COPY text is the URL itself.
 */
function parseExtra(rows: Buffer, start: number, lineEnd: number): SubscriberExtra | null {
  if (start >= lineEnd) return null;
  let tab = rows.indexOf(TAB, start);
  if (tab < 0 || tab > lineEnd) tab = lineEnd;
  let lockoutAtS: number | null = null;
  if (!isNull(rows, start, tab)) {
    lockoutAtS = 0;
    for (let i = start; i < tab; i += 1) lockoutAtS = lockoutAtS * 10 + ((rows[i] ?? 48) - 48);
  }
  let payEnd = tab + 1 >= lineEnd ? lineEnd : rows.indexOf(TAB, tab + 1);
  if (payEnd < 0 || payEnd > lineEnd) payEnd = lineEnd;
  const payUrl = tab + 1 >= lineEnd || isNull(rows, tab + 1, payEnd) ? null : rows.toString('latin1', tab + 1, payEnd);
  const cardUrl =
    payEnd + 1 >= lineEnd || isNull(rows, payEnd + 1, lineEnd) ? null : rows.toString('latin1', payEnd + 1, lineEnd);
  return lockoutAtS === null && payUrl === null && cardUrl === null ? null : { lockoutAtS, payUrl, cardUrl };
}

/**
 * Rows of `COPY (SELECT tenant_id, processor_customer_id, status, lockout, pay_url, card_url ...)
 * TO STDOUT` in text format: `<id>\t<customer>\t<status>[\t<lockout>\t<pay url>\t<card url>]\n`, handed
 * over as bytes. Customer ids are ASCII (`^cus_[A-Za-z0-9_]+$`), so they need no
 * unescaping; one that is not can never be asked for, and the index refuses it. An active
 * subscriber's row makes no object: only a non-active one's extra does.
 */
export function parseSubscriberRows(rows: Buffer, sink: Pick<LookupStateSink, 'subscriber'>): void {
  let start = 0;
  while (start < rows.length) {
    const end = rows.indexOf(NEWLINE, start);
    const lineEnd = end < 0 ? rows.length : end;
    let tenantId = 0;
    let i = start;
    for (; i < lineEnd && rows[i] !== TAB; i += 1) tenantId = tenantId * 10 + ((rows[i] ?? 48) - 48);
    const idStart = i + 1;
    const idEnd = rows.indexOf(TAB, idStart);
    const status = STATUS_BY_FIRST_BYTE[rows[idEnd + 1] ?? 0];
    if (idEnd > idStart && idEnd < lineEnd && status !== undefined) {
      let statusEnd = rows.indexOf(TAB, idEnd + 1);
      if (statusEnd < 0 || statusEnd > lineEnd) statusEnd = lineEnd;
      const extra = status === 'active' ? null : parseExtra(rows, statusEnd + 1, lineEnd);
      sink.subscriber(tenantId, rows, idStart, idEnd, status, extra);
    }
    start = lineEnd + 1;
  }
}

/**
 * Reads of migration 006's change log, each in one REPEATABLE READ, READ ONLY transaction:
 * every statement of it sees one snapshot, the one whose position it returns.
 */
function atOneSnapshot<T>(db: Db, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  return db.transaction(async (tx) => {
    await tx.exec('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    return fn(tx);
  });
}

/**
 * The position of this transaction's snapshot. On a hot standby PostgreSQL leaves the
 * in-progress list out of `pg_current_snapshot()` (it keeps a standby's running ids
 * elsewhere), so a transaction the primary had not committed would read as seen: there
 * the position is `xmin:xmin:`, everything from the oldest running id on unseen. The
 * catch-ups after it then re-read those keys at their values now, which is harmless.
 */
async function positionNow(tx: Queryable): Promise<ChangePosition> {
  const [row] = await tx.query<{ position: string; xmin: string; standby: boolean }>(
    'SELECT pg_current_snapshot()::text AS position, pg_snapshot_xmin(pg_current_snapshot())::text AS xmin, pg_is_in_recovery() AS standby',
  );
  if (!row) throw new Error('no snapshot');
  return row.standby ? `${row.xmin}:${row.xmin}:` : row.position;
}

/**
 * Everything the lookup reads, as of one snapshot: every tenant, then every subscriber as
 * COPY text. Returns the snapshot's position, from which changes are read next. A tenant
 * that cannot be read is handed over as unreadable: the load of every other goes on.
 */
export async function loadLookupState(db: Db, secrets: SecretBox, sink: LookupStateSink): Promise<ChangePosition> {
  return atOneSnapshot(db, async (tx) => {
    const position = await positionNow(tx);
    const [count] = await tx.query<{ n: string }>('SELECT count(*) AS n FROM subscribers');
    const { tenants, unreadable } = await readTenantsChecked(tx, secrets, null);
    sink.begin(Number(count?.n ?? 0), tenants, unreadable);
    // Parsed as it arrives: no row becomes an object, so a load of millions leaves no
    // garbage behind to grow the heap.
    await tx.copyRows(SUBSCRIBERS, (rows) => parseSubscriberRows(rows, sink));
    // The notices that hold: few (a card's last month), read as rows.
    if (sink.notice !== undefined) {
      const notices = await tx.query<{
        tenant_id: number;
        processor_customer_id: string;
        expires: string;
        until_s: string;
        card_url: string | null;
      }>(HOLDING_NOTICES_ROWS);
      for (const n of notices)
        sink.notice(n.tenant_id, n.processor_customer_id, {
          expires: n.expires,
          untilS: Number(n.until_s),
          cardUrl: n.card_url,
        });
    }
    return position;
  });
}

/**
 * What changed since `since`: every key written by a transaction that snapshot had not
 * seen, with its value now (null: gone). A key written twice is read once, as it is now.
 * A changed tenant that cannot be read comes as unreadable; the other changes still apply.
 */
export async function lookupChangesSince(db: Db, secrets: SecretBox, since: ChangePosition): Promise<LookupChanges> {
  return atOneSnapshot(db, async (tx) => {
    const [head] = await tx.query<{ position: string; gap: boolean }>(
      `SELECT pg_current_snapshot()::text AS position, pruned_through >= pg_snapshot_xmin($1::pg_snapshot) AS gap
       FROM lookup_changes_horizon`,
      [since],
    );
    if (!head) throw new Error('lookup_changes_horizon is empty');
    if (head.gap) return { position: head.position, gap: true, tenants: [], subscribers: [] };
    const rows = await tx.query<{
      tenant_id: number | null;
      processor_customer_id: string | null;
      tier: string | null;
      status: SubscriberStatus | null;
      lockout_s: string | null;
      pay_url: string | null;
      card_url: string | null;
      notice_expires: string | null;
      notice_until_s: string | null;
      notice_card_url: string | null;
    }>(
      `SELECT c.tenant_id, c.processor_customer_id, c.tier, s.status, ceil(extract(epoch FROM s.lockout_at))::bigint::text AS lockout_s, s.pay_url, s.card_url,
         n.expires AS notice_expires, floor(extract(epoch FROM n.until_at))::bigint::text AS notice_until_s, n.card_url AS notice_card_url
       FROM (SELECT DISTINCT tenant_id, processor_customer_id, tier FROM lookup_changes
             WHERE xid >= pg_snapshot_xmin($1::pg_snapshot) AND NOT pg_visible_in_snapshot(xid, $1::pg_snapshot)) c
       LEFT JOIN subscribers s ON s.tenant_id = c.tenant_id AND s.processor_customer_id = c.processor_customer_id
       LEFT JOIN card_notices n ON n.tenant_id = c.tenant_id AND n.processor_customer_id = c.processor_customer_id AND n.expires IS NOT NULL`,
      [since],
    );
    const tenantIds = new Set<number>();
    const tiers: string[] = [];
    const subscribers: LookupChanges['subscribers'] = [];
    for (const row of rows) {
      if (row.tier !== null) tiers.push(row.tier);
      else if (row.tenant_id === null) continue;
      else if (row.processor_customer_id === null) tenantIds.add(row.tenant_id);
      else {
        const extra =
          row.lockout_s === null && row.pay_url === null && row.card_url === null
            ? null
            : {
                lockoutAtS: row.lockout_s === null ? null : Number(row.lockout_s),
                payUrl: row.pay_url,
                cardUrl: row.card_url,
              };
        const notice =
          row.notice_expires === null || row.notice_until_s === null
            ? null
            : { expires: row.notice_expires, untilS: Number(row.notice_until_s), cardUrl: row.notice_card_url };
        subscribers.push({
          tenantId: row.tenant_id,
          customerId: row.processor_customer_id,
          status: row.status,
          extra,
          notice,
        });
      }
    }
    // A changed tier: every tenant on it as of this snapshot.
    const found = new Map<number, TenantAuth>();
    const unreadable = new Map<number, UnreadableTenant>();
    const take = (read: { tenants: TenantAuth[]; unreadable: UnreadableTenant[] }) => {
      for (const tenant of read.tenants) found.set(tenant.id, tenant);
      for (const bad of read.unreadable) unreadable.set(bad.id, bad);
    };
    if (tiers.length > 0) take(await readTenantsChecked(tx, secrets, { tiers }));
    const unread = [...tenantIds].filter((id) => !found.has(id) && !unreadable.has(id));
    if (unread.length > 0) take(await readTenantsChecked(tx, secrets, unread));
    const tenants: LookupChanges['tenants'] = [];
    // A twin's change (the other mode's space: its keys, its copy of the settings) is its
    // tenant's, read with it: the twin's own id names no tenant of the read model.
    const twins = new Set<number>();
    for (const tenant of found.values()) if (tenant.twin !== null) twins.add(tenant.twin.id);
    for (const id of new Set([...tenantIds, ...found.keys(), ...unreadable.keys()])) {
      if (twins.has(id)) continue;
      const bad = unreadable.get(id);
      tenants.push(bad === undefined ? { id, tenant: found.get(id) ?? null } : { id, tenant: null, unreadable: bad });
    }
    return { position: head.position, gap: false, tenants, subscribers };
  });
}

/** The logs read by snapshot visibility, each with the horizon its pruning records (migrations 006 and 014). */
const HORIZONS = { lookup_changes: 'lookup_changes_horizon', status_changes: 'status_changes_horizon' } as const;

interface Snapshot {
  xmin: bigint;
  xmax: bigint;
  running: Set<bigint>;
}

/** `xmin:xmax:xip,...` (pg_snapshot's text); null when it is not one. */
function parseSnapshot(text: ChangePosition): Snapshot | null {
  const m = /^(\d+):(\d+):((?:\d+(?:,\d+)*)?)$/.exec(text);
  if (m === null) return null;
  return {
    xmin: BigInt(m[1] ?? '0'),
    xmax: BigInt(m[2] ?? '0'),
    running: new Set(
      (m[3] ?? '')
        .split(',')
        .filter((x) => x !== '')
        .map((x) => BigInt(x)),
    ),
  };
}

/** pg_visible_in_snapshot: committed or rolled back before the snapshot was taken. */
function sees(s: Snapshot, xid: bigint): boolean {
  return xid < s.xmin || (xid < s.xmax && !s.running.has(xid));
}

/**
 * True when a reader at position `at` has read everything a reader at `target` has: every
 * transaction `target` sees, `at` sees too. What `at` does not see is its running ids and
 * everything from its xmax on; none of those may be seen by `target`. Positions of one
 * primary only (a standby's `xmin:xmin:` says less, and is answered false unless plainly
 * ahead). False when either is not a snapshot: the caller then reads the log again.
 */
export function positionCovers(at: ChangePosition, target: ChangePosition): boolean {
  const a = parseSnapshot(at);
  const t = parseSnapshot(target);
  if (a === null || t === null) return false;
  for (const xid of a.running) if (sees(t, xid)) return false;
  if (t.xmax <= a.xmax) return true;
  // The ids from a.xmax to t.xmax: `at` sees none, so `target` must have seen none either.
  if (t.xmin > a.xmax) return false;
  let unseen = 0n;
  for (const xid of t.running) if (xid >= a.xmax) unseen += 1n;
  return unseen === t.xmax - a.xmax;
}

/**
 * Forgets the rows of a log read by snapshot, and its horizon, that no transaction of this
 * database can have written (ids at or past the next one): what a dump restored into another
 * cluster brings along. Left, they would read as unseen by every position, and the horizon as
 * past it. It runs at start-up, before any reader; returns the rows deleted.
 */
export async function forgetForeignRows(db: Db, log: keyof typeof HORIZONS): Promise<number> {
  return db.transaction(async (tx) => {
    const [row] = await tx.query<{ n: string }>(
      `WITH next AS (SELECT pg_snapshot_xmax(pg_current_snapshot()) AS xid),
       gone AS (DELETE FROM ${log} WHERE xid >= (SELECT xid FROM next) RETURNING 1),
       horizon AS (UPDATE ${HORIZONS[log]} SET pruned_through = '0' WHERE pruned_through >= (SELECT xid FROM next))
       SELECT count(*) AS n FROM gone`,
    );
    return Number(row?.n ?? 0);
  });
}

/** The change log's foreign rows (see `forgetForeignRows`): every read model loads after this, so nothing is lost. */
export function forgetForeignLookupChanges(db: Db): Promise<number> {
  return forgetForeignRows(db, 'lookup_changes');
}

/**
 * Deletes change rows recorded more than `olderThanMs` ago (by the database's clock) whose
 * transactions every snapshot now sees, and records the highest transaction id deleted
 * (readers not past it reload). Returns the rows deleted; 0 when another instance is
 * pruning.
 */
export async function pruneLookupChanges(db: Db, olderThanMs: number): Promise<number> {
  return db.transaction(async (tx) => {
    if (!(await tryDeploymentLock(tx, PRUNE_LOCK_KEY))) return 0;
    const [row] = await tx.query<{ n: string }>(
      `WITH gone AS (
         DELETE FROM lookup_changes
         WHERE recorded_at < now() - make_interval(secs => $1::double precision / 1000)
           AND xid < pg_snapshot_xmin(pg_current_snapshot())
         RETURNING xid
       ), horizon AS (
         UPDATE lookup_changes_horizon SET pruned_through = GREATEST(pruned_through, (SELECT max(xid) FROM gone))
         WHERE EXISTS (SELECT 1 FROM gone)
       )
       SELECT count(*) AS n FROM gone`,
      [olderThanMs],
    );
    return Number(row?.n ?? 0);
  });
}
