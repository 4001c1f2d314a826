import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deriveChange, invoiceFailureOfEventFacts, invoiceFailureOutcome } from '../../src/domain/stripe/derive.js';
import { eventShapeProblem } from '../../src/domain/stripe/event.js';
import { escapeStored, escapeStrings, unescapeStored } from '../../src/domain/stripe/json.js';
import { RANKS, comparePositions, customerStatus, endsOverride } from '../../src/domain/stripe/fold.js';
import type { Episode } from '../../src/domain/stripe/fold.js';
import {
  BASIL_API,
  LEGACY_API,
  charge,
  customer,
  event,
  invoice,
  paymentIds,
  paymentIntent,
  subscription,
} from '../helpers/stripe-fixtures.js';

const T = 1_780_000_000;

describe('deriveChange', () => {
  it('reads the decline code of an expanded invoice payment, in both API shapes', () => {
    const pi = paymentIntent('cus_1', { decline_code: 'insufficient_funds' });
    for (const api of [LEGACY_API, BASIL_API] as const) {
      const d = deriveChange(
        event(
          'invoice.payment_failed',
          invoice('cus_1', { next_payment_attempt: T + 3600, api, expandedPaymentIntent: pi }),
          { created: T, api },
        ),
      );
      expect(d).toMatchObject({
        kind: 'change',
        customerId: 'cus_1',
        declineCode: 'insufficient_funds',
        change: { kind: 'episode', outcome: { state: 'warning', reason: 'soft_decline' } },
      });
    }
    const unexpanded = deriveChange(
      event('invoice.payment_failed', invoice('cus_1', { api: LEGACY_API }), { created: T, api: LEGACY_API }),
    );
    expect(unexpanded).toMatchObject({
      kind: 'change',
      declineCode: null,
      change: { outcome: { state: 'lockout', reason: 'retries_exhausted' } },
    });
  });

  it("finds an invoice's subscription and payments in both API shapes", () => {
    const ids = paymentIds();
    const legacy = deriveChange(
      event('invoice.payment_failed', invoice('cus_1', { api: LEGACY_API, ids }), { created: T, api: LEGACY_API }),
    );
    expect(legacy).toMatchObject({
      invoice: {
        invoiceId: ids.invoice,
        episode: ids.subscription,
        autoCollected: true,
        firstInvoice: false,
        paymentIds: [ids.paymentIntent, ids.charge],
      },
    });
    const basil = deriveChange(
      event(
        'invoice.payment_failed',
        invoice('cus_1', { api: BASIL_API, ids, namePayments: true, billing_reason: 'subscription_create' }),
        { created: T },
      ),
    );
    expect(basil).toMatchObject({
      invoice: { episode: ids.subscription, firstInvoice: true, paymentIds: [ids.paymentIntent] },
    });
    // Basil sends no payments unless the payload includes them.
    expect(deriveChange(event('invoice.paid', invoice('cus_1', { ids }), { created: T }))).toMatchObject({
      invoice: { paymentIds: [] },
    });
    // An invoice of no subscription is its own episode.
    const oneOff = paymentIds({ subscription: null });
    expect(deriveChange(event('invoice.paid', invoice('cus_1', { ids: oneOff }), { created: T }))).toMatchObject({
      invoice: { episode: oneOff.invoice },
    });
  });

  it("reads the latest attempt's code when an invoice lists several payments, in either order", () => {
    const older = { ...paymentIntent('cus_1', { decline_code: 'insufficient_funds' }), created: T - 7200 };
    const newer = { ...paymentIntent('cus_1', { decline_code: 'lost_card' }), created: T - 60 };
    for (const listed of [
      [newer, older],
      [older, newer],
    ]) {
      const inv = {
        ...invoice('cus_1', { next_payment_attempt: T + 3600 }),
        payments: {
          object: 'list',
          data: listed.map((pi) => ({ payment: { type: 'payment_intent', payment_intent: pi } })),
        },
      };
      expect(deriveChange(event('invoice.payment_failed', inv, { created: T }))).toMatchObject({
        declineCode: 'lost_card',
        change: { outcome: { state: 'lockout', reason: 'hard_decline' } },
      });
    }
  });

  it('keeps a decline as a decline: it gates only through a linked invoice', () => {
    const d = deriveChange(
      event(
        'charge.failed',
        charge('cus_1', { outcome_reason: 'stolen_card', failure_code: 'card_declined' }, BASIL_API, {
          id: 'ch_1',
          paymentIntent: 'pi_1',
        }),
        { created: T },
      ),
    );
    expect(d).toEqual({
      kind: 'change',
      customerId: 'cus_1',
      change: {
        kind: 'decline',
        decline: { hard: true, code: 'stolen_card', paymentIds: ['ch_1', 'pi_1'], invoiceId: null },
      },
      invoice: null,
      declineCode: 'stolen_card',
      facts: { outcome_reason: 'stolen_card', failure_code: 'card_declined', decline_class: 'hard' },
    });
    const legacy = deriveChange(
      event(
        'payment_intent.payment_failed',
        paymentIntent('cus_1', { decline_code: 'generic_decline' }, LEGACY_API, {
          id: 'pi_2',
          charge: 'ch_2',
          invoice: 'in_2',
        }),
        { created: T },
      ),
    );
    expect(legacy).toMatchObject({
      change: { kind: 'decline', decline: { hard: false, paymentIds: ['pi_2', 'ch_2'], invoiceId: 'in_2' } },
    });
  });

  it('reads an expanded customer object', () => {
    const d = deriveChange(
      event('invoice.paid', { ...invoice('cus_1', {}), customer: { id: 'cus_2', object: 'customer' } }, { created: T }),
    );
    expect(d).toMatchObject({ kind: 'change', customerId: 'cus_2' });
  });

  it('ignores what it cannot act on', () => {
    expect(deriveChange(event('customer.created', customer('cus_1'), { created: T }))).toEqual({ kind: 'irrelevant' });
    expect(deriveChange(event('charge.failed', charge('not_a_customer', {}), { created: T }))).toMatchObject({
      kind: 'ignored',
      why: 'no_customer',
    });
    expect(
      deriveChange(
        event('invoice.payment_action_required', invoice('cus_1', { collection_method: 'send_invoice' }), {
          created: T,
        }),
      ),
    ).toMatchObject({
      kind: 'ignored',
      why: 'send_invoice',
    });
    expect(
      deriveChange(
        event('customer.subscription.updated', subscription('cus_1', 'paused'), {
          created: T,
          previous: { status: 'active' },
        }),
      ),
    ).toMatchObject({
      kind: 'ignored',
      why: 'status_not_enforced',
    });
    expect(
      deriveChange(event('customer.subscription.updated', subscription('cus_1', 'past_due'), { created: T })),
    ).toMatchObject({
      kind: 'ignored',
      why: 'no_status_transition',
    });
    // The contract exempts send_invoice invoices; a subscription gates whatever its collection method.
    const invoiced = { ...subscription('cus_1', 'unpaid'), collection_method: 'send_invoice' };
    expect(
      deriveChange(event('customer.subscription.updated', invoiced, { created: T, previous: { status: 'past_due' } })),
    ).toMatchObject({
      kind: 'change',
      change: { outcome: { state: 'lockout', reason: 'subscription_unpaid' } },
    });
  });
});

