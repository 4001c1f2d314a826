import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keepTrue, LookupCache } from '../../src/cache/lookup-cache.js';
import { prepareTenant } from '../../src/domain/lookup.js';
import type { SubscriberStatus, TenantAuth } from '../../src/domain/types.js';
import type { LookupSource } from '../../src/cache/lookup-source.js';
import { isStoreUnavailable, StoreUnavailableError } from '../../src/store/errors.js';
import { openDb } from '../../src/store/index.js';
import { SqlStore } from '../../src/store/sql-store.js';
import type { ChangeCause, Store } from '../../src/store/store.js';
import { sha256 } from '../../src/domain/keys.js';
import { availableEngines, DEFAULT_TEST_DATABASE_URL } from '../helpers/engines.js';

const engines = await availableEngines();

function tenantAuth(id: number, slug: string): TenantAuth {
  return prepareTenant({
    id,
    slug,
    suspended: false,
    hmacRequired: false,
    cardUpdateUrl: null,
    allowedOrigins: null,
    lookupsPerMinute: null,
    entitlements: { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false },
    publishableKeyHashes: [],
    hmacSecrets: [],
  });
}

/** A source that counts its reads and whose answers (or failure) the test sets. */
class FakeSource implements LookupSource {
  reads = 0;
  statuses = new Map<string, SubscriberStatus | null>();
  gate: Promise<void> | null = null;
  /** Every read fails with this, once past the gate. */
  failWith: Error | null = null;
  async getTenantAuth(slug: string) {
    this.reads += 1;
    if (this.gate) await this.gate;
    if (this.failWith) throw this.failWith;
    return slug === 'acme' ? tenantAuth(1, 'acme') : null;
  }
  async getSubscriberStatus(tenantId: number, customerId: string) {
    this.reads += 1;
    const value = this.statuses.get(`${tenantId}:${customerId}`) ?? null;
    if (this.gate) await this.gate;
    if (this.failWith) throw this.failWith;
    return value;
  }
}

/** What the driver raises when PostgreSQL is not there. */
function unreachable(): Error {
  return Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
}

describe('LookupCache', () => {
  it('serves hits from memory, unknown answers included, and reads again after an invalidation', async () => {
    const source = new FakeSource();
    const cache = new LookupCache(source);
    cache.setLive(true);
    expect(await cache.getSubscriberStatus(1, 'cus_x')).toBeNull();
    expect(await cache.getSubscriberStatus(1, 'cus_x')).toBeNull();
    expect(await cache.getTenantAuth('nobody')).toBeNull();
    expect(await cache.getTenantAuth('nobody')).toBeNull();
    expect(source.reads).toBe(2);
    source.statuses.set('1:cus_x', 'lockout');
    cache.invalidate({ kind: 'subscriber', tenantId: 1, customerId: 'cus_x' });
    expect(await cache.getSubscriberStatus(1, 'cus_x')).toBe('lockout');
    expect(source.reads).toBe(3);
  });

  it('drops a tenant by id, by slug, and every tenant on a tier change', async () => {
    const source = new FakeSource();
    const cache = new LookupCache(source);
    cache.setLive(true);
    await cache.getTenantAuth('acme');
    cache.invalidate({ kind: 'tenant', tenantId: 1, slug: null });
    await cache.getTenantAuth('acme');
    cache.invalidate({ kind: 'all' });
    await cache.getTenantAuth('acme');
    await cache.getTenantAuth('acme');
    expect(source.reads).toBe(3);
  });

  it('never puts back a value read before an invalidation that raced it', async () => {
    const source = new FakeSource();
    const cache = new LookupCache(source);
    cache.setLive(true);
    source.statuses.set('1:cus_r', 'lockout');
    let release: () => void = () => {};
    source.gate = new Promise((resolve) => (release = resolve));
    const pending = cache.getSubscriberStatus(1, 'cus_r');
    // The customer pays while the read is in flight.
    source.statuses.set('1:cus_r', 'active');
    cache.invalidate({ kind: 'subscriber', tenantId: 1, customerId: 'cus_r' });
    release();
    expect(await pending).toBe('lockout');
    source.gate = null;
    expect(await cache.getSubscriberStatus(1, 'cus_r')).toBe('active');
  });

  it('still fills a customer whose read raced only other customers\' invalidations', async () => {
    const source = new FakeSource();
    const cache = new LookupCache(source);
    cache.setLive(true);
    let release: () => void = () => {};
    source.gate = new Promise((resolve) => (release = resolve));
    const pending = cache.getSubscriberStatus(1, 'cus_quiet');
    for (let i = 0; i < 50; i += 1) cache.invalidate({ kind: 'subscriber', tenantId: 1, customerId: `cus_busy${i}` });
    release();
    await pending;
    source.gate = null;
    await cache.getSubscriberStatus(1, 'cus_quiet');
    expect(source.reads).toBe(1);
  });

  it('reads through while invalidations may be missed, and expires entries after the TTL', async () => {
    let now = 0;
    const source = new FakeSource();
    const cache = new LookupCache(source, { ttlMs: 1_000, now: () => now });
    await cache.getSubscriberStatus(1, 'cus_t');
    await cache.getSubscriberStatus(1, 'cus_t');
    expect(source.reads).toBe(2);
    cache.setLive(true);
    await cache.getSubscriberStatus(1, 'cus_t');
    await cache.getSubscriberStatus(1, 'cus_t');
    expect(source.reads).toBe(3);
    now += 1_001;
    await cache.getSubscriberStatus(1, 'cus_t');
    expect(source.reads).toBe(4);
  });

  it('reads a key changed moments ago from the primary, even past the bound on remembered keys', async () => {
    let now = 0;
    const replica = new FakeSource();
    const primary = new FakeSource();
    const cache = new LookupCache(replica, { primary, now: () => now });
    cache.setLive(true);
    for (let i = 0; i <= 10_001; i += 1) cache.invalidate({ kind: 'subscriber', tenantId: 1, customerId: `cus_${i}` });
    await cache.getSubscriberStatus(1, 'cus_0');
    await cache.getSubscriberStatus(1, 'cus_10001');
    expect([primary.reads, replica.reads]).toEqual([2, 0]);
    now += 2_001;
    await cache.getSubscriberStatus(1, 'cus_5');
    expect(replica.reads).toBe(1);
  });

  it('keeps at most the configured number of entries, and none with 0', async () => {
    const source = new FakeSource();
    const cache = new LookupCache(source, { maxEntries: 2 });
    cache.setLive(true);
    for (const id of ['a', 'b', 'c']) await cache.getSubscriberStatus(1, `cus_${id}`);
    expect(cache.size.subscribers).toBe(2);
    await cache.getSubscriberStatus(1, 'cus_a');
    expect(source.reads).toBe(4);
    const none = new LookupCache(source, { maxEntries: 0 });
    none.setLive(true);
    await none.getSubscriberStatus(1, 'cus_a');
    expect(none.size.subscribers).toBe(0);
  });
});

