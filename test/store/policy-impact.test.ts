import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChangeCause } from '../../src/domain/history.js';
import type { Policy } from '../../src/domain/policy.js';
import { storeOver } from '../../src/store/index.js';
import type { Db, Store } from '../../src/store/index.js';
import { toStripeEventInput } from '../../src/services/stripe-events.js';
import { availableEngines } from '../helpers/engines.js';
import { newTenant } from '../helpers/store-fixtures.js';
import { event, invoice, paymentIds } from '../helpers/stripe-fixtures.js';
import type { StripeEventFixture } from '../helpers/stripe-fixtures.js';

/**
 * The policy impact over constructed histories with known answers, every episode made by
 * Stripe events through the store's ingestion and every override by the admin change, as
 * in production. The tenant's policy is the default (gate, no grace, no escalation); now is
 * day 30 (T is 2026-01-05):
 *
 * | customer      | what                                                  | answered now |
 * |---------------|-------------------------------------------------------|--------------|
 * | cus_new_lock  | retries exhausted on day 28 (lockout, 2 days ago)      | lockout      |
 * | cus_old_lock  | retries exhausted on day 1 (lockout, 29 days ago)      | lockout      |
 * | cus_old_warn  | a failure Stripe retries on day 5 (warning, 25 days)   | warning      |
 * | cus_new_warn  | a failure Stripe retries on day 25 (warning, 5 days)   | warning      |
 * | cus_override  | no episode; an admin set lockout on day 10            | lockout      |
 * | cus_freed     | retries exhausted on day 2, an admin set active day 3  | active       |
 * | cus_paid      | failed on day 3, paid on day 4                         | active       |
 *
 * Another tenant holds the same customers: none of them counts.
 */
const engines = await availableEngines();
const T = Date.parse('2026-01-05T00:00:00Z') / 1000;
const DAY = 86_400;
const at = (days: number) => T + days * DAY;
const NOW = new Date(at(30) * 1000);
const admin = (days: number): ChangeCause => ({
  source: 'admin',
  eventId: null,
  eventType: null,
  declineCode: null,
  occurredAt: new Date(at(days) * 1000),
});

function history(): StripeEventFixture[] {
  const exhausted = (cus: string, days: number) =>
    event('invoice.payment_failed', invoice(cus, { ids: paymentIds(), next_payment_attempt: null }), {
      created: at(days),
    });
  const retried = (cus: string, days: number) =>
    event('invoice.payment_failed', invoice(cus, { ids: paymentIds(), next_payment_attempt: at(days + 3) }), {
      created: at(days),
    });
  const paid = paymentIds();
  return [
    exhausted('cus_new_lock', 28),
    exhausted('cus_old_lock', 1),
    retried('cus_old_warn', 5),
    retried('cus_new_warn', 25),
    exhausted('cus_freed', 2),
    event('invoice.payment_failed', invoice('cus_paid', { ids: paid, next_payment_attempt: at(6) }), {
      created: at(3),
    }),
    event('invoice.paid', invoice('cus_paid', { ids: paid, status: 'paid' }), { created: at(4) }),
  ];
}

