import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import {
  BASIL_API,
  LEGACY_API,
  charge,
  customer,
  event,
  hostedInvoiceUrl,
  invoice,
  paymentIds,
  paymentIntent,
  subscription,
} from '../helpers/stripe-fixtures.js';
import type { ApiShape, StripeEventFixture } from '../helpers/stripe-fixtures.js';
import { deliver } from '../helpers/webhook.js';

/**
 * docs/stripe.md, statuses from dunning episodes, row by row, through the signed webhook and the lookup, in both
 * payload shapes (before and from API version 2025-03-31.basil).
 */
const engines = await availableEngines();
const SECRET = 'whsec_episode_tests_0123456789abcdef';
const DAY_S = 86_400;

describe.each(engines)('Statuses from dunning episodes ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  let n = 0;
  const nextCustomer = () => `cus_ep${(n += 1)}`;
  const nowS = () => Math.floor(h.clock.ms / 1000);

  beforeAll(async () => {
    h = await harness(engine);
    acme = await h.createTenant('acme', { card_update_url: 'https://acme.test/card' });
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET });
  });
  afterAll(() => h.close());

  async function send(fixture: StripeEventFixture): Promise<string> {
    const res = await deliver(h, 'acme', fixture, SECRET);
    expect(res.statusCode).toBe(200);
    return (res.json() as { outcome: string }).outcome;
  }
  /** The lookup's answer: null for the unknown subscriber's `{"status":"active"}`. */
  async function statusOf(customerId: string): Promise<string | null> {
    const res = await h.lookup('acme', { key: acme.publishable_key, customerId });
    expect(res.statusCode).toBe(200);
    return res.body === '{"status":"active"}' ? null : (res.json().status as string);
  }
  async function subscriber(customerId: string): Promise<{
    status: string | null;
    reason: string | null;
    history: { effect: string; event_id: string | null; status: string | null; source: string }[];
    episodes: { episode: string; state: string; reason: string; event_id: string }[];
  }> {
    const res = await h.admin('GET', `/tenants/acme/subscribers/${customerId}`);
    expect(res.statusCode).toBe(200);
    return res.json();
  }
  async function statusAndReason(customerId: string): Promise<[string | null, string | null]> {
    const s = await subscriber(customerId);
    expect(await statusOf(customerId)).toBe(s.status);
    return [s.status, s.reason];
  }

  describe.each([LEGACY_API, BASIL_API] as ApiShape[])('API %s', (api) => {
    const failed = (cus: string, opts: Parameters<typeof invoice>[1], created: number) =>
      event('invoice.payment_failed', invoice(cus, { api, ...opts }), { created, api });

    it('invoice.payment_failed: retries left -> warning soft_decline; none left -> lockout retries_exhausted', async () => {
      const retrying = nextCustomer();
      expect(await send(failed(retrying, { next_payment_attempt: nowS() + DAY_S }, nowS()))).toBe('applied');
      expect(await statusAndReason(retrying)).toEqual(['warning', 'soft_decline']);
      const exhausted = nextCustomer();
      await send(failed(exhausted, { next_payment_attempt: null }, nowS()));
      expect(await statusAndReason(exhausted)).toEqual(['lockout', 'retries_exhausted']);
    });

    it('invoice.payment_failed with a hard decline code -> lockout hard_decline, retries or not', async () => {
      const c = nextCustomer();
      const pi = paymentIntent(c, { decline_code: 'stolen_card' }, api);
      await send(failed(c, { next_payment_attempt: nowS() + DAY_S, expandedPaymentIntent: pi }, nowS()));
      expect(await statusAndReason(c)).toEqual(['lockout', 'hard_decline']);
    });

    it("a subscription's first invoice -> warning first_payment_failed, whatever its decline or retries", async () => {
      const c = nextCustomer();
      const pi = paymentIntent(c, { decline_code: 'stolen_card' }, api);
      await send(
        failed(
          c,
          { next_payment_attempt: null, billing_reason: 'subscription_create', expandedPaymentIntent: pi },
          nowS(),
        ),
      );
      expect(await statusAndReason(c)).toEqual(['warning', 'first_payment_failed']);
    });

    it('invoice.payment_action_required -> warning payment_action_required', async () => {
      const c = nextCustomer();
      await send(
        event('invoice.payment_action_required', invoice(c, { api, next_payment_attempt: null }), {
          created: nowS(),
          api,
        }),
      );
      expect(await statusAndReason(c)).toEqual(['warning', 'payment_action_required']);
    });

    it('invoice.paid and invoice.payment_succeeded resolve the episode: active, paid', async () => {
      for (const type of ['invoice.paid', 'invoice.payment_succeeded']) {
        const c = nextCustomer();
        const ids = paymentIds();
        const t = nowS();
        await send(failed(c, { ids, next_payment_attempt: null }, t));
        expect(await statusOf(c)).toBe('lockout');
        await send(event(type, invoice(c, { api, ids, status: 'paid' }), { created: t + 1, api }));
        expect(await statusAndReason(c)).toEqual(['active', 'paid']);
      }
    });

    it('invoice.voided resolves the episode: active, voided', async () => {
      const c = nextCustomer();
      const ids = paymentIds({ subscription: null });
      const t = nowS();
      await send(failed(c, { ids, next_payment_attempt: null }, t));
      expect(await statusOf(c)).toBe('lockout');
      expect(
        await send(event('invoice.voided', invoice(c, { api, ids, status: 'void' }), { created: t + 5, api })),
      ).toBe('applied');
      expect(await statusAndReason(c)).toEqual(['active', 'voided']);
    });

    it('send_invoice invoices never start an episode, and a decline linked to one changes nothing', async () => {
      const c = nextCustomer();
      const ids = paymentIds({ subscription: null });
      const t = nowS();
      expect(
        await send(
          failed(c, { ids, collection_method: 'send_invoice', next_payment_attempt: null, namePayments: true }, t),
        ),
      ).toBe('ignored');
      await send(
        event(
          'payment_intent.payment_failed',
          paymentIntent(c, { decline_code: 'stolen_card' }, api, { id: ids.paymentIntent, invoice: ids.invoice }),
          {
            created: t + 1,
            api,
          },
        ),
      );
      expect(await statusOf(c)).toBeNull();
      expect(
        await send(
          event('invoice.paid', invoice(c, { api, ids, collection_method: 'send_invoice', status: 'paid' }), {
            created: t + 2,
            api,
          }),
        ),
      ).toBe('ignored');
      expect(await statusOf(c)).toBeNull();
    });

    it('customer.subscription.updated to past_due -> warning, unpaid -> lockout, active or trialing -> resolved', async () => {
      for (const back of ['active', 'trialing']) {
        const c = nextCustomer();
        const sub = subscription(c, 'past_due');
        const t = nowS();
        await send(event('customer.subscription.updated', sub, { created: t, api, previous: { status: 'active' } }));
        expect(await statusAndReason(c)).toEqual(['warning', 'subscription_past_due']);
        await send(
          event(
            'customer.subscription.updated',
            { ...sub, status: 'unpaid' },
            { created: t + 1, api, previous: { status: 'past_due' } },
          ),
        );
        expect(await statusAndReason(c)).toEqual(['lockout', 'subscription_unpaid']);
        // An update that is not a status transition says nothing about payment.
        expect(
          await send(
            event(
              'customer.subscription.updated',
              { ...sub, status: 'unpaid' },
              { created: t + 2, api, previous: { metadata: {} } },
            ),
          ),
        ).toBe('ignored');
        expect(await statusOf(c)).toBe('lockout');
        await send(
          event(
            'customer.subscription.updated',
            { ...sub, status: back },
            { created: t + 3, api, previous: { status: 'unpaid' } },
          ),
        );
        expect(await statusAndReason(c)).toEqual(['active', 'paid']);
      }
    });

    it('customer.subscription.deleted, or updated to canceled / incomplete_expired -> resolved, subscription_ended', async () => {
      const cases: [string, string | null][] = [
        ['customer.subscription.deleted', null],
        ['customer.subscription.updated', 'canceled'],
        ['customer.subscription.updated', 'incomplete_expired'],
      ];
      for (const [type, to] of cases) {
        const c = nextCustomer();
        const ids = paymentIds();
        const t = nowS();
        await send(failed(c, { ids, next_payment_attempt: null }, t));
        expect(await statusOf(c)).toBe('lockout');
        const sub = subscription(c, to ?? 'canceled', { id: ids.subscription ?? '' });
        await send(
          event(type, sub, { created: t + 1, api, ...(to === null ? {} : { previous: { status: 'past_due' } }) }),
        );
        expect(await statusAndReason(c)).toEqual(['active', 'subscription_ended']);
      }
    });

    it('a decline linked to an automatically collected invoice: hard -> lockout, soft -> warning, in either arrival order', async () => {
      const kinds = [
        { type: 'payment_intent.payment_failed', hard: true },
        { type: 'payment_intent.payment_failed', hard: false },
        { type: 'charge.failed', hard: true },
        { type: 'charge.failed', hard: false },
      ];
      for (const { type, hard } of kinds) {
        for (const order of ['decline first', 'invoice first'] as const) {
          const c = nextCustomer();
          const ids = paymentIds();
          const t = nowS();
          // The invoice's own event is an earlier, soft one; the decline comes a second later.
          const inv = event(
            'invoice.payment_failed',
            invoice(c, { api, ids, next_payment_attempt: t + DAY_S, namePayments: true }),
            { created: t, api },
          );
          const link = {
            id: type === 'charge.failed' ? ids.charge : ids.paymentIntent,
            paymentIntent: ids.paymentIntent,
            charge: ids.charge,
            invoice: ids.invoice,
          };
          const decline =
            type === 'charge.failed'
              ? event(
                  type,
                  charge(
                    c,
                    { outcome_reason: hard ? 'lost_card' : 'insufficient_funds', failure_code: 'card_declined' },
                    api,
                    link,
                  ),
                  {
                    created: t + 1,
                    api,
                  },
                )
              : event(type, paymentIntent(c, { decline_code: hard ? 'lost_card' : 'insufficient_funds' }, api, link), {
                  created: t + 1,
                  api,
                });
          for (const e of order === 'decline first' ? [decline, inv] : [inv, decline]) await send(e);
          const label = `${type} ${hard ? 'hard' : 'soft'}, ${order}`;
          expect(await statusAndReason(c), label).toEqual(
            hard ? ['lockout', 'hard_decline'] : ['warning', 'soft_decline'],
          );
          // The decline, the later of the two, is what set the subscription's episode.
          expect((await subscriber(c)).episodes, label).toMatchObject([
            { episode: ids.subscription, event_id: decline.id },
          ]);
        }
      }
    });

    /** A decline of the invoice's payment, linked as Stripe links it in this shape. */
    function linkedDecline(
      type: string,
      c: string,
      ids: ReturnType<typeof paymentIds>,
      code: string,
      created: number,
      opts: { paymentIntent?: string; charge?: string } = {},
    ): StripeEventFixture {
      const pi = opts.paymentIntent ?? ids.paymentIntent;
      const ch = opts.charge ?? ids.charge;
      // Before basil the payment names its invoice; from basil on only the invoice's payments link it.
      return type === 'charge.failed'
        ? event(
            type,
            charge(c, { outcome_reason: code, failure_code: 'card_declined' }, api, {
              id: ch,
              paymentIntent: pi,
              invoice: ids.invoice,
            }),
            {
              created,
              api,
            },
          )
        : event(type, paymentIntent(c, { decline_code: code }, api, { id: pi, charge: ch, invoice: ids.invoice }), {
            created,
            api,
          });
    }
    const failedNamingPayment = (
      c: string,
      ids: ReturnType<typeof paymentIds>,
      opts: Parameters<typeof invoice>[1],
      created: number,
    ) => event('invoice.payment_failed', invoice(c, { api, ids, namePayments: true, ...opts }), { created, api });

    it('a hard decline linked to the invoice, then its invoice.payment_failed a second later: lockout hard_decline, retries or not, in either arrival order', async () => {
      for (const type of ['charge.failed', 'payment_intent.payment_failed']) {
        for (const order of ['decline first', 'invoice first'] as const) {
          for (const next of ['none', 'scheduled'] as const) {
            const c = nextCustomer();
            const ids = paymentIds();
            const t = nowS();
            const decline = linkedDecline(type, c, ids, 'lost_card', t);
            const failure = failedNamingPayment(
              c,
              ids,
              { next_payment_attempt: next === 'none' ? null : t + DAY_S },
              t + 1,
            );
            for (const e of order === 'decline first' ? [decline, failure] : [failure, decline]) await send(e);
            const label = `${type}, ${order}, next attempt ${next}`;
            expect(await statusAndReason(c), label).toEqual(['lockout', 'hard_decline']);
            // The invoice failure, the later of the two, is what set the episode, with the decline's code.
            expect((await subscriber(c)).episodes, label).toMatchObject([
              {
                episode: ids.subscription,
                event_id: failure.id,
                state: 'lockout',
                reason: 'hard_decline',
                decline_code: 'lost_card',
              },
            ]);
          }
        }
      }
    });

    it('a soft decline linked to the invoice leaves the retry schedule to decide: retries_exhausted when Stripe stops, in either arrival order', async () => {
      for (const type of ['charge.failed', 'payment_intent.payment_failed']) {
        for (const order of ['decline first', 'invoice first'] as const) {
          const c = nextCustomer();
          const ids = paymentIds();
          const t = nowS();
          const decline = linkedDecline(type, c, ids, 'insufficient_funds', t);
          const failure = failedNamingPayment(c, ids, { next_payment_attempt: null }, t + 1);
          for (const e of order === 'decline first' ? [decline, failure] : [failure, decline]) await send(e);
          expect(await statusAndReason(c), `${type}, ${order}`).toEqual(['lockout', 'retries_exhausted']);
        }
      }
    });

    it("a subscription's first invoice stays warning first_payment_failed with a linked hard decline", async () => {
      for (const order of ['decline first', 'invoice first'] as const) {
        const c = nextCustomer();
        const ids = paymentIds();
        const t = nowS();
        const decline = linkedDecline('payment_intent.payment_failed', c, ids, 'stolen_card', t);
        const failure = failedNamingPayment(
          c,
          ids,
          { next_payment_attempt: null, billing_reason: 'subscription_create' },
          t + 1,
        );
        for (const e of order === 'decline first' ? [decline, failure] : [failure, decline]) await send(e);
        expect(await statusAndReason(c), order).toEqual(['warning', 'first_payment_failed']);
      }
    });

    it("the decline that counts is the latest at or before the failure's second, whatever the arrival order", async () => {
      const t = nowS();
      // Attempt one: a hard decline (a lost card) and its failure. The customer puts in a
      // new card; attempt two, days later on the same payment intent: a soft decline.
      const story = (c: string, ids: ReturnType<typeof paymentIds>): StripeEventFixture[] => [
        linkedDecline('payment_intent.payment_failed', c, ids, 'lost_card', t - 3 * DAY_S),
        failedNamingPayment(c, ids, { next_payment_attempt: null }, t - 3 * DAY_S + 1),
        linkedDecline('payment_intent.payment_failed', c, ids, 'insufficient_funds', t, { charge: `ch_second_${c}` }),
        failedNamingPayment(c, ids, { next_payment_attempt: null }, t + 1),
      ];
      for (const order of [
        [0, 1, 2, 3],
        [3, 2, 1, 0],
        [1, 3, 0, 2],
        [0, 1, 3, 2],
        [3, 0, 1, 2],
      ]) {
        const c = nextCustomer();
        const events = story(c, paymentIds());
        for (const i of order) await send(events[i] as StripeEventFixture);
        expect(await statusAndReason(c), order.join(' ')).toEqual(['lockout', 'retries_exhausted']);
        expect((await subscriber(c)).episodes, order.join(' ')).toMatchObject([
          { event_id: events[3]?.id, reason: 'retries_exhausted' },
        ]);
        // Without the second attempt's decline, the first attempt's hard one is the latest.
        const alone = nextCustomer();
        const fewer = story(alone, paymentIds());
        for (const i of order.filter((i) => i !== 2)) await send(fewer[i] as StripeEventFixture);
        expect(await statusAndReason(alone), order.join(' ')).toEqual(['lockout', 'hard_decline']);
      }
    });

    it('a decline of a one-off payment changes nothing: kept in the history only, an unknown customer stays unknown', async () => {
      const c = nextCustomer();
      const oneOff = event(
        'payment_intent.payment_failed',
        paymentIntent(c, { decline_code: 'incorrect_number' }, api, { invoice: null }),
        {
          created: nowS(),
          api,
        },
      );
      expect(await send(oneOff)).toBe('pending');
      expect(await statusOf(c)).toBeNull();
      const s = await subscriber(c);
      expect(s.status).toBeNull();
      expect(s.history).toMatchObject([{ effect: 'none', event_id: oneOff.id, status: null }]);

      // A paying customer buys an add-on and mistypes the card: still active.
      const paying = nextCustomer();
      const t = nowS();
      await send(event('invoice.paid', invoice(paying, { api, status: 'paid' }), { created: t, api }));
      await send(
        event('charge.failed', charge(paying, { outcome_reason: 'incorrect_number' }, api, { invoice: null }), {
          created: t + 60,
          api,
        }),
      );
      await send(
        event(
          'payment_intent.payment_failed',
          paymentIntent(paying, { decline_code: 'incorrect_number' }, api, { invoice: null }),
          { created: t + 60, api },
        ),
      );
      expect(await statusAndReason(paying)).toEqual(['active', 'paid']);
    });

    it('customer.deleted removes the record and every episode; older events change nothing, later ones count', async () => {
      const c = nextCustomer();
      const t = nowS();
      await send(failed(c, { next_payment_attempt: null }, t));
      expect(await send(event('customer.deleted', customer(c), { created: t + 10, api }))).toBe('applied');
      expect(await statusOf(c)).toBeNull();
      expect((await subscriber(c)).episodes).toEqual([]);
      expect(await send(failed(c, { next_payment_attempt: null }, t + 5))).toBe('stale');
      expect(await statusOf(c)).toBeNull();
      await send(failed(c, { next_payment_attempt: t + DAY_S }, t + 20));
      expect(await statusOf(c)).toBe('warning');
    });
  });

  it('before basil a decline links through its own invoice field, without any invoice payments listed', async () => {
    const c = nextCustomer();
    const ids = paymentIds();
    const t = nowS();
    await send(
      event(
        'payment_intent.payment_failed',
        paymentIntent(c, { decline_code: 'expired_card' }, LEGACY_API, { id: ids.paymentIntent, invoice: ids.invoice }),
        {
          created: t + 1,
          api: LEGACY_API,
        },
      ),
    );
    expect(await statusOf(c)).toBeNull();
    // The invoice event arrives second and names a different payment: the decline's own field links it.
    await send(
      event(
        'invoice.payment_failed',
        invoice(c, {
          api: LEGACY_API,
          ids: { ...ids, paymentIntent: 'pi_other', charge: 'ch_other' },
          next_payment_attempt: t + DAY_S,
        }),
        { created: t, api: LEGACY_API },
      ),
    );
    expect(await statusAndReason(c)).toEqual(['lockout', 'hard_decline']);
  });

  it('from basil an unlinked hard decline leaves the gate to the invoice: retries_exhausted when Stripe stops', async () => {
    const c = nextCustomer();
    const ids = paymentIds();
    const t = nowS();
    expect(
      await send(
        event(
          'payment_intent.payment_failed',
          paymentIntent(c, { decline_code: 'stolen_card' }, BASIL_API, { id: ids.paymentIntent }),
          {
            created: t,
            api: BASIL_API,
          },
        ),
      ),
    ).toBe('pending');
    await send(
      event('invoice.payment_failed', invoice(c, { api: BASIL_API, ids, next_payment_attempt: null }), {
        created: t,
        api: BASIL_API,
      }),
    );
    expect(await statusAndReason(c)).toEqual(['lockout', 'retries_exhausted']);
  });

  it('several subscriptions: the worst unresolved episode shows; paying one does not clear another', async () => {
    const c = nextCustomer();
    const a = paymentIds();
    const b = paymentIds();
    const t = nowS();
    await send(
      event('invoice.payment_failed', invoice(c, { ids: a, next_payment_attempt: t + DAY_S }), { created: t }),
    );
    await send(event('invoice.payment_failed', invoice(c, { ids: b, next_payment_attempt: null }), { created: t + 1 }));
    expect(await statusAndReason(c)).toEqual(['lockout', 'retries_exhausted']);
    await send(event('invoice.paid', invoice(c, { ids: a, status: 'paid' }), { created: t + 2 }));
    expect(await statusAndReason(c)).toEqual(['lockout', 'retries_exhausted']);
    await send(
      event('customer.subscription.deleted', subscription(c, 'canceled', { id: b.subscription ?? '' }), {
        created: t + 3,
      }),
    );
    // Every episode resolved: the reason is that of the most recently resolved.
    expect(await statusAndReason(c)).toEqual(['active', 'subscription_ended']);
    expect((await subscriber(c)).episodes.map((e) => [e.episode, e.state]).sort()).toEqual(
      [
        [a.subscription, 'resolved'],
        [b.subscription, 'resolved'],
      ].sort(),
    );
  });

  it('an older invoice failing while a newer one is paid: the later event of the subscription wins', async () => {
    const c = nextCustomer();
    const older = paymentIds();
    const newer = { ...paymentIds(), subscription: older.subscription };
    const t = nowS();
    await send(event('invoice.paid', invoice(c, { ids: newer, status: 'paid' }), { created: t + 30 }));
    expect(
      await send(
        event('invoice.payment_failed', invoice(c, { ids: older, next_payment_attempt: null }), { created: t + 10 }),
      ),
    ).toBe('stale');
    expect(await statusAndReason(c)).toEqual(['active', 'paid']);
  });

  it('at an equal second: a hard decline outranks a soft one, and a payment outranks both', async () => {
    const c = nextCustomer();
    const ids = paymentIds();
    const t = nowS();
    await send(event('invoice.payment_failed', invoice(c, { ids, next_payment_attempt: null }), { created: t }));
    await send(event('invoice.payment_failed', invoice(c, { ids, next_payment_attempt: t + DAY_S }), { created: t }));
    expect(await statusOf(c)).toBe('lockout');
    await send(event('invoice.paid', invoice(c, { ids, status: 'paid' }), { created: t }));
    expect(await statusOf(c)).toBe('active');
  });

  it('an admin PUT overrides the episodes until a Stripe event of a later second changes one', async () => {
    const c = nextCustomer();
    const ids = paymentIds();
    await send(event('invoice.payment_failed', invoice(c, { ids, next_payment_attempt: null }), { created: nowS() }));
    h.clock.advance(1_000);
    await h.setSubscriber('acme', c, 'active', 'manual');
    expect(await statusAndReason(c)).toEqual(['active', 'manual']);
    // The same second, an irrelevant event and a one-off decline leave the override standing.
    await send(event('invoice.payment_failed', invoice(c, { next_payment_attempt: null }), { created: nowS() }));
    await send(event('product.updated', { id: 'prod_1', object: 'product' }, { created: nowS() + 1 }));
    await send(
      event('payment_intent.payment_failed', paymentIntent(c, { decline_code: 'stolen_card' }, BASIL_API), {
        created: nowS() + 1,
      }),
    );
    expect(await statusAndReason(c)).toEqual(['active', 'manual']);
    // A later second's event ends it: the episodes speak again.
    await send(
      event('invoice.payment_failed', invoice(c, { next_payment_attempt: nowS() + DAY_S }), { created: nowS() + 2 }),
    );
    expect(await statusAndReason(c)).toEqual(['lockout', 'retries_exhausted']);
    const s = await subscriber(c);
    expect(s.history.map((e) => e.source)).toContain('admin');
  });

  it('an admin PUT or DELETE answers 409 when a Stripe event dated after now holds an episode, and changes nothing', async () => {
    const c = nextCustomer();
    // Stripe's clock a little ahead of ours: within the signature tolerance.
    await send(event('invoice.payment_failed', invoice(c, { next_payment_attempt: null }), { created: nowS() + 120 }));
    expect((await h.admin('PUT', `/tenants/acme/subscribers/${c}`, { status: 'active' })).json()).toMatchObject({
      status: 409,
      code: 'stale_change',
    });
    expect((await h.admin('DELETE', `/tenants/acme/subscribers/${c}`)).json()).toMatchObject({
      status: 409,
      code: 'stale_change',
    });
    expect(await statusAndReason(c)).toEqual(['lockout', 'retries_exhausted']);
    h.clock.advance(121_000);
    expect((await h.admin('DELETE', `/tenants/acme/subscribers/${c}`)).statusCode).toBe(204);
    expect(await statusOf(c)).toBeNull();
  });

  it('a subscription paid by emailed invoice still gates when it goes past_due: the exemption is for invoices', async () => {
    const c = nextCustomer();
    await send(
      event('customer.subscription.updated', subscription(c, 'past_due', { collection_method: 'send_invoice' }), {
        created: nowS(),
        previous: { status: 'active' },
      }),
    );
    expect(await statusAndReason(c)).toEqual(['warning', 'subscription_past_due']);
  });

  it('an admin DELETE is like customer.deleted: the history outlives the record', async () => {
    const c = nextCustomer();
    const t = nowS();
    await send(event('invoice.payment_failed', invoice(c, { next_payment_attempt: null }), { created: t }));
    h.clock.advance(2_000);
    expect((await h.admin('DELETE', `/tenants/acme/subscribers/${c}`)).statusCode).toBe(204);
    expect(await statusOf(c)).toBeNull();
    expect(
      await send(event('invoice.payment_failed', invoice(c, { next_payment_attempt: null }), { created: t + 1 })),
    ).toBe('stale');
    expect(await statusOf(c)).toBeNull();
    const s = await subscriber(c);
    expect(s.status).toBeNull();
    expect(s.history.map((e) => [e.status, e.effect, e.source])).toEqual([
      ['lockout', 'changed', 'stripe'],
      [null, 'removed', 'admin'],
    ]);
  });

  it('under concurrency: events of one customer delivered at once, twice each, end as delivered one by one', async () => {
    const story = (
      cus: string,
      a: ReturnType<typeof paymentIds>,
      b: ReturnType<typeof paymentIds>,
      t: number,
      tag: string,
    ): StripeEventFixture[] => [
      event('invoice.payment_failed', invoice(cus, { ids: a, next_payment_attempt: t + DAY_S, namePayments: true }), {
        created: t,
        id: `evt_${tag}1`,
      }),
      event(
        'payment_intent.payment_failed',
        paymentIntent(cus, { decline_code: 'lost_card' }, BASIL_API, { id: a.paymentIntent }),
        {
          created: t + 1,
          id: `evt_${tag}2`,
        },
      ),
      event('invoice.payment_failed', invoice(cus, { ids: b, next_payment_attempt: t + DAY_S }), {
        created: t + 2,
        id: `evt_${tag}3`,
      }),
      event('invoice.paid', invoice(cus, { ids: b, status: 'paid' }), { created: t + 3, id: `evt_${tag}4` }),
      event('charge.failed', charge(cus, { outcome_reason: 'incorrect_number' }, BASIL_API, { invoice: null }), {
        created: t + 4,
        id: `evt_${tag}5`,
      }),
    ];
    const t = nowS();
    for (let round = 0; round < 5; round += 1) {
      const c = nextCustomer();
      const twin = nextCustomer();
      const events = story(c, paymentIds(), paymentIds(), t, `conc${n}_`);
      const res = await Promise.all([...events, ...events].reverse().map((e) => deliver(h, 'acme', e, SECRET)));
      expect(res.map((r) => r.statusCode)).toEqual(res.map(() => 200));
      for (const e of story(twin, paymentIds(), paymentIds(), t, `seq${n}_`)) await send(e);
      expect(await statusAndReason(c)).toEqual(['lockout', 'hard_decline']);
      expect(await statusAndReason(c)).toEqual(await statusAndReason(twin));
      const outcomes = res.map((r) => (r.json() as { outcome: string }).outcome);
      expect(outcomes.filter((o) => o === 'duplicate')).toHaveLength(events.length);
    }
  });

  it('dry runs: roll back, say what would change, and two at once over the same customers in opposite orders both answer', async () => {
    const customers = Array.from({ length: 6 }, () => nextCustomer());
    const events = customers.map((c) =>
      event('invoice.payment_failed', invoice(c, { next_payment_attempt: null }), { created: nowS() }),
    );
    for (let round = 0; round < 5; round += 1) {
      const [a, b] = await Promise.all([
        h.admin('POST', '/tenants/acme/stripe-events', { events, dry_run: true }),
        h.admin('POST', '/tenants/acme/stripe-events', { events: [...events].reverse(), dry_run: true }),
      ]);
      expect([a?.statusCode, b?.statusCode]).toEqual([200, 200]);
      expect(a?.json()).toMatchObject({
        dry_run: true,
        outcomes: { applied: 6 },
        results: events.map(() => 'applied'),
      });
      expect(a?.json().customers).toContainEqual({
        processor_customer_id: customers[0],
        status_before: null,
        status: 'lockout',
        reason: 'retries_exhausted',
      });
    }
    for (const c of customers) expect(await statusOf(c)).toBeNull();
  });

  it('shows the cause and the episode of every change in the subscriber history', async () => {
    const c = nextCustomer();
    const ids = paymentIds();
    const pi = paymentIntent(c, { decline_code: 'stolen_card' });
    const failedInvoice = event(
      'invoice.payment_failed',
      invoice(c, { ids, next_payment_attempt: nowS() + DAY_S, expandedPaymentIntent: pi }),
      {
        created: nowS(),
      },
    );
    await send(failedInvoice);
    const res = await h.admin('GET', `/tenants/acme/subscribers/${c}`);
    expect(res.json()).toMatchObject({ status: 'lockout', reason: 'hard_decline', overridden_at: null });
    expect(res.json().episodes).toEqual([
      {
        episode: ids.subscription,
        state: 'lockout',
        reason: 'hard_decline',
        decline_code: 'stolen_card',
        at: new Date(failedInvoice.created * 1000).toISOString(),
        event_id: failedInvoice.id,
        dunning_started_at: new Date(failedInvoice.created * 1000).toISOString(),
        resolved_at: null,
        invoice: {
          id: ids.invoice,
          status: 'open',
          amount_due: 2900,
          amount_remaining: 2900,
          currency: 'usd',
          hosted_invoice_url: hostedInvoiceUrl(ids.invoice),
        },
      },
    ]);
    expect(res.json().history).toEqual([
      {
        status: 'lockout',
        derived_status: 'lockout',
        lockout_at: null,
        reason: 'hard_decline',
        effect: 'changed',
        episode: ids.subscription,
        source: 'stripe',
        policy_rule: null,
        secret_key_id: null,
        admin_action: null,
        event_id: failedInvoice.id,
        event_type: 'invoice.payment_failed',
        decline_code: 'stolen_card',
        occurred_at: new Date(failedInvoice.created * 1000).toISOString(),
        recorded_at: new Date(h.clock.ms).toISOString(),
      },
    ]);
  });
});
