import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';

/** API versions on either side of the 2025-03-31.basil invoice change. */
export const LEGACY_API = '2024-06-20';
export const BASIL_API = '2025-03-31.basil';
export type ApiShape = typeof LEGACY_API | typeof BASIL_API;

type Obj = Record<string, unknown>;

function id(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}

export interface StripeEventFixture {
  id: string;
  object: 'event';
  api_version: string;
  created: number;
  data: { object: Obj; previous_attributes?: Obj };
  livemode: false;
  pending_webhooks: number;
  request: { id: string | null; idempotency_key: string | null };
  type: string;
}

export function event(type: string, object: Obj, opts: { created: number; api?: ApiShape; previous?: Obj; id?: string }): StripeEventFixture {
  return {
    id: opts.id ?? id('evt'),
    object: 'event',
    api_version: opts.api ?? BASIL_API,
    created: opts.created,
    data: { object, ...(opts.previous ? { previous_attributes: opts.previous } : {}) },
    livemode: false,
    pending_webhooks: 1,
    request: { id: id('req'), idempotency_key: null },
    type,
  };
}

export function charge(customer: string | null, codes: { failure_code?: string | null; outcome_reason?: string | null }, api: ApiShape = BASIL_API): Obj {
  return {
    id: id('ch'),
    object: 'charge',
    amount: 2900,
    currency: 'usd',
    customer,
    failure_code: codes.failure_code ?? null,
    failure_message: 'Your card was declined.',
    outcome: {
      network_status: 'declined_by_network',
      reason: codes.outcome_reason ?? null,
      risk_level: 'normal',
      seller_message: 'The bank did not return any further details with this decline.',
      type: 'issuer_declined',
    },
    paid: false,
    status: 'failed',
    ...(api === LEGACY_API ? { invoice: id('in') } : {}),
  };
}

export function paymentIntent(customer: string | null, error: { code?: string | null; decline_code?: string | null }): Obj {
  return {
    id: id('pi'),
    object: 'payment_intent',
    amount: 2900,
    currency: 'usd',
    customer,
    status: 'requires_payment_method',
    last_payment_error: {
      type: 'card_error',
      code: error.code ?? 'card_declined',
      decline_code: error.decline_code ?? null,
      message: 'Your card was declined.',
    },
  };
}

export function invoice(
  customer: string,
  opts: { collection_method?: 'charge_automatically' | 'send_invoice'; next_payment_attempt?: number | null; api?: ApiShape; expandedPaymentIntent?: Obj },
): Obj {
  const subscription = id('sub');
  const base: Obj = {
    id: id('in'),
    object: 'invoice',
    customer,
    collection_method: opts.collection_method ?? 'charge_automatically',
    next_payment_attempt: opts.next_payment_attempt === undefined ? null : opts.next_payment_attempt,
    attempt_count: 1,
    billing_reason: 'subscription_cycle',
    status: 'open',
    amount_due: 2900,
    currency: 'usd',
  };
  if ((opts.api ?? BASIL_API) === LEGACY_API) {
    return { ...base, subscription, payment_intent: opts.expandedPaymentIntent ?? id('pi'), charge: id('ch') };
  }
  return {
    ...base,
    parent: { type: 'subscription_details', subscription_details: { subscription } },
    ...(opts.expandedPaymentIntent
      ? { payments: { object: 'list', data: [{ id: id('inpay'), object: 'invoice_payment', payment: { type: 'payment_intent', payment_intent: opts.expandedPaymentIntent } }] } }
      : {}),
  };
}

export function subscription(customer: string, status: string): Obj {
  return { id: id('sub'), object: 'subscription', customer, status, collection_method: 'charge_automatically' };
}

export function customer(customerId: string): Obj {
  return { id: customerId, object: 'customer', email: 'jenny@example.com' };
}

/** The body and the Stripe-Signature header, as Stripe would send them, signed at `timestampS`. */
export function signed(fixture: StripeEventFixture, secret: string, timestampS: number): { payload: string; signature: string } {
  const payload = JSON.stringify(fixture, null, 2);
  return { payload, signature: Stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp: timestampS }) };
}
