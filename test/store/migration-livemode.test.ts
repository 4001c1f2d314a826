import { afterEach, describe, expect, it } from 'vitest';
import { loadMigrations, migrate, storeOver } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';

/**
 * A tenant the version before test mode created (migrations up to 010) takes both modes
 * after the migration: its livemode is null, as the contract says of every older tenant.
 */
const engines = await availableEngines();
const T = new Date('2026-03-01T12:00:00Z');

describe.each(engines)('migration to test mode ($name)', (engine) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  it('gives every existing tenant livemode null, and new ones the mode they are created with', async () => {
    const opened = await engine.open({ upTo: 10 });
    cleanups.push(opened.cleanup);
    const { db } = opened;
    await db.query(
      `INSERT INTO tenants (slug, tier, hmac_required, created_at, updated_at) VALUES ('older', 'starter', false, $1, $1)`,
      [T],
    );

    const applied = await migrate(
      db,
      loadMigrations().filter((m) => m.version > 10),
    );
    expect(applied).toContain('012_tenant_livemode.sql');
    const store = storeOver(db);
    expect((await store.tenants.getTenant('older'))?.livemode).toBeNull();
    // Migration 022: an either-mode tenant's data is its live mode's.
    expect((await store.tenants.getTenant('older'))?.mode).toBe('live');

    const base = {
      tier: 'starter',
      cardUpdateUrl: null,
      hmacRequired: false,
      allowedOrigins: null,
      hmacSecret: 's'.repeat(43),
    };
    for (const [slug, livemode, hash] of [
      ['newer-live', true, 'ab'],
      ['newer-test', false, 'cd'],
    ] as const) {
      const created = await store.tenants.createTenant(
        { ...base, slug, livemode, publishableKeyHash: hash.repeat(32) },
        T,
      );
      expect(created).toMatchObject({ ok: true, tenant: { slug, livemode } });
      // Since the modes (migration 022) every new tenant holds both; its own row is its live mode's.
      expect((await store.tenants.getTenant(slug))?.mode).toBe('live');
    }
    expect(await store.tenants.updateTenant('older', { livemode: false }, T)).toMatchObject({
      ok: true,
      tenant: { livemode: false },
    });
    expect(await store.tenants.updateTenant('older', { hmacRequired: true }, T)).toMatchObject({
      ok: true,
      tenant: { hmacRequired: true, livemode: false },
    });
    expect(await store.tenants.updateTenant('older', { livemode: null }, T)).toMatchObject({
      ok: true,
      tenant: { livemode: null },
    });
  });
});
