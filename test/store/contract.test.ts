import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import type { HmacKey } from '../../src/domain/hmac.js';
import { sha256 } from '../../src/domain/keys.js';
import type { Change } from '../../src/domain/stripe/fold.js';
import type { SubscriberStatus } from '../../src/domain/types.js';
import { loadMigrations, migrate } from '../../src/store/index.js';
import type { ChangeCause, Db, Store } from '../../src/store/index.js';
import { newTenant, subscriberStatus, tenantAuth } from '../helpers/store-fixtures.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';

const engines = await availableEngines();
const T = new Date('2026-03-01T12:00:00Z');
const at = (s: number) => new Date(T.getTime() + s * 1000);
const set = (status: SubscriberStatus, reason: string): Change => ({ kind: 'set', status, reason });
/** What a key (or a secret, by the book) signs a probe customer id to: which secret a key holds. */
const signs = (key: HmacKey | string) =>
  typeof key === 'string' ? computeHmac(key, 'cus_probe') : key.sign('cus_probe').toString('hex');
const admin = (d: Date): ChangeCause => ({
  source: 'admin',
  eventId: null,
  eventType: null,
  declineCode: null,
  occurredAt: d,
});

describe.each(engines)('Store contract ($name)', (engine: Engine) => {
  let store: Store;
  let db: Db;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ store, db, cleanup } = await engine.open());
  });
  afterAll(() => cleanup());

  it('migrates idempotently: a second run applies nothing', async () => {
    expect(await migrate(db)).toEqual([]);
    const rows = await db.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(rows.map((r) => r.version)).toEqual(loadMigrations().map((m) => m.version));
  });

  it('creates a tenant once; a taken slug or an unknown tier is a value, not an exception', async () => {
    const created = await store.tenants.createTenant(
      newTenant('acme', { cardUpdateUrl: 'https://a.test/c', allowedOrigins: ['https://a.test'] }),
      T,
    );
    expect(created.ok).toBe(true);
    expect(await store.tenants.createTenant(newTenant('acme'), T)).toEqual({ ok: false, error: 'exists' });
    expect(await store.tenants.createTenant(newTenant('other', { tier: 'gold' }), T)).toEqual({
      ok: false,
      error: 'unknown_tier',
    });
    expect(await store.tenants.countTenants()).toBe(1);
  });

  it('keeps publishable keys as SHA-256 digests only, never in clear', async () => {
    const rows = await db.query<{ key_hash: string | null; secret: string | null }>(
      "SELECT key_hash, secret FROM tenant_credentials WHERE kind = 'publishable_key'",
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]?.key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows[0]?.secret).toBeNull();
  });

  it('reads the tenant as the lookup needs it', async () => {
    const auth = await tenantAuth(store.changes, 'acme');
    expect(auth).toMatchObject({
      slug: 'acme',
      suspended: false,
      hmacRequired: false,
      cardUpdateUrl: 'https://a.test/c',
      allowedOrigins: ['https://a.test'],
      entitlements: { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false },
    });
    expect(auth?.hmacKeys.map((k) => [signs(k.value), k.expiresAtMs])).toEqual([[signs('secret-acme'), null]]);
    expect(auth?.knownBodies.warning.toString()).toBe(
      '{"status":"warning","card_update_url":"https://a.test/c","entitlements":{"powered_by_watermark":true,"custom_domain":false,"downstream_webhooks":false}}',
    );
    expect(auth?.publishableKeyHashes[0]?.value.equals(sha256('pk_acme_key_0000000000000000000'))).toBe(true);
    expect(await tenantAuth(store.changes, 'nobody')).toBeNull();
  });

  it('rotates a credential: the old one expires after the overlap, the new one does not', async () => {
    const tenant = await store.tenants.getTenant('acme');
    if (!tenant) throw new Error('no tenant');
    await store.keys.rotateCredential(tenant.id, 'hmac_secret', 'secret-acme-2', 3600, at(10));
    const auth = await tenantAuth(store.changes, 'acme');
    expect(auth?.hmacKeys.map((k) => [signs(k.value), k.expiresAtMs])).toEqual([
      [signs('secret-acme'), at(3610).getTime()],
      [signs('secret-acme-2'), null],
    ]);
    // A second rotation inside the overlap: the key already on its way out ends now, so that
    // two credentials at most verify.
    await store.keys.rotateCredential(tenant.id, 'hmac_secret', 'secret-acme-3', 86_400, at(20));
    const again = await tenantAuth(store.changes, 'acme');
    expect(again?.hmacKeys.map((k) => k.expiresAtMs)).toEqual([at(20).getTime(), at(86_420).getTime(), null]);
  });

  it('updates only the fields in the patch', async () => {
    const res = await store.tenants.updateTenant('acme', { suspended: true, cardUpdateUrl: null }, at(30));
    expect(res.ok && res.tenant).toMatchObject({
      suspended: true,
      cardUpdateUrl: null,
      allowedOrigins: ['https://a.test'],
      tier: 'starter',
    });
    expect(await store.tenants.updateTenant('nobody', { suspended: true }, T)).toEqual({
      ok: false,
      error: 'not_found',
    });
    expect(await store.tenants.updateTenant('acme', { tier: 'gold' }, T)).toEqual({ ok: false, error: 'unknown_tier' });
  });

  it('sets a signing secret in the same transaction as the patch: a refused patch stores nothing', async () => {
    const count = async () =>
      (
        await db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM tenant_credentials WHERE kind = 'stripe_webhook_secret'",
        )
      )[0]?.n;
    const rotation = { kind: 'stripe_webhook_secret' as const, material: 'whsec_one', overlapS: 60 };
    expect(await store.tenants.updateTenant('acme', { tier: 'gold' }, T, rotation)).toEqual({
      ok: false,
      error: 'unknown_tier',
    });
    expect(await count()).toBe(0);
    const ok = await store.tenants.updateTenant('acme', { hmacRequired: true }, T, rotation);
    expect(ok.ok).toBe(true);
    expect(await count()).toBe(1);
  });

  it('records subscriber changes with their cause, and deletion as a history entry', async () => {
    const tenant = await store.tenants.getTenant('acme');
    if (!tenant) throw new Error('no tenant');
    expect(await subscriberStatus(store.subscribers, tenant.id, 'cus_1')).toBeNull();
    await store.subscribers.applyChange(tenant.id, 'cus_1', set('warning', 'soft_decline'), admin(at(1)), at(1));
    await store.subscribers.applyChange(tenant.id, 'cus_1', set('lockout', 'hard_decline'), admin(at(2)), at(3));
    expect(await subscriberStatus(store.subscribers, tenant.id, 'cus_1')).toBe('lockout');
    const record = await store.subscribers.getSubscriber(tenant.id, 'cus_1');
    expect(record).toMatchObject({ status: 'lockout', reason: 'hard_decline', overriddenAt: at(2), episodes: [] });
    expect(record?.history).toEqual([
      {
        status: 'warning',
        derivedStatus: 'warning',
        lockoutAt: null,
        policyRule: null,
        secretKeyId: null,
        adminAction: 'set_status',
        reason: 'soft_decline',
        effect: 'changed',
        episode: null,
        source: 'admin',
        eventId: null,
        eventType: null,
        declineCode: null,
        occurredAt: at(1),
        recordedAt: at(1),
      },
      {
        status: 'lockout',
        derivedStatus: 'lockout',
        lockoutAt: null,
        policyRule: null,
        secretKeyId: null,
        adminAction: 'set_status',
        reason: 'hard_decline',
        effect: 'changed',
        episode: null,
        source: 'admin',
        eventId: null,
        eventType: null,
        declineCode: null,
        occurredAt: at(2),
        recordedAt: at(3),
      },
    ]);
    expect(await store.subscribers.applyChange(tenant.id, 'cus_1', { kind: 'delete' }, admin(at(4)), at(4))).toBe(
      'applied',
    );
    expect(await subscriberStatus(store.subscribers, tenant.id, 'cus_1')).toBeNull();
    // The history outlives the record.
    const cleared = await store.subscribers.getSubscriber(tenant.id, 'cus_1');
    expect(cleared).toMatchObject({ status: null, reason: null, overriddenAt: null, updatedAt: null });
    expect(cleared?.history.map((e) => [e.status, e.effect, e.adminAction])).toEqual([
      ['warning', 'changed', 'set_status'],
      ['lockout', 'changed', 'set_status'],
      [null, 'removed', 'delete'],
    ]);
    expect(await store.subscribers.getSubscriber(tenant.id, 'cus_never')).toBeNull();
  });

  it('keeps subscribers of different tenants apart', async () => {
    await store.tenants.createTenant(newTenant('beta'), T);
    const [a, b] = [await store.tenants.getTenant('acme'), await store.tenants.getTenant('beta')];
    if (!a || !b) throw new Error('no tenants');
    await store.subscribers.applyChange(a.id, 'cus_same', set('lockout', 'manual'), admin(T), T);
    expect(await subscriberStatus(store.subscribers, b.id, 'cus_same')).toBeNull();
    await store.subscribers.applyChange(b.id, 'cus_same', set('warning', 'manual'), admin(T), T);
    expect(await subscriberStatus(store.subscribers, a.id, 'cus_same')).toBe('lockout');
  });

  it('upserts tiers, their flags normalised with the named ones first', async () => {
    const tier = await store.tenants.putTier(
      'gold',
      { zeta: true, downstream_webhooks: true, powered_by_watermark: false, custom_domain: true },
      T,
    );
    expect(Object.keys(tier.entitlements)).toEqual([
      'powered_by_watermark',
      'custom_domain',
      'downstream_webhooks',
      'zeta',
    ]);
    expect((await store.tenants.listTiers()).map((t) => t.name)).toEqual(['gold', 'growth', 'scale', 'starter']);
  });

  it('answers ping', async () => {
    await expect(store.maintenance.ping()).resolves.toBeUndefined();
  });
});

describe.each(engines.filter((e) => e.name === 'postgres'))('migrations on a shared server ($name)', (engine) => {
  it('are safe when instances start at once: each migration is applied exactly once', async () => {
    const { db, target, cleanup } = await engine.open();
    try {
      const tables = await db.query<{ name: string }>(
        'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()',
      );
      await db.exec(`DROP TABLE ${tables.map((t) => t.name).join(', ')} CASCADE`);
      const { openDb } = await import('../../src/store/index.js');
      const instances = await Promise.all([openDb(target), openDb(target), openDb(target)]);
      const applied = await Promise.all(instances.map((d) => migrate(d)));
      expect(applied.flat().sort()).toEqual(
        loadMigrations()
          .map((m) => m.name)
          .sort(),
      );
      expect(applied.filter((names) => names.length > 0)).toHaveLength(1);
      await Promise.all(instances.map((d) => d.close()));
    } finally {
      await cleanup();
    }
  });
});