describe('invoiceFailureOutcome', () => {
  const auto = { autoCollected: true, firstInvoice: false };
  const soft = { nextAttempt: T + 3600, payloadHard: null };
  const last = { nextAttempt: null, payloadHard: null };

  it('a linked hard decline makes the failure a hard one, retries or not; soft or none leaves the schedule to decide', () => {
    expect(invoiceFailureOutcome(auto, last, true)).toEqual({ state: 'lockout', reason: 'hard_decline' });
    expect(invoiceFailureOutcome(auto, soft, true)).toEqual({ state: 'lockout', reason: 'hard_decline' });
    expect(invoiceFailureOutcome(auto, last, false)).toEqual({ state: 'lockout', reason: 'retries_exhausted' });
    expect(invoiceFailureOutcome(auto, last, null)).toEqual({ state: 'lockout', reason: 'retries_exhausted' });
    expect(invoiceFailureOutcome(auto, soft, false)).toEqual({ state: 'warning', reason: 'soft_decline' });
  });

  it("the payload's own decline, when it carries one, comes before a linked one", () => {
    expect(invoiceFailureOutcome(auto, { nextAttempt: null, payloadHard: false }, true)).toEqual({
      state: 'lockout',
      reason: 'retries_exhausted',
    });
    expect(invoiceFailureOutcome(auto, { nextAttempt: T, payloadHard: true }, false)).toEqual({
      state: 'lockout',
      reason: 'hard_decline',
    });
  });

  it("a subscription's first invoice is a warning whatever its decline; an emailed invoice gates nothing", () => {
    expect(invoiceFailureOutcome({ autoCollected: true, firstInvoice: true }, last, true)).toEqual({
      state: 'warning',
      reason: 'first_payment_failed',
    });
    expect(invoiceFailureOutcome({ autoCollected: false, firstInvoice: false }, last, true)).toBeNull();
  });

  it('reads back from the facts kept with the event what the derivation read from the payload, in both shapes', () => {
    for (const api of [LEGACY_API, BASIL_API] as const) {
      const payloads = [
        invoice('cus_1', { api, next_payment_attempt: T + 3600 }),
        invoice('cus_1', {
          api,
          next_payment_attempt: null,
          expandedPaymentIntent: paymentIntent('cus_1', { decline_code: 'lost_card' }),
        }),
        invoice('cus_1', {
          api,
          next_payment_attempt: null,
          expandedPaymentIntent: paymentIntent('cus_1', { decline_code: 'insufficient_funds' }),
        }),
      ];
      for (const payload of payloads) {
        const d = deriveChange(event('invoice.payment_failed', payload, { created: T, api }));
        if (d.kind !== 'change' || d.change.kind !== 'episode') throw new Error('expected an episode change');
        expect(d.change.failure).toBeDefined();
        // Stored as JSON, read back as JSON.
        expect(invoiceFailureOfEventFacts(JSON.parse(JSON.stringify(d.facts)))).toEqual(d.change.failure);
      }
    }
    const plain = deriveChange(
      event('invoice.payment_failed', invoice('cus_1', { next_payment_attempt: T + 3600 }), { created: T }),
    );
    expect(plain).toMatchObject({ change: { failure: { nextAttempt: T + 3600, payloadHard: null } } });
    // Only a payment failure is weighed with a linked decline.
    expect(
      deriveChange(event('invoice.payment_action_required', invoice('cus_1', {}), { created: T })),
    ).not.toHaveProperty('change.failure');
  });
});

