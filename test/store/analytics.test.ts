import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toStripeEventInput } from '../../src/services/stripe-events.js';
import type { Store } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';
import { newTenant } from '../helpers/store-fixtures.js';
import { customer, event, invoice, paymentIds, subscription } from '../helpers/stripe-fixtures.js';
import type { PaymentIds, StripeEventFixture } from '../helpers/stripe-fixtures.js';

/**
 * The recovery analytics over constructed histories with known answers, each event going
 * through the store's Stripe ingestion, so the runs are those the write path keeps. Starting
 * Monday 2026-01-05 (T), in days:
 *
 * | customer    | run                                                  | invoice    | class          |
 * |-------------|------------------------------------------------------|------------|----------------|
 * | cus_paid    | fails 0, paid 1                                      | 2500 eur   | soft           |
 * | cus_open    | fails 2 (retries exhausted), still open              | 5000 eur   | exhausted      |
 * | cus_void    | fails 3, voided 5                                    | 1000 usd   | soft           |
 * | cus_ended   | needs authentication 10, subscription deleted 12     | 4000 eur   | authentication |
 * | cus_twice   | fails 0, paid 3; a new invoice fails hard 35, paid 40| 2900, 1500 usd | soft, hard |
 * | cus_gone    | fails 20, customer deleted 21                        | 700 usd    | soft           |
 * | cus_open2   | fails 50, still open                                 | 2900 usd   | soft           |
 */
const engines = await availableEngines();
const T = Date.parse('2026-01-05T00:00:00Z') / 1000;
const DAY = 86_400;
const at = (days: number) => T + days * DAY;

function money(
  ids: PaymentIds,
  cus: string,
  amount: number,
  currency: string,
  opts: Parameters<typeof invoice>[1] = {},
) {
  return {
    ...invoice(cus, { ids, ...opts }),
    amount_due: amount,
    amount_remaining: opts.status === 'paid' ? 0 : amount,
    currency,
  };
}

function history(): StripeEventFixture[] {
  const events: StripeEventFixture[] = [];
  const retry = (days: number) => ({ next_payment_attempt: at(days + 3) });
  const failed = (
    ids: PaymentIds,
    cus: string,
    amount: number,
    currency: string,
    days: number,
    opts: Parameters<typeof invoice>[1] = retry(days),
  ) => events.push(event('invoice.payment_failed', money(ids, cus, amount, currency, opts), { created: at(days) }));
  const paid = (ids: PaymentIds, cus: string, amount: number, currency: string, days: number) =>
    events.push(event('invoice.paid', money(ids, cus, amount, currency, { status: 'paid' }), { created: at(days) }));

  const a = paymentIds();
  failed(a, 'cus_paid', 2500, 'eur', 0);
  paid(a, 'cus_paid', 2500, 'eur', 1);

  failed(paymentIds(), 'cus_open', 5000, 'eur', 2, { next_payment_attempt: null });

  const c = paymentIds();
  failed(c, 'cus_void', 1000, 'usd', 3);
  events.push(event('invoice.voided', money(c, 'cus_void', 1000, 'usd', { status: 'void' }), { created: at(5) }));

  const d = paymentIds();
  events.push(event('invoice.payment_action_required', money(d, 'cus_ended', 4000, 'eur'), { created: at(10) }));
  events.push(
    event('customer.subscription.deleted', subscription('cus_ended', 'canceled', { id: d.subscription ?? '' }), {
      created: at(12),
    }),
  );

  const e1 = paymentIds();
  const e2: PaymentIds = { ...paymentIds(), subscription: e1.subscription };
  failed(e1, 'cus_twice', 2900, 'usd', 0);
  paid(e1, 'cus_twice', 2900, 'usd', 3);
  failed(e2, 'cus_twice', 1500, 'usd', 35, {
    ...retry(35),
    expandedPaymentIntent: {
      id: e2.paymentIntent,
      object: 'payment_intent',
      last_payment_error: { decline_code: 'lost_card' },
    },
  });
  paid(e2, 'cus_twice', 1500, 'usd', 40);

  failed(paymentIds(), 'cus_gone', 700, 'usd', 20);
  events.push(event('customer.deleted', customer('cus_gone'), { created: at(21) }));

  failed(paymentIds(), 'cus_open2', 2900, 'usd', 50);
  return events;
}

