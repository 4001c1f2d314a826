import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { T0, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import {
  BASIL_API,
  LEGACY_API,
  charge,
  customer,
  event,
  invoice,
  paymentIntent,
  subscription,
} from '../helpers/stripe-fixtures.js';
import type { ApiShape, PaymentIds, StripeEventFixture } from '../helpers/stripe-fixtures.js';
import { deliver } from '../helpers/webhook.js';

const engines = await availableEngines();
const SECRET = 'whsec_property_tests_0123456789abcdef';
const BASE_S = Math.floor(T0 / 1000);
const SUBSCRIPTIONS = 3;

/**
 * One event of a customer's life: a kind, the subscription it concerns (several per
 * customer), the second it is dated, and the payload shape (both shapes mixed in one stream).
 */
const kinds = [
  'invoice_retrying',
  'invoice_exhausted',
  'invoice_hard',
  'action_required',
  'paid',
  'voided',
  'past_due',
  'unpaid',
  'reactivated',
  'ended',
  'linked_pi_hard',
  'linked_charge_soft',
  'one_off_hard',
  'one_off_soft',
  'deleted',
] as const;
type Kind = (typeof kinds)[number];
interface Step {
  kind: Kind;
  sub: number;
  second: number;
  api: ApiShape;
}

function build(step: Step, cus: string, ids: PaymentIds, id: string): StripeEventFixture {
  const created = BASE_S + step.second;
  const o = { created, id, api: step.api };
  const api = step.api;
  const sub = ids.subscription ?? '';
  // From basil on, every invoice event here includes its payments, so that the link is known.
  const inv = (extra: Parameters<typeof invoice>[1]) => invoice(cus, { api, ids, namePayments: true, ...extra });
  const link = { paymentIntent: ids.paymentIntent, charge: ids.charge, invoice: ids.invoice };
  switch (step.kind) {
    case 'invoice_retrying':
      return event('invoice.payment_failed', inv({ next_payment_attempt: created + 86_400 }), o);
    case 'invoice_exhausted':
      return event('invoice.payment_failed', inv({ next_payment_attempt: null }), o);
    case 'invoice_hard':
      return event(
        'invoice.payment_failed',
        inv({
          next_payment_attempt: created + 86_400,
          expandedPaymentIntent: paymentIntent(cus, { decline_code: 'lost_card' }, api, { id: ids.paymentIntent }),
        }),
        o,
      );
    case 'action_required':
      return event('invoice.payment_action_required', inv({}), o);
    case 'paid':
      return event('invoice.paid', inv({ status: 'paid' }), o);
    case 'voided':
      return event('invoice.voided', inv({ status: 'void' }), o);
    case 'past_due':
      return event('customer.subscription.updated', subscription(cus, 'past_due', { id: sub }), {
        ...o,
        previous: { status: 'active' },
      });
    case 'unpaid':
      return event('customer.subscription.updated', subscription(cus, 'unpaid', { id: sub }), {
        ...o,
        previous: { status: 'past_due' },
      });
    case 'reactivated':
      return event('customer.subscription.updated', subscription(cus, 'active', { id: sub }), {
        ...o,
        previous: { status: 'past_due' },
      });
    case 'ended':
      return event('customer.subscription.deleted', subscription(cus, 'canceled', { id: sub }), o);
    case 'linked_pi_hard':
      return event(
        'payment_intent.payment_failed',
        paymentIntent(cus, { decline_code: 'stolen_card' }, api, { ...link, id: ids.paymentIntent }),
        o,
      );
    case 'linked_charge_soft':
      return event(
        'charge.failed',
        charge(cus, { outcome_reason: 'insufficient_funds', failure_code: 'card_declined' }, api, {
          ...link,
          id: ids.charge,
        }),
        o,
      );
    case 'one_off_hard':
      return event(
        'payment_intent.payment_failed',
        paymentIntent(cus, { decline_code: 'incorrect_number' }, api, { invoice: null }),
        o,
      );
    case 'one_off_soft':
      return event('charge.failed', charge(cus, { outcome_reason: 'insufficient_funds' }, api, { invoice: null }), o);
    case 'deleted':
      return event('customer.deleted', customer(cus), o);
  }
}

type State = 'warning' | 'lockout' | 'resolved';
const STATE_OF: Record<Kind, State | 'removed' | null> = {
  invoice_retrying: 'warning',
  invoice_exhausted: 'lockout',
  invoice_hard: 'lockout',
  action_required: 'warning',
  paid: 'resolved',
  voided: 'resolved',
  past_due: 'warning',
  unpaid: 'lockout',
  reactivated: 'resolved',
  ended: 'resolved',
  linked_pi_hard: 'lockout',
  linked_charge_soft: 'warning',
  one_off_hard: null,
  one_off_soft: null,
  deleted: 'removed',
};
const RANK: Record<State | 'removed', number> = { warning: 1, lockout: 2, resolved: 3, removed: 4 };
const INVOICE_KINDS: readonly Kind[] = [
  'invoice_retrying',
  'invoice_exhausted',
  'invoice_hard',
  'action_required',
  'paid',
  'voided',
];
const SEVERITY: Record<State, number> = { resolved: 0, warning: 1, lockout: 2 };

interface Effect {
  created: number;
  rank: number;
  id: string;
  sub: number;
  state: State | 'removed';
}
const byPosition = (a: Effect, b: Effect) =>
  a.created - b.created || a.rank - b.rank || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * The expected answer, computed apart from the code under test: sort each episode's
 * events chronologically (ties as the contract says) and keep the last; drop what a
 * later customer.deleted removed; show the worst unresolved episode. A decline counts
 * only when its subscription's invoice has an event in the set (that is what links it);
 * a one-off decline counts never.
 */
function chronologicalStatus(steps: Step[], ids: string[]): string | null {
  const invoiced = new Set(steps.filter((s) => INVOICE_KINDS.includes(s.kind)).map((s) => s.sub));
  const effects: Effect[] = steps.flatMap((s, i) => {
    const state = STATE_OF[s.kind];
    if (state === null) return [];
    if ((s.kind === 'linked_pi_hard' || s.kind === 'linked_charge_soft') && !invoiced.has(s.sub)) return [];
    return [{ created: s.second, rank: RANK[state], id: ids[i] ?? '', sub: s.sub, state }];
  });
  effects.sort(byPosition);
  const removal = effects.filter((e) => e.state === 'removed').at(-1);
  const episodes = new Map<number, Effect>();
  for (const e of effects) {
    if (e.state === 'removed' || (removal && byPosition(e, removal) < 0)) continue;
    episodes.set(e.sub, e);
  }
  let worst: Effect | null = null;
  for (const e of episodes.values()) {
    const sev = SEVERITY[e.state as State] - (worst ? SEVERITY[worst.state as State] : -1);
    if (worst === null || sev > 0 || (sev === 0 && byPosition(e, worst) > 0)) worst = e;
  }
  if (worst === null) return null;
  return worst.state === 'resolved' ? 'active' : worst.state;
}

const step = fc.record({
  kind: fc.constantFrom(...kinds),
  sub: fc.integer({ min: 0, max: SUBSCRIPTIONS - 1 }),
  second: fc.integer({ min: 0, max: 5 }),
  api: fc.constantFrom<ApiShape>(LEGACY_API, BASIL_API),
});
const history = fc
  .array(step, { minLength: 1, maxLength: 9 })
  .chain((steps) =>
    fc.record({
      steps: fc.constant(steps),
      // A delivery: every event at least once, in any order, some more than once.
      order: fc.shuffledSubarray([...steps.keys(), ...steps.keys()], {
        minLength: steps.length,
        maxLength: steps.length * 2,
      }),
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

  async function lookup(cus: string): Promise<string | null> {
    const res = await h.lookup('acme', { key: acme.publishable_key, customerId: cus });
    return res.body === '{"status":"active"}' ? null : (res.json().status as string);
  }

  it('several subscriptions, one-off declines interleaved, any order and duplication: the status of the chronological replay', async () => {
    await fc.assert(
      fc.asyncProperty(history, async ({ steps, order }) => {
        run += 1;
        const cus = `cus_prop${run}`;
        const idsOf = (tag: string): PaymentIds[] =>
          Array.from({ length: SUBSCRIPTIONS }, (_, k) => ({
            subscription: `sub_p${run}s${k}${tag}`,
            invoice: `in_p${run}s${k}${tag}`,
            paymentIntent: `pi_p${run}s${k}${tag}`,
            charge: `ch_p${run}s${k}${tag}`,
          }));
        const subs = idsOf('');
        const twinSubs = idsOf('t');
        const ids = steps.map((_, i) => `evt_p${run}_${i}`);
        const events = steps.map((s, i) => build(s, cus, subs[s.sub] ?? (subs[0] as PaymentIds), ids[i] ?? ''));
        for (const i of order) {
          const fixture = events[i];
          if (!fixture) throw new Error('index out of range');
          const res = await deliver(h, 'acme', fixture, SECRET);
          expect(res.statusCode).toBe(200);
        }
        expect(await lookup(cus)).toBe(chronologicalStatus(steps, ids));
        // The same set without its one-off declines, to a twin customer: the same answer.
        const twin = `${cus}t`;
        const kept = order.filter((i) => !(steps[i]?.kind ?? '').startsWith('one_off'));
        for (const i of kept) {
          const s = steps[i];
          if (!s) throw new Error('index out of range');
          const res = await deliver(
            h,
            'acme',
            build(s, twin, twinSubs[s.sub] ?? (twinSubs[0] as PaymentIds), `${ids[i] ?? ''}t`),
            SECRET,
          );
          expect(res.statusCode).toBe(200);
        }
        expect(await lookup(twin)).toBe(await lookup(cus));
      }),
      { numRuns: 60, seed: 20261123, endOnFailure: true },
    );
  });
});