describe('LookupCache while the store is unreachable', () => {
  const TTL_MS = 60_000;
  const STALE_MS = 300_000;

  function setup(staleIfErrorMs = STALE_MS) {
    const clock = { ms: 0 };
    const source = new FakeSource();
    const stale: string[] = [];
    const cache = new LookupCache(source, {
      ttlMs: TTL_MS,
      staleIfErrorMs,
      now: () => clock.ms,
      events: { hit() {}, miss() {}, invalidated() {}, stale: (kind) => stale.push(kind) },
    });
    return { clock, source, cache, stale };
  }

  it('reads through once the listener is lost, and answers with the last value read only when the store fails, within the bound', async () => {
    const { clock, source, cache, stale } = setup();
    cache.setLive(true);
    source.statuses.set('1:cus_kept', 'lockout');
    await cache.getTenantAuth('acme');
    expect(await cache.getSubscriberStatus(1, 'cus_kept')).toBe('lockout');
    // The listener is lost, and reported again at each failed reconnection.
    cache.setLive(false);
    cache.setLive(false);
    // The store answers: it is read, never memory (a notification may have been missed).
    source.statuses.set('1:cus_kept', 'warning');
    clock.ms = 10_000;
    await cache.getTenantAuth('acme');
    expect(await cache.getSubscriberStatus(1, 'cus_kept')).toBe('warning');
    expect(stale).toEqual([]);

    source.failWith = unreachable();
    clock.ms = 10_000 + STALE_MS;
    expect(await cache.getSubscriberStatus(1, 'cus_kept')).toBe('warning');
    expect((await cache.getTenantAuth('acme'))?.slug).toBe('acme');
    expect(stale).toEqual(['subscriber', 'tenant']);
    // A customer never read has nothing to answer with.
    await expect(cache.getSubscriberStatus(1, 'cus_never')).rejects.toSatisfy(isStoreUnavailable);
    // Past the bound the failure goes on: the lookup answers 503, the snippet fails open.
    clock.ms = 10_000 + STALE_MS + 1_001;
    await expect(cache.getSubscriberStatus(1, 'cus_kept')).rejects.toThrow('ECONNREFUSED');
    expect(stale).toEqual(['subscriber', 'tenant']);
  });

  it('keeps what it read while live when the listener is lost, to answer with if the store is gone too', async () => {
    const { clock, source, cache } = setup();
    cache.setLive(true);
    source.statuses.set('1:cus_kept', 'lockout');
    await cache.getTenantAuth('acme');
    await cache.getSubscriberStatus(1, 'cus_kept');
    // PostgreSQL stops: the listener is lost (and reported again at each failed reconnection).
    cache.setLive(false);
    cache.setLive(false);
    source.failWith = unreachable();
    clock.ms = 30_000;
    expect((await cache.getTenantAuth('acme'))?.slug).toBe('acme');
    expect(await cache.getSubscriberStatus(1, 'cus_kept')).toBe('lockout');
  });

  it('answers with an entry past its TTL while the store fails, even while live', async () => {
    const { clock, source, cache } = setup();
    cache.setLive(true);
    source.statuses.set('1:cus_kept', 'warning');
    await cache.getSubscriberStatus(1, 'cus_kept');
    clock.ms = TTL_MS * 2;
    source.failWith = unreachable();
    expect(await cache.getSubscriberStatus(1, 'cus_kept')).toBe('warning');
    expect(source.reads).toBe(2);
  });

  it('does not wait on a store found unreachable: not for a second, then one read at a time', async () => {
    const { clock, source, cache } = setup();
    source.statuses.set('1:cus_kept', 'lockout');
    await cache.getSubscriberStatus(1, 'cus_kept');
    source.failWith = unreachable();
    await expect(cache.getSubscriberStatus(1, 'cus_other')).rejects.toThrow('ECONNREFUSED');
    expect(source.reads).toBe(2);

    clock.ms = 999;
    expect(await cache.getSubscriberStatus(1, 'cus_kept')).toBe('lockout');
    await expect(cache.getSubscriberStatus(1, 'cus_other')).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(cache.getTenantAuth('acme')).rejects.toSatisfy(isStoreUnavailable);
    expect(source.reads).toBe(2);

    // A second on, one read tries again; while it hangs (a connect timeout), no other waits.
    clock.ms = 1_000;
    let release: () => void = () => {};
    source.gate = new Promise((resolve) => (release = resolve));
    const probe = cache.getSubscriberStatus(1, 'cus_kept');
    expect(source.reads).toBe(3);
    expect(await cache.getSubscriberStatus(1, 'cus_kept')).toBe('lockout');
    await expect(cache.getSubscriberStatus(1, 'cus_other')).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(source.reads).toBe(3);
    // It fails too: another second without trying.
    clock.ms = 6_000;
    release();
    expect(await probe).toBe('lockout');
    source.gate = null;
    clock.ms = 6_999;
    await expect(cache.getSubscriberStatus(1, 'cus_other')).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(source.reads).toBe(3);

    // The store is back: the next read that tries it closes the breaker, and all read again.
    clock.ms = 7_000;
    source.failWith = null;
    source.statuses.set('1:cus_kept', 'active');
    expect(await cache.getSubscriberStatus(1, 'cus_kept')).toBe('active');
    expect(await cache.getSubscriberStatus(1, 'cus_other')).toBeNull();
    expect(source.reads).toBe(5);
  });

  it('passes other failures on, never answering them from memory nor refusing the next reads', async () => {
    const { source, cache } = setup();
    source.statuses.set('1:cus_kept', 'lockout');
    await cache.getSubscriberStatus(1, 'cus_kept');
    source.failWith = new Error('relation "subscribers" does not exist');
    await expect(cache.getSubscriberStatus(1, 'cus_kept')).rejects.toThrow('relation');
    await expect(cache.getSubscriberStatus(1, 'cus_kept')).rejects.toThrow('relation');
    expect(source.reads).toBe(3);
  });

  it('never answers with a value this instance has changed since, nor with any once invalidations flow again', async () => {
    const { clock, source, cache } = setup();
    source.statuses.set('1:cus_paid', 'lockout');
    source.statuses.set('1:cus_kept', 'warning');
    await cache.getSubscriberStatus(1, 'cus_paid');
    await cache.getSubscriberStatus(1, 'cus_kept');
    cache.invalidate({ kind: 'subscriber', tenantId: 1, customerId: 'cus_paid' });
    source.failWith = unreachable();
    await expect(cache.getSubscriberStatus(1, 'cus_paid')).rejects.toThrow('ECONNREFUSED');

    // The listener is back (onReady): what was kept may have missed notifications.
    cache.setLive(true);
    clock.ms = 1_000;
    await expect(cache.getSubscriberStatus(1, 'cus_kept')).rejects.toThrow('ECONNREFUSED');
    clock.ms = 2_000;
    source.failWith = null;
    expect(await cache.getSubscriberStatus(1, 'cus_kept')).toBe('warning');
    const reads = source.reads;
    expect(await cache.getSubscriberStatus(1, 'cus_kept')).toBe('warning');
    expect(source.reads).toBe(reads);
  });

  it('answers nothing from memory with a bound of 0', async () => {
    const { source, cache } = setup(0);
    await cache.getSubscriberStatus(1, 'cus_kept');
    source.failWith = unreachable();
    await expect(cache.getSubscriberStatus(1, 'cus_kept')).rejects.toThrow('ECONNREFUSED');
  });
});