describe.each(engines)('policy impact ($name)', (engine) => {
  let store: Store;
  let db: Db;
  let tenantId = 0;
  let cleanup: () => Promise<void> = async () => {};

  async function seed(id: number): Promise<void> {
    for (const fixture of history()) {
      const input = toStripeEventInput({ ...fixture, id: `${fixture.id}_${id}` });
      if (input === null) throw new Error(`${fixture.type}: relevant`);
      expect((await store.stripe.recordStripeEvent(id, input, new Date(fixture.created * 1000))).outcome).toBe(
        'applied',
      );
    }
    expect(
      await store.subscribers.applyChange(
        id,
        'cus_override',
        { kind: 'set', status: 'lockout', reason: 'manual' },
        admin(10),
        new Date(at(10) * 1000),
      ),
    ).toBe('applied');
    expect(
      await store.subscribers.applyChange(
        id,
        'cus_freed',
        { kind: 'set', status: 'active', reason: 'manual' },
        admin(3),
        new Date(at(3) * 1000),
      ),
    ).toBe('applied');
  }

  beforeAll(async () => {
    const opened = await engine.open();
    store = opened.store;
    db = opened.db;
    cleanup = opened.cleanup;
    const created = await store.tenants.createTenant(newTenant('impact'), new Date(at(0) * 1000));
    const other = await store.tenants.createTenant(newTenant('elsewhere'), new Date(at(0) * 1000));
    if (!created.ok || !other.ok) throw new Error('tenant');
    tenantId = created.tenant.id;
    await seed(tenantId);
    await seed(other.tenant.id);
  }, 120_000);
  afterAll(async () => cleanup());

  it('has the statuses the table says (the histories are what they claim)', async () => {
    const status = async (cus: string) => (await store.subscribers.getSubscriber(tenantId, cus))?.status ?? null;
    expect({
      new_lock: await status('cus_new_lock'),
      old_lock: await status('cus_old_lock'),
      old_warn: await status('cus_old_warn'),
      new_warn: await status('cus_new_warn'),
      override: await status('cus_override'),
      freed: await status('cus_freed'),
      paid: await status('cus_paid'),
    }).toEqual({
      new_lock: 'lockout',
      old_lock: 'lockout',
      old_warn: 'warning',
      new_warn: 'warning',
      override: 'lockout',
      freed: 'active',
      paid: 'active',
    });
  });

  const current = { warning: 2, lockout: 3 };
  const impact = (proposed: Partial<Policy>) => store.analytics.policyImpact(tenantId, proposed, NOW);

  it('changes nothing when nothing is proposed', async () => {
    expect(await impact({})).toEqual({
      currentPolicy: { enforcement: 'gate', grace_days: 0, escalate_after_days: null },
      proposedPolicy: { enforcement: 'gate', grace_days: 0, escalate_after_days: null },
      current,
      proposed: current,
      newlyGated: 0,
      released: 0,
    });
  });

  it('a grace turns a recent lockout into a warning, not an old one nor an override', async () => {
    expect(await impact({ grace_days: 5 })).toMatchObject({
      proposedPolicy: { enforcement: 'gate', grace_days: 5, escalate_after_days: null },
      current,
      proposed: { warning: 3, lockout: 2 },
      newlyGated: 0,
      released: 1,
    });
    // Past every start: nothing is in its grace any more; a grace of 29 days ends on day 30 exactly.
    expect(await impact({ grace_days: 29 })).toMatchObject({ proposed: { warning: 3, lockout: 2 }, released: 1 });
    expect(await impact({ grace_days: 30 })).toMatchObject({ proposed: { warning: 4, lockout: 1 }, released: 2 });
  });

  it('an escalation turns an old warning into a lockout, to the day', async () => {
    expect(await impact({ escalate_after_days: 20 })).toMatchObject({
      proposed: { warning: 1, lockout: 4 },
      newlyGated: 1,
      released: 0,
    });
    expect(await impact({ escalate_after_days: 25 })).toMatchObject({
      proposed: { warning: 1, lockout: 4 },
      newlyGated: 1,
    });
    expect(await impact({ escalate_after_days: 26 })).toMatchObject({ proposed: current, newlyGated: 0 });
    expect(await impact({ escalate_after_days: 5 })).toMatchObject({
      proposed: { warning: 0, lockout: 5 },
      newlyGated: 2,
    });
    expect(await impact({ grace_days: 5, escalate_after_days: 20 })).toMatchObject({
      proposed: { warning: 2, lockout: 3 },
      newlyGated: 1,
      released: 1,
    });
  });

  it('banner_only answers every lockout warning, the override too; monitor answers everyone active', async () => {
    expect(await impact({ enforcement: 'banner_only' })).toMatchObject({
      proposed: { warning: 5, lockout: 0 },
      newlyGated: 0,
      released: 3,
    });
    expect(await impact({ enforcement: 'monitor' })).toMatchObject({
      proposed: { warning: 0, lockout: 0 },
      newlyGated: 0,
      released: 3,
    });
    // banner_only schedules no escalation either.
    expect(await impact({ enforcement: 'banner_only', escalate_after_days: 1 })).toMatchObject({
      proposed: { warning: 5, lockout: 0 },
    });
  });

  it('keeps the tenant current policy for what is not proposed, and counts from it', async () => {
    const updated = await store.tenants.updateTenant(
      'impact',
      { policy: { enforcement: 'banner_only', grace_days: 5 } },
      NOW,
    );
    expect(updated.ok).toBe(true);
    try {
      expect(await impact({ enforcement: 'gate' })).toEqual({
        currentPolicy: { enforcement: 'banner_only', grace_days: 5, escalate_after_days: null },
        proposedPolicy: { enforcement: 'gate', grace_days: 5, escalate_after_days: null },
        current: { warning: 5, lockout: 0 },
        proposed: { warning: 3, lockout: 2 },
        newlyGated: 2,
        released: 0,
      });
    } finally {
      await store.tenants.updateTenant('impact', { policy: { enforcement: 'gate', grace_days: 0 } }, NOW);
    }
  });

  it('answers a tenant with 20,000 customers in dunning in one statement, nothing per customer (its time on 100,000 is in the bench)', async () => {
    const created = await store.tenants.createTenant(newTenant('big'), NOW);
    if (!created.ok) throw new Error('tenant');
    const id = created.tenant.id;
    // Every third customer in lockout, the others in warning; starts 0 to 49 days before now.
    await db.query(
      `INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, updated_at)
       SELECT $1, 'cus_' || lpad(i::text, 7, '0'), s, s, 'x', $2, $2
       FROM generate_series(1, 20000) i, LATERAL (SELECT CASE WHEN i % 3 = 0 THEN 'lockout' ELSE 'warning' END AS s) st`,
      [id, NOW],
    );
    await db.query(
      `INSERT INTO subscriber_episodes (tenant_id, processor_customer_id, episode, state, reason, at, rank, event_id, updated_at, dunning_started_at)
       SELECT $1, 'cus_' || lpad(i::text, 7, '0'), 'sub_' || i, CASE WHEN i % 3 = 0 THEN 'lockout' ELSE 'warning' END, 'x', $2, 1, 'evt_' || i, $2,
         $2::timestamptz - (i % 50) * interval '1 day'
       FROM generate_series(1, 20000) i`,
      [id, NOW],
    );
    let statements = 0;
    const counting: Db = {
      ...db,
      engine: db.engine,
      query: (sql, params) => {
        statements += 1;
        return db.query(sql, params);
      },
    };
    const measured = storeOver(counting);
    const answer = await measured.analytics.policyImpact(id, { grace_days: 10, escalate_after_days: 20 }, NOW);
    // Lockouts started fewer than 10 days ago (i % 50 < 10) are released; warnings 20 days old or more escalate.
    expect(answer).toMatchObject({
      current: { warning: 13_334, lockout: 6_666 },
      proposed: { warning: 6_667, lockout: 13_333 },
      newlyGated: 8_000,
      released: 1_333,
    });
    // The tenant's policy, then the one statement: nothing per customer, nothing per page.
    expect(statements).toBe(2);
  }, 120_000);
});
