import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Change } from '../../src/domain/stripe/fold.js';
import type { SubscriberStatus } from '../../src/domain/types.js';
import { ReadModel } from '../../src/readmodel/index.js';
import type { ChangedTenants } from '../../src/readmodel/index.js';
import { forgetForeignLookupChanges, openStore } from '../../src/store/index.js';
import type { ChangeCause, ChangeLog, Store } from '../../src/store/index.js';
import { availableEngines, pgClients, schemaScopedUrl } from '../helpers/engines.js';
import { newTenant } from '../helpers/store-fixtures.js';
import type { Engine } from '../helpers/engines.js';

const engines = await availableEngines();
const T = new Date('2026-03-01T12:00:00Z');
const at = (s: number) => new Date(T.getTime() + s * 1000);
const set = (status: SubscriberStatus): Change => ({ kind: 'set', status, reason: 'test' });
const admin = (d: Date): ChangeCause => ({
  source: 'admin',
  eventId: null,
  eventType: null,
  declineCode: null,
  occurredAt: d,
});

async function tenantId(store: Store, slug: string): Promise<number> {
  const created = await store.tenants.createTenant(newTenant(slug), T);
  if (!created.ok) throw new Error(`tenant ${slug}: ${created.error}`);
  return created.tenant.id;
}

/** Every subscriber row of the database against the model, and the model against rows it should not know. */
async function expectSameAsDatabase(
  model: ReadModel,
  query: (sql: string) => Promise<{ tenant_id: number; processor_customer_id: string; status: SubscriberStatus }[]>,
  forgotten: [number, string][] = [],
) {
  const rows = await query('SELECT tenant_id, processor_customer_id, status FROM subscribers');
  const wrong = rows.filter((r) => model.status(r.tenant_id, r.processor_customer_id) !== r.status);
  expect(wrong.slice(0, 5), `${wrong.length} of ${rows.length} keys differ`).toEqual([]);
  expect(model.snapshotStats().subscribers).toBe(rows.length);
  const known = new Set(rows.map((r) => `${r.tenant_id}:${r.processor_customer_id}`));
  for (const [t, c] of forgotten) if (!known.has(`${t}:${c}`)) expect(model.status(t, c), c).toBeNull();
}