describe.each(engines.filter((e) => e.name === 'postgres'))('invalidation across instances ($name)', (engine) => {
  const url = process.env.DATABASE_URL || DEFAULT_TEST_DATABASE_URL;
  let a: Store;
  let b: Store;
  let cacheB: LookupCache;
  let stopB: () => Promise<void>;
  let cleanup: () => Promise<void>;
  let appName = '';
  const cause = (): ChangeCause => ({ source: 'admin', eventId: null, eventType: null, declineCode: null, occurredAt: new Date() });

  beforeAll(async () => {
    const opened = await engine.open();
    a = opened.store;
    cleanup = opened.cleanup;
    if (opened.target.engine !== 'postgres') throw new Error('postgres only');
    appName = `dunwall_cache_${Date.now().toString(36)}`;
    // Instance B: its own pool and listener on the same schema, named so the test can find it.
    b = new SqlStore(await openDb({ ...opened.target, options: `${opened.target.options ?? ''} -c application_name=${appName}` }));
    cacheB = new LookupCache(b);
    stopB = await keepTrue(cacheB, b);
    const created = await a.createTenant(
      { slug: 'acme', tier: 'starter', cardUpdateUrl: null, hmacRequired: false, allowedOrigins: null, publishableKeyHash: sha256('pk_x').toString('hex'), hmacSecret: 's' },
      new Date(),
    );
    if (!created.ok) throw new Error('tenant');
  });
  afterAll(async () => {
    await stopB();
    await b.close();
    await cleanup();
  });

  it("sees another instance's write through LISTEN/NOTIFY", async () => {
    const tenant = await cacheB.getTenantAuth('acme');
    if (!tenant) throw new Error('no tenant');
    expect(await cacheB.getSubscriberStatus(tenant.id, 'cus_1')).toBeNull();
    expect(await cacheB.getSubscriberStatus(tenant.id, 'cus_1')).toBeNull();
    await a.applyChange(tenant.id, 'cus_1', { kind: 'set', status: 'lockout', reason: 'manual' }, cause(), new Date());
    await expect.poll(() => cacheB.getSubscriberStatus(tenant.id, 'cus_1'), { timeout: 2_000, interval: 5 }).toBe('lockout');
    await a.updateTenant('acme', { suspended: true }, new Date());
    await expect.poll(async () => (await cacheB.getTenantAuth('acme'))?.suspended, { timeout: 2_000, interval: 5 }).toBe(true);
  });

  it('flushes and reads through when its listener is lost, and serves from memory again once back', async () => {
    const tenant = await cacheB.getTenantAuth('acme');
    if (!tenant) throw new Error('no tenant');
    expect(cacheB.isLive).toBe(true);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      const killed = await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE 'LISTEN%'`,
        [appName],
      );
      expect(killed.rowCount).toBe(1);
    } finally {
      await admin.end();
    }
    await expect.poll(() => cacheB.isLive, { timeout: 2_000, interval: 5 }).toBe(false);
    // While it is down, a write is still seen at once: nothing is served from memory.
    await a.applyChange(tenant.id, 'cus_1', { kind: 'set', status: 'active', reason: 'paid' }, cause(), new Date());
    expect(await cacheB.getSubscriberStatus(tenant.id, 'cus_1')).toBe('active');
    await expect.poll(() => cacheB.isLive, { timeout: 5_000, interval: 20 }).toBe(true);
    await a.applyChange(tenant.id, 'cus_1', { kind: 'set', status: 'warning', reason: 'soft_decline' }, cause(), new Date());
    await expect.poll(() => cacheB.getSubscriberStatus(tenant.id, 'cus_1'), { timeout: 2_000, interval: 5 }).toBe('warning');
  });
});
