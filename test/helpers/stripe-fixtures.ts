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
  livemode: boolean;
  pending_webhooks: number;
  request: { id: string | null; idempotency_key: string | null };
  type: string;
}

/** A Stripe event as its API documents it; in live mode (`livemode: true`) unless told: the mode a tenant's own key and signing secret address by default. */
export function event(
  type: string,
  object: Obj,
  opts: { created: number; api?: ApiShape; previous?: Obj; id?: string; livemode?: boolean },
): StripeEventFixture {
  return {
    id: opts.id ?? id('evt'),
    object: 'event',
    api_version: opts.api ?? BASIL_API,
    created: opts.created,
    data: { object, ...(opts.previous ? { previous_attributes: opts.previous } : {}) },
    livemode: opts.livemode ?? true,
    pending_webhooks: 1,
    request: { id: id('req'), idempotency_key: null },
    type,
  };
}

/**
 * The ids that tie a customer's payment objects together: a subscription (null for a
 * one-off invoice), its invoice, and the invoice's payment intent and charge.
 */
export interface PaymentIds {
  subscription: string | null;
  invoice: string;
  paymentIntent: string;
  charge: string;
}

export function paymentIds(opts: { subscription?: string | null } = {}): PaymentIds {
  return {
    subscription: opts.subscription === undefined ? id('sub') : opts.subscription,
    invoice: id('in'),
    paymentIntent: id('pi'),
    charge: id('ch'),
  };
}

/** Where a payment intent or charge points: its own ids, and its invoice (null: a one-off payment). */
export interface PaymentLink {
  id?: string;
  paymentIntent?: string;
  charge?: string;
  /** Named in the payload before 2025-03-31.basil only; undefined: a random invoice (legacy) as before. */
  invoice?: string | null;
}

export function charge(
  customer: string | null,
  codes: { failure_code?: string | null; outcome_reason?: string | null },
  api: ApiShape = BASIL_API,
  link: PaymentLink = {},
): Obj {
  return {
    id: link.id ?? link.charge ?? id('ch'),
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
    payment_intent: link.paymentIntent ?? id('pi'),
    status: 'failed',
    ...(api === LEGACY_API && link.invoice !== null ? { invoice: link.invoice ?? id('in') } : {}),
  };
}

export function paymentIntent(
  customer: string | null,
  error: { code?: string | null; decline_code?: string | null },
  api: ApiShape = BASIL_API,
  link: PaymentLink = {},
): Obj {
  const latestCharge = link.charge ?? id('ch');
  return {
    id: link.id ?? link.paymentIntent ?? id('pi'),
    object: 'payment_intent',
    amount: 2900,
    currency: 'usd',
    customer,
    status: 'requires_payment_method',
    latest_charge: latestCharge,
    last_payment_error: {
      type: 'card_error',
      charge: latestCharge,
      code: error.code ?? 'card_declined',
      decline_code: error.decline_code ?? null,
      message: 'Your card was declined.',
    },
    ...(api === LEGACY_API && link.invoice !== undefined && link.invoice !== null ? { invoice: link.invoice } : {}),
  };
}

export interface InvoiceOptions {
  collection_method?: 'charge_automatically' | 'send_invoice';
  next_payment_attempt?: number | null;
  api?: ApiShape;
  expandedPaymentIntent?: Obj;
  /** The ids to use; default: a new subscription, invoice and payment. */
  ids?: PaymentIds;
  billing_reason?: string;
  status?: string;
  /**
   * From basil on, Stripe sends `payments` only when the payload includes it; true: the
   * payload names the invoice's payment (as `payments.data[].payment`).
   */
  namePayments?: boolean;
}

/** The form of Stripe's hosted invoice page (`invoice.hosted_invoice_url`). */
export function hostedInvoiceUrl(invoiceId: string): string {
  return `https://invoice.stripe.com/i/acct_1TestAccount0000/test_${invoiceId}?s=ap`;
}

export function invoice(customer: string, opts: InvoiceOptions): Obj {
  const ids = opts.ids ?? paymentIds();
  const subscription = ids.subscription;
  const base: Obj = {
    id: ids.invoice,
    object: 'invoice',
    customer,
    collection_method: opts.collection_method ?? 'charge_automatically',
    next_payment_attempt: opts.next_payment_attempt === undefined ? null : opts.next_payment_attempt,
    attempt_count: 1,
    attempted: true,
    billing_reason: opts.billing_reason ?? (subscription === null ? 'manual' : 'subscription_cycle'),
    status: opts.status ?? 'open',
    amount_due: 2900,
    amount_remaining: opts.status === 'paid' ? 0 : 2900,
    currency: 'usd',
    hosted_invoice_url: hostedInvoiceUrl(ids.invoice),
  };
  if ((opts.api ?? BASIL_API) === LEGACY_API) {
    return {
      ...base,
      subscription,
      payment_intent: opts.expandedPaymentIntent ?? ids.paymentIntent,
      charge: ids.charge,
    };
  }
  const payment = opts.expandedPaymentIntent ?? (opts.namePayments === true ? ids.paymentIntent : null);
  return {
    ...base,
    parent:
      subscription === null
        ? null
        : { type: 'subscription_details', subscription_details: { subscription, metadata: {} }, quote_details: null },
    ...(payment !== null
      ? {
          payments: {
            object: 'list',
            data: [
              {
                id: id('inpay'),
                object: 'invoice_payment',
                payment: { type: 'payment_intent', payment_intent: payment },
              },
            ],
            has_more: false,
          },
        }
      : {}),
  };
}

export function subscription(
  customer: string,
  status: string,
  opts: { id?: string; collection_method?: string } = {},
): Obj {
  return {
    id: opts.id ?? id('sub'),
    object: 'subscription',
    customer,
    status,
    collection_method: opts.collection_method ?? 'charge_automatically',
  };
}

export function customer(customerId: string): Obj {
  return { id: customerId, object: 'customer', email: 'jenny@example.com' };
}

/** The body and the Stripe-Signature header, as Stripe would send them, signed at `timestampS`. */
export function signed(
  fixture: StripeEventFixture,
  secret: string,
  timestampS: number,
): { payload: string; signature: string } {
  const payload = JSON.stringify(fixture, null, 2);
  return { payload, signature: Stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp: timestampS }) };
}
