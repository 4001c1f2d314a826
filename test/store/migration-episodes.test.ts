import { afterEach, describe, expect, it } from 'vitest';
import { subscriberStatus } from '../helpers/store-fixtures.js';
import { loadMigrations, migrate, storeOver } from '../../src/store/index.js';
import { toStripeEventInput } from '../../src/services/stripe-events.js';
import { availableEngines } from '../helpers/engines.js';
import { event, invoice, paymentIds } from '../helpers/stripe-fixtures.js';

/**
 * A store written by the version before episodes (migrations 001 to 004): one status per
 * customer with its position, tombstones, history. Migrating forward keeps every status;
 * a Stripe event dated in a later second then takes over, as after an admin's override.
 */
const engines = await availableEngines();
const T = new Date('2026-03-01T12:00:00Z');
const at = (s: number) => new Date(T.getTime() + s * 1000);

describe.each(engines)('migration to episodes ($name)', (engine) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  it('keeps every status, history and tombstone the previous version wrote', async () => {
    const opened = await engine.open({ upTo: 4 });
    cleanups.push(opened.cleanup);
    const { db } = opened;
    const [tenant] = await db.query<{ id: number }>(
      `INSERT INTO tenants (slug, tier, hmac_required, created_at, updated_at) VALUES ('legacy', 'starter', false, $1, $1) RETURNING id`,
      [T],
    );
    const id = tenant?.id ?? 0;
    // As the previous version kept them: a status with the position of the event that set it.
    const rows: [string, string, string, number, string][] = [
      ['cus_warn', 'warning', 'soft_decline', 1, 'evt_old_1'],
      ['cus_lock', 'lockout', 'hard_decline', 2, 'evt_old_2'],
      ['cus_ok', 'active', 'paid', 3, 'evt_old_3'],
      ['cus_manual', 'lockout', 'manual', 0, ''],
    ];
    for (const [cus, status, reason, rank, eventId] of rows) {
      await db.query(
        `INSERT INTO subscribers (tenant_id, processor_customer_id, status, reason, status_at, status_rank, status_event_id, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $5)`,
        [id, cus, status, reason, at(10), rank, eventId],
      );
      await db.query(
        `INSERT INTO subscriber_history (tenant_id, processor_customer_id, status, reason, source, event_id, occurred_at, recorded_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
        [id, cus, status, reason, eventId === '' ? 'admin' : 'stripe', eventId === '' ? null : eventId, at(10)],
      );
    }
    await db.query(
      `INSERT INTO subscriber_history (tenant_id, processor_customer_id, status, reason, source, occurred_at, recorded_at) VALUES ($1, 'cus_gone', NULL, NULL, 'admin', $2, $2)`,
      [id, at(5)],
    );
    await db.query(
      `INSERT INTO subscriber_tombstones (tenant_id, processor_customer_id, removed_at, rank, event_id) VALUES ($1, 'cus_gone', $2, 4, '')`,
      [id, at(5)],
    );
    await db.query(
      `INSERT INTO stripe_events (tenant_id, event_id, event_type, processor_customer_id, created, facts, outcome, received_at)
       VALUES ($1, 'evt_old_1', 'charge.failed', 'cus_warn', $2, '{}', 'applied', $2)`,
      [id, at(10)],
    );

    // 005 and every migration after it: the current store needs them all.
    expect(
      (
        await migrate(
          db,
          loadMigrations().filter((m) => m.version >= 5),
        )
      )[0],
    ).toBe('005_episodes.sql');
    const store = storeOver(db);

    for (const [cus, status, reason] of rows) {
      expect(await subscriberStatus(store.subscribers, id, cus), cus).toBe(status);
      expect(await store.subscribers.getSubscriber(id, cus), cus).toMatchObject({
        status,
        reason,
        overriddenAt: at(10),
        episodes: [],
      });
    }
    const gone = await store.subscribers.getSubscriber(id, 'cus_gone');
    expect(gone).toMatchObject({ status: null, history: [{ status: null, effect: 'removed' }] });
    expect((await store.subscribers.getSubscriber(id, 'cus_warn'))?.history).toMatchObject([
      { status: 'warning', effect: 'changed', episode: null },
    ]);

    // A redelivery of an event the previous version recorded is still a duplicate.
    const redelivered = event(
      'charge.failed',
      { id: 'ch_1', object: 'charge', customer: 'cus_warn' },
      { created: at(10).getTime() / 1000, id: 'evt_old_1' },
    );
    const input = toStripeEventInput(redelivered);
    if (input === null) throw new Error('relevant event');
    expect((await store.stripe.recordStripeEvent(id, input, at(20))).outcome).toBe('duplicate');

    // The same second leaves a migrated status standing; a later second takes over.
    const ids = paymentIds();
    const sameSecond = toStripeEventInput(
      event('invoice.paid', invoice('cus_lock', { ids, status: 'paid' }), { created: at(10).getTime() / 1000 }),
    );
    const later = toStripeEventInput(
      event('invoice.paid', invoice('cus_lock', { ids, status: 'paid' }), { created: at(11).getTime() / 1000 }),
    );
    if (sameSecond === null || later === null) throw new Error('relevant events');
    await store.stripe.recordStripeEvent(id, sameSecond, at(20));
    expect(await subscriberStatus(store.subscribers, id, 'cus_lock')).toBe('lockout');
    await store.stripe.recordStripeEvent(id, later, at(21));
    expect(await store.subscribers.getSubscriber(id, 'cus_lock')).toMatchObject({
      status: 'active',
      reason: 'paid',
      overriddenAt: null,
    });

    // The previous version kept no subscription ids, so a migrated status stands alone:
    // a later event of another subscription ends it. An import after the upgrade (stripe
    // sync: events dated at the real attempts, older than the migrated status) gives the
    // status its episode, so that it survives that.
    const warned = paymentIds();
    const imported = toStripeEventInput(
      event(
        'invoice.payment_failed',
        invoice('cus_warn', { ids: warned, next_payment_attempt: at(30).getTime() / 1000 }),
        {
          created: at(9).getTime() / 1000,
          id: 'evt_sync_in_1_1',
        },
      ),
    );
    const otherPaid = toStripeEventInput(
      event('invoice.paid', invoice('cus_warn', { status: 'paid' }), { created: at(12).getTime() / 1000 }),
    );
    if (imported === null || otherPaid === null) throw new Error('relevant events');
    await store.stripe.recordStripeEvent(id, imported, at(23));
    expect(await store.subscribers.getSubscriber(id, 'cus_warn')).toMatchObject({
      status: 'warning',
      reason: 'soft_decline',
      overriddenAt: at(10),
    });
    await store.stripe.recordStripeEvent(id, otherPaid, at(24));
    expect(await store.subscribers.getSubscriber(id, 'cus_warn')).toMatchObject({
      status: 'warning',
      reason: 'soft_decline',
      overriddenAt: null,
    });

    // An event older than the migrated tombstone changes nothing.
    const old = toStripeEventInput(
      event('invoice.payment_failed', invoice('cus_gone', { next_payment_attempt: null }), {
        created: at(4).getTime() / 1000,
      }),
    );
    if (old === null) throw new Error('relevant event');
    expect((await store.stripe.recordStripeEvent(id, old, at(22))).outcome).toBe('stale');
    expect(await subscriberStatus(store.subscribers, id, 'cus_gone')).toBeNull();
  });
});
