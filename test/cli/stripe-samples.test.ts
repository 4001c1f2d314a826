import { describe, expect, it } from 'vitest';
import { deriveChange } from '../../src/domain/stripe/derive.js';
import type { StripeEventLike } from '../../src/domain/stripe/derive.js';
import { SAMPLE_API_VERSIONS, SAMPLE_SCENARIOS, sampleEvents, sampleIds } from '../../src/cli/stripe-samples.js';

const NOW = 1_790_000_000;
type Obj = Record<string, unknown>;

describe('stripe send-sample events', () => {
  it('gives one customer the same subscription, invoice and payment intent at every run, and another customer others', () => {
    expect(sampleIds('acme', 'cus_1')).toEqual(sampleIds('acme', 'cus_1'));
    expect(sampleIds('acme', 'cus_2').subscription).not.toBe(sampleIds('acme', 'cus_1').subscription);
    expect(sampleIds('acme', 'cus_1')).toMatchObject({
      subscription: expect.stringMatching(/^sub_[A-Za-z0-9]{24}$/),
      invoice: expect.stringMatching(/^in_[A-Za-z0-9]{24}$/),
      paymentIntent: expect.stringMatching(/^pi_/),
    });
    const given = sampleIds('acme', 'cus_1', { subscription: 'sub_given', invoice: 'in_given' });
    expect(given).toMatchObject({ subscription: 'sub_given', invoice: 'in_given' });
  });

  it('are test-mode Stripe events in the shape of their API version, with the fields Stripe documents', () => {
    for (const shape of ['legacy', 'basil'] as const) {
      for (const scenario of SAMPLE_SCENARIOS) {
        const ids = sampleIds('acme', 'cus_1');
        const events = sampleEvents({ scenario, shape, tenant: 'acme', customer: 'cus_1', ids, nowS: NOW });
        const label = `${shape} ${scenario}`;
        expect(events.length, label).toBeGreaterThan(0);
        expect(events.at(-1)?.created, label).toBe(NOW);
        for (const e of events) {
          expect(e, label).toMatchObject({ object: 'event', api_version: SAMPLE_API_VERSIONS[shape], livemode: false, id: expect.stringMatching(/^evt_/) });
          const object = (e.data as { object: Obj }).object;
          expect(object.livemode, label).toBe(false);
          if (object.object === 'invoice') {
            expect(object, label).toMatchObject({
              id: ids.invoice,
              customer: 'cus_1',
              currency: 'usd',
              amount_due: 2900,
              collection_method: 'charge_automatically',
            });
            expect(object.hosted_invoice_url, label).toMatch(/^https:\/\/invoice\.stripe\.com\/i\/acct_[A-Za-z0-9]+\/test_[A-Za-z0-9]+\?s=ap$/);
            expect(typeof object.amount_remaining, label).toBe('number');
            expect(typeof object.attempt_count, label).toBe('number');
            expect(object, label).toHaveProperty('next_payment_attempt');
            if (shape === 'legacy') {
              expect(object, label).toMatchObject({ subscription: ids.subscription, payment_intent: ids.paymentIntent });
              expect(object, label).not.toHaveProperty('parent');
            } else {
              expect(object, label).toMatchObject({
                parent: { subscription_details: { subscription: ids.subscription } },
                payments: { data: [{ payment: { payment_intent: ids.paymentIntent } }] },
              });
              expect(object, label).not.toHaveProperty('subscription');
            }
          }
          if (object.object === 'payment_intent') expect('invoice' in object, label).toBe(shape === 'legacy');
        }
      }
    }
  });

  it("are what Dunwall's derivation reads as the scenario says", () => {
    const ids = sampleIds('acme', 'cus_1');
    const last = (scenario: (typeof SAMPLE_SCENARIOS)[number]) => {
      const events = sampleEvents({ scenario, shape: 'basil', tenant: 'acme', customer: 'cus_1', ids, nowS: NOW });
      return deriveChange(events.at(-1) as unknown as StripeEventLike);
    };
    expect(last('payment_failed')).toMatchObject({ change: { episode: ids.subscription, outcome: { state: 'warning', reason: 'soft_decline' } } });
    expect(last('retries_exhausted')).toMatchObject({ change: { outcome: { state: 'lockout', reason: 'retries_exhausted' } } });
    expect(last('action_required')).toMatchObject({ change: { outcome: { state: 'warning', reason: 'payment_action_required' } } });
    expect(last('paid')).toMatchObject({ change: { episode: ids.subscription, outcome: { state: 'resolved', reason: 'paid' } } });
    expect(last('subscription_deleted')).toMatchObject({ change: { episode: ids.subscription, outcome: { state: 'resolved', reason: 'subscription_ended' } } });
    // The hard decline is the payment intent's, linked to the invoice: the store weighs them together.
    const [decline] = sampleEvents({ scenario: 'hard_decline', shape: 'legacy', tenant: 'acme', customer: 'cus_1', ids, nowS: NOW });
    expect(deriveChange(decline as unknown as StripeEventLike)).toMatchObject({
      change: { kind: 'decline', decline: { hard: true, code: 'lost_card', invoiceId: ids.invoice } },
    });
  });
});