describe.each(engines)('read model ($name)', (engine: Engine) => {
  let opened: Awaited<ReturnType<Engine['open']>>;
  let model: ReadModel | undefined;
  beforeAll(async () => {
    opened = await engine.open();
  });
  afterEach(async () => {
    await model?.close();
    model = undefined;
  });
  afterAll(() => opened.cleanup());

  it('loads every tenant and subscriber, then follows writes, removals and tenant changes', async () => {
    const { store } = opened;
    const acme = await tenantId(store, 'acme');
    await store.subscribers.applyChange(acme, 'cus_before', set('lockout'), admin(at(1)), at(1));
    model = await ReadModel.open(store.changes);
    expect(model.serving(Date.now())).toBe(true);
    expect(model.tenant('acme')?.id).toBe(acme);
    expect(model.status(acme, 'cus_before')).toBe('lockout');
    expect(model.status(acme, 'cus_nobody')).toBeNull();
    expect(model.snapshotStats()).toMatchObject({ tenants: 1, subscribers: 1, loads: 1 });

    // Each write is applied before the write returns to its caller's next step here: the
    // store reports its own commits, and the model catches up on each.
    await store.subscribers.applyChange(acme, 'cus_after', set('warning'), admin(at(2)), at(2));
    await model.ownWritesApplied();
    expect(model.status(acme, 'cus_after')).toBe('warning');
    await store.subscribers.applyChange(acme, 'cus_before', { kind: 'delete' }, admin(at(3)), at(3));
    await model.ownWritesApplied();
    expect(model.status(acme, 'cus_before')).toBeNull();

    const beta = await tenantId(store, 'beta');
    await model.ownWritesApplied();
    expect(model.tenant('beta')?.id).toBe(beta);
    await store.tenants.updateTenant('beta', { suspended: true, cardUpdateUrl: 'https://beta.test/card' }, at(4));
    await model.ownWritesApplied();
    expect(model.tenant('beta')).toMatchObject({ suspended: true, cardUpdateUrl: 'https://beta.test/card' });
    expect(model.tenant('beta')?.knownBodies.warning.toString()).toContain('https://beta.test/card');

    // A tier's flags reach every tenant on it.
    await store.tenants.putTier(
      'starter',
      { powered_by_watermark: false, custom_domain: true, downstream_webhooks: false },
      at(5),
    );
    await model.ownWritesApplied();
    expect(model.tenant('acme')?.entitlements.custom_domain).toBe(true);
    expect(model.tenant('beta')?.entitlements.custom_domain).toBe(true);
    await expectSameAsDatabase(model, (sql) => opened.db.query(sql), [[acme, 'cus_before']]);
    expect(model.snapshotStats().loads).toBe(1);
  });

  it('tells its change listeners which tenants each catch-up changed, once applied, whatever another listener throws', async () => {
    const { store } = opened;
    const one = await tenantId(store, 'told-one');
    const two = await tenantId(store, 'told-two');
    model = await ReadModel.open(store.changes);
    const open = model;
    const told: { tenants: number[]; applied: string | null }[] = [];
    open.onChanged(() => {
      throw new Error('a broken listener');
    });
    const stop = open.onChanged((tenants) =>
      told.push({ tenants: [...(tenants ?? [])].sort(), applied: open.status(one, 'cus_told') }),
    );
    await store.subscribers.applyChange(one, 'cus_told', set('lockout'), admin(at(1)), at(1));
    await open.ownWritesApplied();
    await store.tenants.updateTenant('told-two', { cardUpdateUrl: 'https://two.test/card' }, at(2));
    await open.ownWritesApplied();
    // Nothing new: no call.
    await open.catchUp();
    expect(told).toEqual([
      { tenants: [one], applied: 'lockout' },
      { tenants: [two], applied: 'lockout' },
    ]);
    stop();
    await store.subscribers.applyChange(one, 'cus_told', set('warning'), admin(at(3)), at(3));
    await open.ownWritesApplied();
    expect(told).toHaveLength(2);
  });

  it('keeps a slug with its owner when one catch-up deletes and re-creates it, or moves slugs between tenants', async () => {
    const { store, db } = opened;
    const a = await tenantId(store, 'slug-a');
    const b = await tenantId(store, 'slug-b');
    model = await ReadModel.open(store.changes);
    // One transaction of direct SQL (the API renames nothing): the changes arrive in one
    // catch-up, in no particular order.
    await db.transaction(async (tx) => {
      await tx.query(`UPDATE tenants SET slug = 'slug-tmp' WHERE id = $1`, [a]);
      await tx.query(`UPDATE tenants SET slug = 'slug-a' WHERE id = $1`, [b]);
      await tx.query(`UPDATE tenants SET slug = 'slug-b' WHERE id = $1`, [a]);
    });
    await model.catchUp();
    expect([model.tenant('slug-a')?.id, model.tenant('slug-b')?.id, model.tenant('slug-tmp')]).toEqual([b, a, null]);
    const again = await db.transaction(async (tx) => {
      await tx.query(`DELETE FROM tenants WHERE id = $1`, [a]);
      const [row] = await tx.query<{ id: number }>(
        `INSERT INTO tenants (slug, tier, hmac_required, suspended, created_at, updated_at) VALUES ('slug-b', 'starter', false, false, now(), now()) RETURNING id`,
      );
      return row?.id;
    });
    await model.catchUp();
    expect(model.tenant('slug-b')?.id).toBe(again);
    expect(model.tenant('slug-a')?.id).toBe(b);
  });

  it('forgets change log rows that no transaction of this database wrote (a restored dump), instead of reloading for ever', async () => {
    const { store, db } = opened;
    const id = await tenantId(store, 'restored');
    // What a dump of another cluster brings: ids past this cluster's next one.
    const [{ next }] = (await db.query<{ next: string }>(
      'SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS next',
    )) as [{ next: string }];
    const foreign = (BigInt(next) + 10_000_000n).toString();
    await db.query(
      `INSERT INTO lookup_changes (xid, tenant_id, processor_customer_id) VALUES ($1::xid8, $2, 'cus_foreign')`,
      [foreign, id],
    );
    await db.query(`UPDATE lookup_changes_horizon SET pruned_through = $1::xid8`, [foreign]);
    expect(await forgetForeignLookupChanges(db)).toBe(1);
    model = await ReadModel.open(store.changes);
    await store.subscribers.applyChange(id, 'cus_after', set('warning'), admin(at(1)), at(1));
    await model.ownWritesApplied();
    for (let i = 0; i < 3; i += 1) await model.catchUp();
    expect(model.status(id, 'cus_after')).toBe('warning');
    expect(model.snapshotStats().loads).toBe(1);
  });

  it('reloads when the change log was pruned past its position, answering from the old copy meanwhile', async () => {
    const { store } = opened;
    const id = await tenantId(store, 'gap');
    await store.subscribers.applyChange(id, 'cus_gap_1', set('lockout'), admin(at(1)), at(1));
    // A model whose reads of the log fail (as if paused or cut off) while others write and prune.
    const blocked = { on: false };
    const stalled = new Proxy(store.changes, {
      get: (target, prop) => {
        if (prop === 'lookupChangesSince' && blocked.on)
          return () => Promise.reject(Object.assign(new Error('cut'), { code: 'ECONNRESET' }));
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as ChangeLog;
    model = await ReadModel.open(stalled);
    const told: ChangedTenants[] = [];
    model.onChanged((tenants) => told.push(tenants));
    blocked.on = true;
    await store.subscribers.applyChange(id, 'cus_gap_1', set('active'), admin(at(2)), at(2));
    await store.subscribers.applyChange(id, 'cus_gap_2', set('warning'), admin(at(3)), at(3));
    // Every row recorded before now, so the position is past the horizon.
    // Only rows every snapshot sees go, and a transaction of another test file on the shared
    // server may hold that back for a moment.
    const left = async () => {
      await store.changes.pruneLookupChanges(0);
      const [row] = await opened.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM lookup_changes WHERE processor_customer_id LIKE 'cus_gap_%'`,
      );
      return row?.n;
    };
    await expect.poll(left, { timeout: 20_000, interval: 200 }).toBe(0);
    await model.catchUp();
    // Still the copy it had: the database could not be read.
    expect(model.status(id, 'cus_gap_1')).toBe('lockout');
    expect(model.serving(Date.now())).toBe(true);
    blocked.on = false;
    await model.catchUp();
    expect(model.snapshotStats().loads).toBe(2);
    // After a reload any tenant may have changed: its listeners are told so.
    expect(told).toEqual([null]);
    expect(model.status(id, 'cus_gap_1')).toBe('active');
    expect(model.status(id, 'cus_gap_2')).toBe('warning');
    await expectSameAsDatabase(model, (sql) => opened.db.query(sql));
  });

  it('answers from memory for staleIfErrorMs after its last good read, then stops serving until the database is back', async () => {
    const { store } = opened;
    let nowMs = Date.now();
    const broken = { on: false };
    const breakable = new Proxy(store.changes, {
      get: (target, prop) => {
        if (broken.on && (prop === 'lookupChangesSince' || prop === 'loadLookupState'))
          return () => Promise.reject(Object.assign(new Error('down'), { code: 'ECONNREFUSED' }));
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as ChangeLog;
    model = await ReadModel.open(breakable, { staleIfErrorMs: 30_000, now: () => nowMs });
    broken.on = true;
    nowMs += 10_000;
    await model.catchUp();
    expect(model.serving(nowMs)).toBe(true);
    nowMs += 20_001;
    expect(model.serving(nowMs)).toBe(false);
    broken.on = false;
    await model.catchUp();
    expect(model.serving(nowMs)).toBe(true);
  });

  it('tells its lag: the time since its last good read of the change log began, growing while the database is away', async () => {
    const { store } = opened;
    let nowMs = Date.now();
    const broken = { on: false };
    const breakable = new Proxy(store.changes, {
      get: (target, prop) => {
        if (broken.on && prop === 'lookupChangesSince')
          return () => Promise.reject(Object.assign(new Error('down'), { code: 'ECONNREFUSED' }));
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as ChangeLog;
    model = await ReadModel.open(breakable, { staleIfErrorMs: 30_000, pollIntervalMs: 3_600_000, now: () => nowMs });
    expect(model.lagMs(nowMs)).toBe(0);
    nowMs += 700;
    expect(model.lagMs(nowMs)).toBe(700);
    await model.catchUp();
    expect(model.lagMs(nowMs)).toBe(0);
    broken.on = true;
    nowMs += 10_000;
    await model.catchUp();
    expect([model.lagMs(nowMs), model.serving(nowMs)]).toEqual([10_000, true]);
    nowMs += 25_000;
    expect([model.lagMs(nowMs), model.serving(nowMs)]).toEqual([35_000, false]);
    broken.on = false;
    await model.catchUp();
    expect([model.lagMs(nowMs), model.serving(nowMs)]).toEqual([0, true]);
  });
});

describe.skipIf(!engines.some((e) => e.name === 'postgres'))('read model on PostgreSQL: concurrent writers', () => {
  let scoped: Awaited<ReturnType<typeof schemaScopedUrl>>;
  let store: Store;
  let model: ReadModel;
  const clients = pgClients();
  const client = clients.open;

  beforeAll(async () => {
    scoped = await schemaScopedUrl('dunwall_readmodel');
    store = await openStore({ engine: 'postgres', url: scoped.url });
  });
  afterAll(async () => {
    await model?.close();
    await clients.endAll();
    await store?.close();
    await scoped?.drop();
  });

  it('applies a change whose writer began first and committed last (transaction ids, not sequence numbers)', async () => {
    const id = await tenantId(store, 'order');
    model = await ReadModel.open(store.changes);
    const slow = await client(scoped.url);
    const fast = await client(scoped.url);
    const insert = `INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, updated_at) VALUES ($1, $2, $3, $3, 'test', now(), now())`;
    // The slow writer takes its transaction id (and its change log row) first...
    await slow.query('BEGIN');
    await slow.query(insert, [id, 'cus_slow', 'lockout']);
    // ...the fast one begins later, commits first, and the model reads past it.
    await fast.query('BEGIN');
    await fast.query(insert, [id, 'cus_fast', 'warning']);
    await fast.query('COMMIT');
    await model.catchUp();
    expect(model.status(id, 'cus_fast')).toBe('warning');
    expect(model.status(id, 'cus_slow')).toBeNull();
    await slow.query('COMMIT');
    await model.catchUp();
    expect(model.status(id, 'cus_slow')).toBe('lockout');
    const [order] = (
      await fast.query<{ slow_first: boolean }>(
        `SELECT (SELECT xid FROM lookup_changes WHERE processor_customer_id = 'cus_slow') < (SELECT xid FROM lookup_changes WHERE processor_customer_id = 'cus_fast') AS slow_first`,
      )
    ).rows;
    expect(order?.slow_first).toBe(true);
  });

  it('follows a tier change that races a tenant moving onto the tier', async () => {
    const created = await store.tenants.createTenant({ ...newTenant('mover'), tier: 'growth' }, T);
    if (!created.ok) throw new Error(created.error);
    await model.catchUp();
    const tier = await client(scoped.url);
    // An admin changing the tier's flags, in a transaction still open...
    await tier.query('BEGIN');
    await tier.query(
      `UPDATE tiers SET entitlements = '{"powered_by_watermark": false, "custom_domain": false, "downstream_webhooks": false}' WHERE name = 'scale'`,
    );
    // ...while another moves the tenant onto the tier and commits first.
    expect((await store.tenants.updateTenant('mover', { tier: 'scale' }, T)).ok).toBe(true);
    await model.catchUp();
    expect(model.tenant('mover')?.entitlements.downstream_webhooks).toBe(true);
    await tier.query('COMMIT');
    await model.catchUp();
    expect(model.tenant('mover')?.entitlements.downstream_webhooks).toBe(false);
  });

  it(
    'misses nothing while its connections are killed during a stream of writes from another instance',
    { timeout: 60_000 },
    async () => {
      const id = await tenantId(store, 'killed');
      // The model's connections carry a name of their own, so that only they are killed.
      const named = new URL(scoped.url);
      named.searchParams.set(
        'options',
        `${named.searchParams.get('options') ?? ''} -c application_name=dunwall_model_under_test`,
      );
      const modelStore = await openStore({ engine: 'postgres', url: named.toString() });
      const killer = await client(scoped.url);
      const followed = await ReadModel.open(modelStore.changes, { pollIntervalMs: 200 });
      try {
        const statuses: SubscriberStatus[] = ['active', 'warning', 'lockout'];
        const customers = Array.from({ length: 60 }, (_, i) => `cus_stream_${i}`);
        let kills = 0;
        for (let i = 0; i < 600; i += 1) {
          const customer = customers[i % customers.length] ?? 'cus_stream_0';
          const change: Change = i % 17 === 0 ? { kind: 'delete' } : set(statuses[i % 3] ?? 'active');
          await store.subscribers.applyChange(id, customer, change, admin(at(i + 1)), at(i + 1));
          if (i % 50 === 25) {
            const { rows } = await killer.query<{ n: number }>(
              `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = 'dunwall_model_under_test'`,
            );
            kills += rows[0]?.n ?? 0;
          }
        }
        expect(kills).toBeGreaterThan(0);
        // Back in touch: the listener reconnects and resumes from its position.
        await expect.poll(() => followed.snapshotStats().listening, { timeout: 20_000 }).toBe(true);
        await followed.catchUp();
        await expectSameAsDatabase(
          followed,
          async (sql) => (await killer.query(sql)).rows,
          customers.map((c) => [id, c]),
        );
      } finally {
        await followed.close();
        await modelStore.close();
      }
    },
  );
});
