import { afterEach, describe, expect, it } from 'vitest';
import { checkLookup } from '../../src/domain/lookup.js';
import { sha256 } from '../../src/domain/keys.js';
import type { Mode } from '../../src/domain/types.js';
import { loadMigrations, migrate, storeOver } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';
import { tenantAuth } from '../helpers/store-fixtures.js';

/**
 * Migration 022 (modes): a store as migration 021 left it holds a live tenant
 * (`livemode: true`), a test tenant (`false`) and an either-mode one (`null`), each with a
 * subscriber, its history, a Stripe event, a publishable key, a secret key and a Stripe
 * signing secret. After it, the test tenant's data and keys are its test mode's and every
 * other tenant's its live mode's; each tenant has the other mode's space too, empty.
 */
const engines = await availableEngines();
const T = new Date('2026-03-01T12:00:00Z');

const TENANTS = [
  { slug: 'was-live', livemode: true, pk: 'pk_live_WasLiveWasLiveWasLiveWasLive12', dataMode: 'live' },
  { slug: 'was-test', livemode: false, pk: 'pk_test_WasTestWasTestWasTestWasTest12', dataMode: 'test' },
  { slug: 'was-either', livemode: null, pk: 'pk_WasEitherWasEitherWasEither1234', dataMode: 'live' },
] as const;

const skOf = (slug: string) => `sk_live_${slug.replace(/-/g, '')}${'K'.repeat(40)}`;
const customerOf = (slug: string) => `cus_${slug.replace(/-/g, '_')}`;