describe('customerStatus', () => {
  const episode = (
    key: string,
    state: Episode['outcome']['state'],
    reason: string,
    atMs: number,
    eventId = `evt_${key}`,
  ): Episode => ({
    key,
    outcome: { state, reason },
    position: { atMs, rank: RANKS[state], eventId },
  });

  it('orders by time, then warning < lockout < resolved < removal, then id', () => {
    const at = (atMs: number, rank: number, eventId: string) => ({ atMs, rank, eventId });
    expect(comparePositions(at(1000, RANKS.resolved, 'evt_a'), at(2000, RANKS.warning, 'evt_a'))).toBeLessThan(0);
    expect(comparePositions(at(1000, RANKS.warning, 'evt_z'), at(1000, RANKS.lockout, 'evt_a'))).toBeLessThan(0);
    expect(comparePositions(at(1000, RANKS.lockout, 'evt_z'), at(1000, RANKS.resolved, 'evt_a'))).toBeLessThan(0);
    expect(comparePositions(at(1000, RANKS.resolved, 'evt_z'), at(1000, RANKS.removed, 'evt_a'))).toBeLessThan(0);
    expect(comparePositions(at(1000, RANKS.warning, 'evt_a'), at(1000, RANKS.warning, 'evt_b'))).toBeLessThan(0);
    expect(comparePositions(at(1000, RANKS.warning, 'evt_a'), at(1000, RANKS.warning, 'evt_a'))).toBe(0);
  });

  it('shows the most severe unresolved episode, the latest among equals', () => {
    expect(
      customerStatus(
        [
          episode('a', 'warning', 'soft_decline', 3000),
          episode('b', 'lockout', 'retries_exhausted', 1000),
          episode('c', 'resolved', 'paid', 5000),
        ],
        null,
      ),
    ).toEqual({
      status: 'lockout',
      reason: 'retries_exhausted',
    });
    expect(
      customerStatus(
        [episode('a', 'warning', 'soft_decline', 1000), episode('b', 'warning', 'payment_action_required', 2000)],
        null,
      ),
    ).toEqual({
      status: 'warning',
      reason: 'payment_action_required',
    });
  });

  it('with every episode resolved: active, with the reason of the most recently resolved; none: unknown', () => {
    expect(
      customerStatus([episode('a', 'resolved', 'voided', 4000), episode('b', 'resolved', 'paid', 2000)], null),
    ).toEqual({
      status: 'active',
      reason: 'voided',
    });
    expect(customerStatus([], null)).toBeNull();
  });

  it('an override stands over the episodes until an event of a later second', () => {
    const override = { status: 'active' as const, reason: 'manual', atMs: 10_500 };
    expect(customerStatus([episode('a', 'lockout', 'hard_decline', 1000)], override)).toEqual({
      status: 'active',
      reason: 'manual',
    });
    expect(endsOverride(override, 10_000)).toBe(false);
    expect(endsOverride(override, 11_000)).toBe(true);
  });
});

