import { afterEach, describe, expect, it } from 'vitest';
import { loadMigrations, migrate } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';

/**
 * Migration 015 backfills the dunning runs from what the episodes still tell: an open run
 * per unresolved episode (from its dunning start, or its latest event when that is unknown),
 * a closed one per resolved episode whose dunning start is known, none otherwise.
 */
const engines = await availableEngines();
const T = new Date('2026-03-01T12:00:00Z');
const at = (s: number) => new Date(T.getTime() + s * 1000);

describe.each(engines)('migration to dunning runs ($name)', (engine) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  it('keeps each episode current run, with its invoice amount and class', async () => {
    const opened = await engine.open({ upTo: 14 });
    cleanups.push(opened.cleanup);
    const { db } = opened;
    const [tenant] = await db.query<{ id: number }>(
      `INSERT INTO tenants (slug, tier, hmac_required, created_at, updated_at) VALUES ('legacy', 'starter', false, $1, $1) RETURNING id`,
      [T],
    );
    const id = tenant?.id ?? 0;
    await db.query(
      `INSERT INTO stripe_invoices (tenant_id, invoice_id, processor_customer_id, episode, auto_collected, first_invoice, amount_due, currency)
       VALUES ($1, 'in_open', 'cus_open', 'sub_open', true, false, 4200, 'gbp')`,
      [id],
    );
    const episodes: [string, string, string, string, Date | null, Date | null, string | null][] = [
      ['cus_open', 'sub_open', 'lockout', 'hard_decline', at(10), null, 'in_open'],
      ['cus_old', 'sub_old', 'warning', 'payment_action_required', null, null, null],
      ['cus_paid', 'sub_paid', 'resolved', 'voided', at(5), at(50), null],
      ['cus_never', 'sub_never', 'resolved', 'paid', null, at(60), null],
    ];
    for (const [cus, episode, state, reason, started, resolved, invoiceId] of episodes) {
      await db.query(
        `INSERT INTO subscriber_episodes (tenant_id, processor_customer_id, episode, state, reason, at, rank, event_id, updated_at, dunning_started_at, resolved_at, invoice_id)
         VALUES ($1, $2, $3, $4, $5, $6, 1, 'evt', $6, $7, $8, $9)`,
        [id, cus, episode, state, reason, at(100), started, resolved, invoiceId],
      );
    }
    await migrate(
      db,
      loadMigrations().filter((m) => m.version >= 15),
    );
    const runs = await db.query<Record<string, unknown>>(
      `SELECT processor_customer_id, started_at, ended_at, outcome, amount::int AS amount, currency, decline_class FROM dunning_runs ORDER BY processor_customer_id`,
    );
    expect(runs).toEqual([
      {
        processor_customer_id: 'cus_old',
        started_at: at(100),
        ended_at: null,
        outcome: null,
        amount: null,
        currency: null,
        decline_class: 'authentication',
      },
      {
        processor_customer_id: 'cus_open',
        started_at: at(10),
        ended_at: null,
        outcome: null,
        amount: 4200,
        currency: 'gbp',
        decline_class: 'hard',
      },
      {
        processor_customer_id: 'cus_paid',
        started_at: at(5),
        ended_at: at(50),
        outcome: 'voided',
        amount: null,
        currency: null,
        decline_class: 'soft',
      },
    ]);
  });
});