describe.each(engines)('recovery analytics ($name)', (engine) => {
  let store: Store;
  let tenantId = 0;
  let cleanup: () => Promise<void> = async () => {};

  beforeAll(async () => {
    const opened = await engine.open();
    store = opened.store;
    cleanup = opened.cleanup;
    const created = await store.tenants.createTenant(newTenant('analytics'), new Date(at(0) * 1000));
    if (!created.ok) throw new Error('tenant');
    tenantId = created.tenant.id;
    const other = await store.tenants.createTenant(newTenant('elsewhere'), new Date(at(0) * 1000));
    if (!other.ok) throw new Error('tenant');
    for (const fixture of history()) {
      const input = toStripeEventInput(fixture);
      if (input === null) throw new Error(`${fixture.type}: relevant`);
      const result = await store.stripe.recordStripeEvent(tenantId, input, new Date(fixture.created * 1000));
      expect(result.outcome, fixture.type).toBe('applied');
      // Another tenant's runs never count.
      const again = toStripeEventInput({ ...fixture, id: `${fixture.id}_other` });
      if (again !== null)
        await store.stripe.recordStripeEvent(other.tenant.id, again, new Date(fixture.created * 1000));
    }
  }, 120_000);
  afterAll(async () => cleanup());

  it('answers every figure of a month view exactly', async () => {
    const figures = await store.analytics.recoveryAnalytics(tenantId, {
      from: new Date('2026-01-01T00:00:00Z'),
      to: new Date('2026-03-01T00:00:00Z'),
      granularity: 'month',
    });
    process.stdout.write(`${engine.name} month view: ${JSON.stringify(figures)}\n`);
    expect(figures.atRisk).toEqual({
      count: 2,
      amounts: [
        { currency: 'eur', amount: 5000 },
        { currency: 'usd', amount: 2900 },
      ],
    });
    expect(figures.recovered).toEqual({
      ended: 6,
      recovered: 3,
      rate: 0.5,
      amounts: [
        { currency: 'eur', amount: 2500 },
        { currency: 'usd', amount: 4400 },
      ],
      periods: [
        {
          periodStart: new Date('2026-01-01T00:00:00Z'),
          ended: 5,
          recovered: 2,
          rate: 0.4,
          amounts: [
            { currency: 'eur', amount: 2500 },
            { currency: 'usd', amount: 2900 },
          ],
        },
        {
          periodStart: new Date('2026-02-01T00:00:00Z'),
          ended: 1,
          recovered: 1,
          rate: 1,
          amounts: [{ currency: 'usd', amount: 1500 }],
        },
      ],
    });
    // Recovered after 1, 3 and 5 days: the median is the middle one; p90 interpolates 80% of the way from 3 to 5 days.
    expect(figures.timeToRecover).toEqual({ medianSeconds: 3 * DAY, p90Seconds: 3 * DAY + 0.8 * 2 * DAY });
    expect(figures.outcomes).toEqual({ paid: 3, voided: 1, subscription_ended: 1, removed: 1, open: 2 });
    expect(figures.declineMix).toEqual({ soft: 5, authentication: 1, exhausted: 1, hard: 1 });
    expect(figures.cohorts).toEqual([
      { month: new Date('2026-01-01T00:00:00Z'), started: 6, recovered: 2, rate: 2 / 6 },
      { month: new Date('2026-02-01T00:00:00Z'), started: 2, recovered: 1, rate: 0.5 },
    ]);
  });

  it('buckets by ISO week, empty weeks included, the end of the range excluded', async () => {
    const figures = await store.analytics.recoveryAnalytics(tenantId, {
      from: new Date('2026-01-05T00:00:00Z'),
      to: new Date('2026-01-26T00:00:00Z'),
      granularity: 'week',
    });
    process.stdout.write(`${engine.name} week view: ${JSON.stringify(figures.recovered)}\n`);
    expect(figures.recovered.periods).toEqual([
      {
        periodStart: new Date('2026-01-05T00:00:00Z'),
        ended: 3,
        recovered: 2,
        rate: 2 / 3,
        amounts: [
          { currency: 'eur', amount: 2500 },
          { currency: 'usd', amount: 2900 },
        ],
      },
      { periodStart: new Date('2026-01-12T00:00:00Z'), ended: 1, recovered: 0, rate: 0, amounts: [] },
      // cus_gone's run ended at 2026-01-26T00:00:00Z, the range's end: not in it.
      { periodStart: new Date('2026-01-19T00:00:00Z'), ended: 0, recovered: 0, rate: null, amounts: [] },
    ]);
    expect(figures.timeToRecover).toEqual({ medianSeconds: 2 * DAY, p90Seconds: 1 * DAY + 0.9 * 2 * DAY });
    // At risk is now, whatever the range.
    expect(figures.atRisk.count).toBe(2);
  });

  it('answers zeros and nulls for a tenant with no runs', async () => {
    const created = await store.tenants.createTenant(newTenant('quiet'), new Date(at(0) * 1000));
    if (!created.ok) throw new Error('tenant');
    const figures = await store.analytics.recoveryAnalytics(created.tenant.id, {
      from: new Date('2026-01-01T00:00:00Z'),
      to: new Date('2026-02-01T00:00:00Z'),
      granularity: 'month',
    });
    expect(figures).toEqual({
      atRisk: { count: 0, amounts: [] },
      recovered: {
        ended: 0,
        recovered: 0,
        rate: null,
        amounts: [],
        periods: [{ periodStart: new Date('2026-01-01T00:00:00Z'), ended: 0, recovered: 0, rate: null, amounts: [] }],
      },
      timeToRecover: { medianSeconds: null, p90Seconds: null },
      outcomes: { paid: 0, voided: 0, subscription_ended: 0, removed: 0, open: 0 },
      declineMix: { soft: 0, authentication: 0, exhausted: 0, hard: 0 },
      cohorts: [],
      links: {
        opened: 0,
        recoveredAfterOpen: 0,
        medianSecondsToPayment: null,
        periods: [
          {
            periodStart: new Date('2026-01-01T00:00:00Z'),
            opened: 0,
            recoveredAfterOpen: 0,
            medianSecondsToPayment: null,
          },
        ],
      },
    });
  });

  /**
   * Opens of pay links (docs/links.md), against the runs above: a run counts once, in the
   * period of its first open while it ran; an open outside every run, or another tenant's,
   * never counts.
   */
  it('counts the runs whose customer opened a link, those recovered after it, and the time to payment', async () => {
    const open = (cus: string, days: number, space = tenantId) =>
      store.links.recordOpen({
        spaceId: space,
        kind: 'pay',
        customerId: cus,
        invoiceId: null,
        at: new Date(at(days) * 1000),
        sentTo: 'stripe',
      });
    await open('cus_paid', 0.5); // run 0 -> 1, paid: half a day to payment
    await open('cus_paid', 0.75); // not its first open
    await open('cus_twice', 1); // run 0 -> 3, paid: 2 days
    await open('cus_twice', 38); // run 35 -> 40, paid: 2 days, in February
    await open('cus_void', 4); // run 3 -> 5, voided
    await open('cus_open', 10); // still open
    await open('cus_gone', 25); // after its run ended (21): not counted
    await open('cus_paid', 0.5, (await store.tenants.getTenant('elsewhere'))?.id ?? -1);
    const figures = await store.analytics.recoveryAnalytics(tenantId, {
      from: new Date('2026-01-01T00:00:00Z'),
      to: new Date('2026-03-01T00:00:00Z'),
      granularity: 'month',
    });
    process.stdout.write(`${engine.name} link opens: ${JSON.stringify(figures.links)}\n`);
    expect(figures.links).toEqual({
      opened: 5,
      recoveredAfterOpen: 3,
      medianSecondsToPayment: 2 * DAY,
      periods: [
        {
          periodStart: new Date('2026-01-01T00:00:00Z'),
          opened: 4,
          recoveredAfterOpen: 2,
          medianSecondsToPayment: 1.25 * DAY,
        },
        {
          periodStart: new Date('2026-02-01T00:00:00Z'),
          opened: 1,
          recoveredAfterOpen: 1,
          medianSecondsToPayment: 2 * DAY,
        },
      ],
    });
  });
});
