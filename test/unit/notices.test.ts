import { describe, expect, it } from 'vitest';
import {
  cardFactOf,
  expiryEndMs,
  expiryText,
  noticeAt,
  noticeSupersedes,
  noticesProblem,
  renewalNotice,
} from '../../src/domain/notices.js';
import { policyProblem } from '../../src/domain/policy.js';
import { customer, event, invoice, paymentIds } from '../helpers/stripe-fixtures.js';

const CREATED = Date.parse('2026-11-02T09:00:00Z') / 1000;
const CUS = 'cus_notice1';

function card(exp_month: number, exp_year: number, extra: Record<string, unknown> = {}) {
  return {
    id: 'card_1Expiring',
    object: 'card',
    brand: 'Visa',
    last4: '4242',
    customer: CUS,
    exp_month,
    exp_year,
    ...extra,
  };
}

describe('the card-expiring notice derivation', () => {
  it('customer.source.expiring: a notice until the end of the card month', () => {
    const fact = cardFactOf(event('customer.source.expiring', card(11, 2026), { created: CREATED }));
    expect(fact).toEqual({
      kind: 'expiring',
      customerId: CUS,
      expiry: { month: 11, year: 2026 },
      untilMs: Date.parse('2026-12-01T00:00:00Z'),
    });
  });

  it('the end of December is the first of January of the next year', () => {
    expect(expiryEndMs({ month: 12, year: 2026 })).toBe(Date.parse('2027-01-01T00:00:00Z'));
    expect(expiryText({ month: 3, year: 2027 })).toBe('2027-03');
  });

  it('refuses a card without a customer or a sensible expiry', () => {
    const noCustomer = { ...card(11, 2026), customer: null };
    expect(cardFactOf(event('customer.source.expiring', noCustomer, { created: CREATED }))).toBeNull();
    expect(cardFactOf(event('customer.source.expiring', card(13, 2026), { created: CREATED }))).toBeNull();
    expect(cardFactOf(event('customer.source.expiring', card(11, 26), { created: CREATED }))).toBeNull();
    expect(cardFactOf(event('customer.source.expiring', card(Number.NaN, 2026), { created: CREATED }))).toBeNull();
  });

  it('invoice.upcoming names the renewal; the card expiring before it makes the notice, after it ends one', () => {
    const attempt = Date.parse('2026-12-15T10:00:00Z') / 1000;
    const upcoming = {
      ...invoice(CUS, { ids: paymentIds() }),
      id: undefined,
      status: 'draft',
      next_payment_attempt: attempt,
    };
    const fact = cardFactOf(event('invoice.upcoming', upcoming, { created: CREATED }));
    expect(fact).toEqual({ kind: 'renewal', customerId: CUS, renewalMs: attempt * 1000 });
    if (fact?.kind !== 'renewal') throw new Error('not a renewal');
    expect(renewalNotice(fact, { month: 11, year: 2026 })).toEqual({
      kind: 'expiring',
      customerId: CUS,
      expiry: { month: 11, year: 2026 },
      untilMs: attempt * 1000,
    });
    // A card valid through December carries a renewal on December 15.
    expect(renewalNotice(fact, { month: 12, year: 2026 })).toEqual({
      kind: 'ended',
      customerId: CUS,
      why: 'card_changed',
    });
    expect(renewalNotice(fact, null)).toBeNull();
  });

  it('invoice.upcoming without next_payment_attempt falls back on period_end', () => {
    const periodEnd = Date.parse('2027-01-03T00:00:00Z') / 1000;
    const upcoming = { object: 'invoice', customer: CUS, next_payment_attempt: null, period_end: periodEnd };
    expect(cardFactOf(event('invoice.upcoming', upcoming, { created: CREATED }))).toEqual({
      kind: 'renewal',
      customerId: CUS,
      renewalMs: periodEnd * 1000,
    });
  });

  it('a card change ends it: a new default payment method, a new default source, a card attached or updated', () => {
    const ended = { kind: 'ended', customerId: CUS, why: 'card_changed' };
    const newDefault = event('customer.updated', customer(CUS), {
      created: CREATED,
      previous: { invoice_settings: { default_payment_method: 'pm_old' } },
    });
    expect(cardFactOf(newDefault)).toEqual(ended);
    const newSource = event('customer.updated', customer(CUS), {
      created: CREATED,
      previous: { default_source: 'card_old' },
    });
    expect(cardFactOf(newSource)).toEqual(ended);
    const attached = {
      id: 'pm_new',
      object: 'payment_method',
      type: 'card',
      customer: CUS,
      card: { exp_month: 4, exp_year: 2030 },
    };
    expect(cardFactOf(event('payment_method.attached', attached, { created: CREATED }))).toEqual(ended);
    expect(cardFactOf(event('customer.source.updated', card(11, 2029), { created: CREATED }))).toEqual(ended);
  });

  it('a customer.updated that leaves the default card alone tells nothing', () => {
    const email = event('customer.updated', customer(CUS), {
      created: CREATED,
      previous: { email: 'old@example.com' },
    });
    expect(cardFactOf(email)).toBeNull();
    expect(cardFactOf(event('customer.updated', customer(CUS), { created: CREATED }))).toBeNull();
  });

  it("the renewal's invoice.paid ends it, in both API shapes; a one-off invoice's does not", () => {
    const renewal = { kind: 'ended', customerId: CUS, why: 'renewal_paid' };
    const basil = invoice(CUS, { status: 'paid', api: '2025-03-31.basil' });
    const legacy = invoice(CUS, { status: 'paid', api: '2024-06-20' });
    const oneOff = invoice(CUS, { status: 'paid', ids: paymentIds({ subscription: null }) });
    expect(cardFactOf(event('invoice.paid', basil, { created: CREATED }))).toEqual(renewal);
    expect(cardFactOf(event('invoice.paid', legacy, { created: CREATED }))).toEqual(renewal);
    expect(cardFactOf(event('invoice.paid', oneOff, { created: CREATED }))).toBeNull();
  });

  it('other types tell nothing of a card', () => {
    expect(cardFactOf(event('invoice.payment_failed', invoice(CUS, {}), { created: CREATED }))).toBeNull();
    expect(cardFactOf(event('customer.created', customer(CUS), { created: CREATED }))).toBeNull();
  });

  it('a later event supersedes; within one second an end wins over a start; a notice holds until its end', () => {
    const stored = {
      expires: '2026-11',
      untilMs: Date.parse('2026-12-01T00:00:00Z'),
      eventCreatedMs: 2000,
      eventId: 'evt_b',
    };
    const ended = { ...stored, expires: null, untilMs: null };
    expect(noticeSupersedes(null, 1000, false)).toBe(true);
    expect(noticeSupersedes(stored, 1000, true)).toBe(false);
    expect(noticeSupersedes(stored, 3000, false)).toBe(true);
    // One second: an end wins over a held notice, a start does not win over an end.
    expect(noticeSupersedes(stored, 2000, true)).toBe(true);
    expect(noticeSupersedes(stored, 2000, false)).toBe(true);
    expect(noticeSupersedes(ended, 2000, false)).toBe(false);
    expect(noticeSupersedes(ended, 2000, true)).toBe(true);
    expect(noticeAt(stored, Date.parse('2026-11-30T23:59:59Z'))).toBe('2026-11');
    expect(noticeAt(stored, Date.parse('2026-12-01T00:00:00Z'))).toBeNull();
    expect(noticeAt({ expires: null, untilMs: null }, 0)).toBeNull();
  });

  it('policy.notices: a list of known kinds', () => {
    expect(noticesProblem(['card_expiring'])).toBeNull();
    expect(noticesProblem([])).toBeNull();
    expect(noticesProblem('card_expiring')).toMatch(/must be a list/);
    expect(noticesProblem(['card_lost'])).toMatch(/card_expiring/);
    expect(policyProblem({ notices: ['card_expiring'], grace_days: 3 })).toBeNull();
    expect(policyProblem({ notices: ['nope'] })).toMatch(/policy.notices/);
  });
});
