import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CardExpiry } from '../../src/domain/notices.js';
import type { CardExpirySource } from '../../src/services/stripe-events.js';
import { availableEngines } from '../helpers/engines.js';
import { computeHmac, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';
import type { StripeEventFixture } from '../helpers/stripe-fixtures.js';

/**
 * The card-expiring notice learned from `invoice.upcoming` (with the customer's default card
 * from Stripe's API, faked here at its interface), the replay, and the notice's end in time.
 */

const engines = await availableEngines();
const SECRET = 'whsec_notices_routes_0123456789abcdefghij';
const DAY_S = 86_400;

/** Stripe's API as `invoice.upcoming` asks it: each customer's default card, or a failure. */
class FakeCards implements CardExpirySource {
  readonly cards = new Map<string, CardExpiry | 'fails'>();
  readonly asked: string[] = [];
  defaultCardExpiry(spaceId: number, customerId: string): Promise<CardExpiry | null> {
    this.asked.push(`${spaceId}:${customerId}`);
    const card = this.cards.get(customerId);
    if (card === 'fails') return Promise.reject(new Error('stripe_error'));
    return Promise.resolve(card ?? null);
  }
}

describe.each(engines)('notices through the app ($name)', (engine) => {
  let h: Harness;
  let t: CreatedTenant;
  let cards: FakeCards;
  const nowS = () => Math.floor(h.clock.now() / 1000);

  beforeEach(async () => {
    cards = new FakeCards();
    h = await harness(engine, { cardExpiry: cards }, {}, { fromTemplate: true });
    t = await h.createTenant('acme', { policy: { notices: ['card_expiring'] } });
    expect((await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET })).statusCode).toBe(200);
  });
  afterEach(async () => h.close());

  async function send(fixture: StripeEventFixture, secret = SECRET): Promise<string> {
    const { payload, signature } = signed(fixture, secret, nowS());
    const res = await h.app.inject({
      method: 'POST',
      url: '/webhooks/stripe/acme',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      payload,
    });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { outcome: string }).outcome;
  }

  async function notice(customerId: string): Promise<unknown> {
    const res = await h.lookup('acme', {
      key: t.publishable_key,
      customerId,
      hmac: computeHmac(t.hmac_secret, customerId),
    });
    expect(res.statusCode).toBe(200);
    return (JSON.parse(res.body) as { notice?: unknown }).notice;
  }

  /** An upcoming renewal of the customer's subscription, attempted `inDays` from now. */
  const upcoming = (customerId: string, inDays: number) =>
    event(
      'invoice.upcoming',
      { ...invoice(customerId, { status: 'draft' }), id: undefined, next_payment_attempt: nowS() + inDays * DAY_S },
      { created: nowS() },
    );

  it('invoice.upcoming: a default card expiring before the renewal starts the notice; Stripe is asked for this space and customer', async () => {
    // The clock is 2026-01-01: a card of January 2026 expires before a renewal on February 10.
    cards.cards.set('cus_upcoming', { month: 1, year: 2026 });
    expect(await send(upcoming('cus_upcoming', 40))).toBe('applied');
    expect(await notice('cus_upcoming')).toEqual({ kind: 'card_expiring', expires: '2026-01' });
    const space = (await h.store.tenants.getTenant('acme'))?.id;
    expect(cards.asked).toEqual([`${space}:cus_upcoming`]);
  });

  it('a card valid through the renewal starts none, and ends one that held', async () => {
    cards.cards.set('cus_valid', { month: 2, year: 2026 });
    expect(await send(upcoming('cus_valid', 40))).toBe('ignored');
    expect(await notice('cus_valid')).toBeUndefined();
    cards.cards.set('cus_renewed', { month: 1, year: 2026 });
    await send(upcoming('cus_renewed', 40));
    expect(await notice('cus_renewed')).toBeDefined();
    h.clock.advance(1000);
    cards.cards.set('cus_renewed', { month: 5, year: 2029 });
    expect(await send(upcoming('cus_renewed', 40))).toBe('applied');
    expect(await notice('cus_renewed')).toBeUndefined();
  });

  it('Stripe failing, or no default card, learns nothing and still acknowledges the event', async () => {
    cards.cards.set('cus_fails', 'fails');
    expect(await send(upcoming('cus_fails', 10))).toBe('ignored');
    expect(await notice('cus_fails')).toBeUndefined();
    expect(await send(upcoming('cus_nocard', 10))).toBe('ignored');
    expect(await notice('cus_nocard')).toBeUndefined();
  });

  it('the notice ends at the renewal by the clock, before any event says so', async () => {
    cards.cards.set('cus_clock', { month: 1, year: 2026 });
    await send(upcoming('cus_clock', 40));
    expect(await notice('cus_clock')).toBeDefined();
    h.clock.advance(40 * DAY_S * 1000 - 1000);
    expect(await notice('cus_clock')).toBeDefined();
    h.clock.advance(1000);
    expect(await notice('cus_clock')).toBeUndefined();
  });

  it("the operator's replay learns notices too; a dry run does not", async () => {
    const card = { object: 'card', customer: 'cus_replayed', exp_month: 1, exp_year: 2026 };
    const dry = await h.admin('POST', '/tenants/acme/stripe-events', {
      events: [event('customer.source.expiring', card, { created: nowS() })],
      dry_run: true,
    });
    expect(dry.statusCode).toBe(200);
    expect(await notice('cus_replayed')).toBeUndefined();
    const res = await h.admin('POST', '/tenants/acme/stripe-events', {
      events: [event('customer.source.expiring', card, { created: nowS() })],
    });
    expect(res.statusCode).toBe(200);
    expect(await notice('cus_replayed')).toEqual({ kind: 'card_expiring', expires: '2026-01' });
  });

  it('an event of the test mode teaches the test mode only', async () => {
    // The test mode's own signing secret, as Stripe gives each mode one.
    const testSecret = 'whsec_noticesTestMode0123456789abcdef';
    expect((await h.admin('PATCH', '/tenants/acme?mode=test', { stripe_webhook_secret: testSecret })).statusCode).toBe(
      200,
    );
    const card = { object: 'card', customer: 'cus_testmode', exp_month: 1, exp_year: 2026 };
    const fixture = event('customer.source.expiring', card, { created: nowS(), livemode: false });
    expect(await send(fixture, testSecret)).toBe('applied');
    // The live mode's answer has none; the test mode's key sees it.
    expect(await notice('cus_testmode')).toBeUndefined();
    const res = await h.lookup('acme', {
      key: t.test_publishable_key as string,
      customerId: 'cus_testmode',
      hmac: computeHmac(t.hmac_secret, 'cus_testmode'),
    });
    expect((JSON.parse(res.body) as { notice?: unknown }).notice).toEqual({
      kind: 'card_expiring',
      expires: '2026-01',
    });
  });
});
