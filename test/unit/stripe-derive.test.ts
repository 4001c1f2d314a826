import { describe, expect, it } from 'vitest';
import { deriveChange } from '../../src/domain/stripe/derive.js';
import { eventShapeProblem } from '../../src/domain/stripe/event.js';
import { comparePositions, fold, positionOf, statusOf } from '../../src/domain/stripe/fold.js';
import type { Change } from '../../src/domain/stripe/fold.js';
import { BASIL_API, LEGACY_API, charge, customer, event, invoice, paymentIntent, subscription } from '../helpers/stripe-fixtures.js';

const T = 1_780_000_000;

describe('deriveChange', () => {
  it('reads the decline code of an expanded invoice payment, in both API shapes', () => {
    const pi = paymentIntent('cus_1', { decline_code: 'insufficient_funds' });
    for (const api of [LEGACY_API, BASIL_API] as const) {
      const d = deriveChange(event('invoice.payment_failed', invoice('cus_1', { next_payment_attempt: T + 3600, api, expandedPaymentIntent: pi }), { created: T, api }));
      expect(d).toMatchObject({ kind: 'change', customerId: 'cus_1', declineCode: 'insufficient_funds', change: { status: 'warning', reason: 'soft_decline' } });
    }
    const unexpanded = deriveChange(event('invoice.payment_failed', invoice('cus_1', { api: LEGACY_API }), { created: T, api: LEGACY_API }));
    expect(unexpanded).toMatchObject({ kind: 'change', declineCode: null, change: { status: 'lockout', reason: 'retries_exhausted' } });
  });

  it('keeps the fields it used', () => {
    const d = deriveChange(event('charge.failed', charge('cus_1', { outcome_reason: 'stolen_card', failure_code: 'card_declined' }), { created: T }));
    expect(d).toEqual({
      kind: 'change',
      customerId: 'cus_1',
      change: { kind: 'set', status: 'lockout', reason: 'hard_decline' },
      declineCode: 'stolen_card',
      facts: { outcome_reason: 'stolen_card', failure_code: 'card_declined', decline_class: 'hard' },
    });
  });

  it('reads an expanded customer object', () => {
    const d = deriveChange(event('invoice.paid', { ...invoice('cus_1', {}), customer: { id: 'cus_2', object: 'customer' } }, { created: T }));
    expect(d).toMatchObject({ kind: 'change', customerId: 'cus_2' });
  });

  it('ignores what it cannot act on', () => {
    expect(deriveChange(event('customer.created', customer('cus_1'), { created: T }))).toEqual({ kind: 'irrelevant' });
    expect(deriveChange(event('charge.failed', charge('not_a_customer', {}), { created: T }))).toMatchObject({ kind: 'ignored', why: 'no_customer' });
    expect(deriveChange(event('invoice.payment_action_required', invoice('cus_1', { collection_method: 'send_invoice' }), { created: T }))).toMatchObject({
      kind: 'ignored',
      why: 'send_invoice',
    });
    expect(deriveChange(event('customer.subscription.updated', subscription('cus_1', 'canceled'), { created: T, previous: { status: 'active' } }))).toMatchObject({
      kind: 'ignored',
      why: 'status_not_enforced',
    });
    expect(deriveChange(event('customer.subscription.updated', subscription('cus_1', 'past_due'), { created: T }))).toMatchObject({
      kind: 'ignored',
      why: 'no_status_transition',
    });
    const invoiced = { ...subscription('cus_1', 'unpaid'), collection_method: 'send_invoice' };
    expect(deriveChange(event('customer.subscription.updated', invoiced, { created: T, previous: { status: 'past_due' } }))).toMatchObject({
      kind: 'ignored',
      why: 'send_invoice',
    });
  });
});

describe('fold', () => {
  const warning: Change = { kind: 'set', status: 'warning', reason: 'soft_decline' };
  const lockout: Change = { kind: 'set', status: 'lockout', reason: 'hard_decline' };
  const active: Change = { kind: 'set', status: 'active', reason: 'paid' };

  it('orders by time, then warning < lockout < active < removal, then id', () => {
    expect(comparePositions(positionOf(active, 1000, 'evt_a'), positionOf(warning, 2000, 'evt_a'))).toBeLessThan(0);
    expect(comparePositions(positionOf(warning, 1000, 'evt_z'), positionOf(lockout, 1000, 'evt_a'))).toBeLessThan(0);
    expect(comparePositions(positionOf(lockout, 1000, 'evt_z'), positionOf(active, 1000, 'evt_a'))).toBeLessThan(0);
    expect(comparePositions(positionOf(active, 1000, 'evt_z'), positionOf({ kind: 'delete' }, 1000, 'evt_a'))).toBeLessThan(0);
    expect(comparePositions(positionOf(warning, 1000, 'evt_a'), positionOf(warning, 1000, 'evt_b'))).toBeLessThan(0);
    expect(comparePositions(positionOf(warning, 1000, 'evt_a'), positionOf(warning, 1000, 'evt_a'))).toBe(0);
  });

  it('gives the same state whatever the order', () => {
    const changes = [
      { change: warning, position: positionOf(warning, 1000, 'evt_1') },
      { change: active, position: positionOf(active, 3000, 'evt_3') },
      { change: lockout, position: positionOf(lockout, 3000, 'evt_2') },
    ];
    expect(statusOf(fold(changes))).toBe('active');
    expect(statusOf(fold([...changes].reverse()))).toBe('active');
    expect(statusOf(fold([]))).toBeNull();
  });
});

describe('eventShapeProblem', () => {
  const now = T * 1000;
  it('refuses times that are not Stripe times in seconds, or are more than a day ahead', () => {
    const at = (created: number) => eventShapeProblem(event('invoice.paid', invoice('cus_1', {}), { created }), now);
    expect(at(T)).toBeNull();
    expect(at(T + 86_400)).toBeNull();
    expect(at(T + 86_401)).toBe('created: more than a day in the future');
    expect(at(T * 1000)).toBe('created: more than a day in the future');
    expect(at(1_000)).toBe('created: must be a Unix time in seconds');
    expect(eventShapeProblem({ ...event('invoice.paid', invoice('cus_1', {}), { created: T }), created: 1.5e9 + 0.5 }, now)).toBe('created: must be a Unix time in seconds');
    expect(eventShapeProblem(null, now)).toBe('the event must be a JSON object');
    expect(eventShapeProblem([], now)).toBe('the event must be a JSON object');
  });
});