describe.each(engines)('migration to modes ($name)', (engine) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  it("puts a test tenant's data and keys in its test mode, every other tenant's in its live mode", async () => {
    const opened = await engine.open({ upTo: 21 });
    cleanups.push(opened.cleanup);
    const { db } = opened;
    const ids = new Map<string, number>();
    for (const t of TENANTS) {
      const [row] = await db.query<{ id: number }>(
        `INSERT INTO tenants (slug, tier, hmac_required, livemode, created_at, updated_at)
         VALUES ($1, 'starter', false, $2, $3, $3) RETURNING id`,
        [t.slug, t.livemode, T],
      );
      const id = row?.id ?? 0;
      ids.set(t.slug, id);
      // The store's secrets are sealed with the key the test store opens them with: written in clear, as before the key.
      await db.query(
        `INSERT INTO tenant_credentials (tenant_id, kind, key_hash, secret, created_at) VALUES
         ($1, 'publishable_key', $2, NULL, $4), ($1, 'hmac_secret', NULL, $3, $4), ($1, 'stripe_webhook_secret', NULL, $5, $4)`,
        [id, sha256(t.pk).toString('hex'), 'h'.repeat(43), T, `whsec_${t.slug}`],
      );
      await db.query(
        `INSERT INTO tenant_secret_keys (id, tenant_id, name, scopes, prefix, digest, created_at)
         VALUES ($1, $2, 'server', ARRAY['status:read', 'subscribers:read'], $3, $4, $5)`,
        [`key_${t.slug.replace(/-/g, '')}`, id, skOf(t.slug).slice(0, 12), sha256(skOf(t.slug)), T],
      );
      await db.query(
        `INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, updated_at)
         VALUES ($1, $2, 'lockout', 'lockout', 'manual', $3, $3)`,
        [id, customerOf(t.slug), T],
      );
      await db.query(
        `INSERT INTO subscriber_history (tenant_id, processor_customer_id, status, reason, source, occurred_at, recorded_at)
         VALUES ($1, $2, 'lockout', 'manual', 'admin', $3, $3)`,
        [id, customerOf(t.slug), T],
      );
      await db.query(
        `INSERT INTO stripe_events (tenant_id, event_id, event_type, processor_customer_id, created, facts, outcome, received_at)
         VALUES ($1, $2, 'invoice.paid', $3, $4, '{}', 'applied', $4)`,
        [id, `evt_${t.slug.replace(/-/g, '')}`, customerOf(t.slug), T],
      );
    }

    const applied = await migrate(
      db,
      loadMigrations().filter((m) => m.version > 21),
    );
    expect(applied).toContain('022_modes.sql');
    const store = storeOver(db);

    // Twins are neither listed nor counted, nor addressable by a slug.
    expect((await store.tenants.listTenants()).map((t) => t.slug).sort()).toEqual(TENANTS.map((t) => t.slug).sort());
    expect(await store.tenants.countTenants()).toBe(3);
    expect(await store.tenants.getTenant('was-test~live')).toBeNull();

    for (const t of TENANTS) {
      const id = ids.get(t.slug) ?? 0;
      const otherMode: Mode = t.dataMode === 'live' ? 'test' : 'live';
      const tenant = await store.tenants.getTenant(t.slug);
      expect(tenant?.mode).toBe(t.dataMode);
      const data = await store.tenants.spaceOf(t.slug, t.dataMode);
      const other = await store.tenants.spaceOf(t.slug, otherMode);
      // The tenant's own row holds its data, and is the space of the mode its data went to.
      expect(data).toEqual({ tenantId: id, spaceId: id });
      expect(other?.tenantId).toBe(id);
      expect(other?.spaceId).not.toBe(id);
      const otherId = other?.spaceId ?? 0;

      // Subscribers, their history and the Stripe events: in the data's mode only.
      expect((await store.subscribers.getSubscriber(id, customerOf(t.slug)))?.status).toBe('lockout');
      expect(await store.subscribers.getSubscriber(otherId, customerOf(t.slug))).toBeNull();
      const events = await db.query<{ tenant_id: number }>('SELECT tenant_id FROM stripe_events WHERE event_id = $1', [
        `evt_${t.slug.replace(/-/g, '')}`,
      ]);
      expect(events.map((e) => e.tenant_id)).toEqual([id]);
      const history = await db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM subscriber_history WHERE tenant_id = $1',
        [otherId],
      );
      expect(history[0]?.n).toBe(0);

      // The signing secret serves the data's mode; the other mode has none until one is set.
      const signing = await store.stripe.getStripeSigningSecrets(t.slug);
      expect(signing?.spaces[t.dataMode].secrets.map((s) => s.value)).toEqual([`whsec_${t.slug}`]);
      expect(signing?.spaces[t.dataMode].spaceId).toBe(id);
      expect(signing?.spaces[otherMode].secrets).toEqual([]);

      // The publishable and the secret key address the mode their data went to, and answer from it.
      const auth = await tenantAuth(store.changes, t.slug);
      expect(auth).not.toBeNull();
      if (auth === null) continue;
      expect(auth.id).toBe(id);
      expect(auth.twin?.mode).toBe(otherMode);
      const query = { processor_customer_id: customerOf(t.slug) };
      for (const token of [t.pk, skOf(t.slug)]) {
        const check = checkLookup({ token, query }, auth, T.getTime());
        expect(check.ok && { mode: check.space.mode, id: check.space.id }).toEqual({ mode: t.dataMode, id });
      }
      // Settings are the tenant's: both spaces carry its hmac secret and suspension.
      expect(auth.twin?.hmacKeys.length).toBe(1);
      expect(auth.twin?.tenantId).toBe(id);
    }

    // A preview is a test mode's: the former test tenant's key previews, a live key does not.
    const wasTest = await tenantAuth(store.changes, 'was-test');
    const wasLive = await tenantAuth(store.changes, 'was-live');
    const preview = (auth: typeof wasTest, token: string) => {
      const check = checkLookup(
        { token, query: { processor_customer_id: 'cus_x', preview: 'warning' } },
        auth,
        T.getTime(),
      );
      return check.ok ? check.preview : check.code;
    };
    expect(preview(wasTest, TENANTS[1].pk)).toBe('warning');
    expect(preview(wasLive, TENANTS[0].pk)).toBeNull();

    // A setting changed on the tenant reaches its twin's copy (what a query by the space's id reads).
    expect((await store.tenants.updateTenant('was-live', { policy: { grace_days: 5 } }, T)).ok).toBe(true);
    const twinId = (await store.tenants.spaceOf('was-live', 'test'))?.spaceId ?? 0;
    const [copy] = await db.query<{ policy_grace_days: number }>(
      'SELECT policy_grace_days FROM tenants WHERE id = $1',
      [twinId],
    );
    expect(Number(copy?.policy_grace_days)).toBe(5);
  });

  it('creates new tenants with both spaces, and deletes both with the tenant', async () => {
    const opened = await engine.open();
    cleanups.push(opened.cleanup);
    const { store, db } = opened;
    const created = await store.tenants.createTenant(
      {
        slug: 'fresh',
        tier: 'starter',
        cardUpdateUrl: null,
        hmacRequired: false,
        allowedOrigins: null,
        hmacSecret: 'h'.repeat(43),
        publishableKeyHash: sha256('pk_live_FreshFreshFreshFreshFreshFr').toString('hex'),
        testPublishableKeyHash: sha256('pk_test_FreshFreshFreshFreshFreshFr').toString('hex'),
      },
      T,
    );
    expect(created.ok && created.tenant.mode).toBe('live');
    const live = await store.tenants.spaceOf('fresh', 'live');
    const test = await store.tenants.spaceOf('fresh', 'test');
    expect(live?.spaceId).toBe(live?.tenantId);
    expect(test?.tenantId).toBe(live?.tenantId);
    const auth = await tenantAuth(store.changes, 'fresh');
    const modeOf = (token: string) => {
      const check =
        auth === null ? null : checkLookup({ token, query: { processor_customer_id: 'cus_a' } }, auth, T.getTime());
      return check?.ok ? check.space.mode : check?.code;
    };
    expect(modeOf('pk_live_FreshFreshFreshFreshFreshFr')).toBe('live');
    expect(modeOf('pk_test_FreshFreshFreshFreshFreshFr')).toBe('test');
    expect(modeOf('pk_test_SomeoneElseSomeoneElseSomeo')).toBe('invalid_publishable_key');

    expect(await store.tenants.deleteTenant(live?.tenantId ?? 0)).toBe(true);
    const [left] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM tenants WHERE id = $1', [
      test?.spaceId ?? 0,
    ]);
    expect(left?.n).toBe(0);
  });
});
