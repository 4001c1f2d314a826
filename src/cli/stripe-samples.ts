import { createHash, randomBytes } from 'node:crypto';
import { answerCustomer, formatLockoutAt } from '../domain/policy.js';
import type { Policy, ScheduledRule } from '../domain/policy.js';
import type { SubscriberStatus } from '../domain/types.js';
import type { SubscriberView } from './client.js';

/**
 * Sample Stripe events for `dunwall stripe send-sample`: what Stripe sends a webhook
 * endpoint when a renewal fails, is retried, is paid, or the subscription ends, shaped as
 * Stripe documents its Event, Invoice, PaymentIntent and Subscription objects, in test
 * mode (`livemode: false`). Two shapes: before API version 2025-03-31.basil (the invoice
 * names `subscription`, `payment_intent`, `charge`; a payment intent names its `invoice`)
 * and from it on (`invoice.parent.subscription_details.subscription`, `invoice.payments`).
 * Pure: the clock and the random ids are the caller's.
 */

export const SAMPLE_SCENARIOS = [
  'payment_failed',
  'retries_exhausted',
  'hard_decline',
  'action_required',
  'paid',
  'subscription_deleted',
  'card_expiring',
  'renewal_upcoming',
  'card_updated',
] as const;
export type SampleScenario = (typeof SAMPLE_SCENARIOS)[number];
/** The scenarios of a card (docs/notices.md): no invoice of theirs is paid or failed. */
export const CARD_SAMPLE_SCENARIOS: readonly SampleScenario[] = ['card_expiring', 'renewal_upcoming', 'card_updated'];

export const SAMPLE_SHAPES = ['basil', 'legacy'] as const;
export type SampleShape = (typeof SAMPLE_SHAPES)[number];

/** The API version each shape's events carry: the last one before basil, and basil. */
export const SAMPLE_API_VERSIONS: Readonly<Record<SampleShape, string>> = {
  legacy: '2025-02-24.acacia',
  basil: '2025-03-31.basil',
};

/** What each scenario should leave the customer at (docs/stripe.md), as a check for the reader. */
export const SAMPLE_DERIVED: Readonly<Record<SampleScenario, { status: SubscriberStatus; reason: string }>> = {
  payment_failed: { status: 'warning', reason: 'soft_decline' },
  retries_exhausted: { status: 'lockout', reason: 'retries_exhausted' },
  hard_decline: { status: 'lockout', reason: 'hard_decline' },
  action_required: { status: 'warning', reason: 'payment_action_required' },
  paid: { status: 'active', reason: 'paid' },
  subscription_deleted: { status: 'active', reason: 'subscription_ended' },
  // The card scenarios never change a status (docs/notices.md): what they tell is the notice.
  card_expiring: { status: 'active', reason: 'card_expiring' },
  renewal_upcoming: { status: 'active', reason: 'renewal_upcoming' },
  card_updated: { status: 'active', reason: 'card_changed' },
};

export const SUBSCRIPTION_ID_RE = /^sub_[A-Za-z0-9]{1,64}$/;
export const INVOICE_ID_RE = /^in_[A-Za-z0-9]{1,64}$/;

