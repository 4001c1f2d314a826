import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveChange } from '../../src/domain/stripe/derive.js';
import { availableEngines } from '../helpers/engines.js';
import { T0, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import { charge, customer, event, invoice, paymentIntent, subscription } from '../helpers/stripe-fixtures.js';
import type { StripeEventFixture } from '../helpers/stripe-fixtures.js';
import { deliver } from '../helpers/webhook.js';

const engines = await availableEngines();
const SECRET = 'whsec_property_tests_0123456789abcdef';
const BASE_S = Math.floor(T0 / 1000);

/** One event of a customer's history: a kind and a second; several may share a second. */
const kinds = ['soft_charge', 'hard_charge', 'pi_hard', 'invoice_retrying', 'invoice_exhausted', 'action_required', 'paid', 'past_due', 'unpaid', 'reactivated', 'deleted'] as const;
type Kind = (typeof kinds)[number];

function build(kind: Kind, cus: string, created: number, id: string): StripeEventFixture {
  const o = { created, id };
  switch (kind) {
    case 'soft_charge': return event('charge.failed', charge(cus, { outcome_reason: 'insufficient_funds', failure_code: 'card_declined' }), o);
    case 'hard_charge': return event('charge.failed', charge(cus, { outcome_reason: 'stolen_card' }), o);
    case 'pi_hard': return event('payment_intent.payment_failed', paymentIntent(cus, { decline_code: 'lost_card' }), o);
    case 'invoice_retrying': return event('invoice.payment_failed', invoice(cus, { next_payment_attempt: created + 86_400 }), o);
    case 'invoice_exhausted': return event('invoice.payment_failed', invoice(cus, { next_payment_attempt: null }), o);
    case 'action_required': return event('invoice.payment_action_required', invoice(cus, {}), o);
    case 'paid': return event('invoice.paid', invoice(cus, {}), o);
    case 'past_due': return event('customer.subscription.updated', subscription(cus, 'past_due'), { ...o, previous: { status: 'active' } });
    case 'unpaid': return event('customer.subscription.updated', subscription(cus, 'unpaid'), { ...o, previous: { status: 'past_due' } });
    case 'reactivated': return event('customer.subscription.updated', subscription(cus, 'active'), { ...o, previous: { status: 'past_due' } });
    case 'deleted': return event('customer.deleted', customer(cus), o);
  }
}

/**
 * The expected answer, computed apart from the code under test: deliver the events in
 * chronological order, ties broken as the contract says (warning < lockout < active <
 * removal, then event id), each one simply overwriting the last.
 */
function chronologicalStatus(events: StripeEventFixture[]): string | null {
  const RANK: Record<string, number> = { warning: 1, lockout: 2, active: 3, removed: 4 };
  const effects = events.flatMap((e) => {
    const d = deriveChange(e);
    if (d.kind !== 'change') return [];
    const status = d.change.kind === 'delete' ? 'removed' : d.change.status;
    return [{ created: e.created, rank: RANK[status] ?? 0, id: e.id, status }];
  });
  effects.sort((a, b) => a.created - b.created || a.rank - b.rank || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const last = effects.at(-1)?.status ?? null;
  return last === 'removed' ? null : last;
}

const history = fc
  .array(fc.record({ kind: fc.constantFrom(...kinds), second: fc.integer({ min: 0, max: 5 }) }), { minLength: 1, maxLength: 7 })
  .chain((steps) =>
    fc.record({
      steps: fc.constant(steps),
      // A delivery: every event at least once, in any order, some more than once.
      order: fc.shuffledSubarray([...steps.keys(), ...steps.keys()], { minLength: steps.length, maxLength: steps.length * 2 }),
    }),
  )
  .map(({ steps, order }) => {
    const missing = steps.map((_, i) => i).filter((i) => !order.includes(i));
    return { steps, order: [...order, ...missing] };
  });

describe.each(engines)('Stripe delivery order does not matter ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  let run = 0;

  beforeAll(async () => {
    h = await harness(engine);
    acme = await h.createTenant('acme');
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET });
  });
  afterAll(() => h.close());

  it('every permutation and duplication yields the status of the chronological replay', async () => {
    await fc.assert(
      fc.asyncProperty(history, async ({ steps, order }) => {
        run += 1;
        const cus = `cus_prop${run}`;
        const events = steps.map((s, i) => build(s.kind, cus, BASE_S + s.second, `evt_p${run}_${i}`));
        for (const i of order) {
          const fixture = events[i];
          if (!fixture) throw new Error('index out of range');
          const res = await deliver(h, 'acme', fixture, SECRET);
          expect(res.statusCode).toBe(200);
        }
        const res = await h.lookup('acme', { key: acme.publishable_key, customerId: cus });
        const actual = res.body === '{"status":"active"}' ? null : (res.json().status as string);
        expect(actual).toBe(chronologicalStatus(events));
      }),
      { numRuns: engine.name === 'embedded' ? 60 : 60, seed: 20261123, endOnFailure: true },
    );
  });
});
