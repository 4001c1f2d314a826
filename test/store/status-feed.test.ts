import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { FeedCursor } from '../../src/domain/feed-cursor.js';
import type { SubscriberStatus } from '../../src/domain/types.js';
import type { Change } from '../../src/domain/stripe/fold.js';
import { Retention } from '../../src/runtime/retention.js';
import { CursorNotIssuedError, openStore } from '../../src/store/index.js';
import type { ChangeCause, StatusChange, StatusChanges, Store } from '../../src/store/index.js';
import { forgetForeignStatusChanges } from '../../src/store/feed/status-feed.js';
import { availableEngines, pgClients, schemaScopedUrl } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { newTenant, pruneUntil } from '../helpers/store-fixtures.js';

/**
 * The status feed's store (migration 014, src/store/feed/status-feed.ts): the trigger records
 * every change of an answer and nothing else; the list pages the non-active subscribers
 * with the feed's position; the feed gives what a position had not seen, by snapshot, in
 * order per subscriber, each change once, across pages; pruning makes old cursors expire.
 */
const engines = await availableEngines();
const T = new Date('2026-03-01T12:00:00Z');
const DAY_MS = 86_400_000;
const silent = { info() {}, warn() {} };
const admin = (d = T): ChangeCause => ({
  source: 'admin',
  eventId: null,
  eventType: null,
  declineCode: null,
  occurredAt: d,
});
const set = (status: SubscriberStatus): Change => ({ kind: 'set', status, reason: 'test' });

async function tenantId(store: Store, slug: string): Promise<number> {
  const created = await store.tenants.createTenant(newTenant(slug), T);
  if (!created.ok) throw new Error(`tenant ${slug}: ${created.error}`);
  return created.tenant.id;
}

function changesOf(result: StatusChanges): { changes: StatusChange[]; next: FeedCursor } {
  if (result.expired) throw new Error('expired');
  return result;
}

/** Reads the feed from `cursor` `limit` at a time until a page comes back empty. */
async function drain(
  store: Store,
  tenant: number,
  cursor: FeedCursor,
  limit: number,
): Promise<{ changes: StatusChange[]; next: FeedCursor; pages: number }> {
  const all: StatusChange[] = [];
  let position = cursor;
  for (let pages = 1; ; pages += 1) {
    const page = changesOf(await store.feed.statusChangesAfter(tenant, position, limit));
    expect(page.changes.length).toBeLessThanOrEqual(limit);
    all.push(...page.changes);
    position = page.next;
    if (page.changes.length === 0) return { changes: all, next: position, pages };
  }
}

const brief = (c: StatusChange) => [c.customerId, c.status];