/** The objects one customer's samples share, so that a `paid` resolves what a failure opened. */
export interface SampleIds {
  account: string;
  subscription: string;
  invoice: string;
  paymentIntent: string;
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function base62(bytes: Buffer, length: number): string {
  let out = '';
  for (let i = 0; i < length; i += 1) out += BASE62[(bytes[i % bytes.length] ?? 0) % 62];
  return out;
}

/** A Stripe-looking id that is the same for the same inputs: `sub_` + 24 base62 characters. */
function stableId(prefix: string, ...parts: string[]): string {
  return `${prefix}_${base62(createHash('sha256').update(parts.join('\u0000')).digest(), 24)}`;
}

/** A new Stripe-looking id, for what is new at every send (events, charges, requests). */
export function randomId(prefix: string): string {
  return `${prefix}_${base62(randomBytes(24), 24)}`;
}

/**
 * The ids of a customer's sample subscription, invoice and payment intent: derived from the
 * tenant and customer unless given, so that every run for that customer speaks of the same
 * objects. A new `--invoice` starts a new billing period of the same subscription.
 */
export function sampleIds(
  tenant: string,
  customer: string,
  given: { subscription?: string; invoice?: string } = {},
): SampleIds {
  const subscription = given.subscription ?? stableId('sub', 'dunwall-sample', tenant, customer);
  const invoice = given.invoice ?? stableId('in', 'dunwall-sample', tenant, customer, subscription);
  return {
    account: stableId('acct', 'dunwall-sample', tenant).slice(0, 21),
    subscription,
    invoice,
    paymentIntent: stableId('pi', 'dunwall-sample', invoice),
  };
}

export interface SampleRequest {
  scenario: SampleScenario;
  shape: SampleShape;
  tenant: string;
  customer: string;
  ids: SampleIds;
  /** Now, in Unix seconds: the last event's `created`. */
  nowS: number;
  /** New ids (`evt`, `ch`, `req`, ...); `randomId` unless a test fixes them. */
  newId?: (prefix: string) => string;
}

type Obj = Record<string, unknown>;

const AMOUNT = 2900;
const CURRENCY = 'usd';
const DAY_S = 86_400;

/** The decline each failing scenario's payment meets: a soft one Stripe retries, or a hard one it does not. */
const DECLINES: Partial<Record<SampleScenario, { code: string; message: string }>> = {
  payment_failed: { code: 'insufficient_funds', message: 'Your card has insufficient funds.' },
  retries_exhausted: { code: 'insufficient_funds', message: 'Your card has insufficient funds.' },
  hard_decline: { code: 'lost_card', message: 'Your card was declined.' },
};

function envelope(
  req: SampleRequest,
  newId: (prefix: string) => string,
  type: string,
  object: Obj,
  created: number,
  previous?: Obj,
): Obj {
  return {
    id: newId('evt'),
    object: 'event',
    api_version: SAMPLE_API_VERSIONS[req.shape],
    created,
    data: { object, ...(previous === undefined ? {} : { previous_attributes: previous }) },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
  };
}

/** The invoice as Stripe sends it in an invoice event: open while in dunning, paid once paid. */
function invoiceObject(
  req: SampleRequest,
  charge: string | null,
  state: { status: 'open' | 'paid'; attemptCount: number; nextAttempt: number | null },
): Obj {
  const { ids, customer, nowS } = req;
  const paid = state.status === 'paid';
  const periodEnd = nowS - 3600;
  const token = stableId('x', ids.invoice).slice(2);
  const base: Obj = {
    id: ids.invoice,
    object: 'invoice',
    account_country: 'US',
    account_name: 'Sample (test mode)',
    amount_due: AMOUNT,
    amount_paid: paid ? AMOUNT : 0,
    amount_remaining: paid ? 0 : AMOUNT,
    attempt_count: state.attemptCount,
    attempted: true,
    auto_advance: !paid,
    billing_reason: 'subscription_cycle',
    collection_method: 'charge_automatically',
    created: periodEnd,
    currency: CURRENCY,
    customer,
    customer_email: null,
    description: null,
    hosted_invoice_url: `https://invoice.stripe.com/i/${ids.account}/test_${token}?s=ap`,
    invoice_pdf: `https://pay.stripe.com/invoice/${ids.account}/test_${token}/pdf?s=ap`,
    livemode: false,
    next_payment_attempt: state.nextAttempt,
    number: `${token.slice(0, 8).toUpperCase()}-0002`,
    period_end: periodEnd,
    period_start: periodEnd - 30 * DAY_S,
    status: state.status,
    status_transitions: {
      finalized_at: periodEnd,
      marked_uncollectible_at: null,
      paid_at: paid ? nowS : null,
      voided_at: null,
    },
    subtotal: AMOUNT,
    total: AMOUNT,
  };
  if (req.shape === 'legacy') {
    return { ...base, charge, paid, payment_intent: ids.paymentIntent, subscription: ids.subscription };
  }
  return {
    ...base,
    parent: {
      type: 'subscription_details',
      quote_details: null,
      subscription_details: { metadata: {}, subscription: ids.subscription },
    },
    payments: {
      object: 'list',
      data: [
        {
          id: stableId('inpay', ids.invoice),
          object: 'invoice_payment',
          amount_paid: paid ? AMOUNT : null,
          amount_requested: AMOUNT,
          created: periodEnd,
          currency: CURRENCY,
          invoice: ids.invoice,
          is_default: true,
          livemode: false,
          payment: { type: 'payment_intent', payment_intent: ids.paymentIntent },
          status: paid ? 'paid' : 'open',
        },
      ],
      has_more: false,
      url: `/v1/invoice_payments?invoice=${ids.invoice}`,
    },
  };
}

/** The invoice's payment intent after a declined attempt (`payment_intent.payment_failed`). */
function failedPaymentIntent(req: SampleRequest, charge: string, decline: { code: string; message: string }): Obj {
  return {
    id: req.ids.paymentIntent,
    object: 'payment_intent',
    amount: AMOUNT,
    amount_received: 0,
    capture_method: 'automatic',
    created: req.nowS - 3600,
    currency: CURRENCY,
    customer: req.customer,
    description: 'Subscription update',
    last_payment_error: {
      type: 'card_error',
      charge,
      code: 'card_declined',
      decline_code: decline.code,
      doc_url: 'https://stripe.com/docs/error-codes/card-declined',
      message: decline.message,
    },
    latest_charge: charge,
    livemode: false,
    payment_method_types: ['card'],
    status: 'requires_payment_method',
    ...(req.shape === 'legacy' ? { invoice: req.ids.invoice } : {}),
    metadata: {},
  };
}

function subscriptionObject(req: SampleRequest, status: string): Obj {
  const { ids, customer, nowS } = req;
  return {
    id: ids.subscription,
    object: 'subscription',
    cancel_at_period_end: false,
    canceled_at: nowS,
    collection_method: 'charge_automatically',
    created: nowS - 90 * DAY_S,
    currency: CURRENCY,
    customer,
    ended_at: nowS,
    latest_invoice: ids.invoice,
    livemode: false,
    metadata: {},
    status,
  };
}

/**
 * The events of one scenario, in the order Stripe creates them. A failed attempt is a
 * `payment_intent.payment_failed` a second before its `invoice.payment_failed`, as Stripe
 * sends both for one declined renewal.
 */
export function sampleEvents(req: SampleRequest): Obj[] {
  const newId = req.newId ?? randomId;
  const now = req.nowS;
  const decline = DECLINES[req.scenario];
  if (decline !== undefined) {
    const charge = newId('ch');
    // Stripe stops retrying after a hard decline, and after the last attempt of its schedule.
    const retrying = req.scenario === 'payment_failed';
    const attemptCount = req.scenario === 'retries_exhausted' ? 4 : 1;
    const invoice = invoiceObject(req, charge, {
      status: 'open',
      attemptCount,
      nextAttempt: retrying ? now + 3 * DAY_S : null,
    });
    return [
      envelope(req, newId, 'payment_intent.payment_failed', failedPaymentIntent(req, charge, decline), now - 1),
      envelope(req, newId, 'invoice.payment_failed', invoice, now),
    ];
  }
  switch (req.scenario) {
    case 'action_required':
      // 3-D Secure: the customer must confirm the payment on the hosted invoice page.
      return [
        envelope(
          req,
          newId,
          'invoice.payment_action_required',
          invoiceObject(req, null, { status: 'open', attemptCount: 1, nextAttempt: null }),
          now,
        ),
      ];
    case 'paid':
      return [
        envelope(
          req,
          newId,
          'invoice.paid',
          invoiceObject(req, newId('ch'), { status: 'paid', attemptCount: 2, nextAttempt: null }),
          now,
        ),
      ];
    case 'card_expiring':
      return [envelope(req, newId, 'customer.source.expiring', expiringCard(req), now)];
    case 'renewal_upcoming':
      return [envelope(req, newId, 'invoice.upcoming', upcomingInvoice(req), now)];
    case 'card_updated':
      // The customer chose a new default card (the Customer Portal's card form does this).
      return [
        envelope(req, newId, 'customer.updated', customerObject(req, newId('pm')), now, {
          invoice_settings: { default_payment_method: newId('pm') },
        }),
      ];
    default:
      return [envelope(req, newId, 'customer.subscription.deleted', subscriptionObject(req, 'canceled'), now)];
  }
}

/** The customer's default card, expiring at the end of the month of `nowS` (what `customer.source.expiring` carries). */
function expiringCard(req: SampleRequest): Obj {
  const now = new Date(req.nowS * 1000);
  return {
    id: stableId('card', 'dunwall-sample', req.tenant, req.customer),
    object: 'card',
    brand: 'Visa',
    country: 'US',
    customer: req.customer,
    exp_month: now.getUTCMonth() + 1,
    exp_year: now.getUTCFullYear(),
    funding: 'credit',
    last4: '4242',
    metadata: {},
  };
}

/**
 * The subscription's next invoice, a week ahead of its attempt (what `invoice.upcoming`
 * carries: no id, as Stripe has not created it yet).
 */
function upcomingInvoice(req: SampleRequest): Obj {
  const { ids, customer, nowS } = req;
  const attempt = nowS + 7 * DAY_S;
  return {
    object: 'invoice',
    amount_due: AMOUNT,
    amount_remaining: AMOUNT,
    billing_reason: 'upcoming',
    collection_method: 'charge_automatically',
    currency: CURRENCY,
    customer,
    livemode: false,
    next_payment_attempt: attempt,
    period_start: attempt - 30 * DAY_S,
    period_end: attempt,
    status: 'draft',
    ...(req.shape === 'legacy'
      ? { subscription: ids.subscription }
      : {
          parent: {
            type: 'subscription_details',
            subscription_details: { subscription: ids.subscription, metadata: {} },
            quote_details: null,
          },
        }),
  };
}

function customerObject(req: SampleRequest, defaultPaymentMethod: string): Obj {
  return {
    id: req.customer,
    object: 'customer',
    email: null,
    invoice_settings: { custom_fields: null, default_payment_method: defaultPaymentMethod, footer: null },
    livemode: false,
    metadata: {},
  };
}

/** The most a sample may be backdated (`--at`, `--days-ago`): past any grace (60 days) or escalation (120 days). */
export const MAX_SAMPLE_AGE_DAYS = 365;

/**
 * What the lookup answers a customer after its samples, under the tenant's policy: the
 * customer's unresolved episodes (with their dunning starts) and override, as the admin API
 * shows them, through the policy's own function at `nowMs`. Null `subscriber`: no record
 * (active).
 */
export interface SampleAnswer {
  status: SubscriberStatus;
  /** While `warning`: when the policy turns it into `lockout` (RFC 3339). */
  lockout_at: string | null;
  /** Why it turns then: the grace ends, or the warning escalates. */
  rule: ScheduledRule | null;
}

export function sampleAnswer(
  subscriber: Pick<SubscriberView, 'derived_status' | 'overridden_at' | 'episodes'> | null,
  policy: Policy,
  nowMs: number,
): SampleAnswer {
  const override = subscriber !== null && subscriber.overridden_at !== null ? subscriber.derived_status : null;
  const episodes = (subscriber?.episodes ?? []).flatMap((e) =>
    e.state === 'resolved'
      ? []
      : [{ state: e.state, dunningStartMs: e.dunning_started_at === null ? null : Date.parse(e.dunning_started_at) }],
  );
  const answer = answerCustomer(episodes, override, policy, nowMs);
  return {
    status: answer.status,
    lockout_at: answer.lockoutAtMs === null ? null : formatLockoutAt(answer.lockoutAtMs),
    rule: answer.rule,
  };
}