describe('eventShapeProblem', () => {
  const now = T * 1000;
  it('refuses times that are not Stripe times in seconds, or are more than 300 s ahead', () => {
    const at = (created: number) => eventShapeProblem(event('invoice.paid', invoice('cus_1', {}), { created }), now);
    expect(at(T)).toBeNull();
    expect(at(T + 300)).toBeNull();
    expect(at(T + 301)).toBe('created: more than 300 s in the future');
    expect(at(T + 86_400)).toBe('created: more than 300 s in the future');
    expect(at(T * 1000)).toBe('created: more than 300 s in the future');
    expect(at(1_000)).toBe('created: must be a Unix time in seconds');
    expect(
      eventShapeProblem({ ...event('invoice.paid', invoice('cus_1', {}), { created: T }), created: 1.5e9 + 0.5 }, now),
    ).toBe('created: must be a Unix time in seconds');
    expect(eventShapeProblem(null, now)).toBe('the event must be a JSON object');
    expect(eventShapeProblem([], now)).toBe('the event must be a JSON object');
  });
});

describe('escaping what the store cannot hold', () => {
  it('gives every string back exactly, keeps different strings different, and leaves a plain one as it is', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', '\\', '\u0000', 'u', '0', '"') }), fc.string(), (s, t) => {
        const escaped = escapeStored(s);
        expect(escaped).not.toContain('\u0000');
        expect(unescapeStored(escaped)).toBe(s);
        if (s !== t) expect(escapeStored(t)).not.toBe(escaped);
        if (!s.includes('\\') && !s.includes('\u0000')) expect(escaped).toBe(s);
      }),
      { numRuns: 500, seed: 7 },
    );
  });

  it('escapes every string and key of an event, however deep, and derives from it what it derives from the original', () => {
    const pi = paymentIntent('cus_1', { decline_code: 'lost_card' });
    const plain = event(
      'invoice.payment_failed',
      invoice('cus_1', { next_payment_attempt: null, expandedPaymentIntent: pi }),
      { created: T },
    );
    expect(escapeStrings(plain)).toBe(plain);
    // Nested as deep as a 1 MiB body allows: parsed (JSON.parse does not recurse), never stringified here.
    const depth = 100_000;
    const metadata = JSON.parse(
      `{"__proto__":"p\\u0000","k\\u0000":${'['.repeat(depth)}"x\\u0000"${']'.repeat(depth)}}`,
    ) as Record<string, unknown>;
    const odd = { ...plain, data: { object: { ...plain.data.object, metadata } } };
    const escaped = escapeStrings(odd);
    const kept = escaped.data.object.metadata as Record<string, unknown>;
    expect(Object.keys(kept)).toEqual(['__proto__', 'k\\u0000']);
    expect(kept.__proto__).toBe('p\\u0000');
    let leaf: unknown = kept['k\\u0000'];
    for (let i = 0; i < depth; i += 1) leaf = (leaf as unknown[])[0];
    expect(leaf).toBe('x\\u0000');
    expect(metadata['k\u0000']).toBeDefined(); // the original is left as it was
    expect(deriveChange(escaped)).toEqual(deriveChange(odd));
  });
});