describe.each(engines)('status feed store ($name)', (engine: Engine) => {
  let opened: Awaited<ReturnType<Engine['open']>>;
  let store: Store;
  beforeAll(async () => {
    opened = await engine.open();
    store = opened.store;
  });
  afterAll(() => opened.cleanup());

  const now = async () => (await store.feed.listStatuses(0, null, 1)).feedCursor;
  /** A subscriber row written as a test wants it: the trigger sees exactly this. */
  const upsert = (
    tenant: number,
    customer: string,
    status: SubscriberStatus,
    fields: { lockoutAt?: Date | null; payUrl?: string | null; reason?: string } = {},
  ) =>
    opened.db.query(
      `INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, updated_at, lockout_at, pay_url)
       VALUES ($1, $2, $3, $3, $4, $5, $5, $6, $7)
       ON CONFLICT (tenant_id, processor_customer_id) DO UPDATE SET status = EXCLUDED.status, derived_status = EXCLUDED.derived_status,
         reason = EXCLUDED.reason, lockout_at = EXCLUDED.lockout_at, pay_url = EXCLUDED.pay_url, updated_at = EXCLUDED.updated_at`,
      [tenant, customer, status, fields.reason ?? 'test', T, fields.lockoutAt ?? null, fields.payUrl ?? null],
    );

  it('records a change of the answered status, lockout_at or pay_url, a deletion as active, and nothing else', async () => {
    const t = await tenantId(store, 'trigger');
    const from = await now();
    const lockoutAt = new Date('2026-03-04T12:00:00.250Z');
    await upsert(t, 'cus_a', 'active'); // a new active subscriber answers as an unknown one did: no change
    await upsert(t, 'cus_a', 'warning');
    await upsert(t, 'cus_a', 'warning', { reason: 'other' }); // the reason is not in the answer
    await upsert(t, 'cus_a', 'warning', { lockoutAt });
    await upsert(t, 'cus_a', 'warning', { lockoutAt, payUrl: 'https://pay.test/in_1' });
    await upsert(t, 'cus_a', 'lockout', { lockoutAt, payUrl: 'https://pay.test/in_1' }); // lockout_at is not answered with lockout
    await upsert(t, 'cus_a', 'lockout', { lockoutAt: null, payUrl: 'https://pay.test/in_1' }); // nor is its clearing a change
    await opened.db.query('DELETE FROM subscribers WHERE tenant_id = $1 AND processor_customer_id = $2', [t, 'cus_a']);
    await upsert(t, 'cus_b', 'active', { payUrl: 'https://pay.test/in_2' }); // a pay link is not answered with active
    await opened.db.query('DELETE FROM subscribers WHERE tenant_id = $1 AND processor_customer_id = $2', [t, 'cus_b']);
    const { changes } = await drain(store, t, from, 100);
    expect(changes.map((c) => [c.customerId, c.status, c.lockoutAtS, c.payUrl])).toEqual([
      ['cus_a', 'warning', null, null],
      ['cus_a', 'warning', Math.ceil(lockoutAt.getTime() / 1000), null],
      ['cus_a', 'warning', Math.ceil(lockoutAt.getTime() / 1000), 'https://pay.test/in_1'],
      ['cus_a', 'lockout', null, 'https://pay.test/in_1'],
      ['cus_a', 'active', null, null],
    ]);
    // An update's time is the row's; a deletion's the transaction's.
    expect(changes[0]?.occurredAt).toEqual(T);
    expect(changes.at(-1)?.occurredAt.getTime()).toBeGreaterThan(T.getTime());
  });

  it("lists the non-active subscribers in pages, each page carrying the first page's feed position, and the feed goes on from it", async () => {
    const t = await tenantId(store, 'listed');
    for (let i = 0; i < 7; i += 1)
      await store.subscribers.applyChange(
        t,
        `cus_l${i}`,
        set(i % 3 === 0 ? 'active' : i % 3 === 1 ? 'warning' : 'lockout'),
        admin(),
        T,
      );
    const first = await store.feed.listStatuses(t, null, 2);
    expect(first.entries.map((e) => [e.customerId, e.status])).toEqual([
      ['cus_l1', 'warning'],
      ['cus_l2', 'lockout'],
    ]);
    expect(first.next).not.toBeNull();
    // A change after the first page: the later pages read rows as they are, the feed has it too.
    await store.subscribers.applyChange(t, 'cus_l4', set('lockout'), admin(), T);
    await store.subscribers.applyChange(t, 'cus_l9', set('warning'), admin(), T);
    const pages = [first];
    while (pages.at(-1)?.next) pages.push(await store.feed.listStatuses(t, pages.at(-1)?.next ?? null, 2));
    expect(pages.flatMap((p) => p.entries.map((e) => [e.customerId, e.status]))).toEqual([
      ['cus_l1', 'warning'],
      ['cus_l2', 'lockout'],
      ['cus_l4', 'lockout'],
      ['cus_l5', 'lockout'],
      ['cus_l9', 'warning'],
    ]);
    expect(new Set(pages.map((p) => JSON.stringify(p.feedCursor))).size).toBe(1);
    const { changes } = await drain(store, t, first.feedCursor, 100);
    expect(changes.map(brief)).toEqual([
      ['cus_l4', 'lockout'],
      ['cus_l9', 'warning'],
    ]);
  });

  it("gives each change once, in order per subscriber, across pages of any size, from any change's cursor, while writes go on", async () => {
    const t = await tenantId(store, 'pages');
    const from = await now();
    const written: [string, SubscriberStatus][] = [];
    const statuses: SubscriberStatus[] = ['warning', 'lockout', 'active'];
    const write = async (i: number) => {
      const customer = `cus_p${i % 7}`;
      const status = statuses[Math.floor(i / 7) % 3] ?? 'warning';
      await store.subscribers.applyChange(t, customer, set(status), admin(), T);
      written.push([customer, status]);
    };
    for (let i = 0; i < 40; i += 1) await write(i);
    // Pages of 3, with more writes between the pages.
    const read: StatusChange[] = [];
    let position = from;
    for (let page = 0; page < 100; page += 1) {
      const result = changesOf(await store.feed.statusChangesAfter(t, position, 3));
      read.push(...result.changes);
      position = result.next;
      if (page < 10) await write(40 + page);
      else if (result.changes.length === 0) break;
    }
    const perCustomer = (list: readonly (readonly [string, string])[]) => {
      const by = new Map<string, string[]>();
      for (const [c, s] of list) by.set(c, [...(by.get(c) ?? []), s]);
      return Object.fromEntries([...by].sort());
    };
    expect(read).toHaveLength(written.length);
    expect(perCustomer(read.map((c) => [c.customerId, c.status] as const))).toEqual(perCustomer(written));
    // Written one after another, they come in that very order.
    expect(read.map(brief)).toEqual(written);
    // The cursor of a change in the middle of a page resumes right after it, whatever the page size.
    for (const k of [0, 4, 17, 38]) {
      const middle = read[k];
      if (!middle) throw new Error('no change');
      for (const limit of [1, 5, 100])
        expect((await drain(store, t, middle.cursor, limit)).changes.map(brief)).toEqual(written.slice(k + 1));
    }
    // A full page's next cursor resumes inside the same set: pages of 1 are the list of pages of 100.
    expect((await drain(store, t, from, 1)).changes.map(brief)).toEqual(written);
  });

  it("never gives one tenant's changes to another, whatever cursor it brings", async () => {
    const a = await tenantId(store, 'iso-a');
    const b = await tenantId(store, 'iso-b');
    const from = await now();
    await store.subscribers.applyChange(b, 'cus_b1', set('lockout'), admin(), T);
    const bCursor = changesOf(await store.feed.statusChangesAfter(b, from, 100)).changes[0]?.cursor;
    if (!bCursor) throw new Error('no change for b');
    await store.subscribers.applyChange(a, 'cus_a1', set('warning'), admin(), T);
    await store.subscribers.applyChange(b, 'cus_b2', set('warning'), admin(), T);
    expect((await drain(store, a, from, 100)).changes.map(brief)).toEqual([['cus_a1', 'warning']]);
    // B's cursor is a position only: read for A, it gives A's changes.
    expect((await drain(store, a, bCursor, 100)).changes.map(brief)).toEqual([['cus_a1', 'warning']]);
    expect((await store.feed.listStatuses(a, null, 100)).entries.map((e) => e.customerId)).toEqual(['cus_a1']);
  });

  it('expires a cursor once retention pruned changes it had not seen, and refuses one ahead of the database', async () => {
    const t = await tenantId(store, 'expiry');
    const old = await now();
    await store.subscribers.applyChange(t, 'cus_e1', set('warning'), admin(), T);
    const expired = async () => 'expired' in (await store.feed.statusChangesAfter(t, old, 100));
    expect(await pruneUntil(store.maintenance, 'status_changes', expired)).toBeGreaterThanOrEqual(1);
    expect(await store.feed.statusChangesAfter(t, old, 100)).toEqual({ expired: true });
    // A position taken after the pruning is good; so is every cursor from it on.
    const fresh = (await store.feed.listStatuses(t, null, 100)).feedCursor;
    await store.subscribers.applyChange(t, 'cus_e1', set('lockout'), admin(), T);
    expect((await drain(store, t, fresh, 100)).changes.map(brief)).toEqual([['cus_e1', 'lockout']]);
    // Transaction ids this database has not reached: a cursor it never handed out (400 invalid_cursor).
    await expect(
      store.feed.statusChangesAfter(t, { since: '900000000000:900000000001:', within: null }, 100),
    ).rejects.toBeInstanceOf(CursorNotIssuedError);
    await expect(
      store.feed.statusChangesAfter(
        t,
        { since: fresh.since, within: { upto: '900000000000:900000000000:', afterSeq: '1' } },
        100,
      ),
    ).rejects.toBeInstanceOf(CursorNotIssuedError);
  });

  it('forgets rows and a horizon no transaction of this database wrote (a restored dump), rather than expire every cursor', async () => {
    const t = await tenantId(store, 'restored');
    const [{ next }] = (await opened.db.query<{ next: string }>(
      'SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS next',
    )) as [{ next: string }];
    const foreign = (BigInt(next) + 10_000_000n).toString();
    await opened.db.query(
      `INSERT INTO status_changes (xid, tenant_id, processor_customer_id, status, occurred_at) VALUES ($1::xid8, $2, 'cus_foreign', 'lockout', now())`,
      [foreign, t],
    );
    await opened.db.query('UPDATE status_changes_horizon SET pruned_through = $1::xid8', [foreign]);
    const from = await now();
    expect(await store.feed.statusChangesAfter(t, from, 100)).toEqual({ expired: true });
    expect(await forgetForeignStatusChanges(opened.db)).toBe(1);
    await store.subscribers.applyChange(t, 'cus_home', set('warning'), admin(), T);
    expect((await drain(store, t, from, 100)).changes.map(brief)).toEqual([['cus_home', 'warning']]);
  });

  it('is pruned by age with the other retained tables', async () => {
    const t = await tenantId(store, 'retained');
    const from = await now();
    await store.subscribers.applyChange(t, 'cus_r1', set('warning'), admin(), new Date(Date.now() - 10 * DAY_MS));
    await store.subscribers.applyChange(t, 'cus_r2', set('warning'), admin(), new Date(Date.now() - DAY_MS));
    const count = async () =>
      Number(
        (
          await opened.db.query<{ n: number }>('SELECT count(*)::int AS n FROM status_changes WHERE tenant_id = $1', [
            t,
          ])
        )[0]?.n,
      );
    expect(await count()).toBe(2);
    const retention = new Retention({
      maintenance: store.maintenance,
      stripeEventsDays: 30,
      historyDays: 0,
      downstreamDays: 30,
      statusFeedDays: 7,
      log: silent,
      sleep: async () => {},
    });
    // A transaction open elsewhere on a shared server may hold the change back a round.
    await vi.waitFor(
      async () => {
        await retention.runOnce();
        expect(await count()).toBe(1);
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(retention.deleted.status_changes).toBeGreaterThanOrEqual(1);
    expect(await store.feed.statusChangesAfter(t, from, 100)).toEqual({ expired: true });
  });
});

describe.skipIf(!engines.some((e) => e.name === 'postgres'))(
  'status feed store on PostgreSQL: concurrent writers',
  () => {
    let scoped: Awaited<ReturnType<typeof schemaScopedUrl>>;
    let store: Store;
    const clients = pgClients();

    beforeAll(async () => {
      scoped = await schemaScopedUrl('dunwall_feed');
      store = await openStore({ engine: 'postgres', url: scoped.url });
    });
    afterAll(async () => {
      await clients.endAll();
      await store?.close();
      await scoped?.drop();
    });

    it('gives the change of a writer that began first and committed last, after a reader read past the later one', async () => {
      const t = await tenantId(store, 'order');
      const from = (await store.feed.listStatuses(t, null, 100)).feedCursor;
      const slow = await clients.open(scoped.url);
      const fast = await clients.open(scoped.url);
      const insert = `INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, updated_at) VALUES ($1, $2, $3, $3, 'test', now(), now())`;
      // The slow writer takes its sequence value and transaction id first...
      await slow.query('BEGIN');
      await slow.query(insert, [t, 'cus_slow', 'lockout']);
      // ...the fast one begins later, commits first, and a reader reads past it.
      await fast.query('BEGIN');
      await fast.query(insert, [t, 'cus_fast', 'warning']);
      await fast.query('COMMIT');
      const first = changesOf(await store.feed.statusChangesAfter(t, from, 100));
      expect(first.changes.map(brief)).toEqual([['cus_fast', 'warning']]);
      // A cursor of the fast change alone, inside its set, and the set's end: all still owe the slow change.
      const inside = first.changes[0]?.cursor;
      if (!inside) throw new Error('no change');
      expect(changesOf(await store.feed.statusChangesAfter(t, first.next, 100)).changes).toEqual([]);
      await slow.query('COMMIT');
      for (const cursor of [first.next, inside, from]) {
        const rest = await drain(store, t, cursor, 1);
        // Read from the start once both committed, the two are one set, in sequence order.
        expect(rest.changes.map(brief)).toEqual(
          cursor === from
            ? [
                ['cus_slow', 'lockout'],
                ['cus_fast', 'warning'],
              ]
            : [['cus_slow', 'lockout']],
        );
      }
      // The slow change has the lower sequence value: "rows after the last seq seen" would have lost it.
      const [order] = (
        await fast.query<{ slow_first: boolean }>(
          `SELECT (SELECT seq FROM status_changes WHERE processor_customer_id = 'cus_slow') < (SELECT seq FROM status_changes WHERE processor_customer_id = 'cus_fast') AS slow_first`,
        )
      ).rows;
      expect(order?.slow_first).toBe(true);
    });

    it("orders one subscriber's changes as they committed: the second writer waits for the first's row lock", async () => {
      const t = await tenantId(store, 'locks');
      await store.subscribers.applyChange(t, 'cus_x', set('warning'), admin(), T);
      const from = (await store.feed.listStatuses(t, null, 100)).feedCursor;
      const one = await clients.open(scoped.url);
      const two = await clients.open(scoped.url);
      await one.query('BEGIN');
      await two.query('BEGIN');
      // Both have transaction ids; the second takes its id first, then waits on the row.
      await two.query('SELECT pg_current_xact_id()');
      await one.query('SELECT pg_current_xact_id()');
      await one.query(
        `UPDATE subscribers SET status = 'lockout' WHERE tenant_id = $1 AND processor_customer_id = 'cus_x'`,
        [t],
      );
      const blocked = two.query(
        `UPDATE subscribers SET status = 'active' WHERE tenant_id = $1 AND processor_customer_id = 'cus_x'`,
        [t],
      );
      await one.query('COMMIT');
      await blocked;
      await two.query('COMMIT');
      expect((await drain(store, t, from, 1)).changes.map(brief)).toEqual([
        ['cus_x', 'lockout'],
        ['cus_x', 'active'],
      ]);
    });
  },
);
