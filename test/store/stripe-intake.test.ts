import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StripeIntakeCount, StripeIntakeKind } from '../../src/domain/stripe/intake.js';
import { storeOver } from '../../src/store/index.js';
import type { Db, Store } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';
import { newTenant } from '../helpers/store-fixtures.js';

/**
 * The Stripe intake counters in the store (migration 016): one statement adds any number of
 * rows, rows add up across flushes and processes, `last_at` only moves later, a tenant
 * deleted meanwhile costs the batch nothing, the health's read, and retention by day.
 */
const engines = await availableEngines();
const T = new Date('2026-01-10T12:00:00Z');
const at = (iso: string) => new Date(iso);
const row = (
  tenantId: number,
  day: string,
  kind: StripeIntakeKind,
  count: number,
  lastAt: string,
): StripeIntakeCount => ({
  tenantId,
  day,
  kind,
  count,
  lastAt: at(lastAt),
});

describe.each(engines)('Stripe intake counters ($name)', (engine) => {
  let store: Store;
  let db: Db;
  let cleanup: () => Promise<void> = async () => {};
  let acme = 0;
  let beta = 0;

  beforeAll(async () => {
    const opened = await engine.open();
    store = opened.store;
    db = opened.db;
    cleanup = opened.cleanup;
    for (const slug of ['acme', 'beta']) {
      const created = await store.tenants.createTenant(newTenant(slug), T);
      if (!created.ok) throw new Error('tenant');
      if (slug === 'acme') acme = created.tenant.id;
      else beta = created.tenant.id;
    }
  });
  afterAll(async () => cleanup());

  it('adds a whole flush in one statement, rows adding up, the last time only ever later', async () => {
    let statements = 0;
    const counting: Db = {
      ...db,
      engine: db.engine,
      query: (sql, params) => {
        statements += 1;
        return db.query(sql, params);
      },
    };
    const flushing = storeOver(counting);
    await flushing.stripe.addStripeIntake([
      row(acme, '2026-01-10', 'received', 40, '2026-01-10T11:00:00Z'),
      row(acme, '2026-01-10', 'refused_signature', 3, '2026-01-10T10:00:00Z'),
      row(acme, '2026-01-09', 'received', 7, '2026-01-09T23:00:00Z'),
      row(beta, '2026-01-10', 'replayed', 500, '2026-01-10T09:00:00Z'),
    ]);
    expect(statements).toBe(1);
    // Another process's flush: its counts add, its older last time does not move the row back.
    await flushing.stripe.addStripeIntake([
      row(acme, '2026-01-10', 'received', 2, '2026-01-10T08:00:00Z'),
      row(acme, '2026-01-10', 'refused_signature', 1, '2026-01-10T11:30:00Z'),
    ]);
    expect(statements).toBe(2);
    const read = await store.stripe.stripeIntake(acme, at('2026-01-04T00:00:00Z'));
    expect(read).toEqual({
      days: [
        { day: '2026-01-09', counts: { received: 7, refused_signature: 0, refused_livemode: 0, replayed: 0 } },
        { day: '2026-01-10', counts: { received: 42, refused_signature: 4, refused_livemode: 0, replayed: 0 } },
      ],
      lastAt: {
        received: at('2026-01-10T11:00:00Z'),
        refused_signature: at('2026-01-10T11:30:00Z'),
        refused_livemode: null,
        replayed: null,
      },
    });
    expect((await store.stripe.stripeIntake(beta, at('2026-01-04T00:00:00Z'))).days).toEqual([
      { day: '2026-01-10', counts: { received: 0, refused_signature: 0, refused_livemode: 0, replayed: 500 } },
    ]);
  });

  it('adds flushes that run at once and share rows, without a deadlock', async () => {
    const flushes = Array.from({ length: 8 }, (_, i) =>
      store.stripe.addStripeIntake(
        // Each in its own order: the store orders the rows before it locks them.
        (i % 2 === 0 ? [acme, beta] : [beta, acme]).flatMap((t) => [
          row(t, '2026-01-08', 'received', 1, '2026-01-08T10:00:00Z'),
          row(t, '2026-01-08', 'refused_livemode', 2, '2026-01-08T10:00:00Z'),
        ]),
      ),
    );
    await Promise.all(flushes);
    const days = (await store.stripe.stripeIntake(beta, at('2026-01-08T00:00:00Z'))).days;
    expect(days[0]).toEqual({
      day: '2026-01-08',
      counts: { received: 8, refused_signature: 0, refused_livemode: 16, replayed: 0 },
    });
  });

  it('reads the days from `since` on, and the last of each kind among every day kept', async () => {
    await store.stripe.addStripeIntake([row(acme, '2025-12-01', 'replayed', 9, '2025-12-01T07:00:00Z')]);
    const read = await store.stripe.stripeIntake(acme, at('2026-01-09T00:00:00Z'));
    expect(read.days.map((d) => d.day)).toEqual(['2026-01-09', '2026-01-10']);
    expect(read.lastAt.replayed).toEqual(at('2025-12-01T07:00:00Z'));
  });

  it('drops the counts of a tenant deleted since they were counted, and keeps the rest of the batch', async () => {
    const created = await store.tenants.createTenant(newTenant('gone'), T);
    if (!created.ok) throw new Error('tenant');
    const gone = created.tenant.id;
    await store.stripe.addStripeIntake([row(gone, '2026-01-10', 'received', 1, '2026-01-10T10:00:00Z')]);
    expect(await store.tenants.deleteTenant(gone)).toBe(true);
    // Its rows went with it.
    expect((await db.query('SELECT 1 FROM stripe_intake WHERE tenant_id = $1', [gone])).length).toBe(0);
    await store.stripe.addStripeIntake([
      row(gone, '2026-01-10', 'received', 5, '2026-01-10T12:00:00Z'),
      row(acme, '2026-01-07', 'received', 1, '2026-01-07T12:00:00Z'),
    ]);
    expect((await db.query('SELECT 1 FROM stripe_intake WHERE tenant_id = $1', [gone])).length).toBe(0);
    expect((await store.stripe.stripeIntake(acme, at('2026-01-07T00:00:00Z'))).days[0]).toMatchObject({
      day: '2026-01-07',
      counts: { received: 1 },
    });
  });

  it('prunes the days before the cut-off, oldest first, by batch', async () => {
    const days = async () =>
      (
        await db.query<{ day: string }>(
          "SELECT DISTINCT to_char(day, 'YYYY-MM-DD') AS day FROM stripe_intake ORDER BY 1",
        )
      ).map((r) => r.day);
    expect(await days()).toEqual(['2025-12-01', '2026-01-07', '2026-01-08', '2026-01-09', '2026-01-10']);
    // The cut-off's own day stays: what is pruned is whole days before it.
    expect(await store.maintenance.pruneOld('stripe_intake', at('2026-01-08T18:00:00Z'), 1)).toBe(1);
    expect(await days()).toEqual(['2026-01-07', '2026-01-08', '2026-01-09', '2026-01-10']);
    expect(await store.maintenance.pruneOld('stripe_intake', at('2026-01-08T18:00:00Z'), 100)).toBe(1);
    expect(await store.maintenance.pruneOld('stripe_intake', at('2026-01-08T18:00:00Z'), 100)).toBe(0);
    expect(await days()).toEqual(['2026-01-08', '2026-01-09', '2026-01-10']);
  });
});
