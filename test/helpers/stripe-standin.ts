import { randomInt } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * A stand-in for Stripe's REST API, for the tests: not Stripe, and no Stripe account is
 * reachable from the test machine. It serves what Dunwall calls: the read endpoints of
 * `dunwall stripe sync` (through the official `stripe` package, pointed here with `host`,
 * `port` and `protocol: 'http'`), and the service's own calls with a tenant's Stripe API key
 * (plain fetch, DUNWALL_STRIPE_API_URL): an invoice, a customer and its default payment
 * method, lists of one to check a key, and Customer Portal sessions.
 *
 * The objects follow the shapes of Stripe's OpenAPI fixtures (stripe/openapi,
 * openapi/fixtures3.json) for API versions from 2025-03-31.basil on: an invoice names its
 * subscription under `parent.subscription_details` and its payments only through
 * invoice_payment objects; it has no `subscription`, `payment_intent`, `charge` or `paid`.
 * A client asking for an older `Stripe-Version` is refused rather than served shapes it
 * does not expect.
 *
 * It answers as Stripe documents where Dunwall depends on it: `Authorization: Bearer` keys,
 * form-encoded request bodies, list envelopes, newest-first cursor pagination, `expand[]`,
 * the error envelope `{"error": {"type", "code", "message", "param"}}`, 401 for an unknown
 * key, 403 for a restricted key without the permission an endpoint needs (checked before the
 * resource, as Stripe does), 429 with `Retry-After`, and 500 with `Stripe-Should-Retry:
 * false`. Parameters Stripe accepts but the stand-in does not implement are refused with a
 * 400, so that a filter is never silently ignored. Switches make it slow (answers held until
 * released) or down (connections dropped), and every request is kept so that a test can
 * assert what was asked.
 */

type Obj = Record<string, unknown>;

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function base62(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += BASE62[randomInt(BASE62.length)];
  return out;
}

/** A Stripe-style id: `prefix_` and 24 base62 characters. */
export function stripeId(prefix: string): string {
  return `${prefix}_${base62(24)}`;
}

export function buildCustomerId(): string {
  return stripeId('cus');
}

const DAY_S = 86_400;
const DEFAULT_AMOUNT = 2000;
const DEFAULT_CURRENCY = 'usd';
/** Subscription invoices are finalized about an hour after they are created. */
const FINALIZE_DELAY_S = 3600;

function addMonthsS(s: number, months: number): number {
  const d = new Date(s * 1000);
  d.setUTCMonth(d.getUTCMonth() + months);
  return Math.floor(d.getTime() / 1000);
}

function formatAmount(amount: number, currency: string): string {
  const major = (amount / 100).toFixed(2);
  return currency === 'usd' ? `$${major}` : `${major} ${currency.toUpperCase()}`;
}

// ---------------------------------------------------------------------------------------
// Prices: subscriptions of the same amount share one price and product, as on an account.

const PRODUCT_ID = stripeId('prod');
const PRICE_CREATED_S = 1_700_000_000;
const prices = new Map<string, string>();

function priceIdFor(amount: number, currency: string): string {
  const key = `${currency}:${amount}`;
  let id = prices.get(key);
  if (id === undefined) {
    id = stripeId('price');
    prices.set(key, id);
  }
  return id;
}

function buildPrice(amount: number, currency: string): Obj {
  return {
    id: priceIdFor(amount, currency),
    object: 'price',
    active: true,
    billing_scheme: 'per_unit',
    created: PRICE_CREATED_S,
    currency,
    custom_unit_amount: null,
    livemode: false,
    lookup_key: null,
    metadata: {},
    nickname: null,
    product: PRODUCT_ID,
    recurring: { interval: 'month', interval_count: 1, meter: null, trial_period_days: null, usage_type: 'licensed' },
    tax_behavior: 'unspecified',
    tiers_mode: null,
    transform_quantity: null,
    type: 'recurring',
    unit_amount: amount,
    unit_amount_decimal: String(amount),
  };
}

/** The legacy plan view of the same price, which Stripe still sends on subscription items. */
function buildPlan(amount: number, currency: string): Obj {
  return {
    id: priceIdFor(amount, currency),
    object: 'plan',
    active: true,
    amount,
    amount_decimal: String(amount),
    billing_scheme: 'per_unit',
    created: PRICE_CREATED_S,
    currency,
    interval: 'month',
    interval_count: 1,
    livemode: false,
    metadata: {},
    meter: null,
    nickname: null,
    product: PRODUCT_ID,
    tiers_mode: null,
    transform_usage: null,
    trial_period_days: null,
    usage_type: 'licensed',
  };
}

// ---------------------------------------------------------------------------------------
// Card failures: the payment intent and its charge report the same decline.

/** Stripe's test cards for each decline, so that a charge's card matches its failure. */
const TEST_CARD_LAST4: Record<string, string> = {
  generic_decline: '0002',
  insufficient_funds: '9995',
  lost_card: '9987',
  stolen_card: '9979',
  expired_card: '0069',
  incorrect_cvc: '0127',
  processing_error: '0119',
};

/** ISO 8583 response codes the card network returns for the common declines. */
const NETWORK_DECLINE_CODES: Record<string, string> = {
  generic_decline: '05',
  do_not_honor: '05',
  insufficient_funds: '51',
  lost_card: '41',
  stolen_card: '43',
  expired_card: '54',
  incorrect_cvc: 'N7',
};

const CODE_MESSAGES: Record<string, string> = {
  card_declined: 'Your card was declined.',
  expired_card: 'Your card has expired.',
  incorrect_cvc: "Your card's security code is incorrect.",
  incorrect_number: 'Your card number is incorrect.',
  processing_error: 'An error occurred while processing your card. Try again in a little bit.',
  authentication_required: 'Your card was declined. This transaction requires authentication.',
};

interface Failure {
  code: string;
  declineCode: string | null;
  message: string;
}

function failureOf(code: string | undefined, declineCode: string | null | undefined): Failure {
  const c = code ?? 'card_declined';
  // Stripe reports the decline code alongside every card error code; card_declined without
  // a more precise reason is a generic_decline.
  const d = declineCode === undefined ? (c === 'card_declined' ? 'generic_decline' : c) : declineCode;
  const message =
    c === 'card_declined' && d === 'insufficient_funds'
      ? 'Your card has insufficient funds.'
      : (CODE_MESSAGES[c] ?? 'Your card was declined.');
  return { code: c, declineCode: d, message };
}

export interface PaymentIntentOptions {
  id?: string;
  customer: string;
  /** null: the card error carries no decline code. Default: generic_decline for card_declined. */
  declineCode?: string | null;
  /** Default card_declined. */
  code?: string;
  createdS: number;
  /** The failed charge's creation time (see buildCharge); default createdS. */
  chargeCreatedS?: number;
  chargeId?: string;
  amount?: number;
  currency?: string;
  description?: string | null;
}

/** What buildCharge needs from a payment intent that is not part of its Stripe shape. */
const chargeCreatedByIntent = new WeakMap<Obj, number>();

/**
 * A payment intent whose last attempt failed: Stripe returns it to requires_payment_method
 * and keeps the failed charge as `latest_charge`.
 */
export function buildPaymentIntent(o: PaymentIntentOptions): Obj {
  const id = o.id ?? stripeId('pi');
  const chargeId = o.chargeId ?? stripeId('ch');
  const failure = failureOf(o.code, o.declineCode);
  const networkDecline = failure.declineCode === null ? undefined : NETWORK_DECLINE_CODES[failure.declineCode];
  const lastPaymentError: Obj = {
    type: 'card_error',
    charge: chargeId,
    code: failure.code,
    ...(failure.declineCode === null ? {} : { decline_code: failure.declineCode }),
    doc_url: `https://stripe.com/docs/error-codes/${failure.code.replace(/_/g, '-')}`,
    message: failure.message,
    ...(networkDecline === undefined ? {} : { network_decline_code: networkDecline }),
    payment_method_type: 'card',
  };
  const pi: Obj = {
    id,
    object: 'payment_intent',
    amount: o.amount ?? DEFAULT_AMOUNT,
    amount_capturable: 0,
    amount_details: { tip: {} },
    amount_received: 0,
    application: null,
    application_fee_amount: null,
    automatic_payment_methods: null,
    canceled_at: null,
    cancellation_reason: null,
    capture_method: 'automatic',
    client_secret: `${id}_secret_${base62(25)}`,
    confirmation_method: 'automatic',
    created: o.createdS,
    currency: o.currency ?? DEFAULT_CURRENCY,
    customer: o.customer,
    customer_account: null,
    description: o.description === undefined ? 'Subscription update' : o.description,
    excluded_payment_method_types: null,
    last_payment_error: lastPaymentError,
    latest_charge: chargeId,
    livemode: false,
    managed_payments: null,
    metadata: {},
    next_action: null,
    on_behalf_of: null,
    // Stripe detaches the declined payment method; the customer must provide another.
    payment_method: null,
    payment_method_configuration_details: null,
    payment_method_options: {
      card: { installments: null, mandate_options: null, network: null, request_three_d_secure: 'automatic' },
    },
    payment_method_types: ['card'],
    processing: null,
    receipt_email: null,
    review: null,
    setup_future_usage: null,
    shipping: null,
    source: null,
    statement_descriptor: null,
    statement_descriptor_suffix: null,
    status: 'requires_payment_method',
    transfer_data: null,
    transfer_group: null,
  };
  chargeCreatedByIntent.set(pi, o.chargeCreatedS ?? o.createdS);
  return pi;
}

export interface ChargeOptions {
  /**
   * The payment intent the charge failed for: the object from buildPaymentIntent (the charge
   * is then its `latest_charge`, with its customer, amount and error), or just its id.
   */
  paymentIntent: Obj | string;
  /** Default: the intent's `latest_charge` when given the object, else a new id. */
  id?: string;
  /** Default: the intent's customer. Needed with an intent id. */
  customer?: string;
  /** As for buildPaymentIntent; default: the intent's error. */
  code?: string;
  declineCode?: string | null;
  /** Default: the intent's chargeCreatedS, else its creation time. Needed with an intent id. */
  createdS?: number;
  amount?: number;
  currency?: string;
}

/** The failed charge behind a payment intent. */
export function buildCharge(o: ChargeOptions): Obj {
  const pi = typeof o.paymentIntent === 'string' ? null : o.paymentIntent;
  const piId = pi === null ? o.paymentIntent : pi.id;
  const error = pi !== null && isObj(pi.last_payment_error) ? pi.last_payment_error : {};
  const id = o.id ?? (pi !== null && typeof pi.latest_charge === 'string' ? pi.latest_charge : stripeId('ch'));
  const customer = o.customer ?? (pi === null ? undefined : pi.customer);
  const created = o.createdS ?? (pi === null ? undefined : (chargeCreatedByIntent.get(pi) ?? pi.created));
  if (typeof piId !== 'string' || typeof customer !== 'string' || typeof created !== 'number') {
    throw new Error('buildCharge: give a payment intent from buildPaymentIntent, or its id with customer and createdS');
  }
  const failure =
    o.code !== undefined || o.declineCode !== undefined || pi === null
      ? failureOf(o.code, o.declineCode)
      : {
          code: typeof error.code === 'string' ? error.code : 'card_declined',
          declineCode: typeof error.decline_code === 'string' ? error.decline_code : null,
          message: typeof error.message === 'string' ? error.message : 'Your card was declined.',
        };
  const { code, declineCode, message } = failure;
  const amount = o.amount ?? (pi !== null && typeof pi.amount === 'number' ? pi.amount : DEFAULT_AMOUNT);
  const currency = o.currency ?? (pi !== null && typeof pi.currency === 'string' ? pi.currency : DEFAULT_CURRENCY);
  const description = pi !== null && typeof pi.description === 'string' ? pi.description : null;
  const expYear = new Date(created * 1000).getUTCFullYear() + (code === 'expired_card' ? -1 : 3);
  return {
    id,
    object: 'charge',
    amount,
    amount_captured: 0,
    amount_refunded: 0,
    application: null,
    application_fee: null,
    application_fee_amount: null,
    balance_transaction: null,
    billing_details: {
      address: { city: null, country: null, line1: null, line2: null, postal_code: null, state: null },
      email: null,
      name: null,
      phone: null,
      tax_id: null,
    },
    calculated_statement_descriptor: null,
    captured: false,
    created,
    currency,
    customer,
    description,
    disputed: false,
    failure_balance_transaction: null,
    failure_code: code,
    failure_message: message,
    fraud_details: {},
    livemode: false,
    metadata: {},
    on_behalf_of: null,
    outcome: {
      advice_code: null,
      network_advice_code: null,
      network_decline_code: declineCode === null ? null : (NETWORK_DECLINE_CODES[declineCode] ?? null),
      network_status: 'declined_by_network',
      reason: declineCode,
      risk_level: 'normal',
      risk_score: randomInt(5, 60),
      seller_message:
        declineCode === null || declineCode === 'generic_decline'
          ? 'The bank did not return any further details with this decline.'
          : `The bank returned the decline code \`${declineCode}\`.`,
      type: 'issuer_declined',
    },
    paid: false,
    payment_intent: piId,
    payment_method: stripeId('pm'),
    payment_method_details: {
      card: {
        amount_authorized: null,
        authorization_code: null,
        brand: 'visa',
        checks: {
          address_line1_check: null,
          address_postal_code_check: null,
          cvc_check: code === 'incorrect_cvc' ? 'fail' : 'pass',
        },
        country: 'US',
        exp_month: 12,
        exp_year: expYear,
        extended_authorization: { status: 'disabled' },
        fingerprint: base62(16),
        funding: 'credit',
        incremental_authorization: { status: 'unavailable' },
        installments: null,
        last4: TEST_CARD_LAST4[declineCode ?? code] ?? '0002',
        mandate: null,
        multicapture: { status: 'unavailable' },
        network: 'visa',
        network_token: { used: false },
        network_transaction_id: null,
        overcapture: { maximum_amount_capturable: amount, status: 'unavailable' },
        regulated_status: 'unregulated',
        three_d_secure: null,
        transaction_link_id: null,
        wallet: null,
      },
      type: 'card',
    },
    receipt_email: null,
    receipt_number: null,
    receipt_url: null,
    refunded: false,
    refunds: { object: 'list', data: [], has_more: false, url: `/v1/charges/${id}/refunds` },
    review: null,
    shipping: null,
    source: null,
    source_transfer: null,
    statement_descriptor: null,
    statement_descriptor_suffix: null,
    status: 'failed',
    transfer_data: null,
    transfer_group: null,
  };
}

// ---------------------------------------------------------------------------------------
// Invoices

export type InvoiceStatus = 'open' | 'paid' | 'draft' | 'void' | 'uncollectible';
export type CollectionMethod = 'charge_automatically' | 'send_invoice';

export interface InvoiceOptions {
  id?: string;
  customer: string;
  /** null or absent: a one-off invoice (parent null). */
  subscription?: string | null;
  /** Default subscription_cycle with a subscription, manual without. */
  billingReason?: string;
  /** Default 0 (1 for a paid invoice). */
  attemptCount?: number;
  /** Default: an hour after finalization for an unattempted automatic invoice, else null. */
  nextPaymentAttempt?: number | null;
  /** Default open. */
  status?: InvoiceStatus;
  /** Default charge_automatically. */
  collectionMethod?: CollectionMethod;
  createdS: number;
  /** Ignored for a draft. Default: createdS for subscription_create, else an hour later. */
  finalizedS?: number;
  amountDue?: number;
  currency?: string;
}

let invoiceSequence = 0;
const INVOICE_NUMBER_PREFIX = base62(8).toUpperCase();

/** An invoice as served from 2025-03-31.basil on. */
export function buildInvoice(o: InvoiceOptions): Obj {
  const id = o.id ?? stripeId('in');
  const subscription = o.subscription ?? null;
  const status = o.status ?? 'open';
  const collectionMethod = o.collectionMethod ?? 'charge_automatically';
  const billingReason = o.billingReason ?? (subscription === null ? 'manual' : 'subscription_cycle');
  const amount = o.amountDue ?? DEFAULT_AMOUNT;
  const currency = o.currency ?? DEFAULT_CURRENCY;
  const draft = status === 'draft';
  const finalized = draft
    ? null
    : (o.finalizedS ?? (billingReason === 'subscription_create' ? o.createdS : o.createdS + FINALIZE_DELAY_S));
  const attemptCount = o.attemptCount ?? (status === 'paid' ? 1 : 0);
  const settledAt = finalized === null ? null : finalized + FINALIZE_DELAY_S;
  const nextPaymentAttempt =
    o.nextPaymentAttempt !== undefined
      ? o.nextPaymentAttempt
      : draft
        ? o.createdS + FINALIZE_DELAY_S
        : status === 'open' && collectionMethod === 'charge_automatically' && attemptCount === 0 && finalized !== null
          ? finalized + FINALIZE_DELAY_S
          : null;
  const periodStart = subscription === null ? o.createdS : addMonthsS(o.createdS, -1);
  const lineId = stripeId('il');
  const line: Obj = {
    id: lineId,
    object: 'line_item',
    amount,
    currency,
    description:
      subscription === null ? 'One-off charge' : `1 × Pro plan (at ${formatAmount(amount, currency)} / month)`,
    discount_amounts: [],
    discountable: true,
    discounts: [],
    invoice: id,
    livemode: false,
    metadata: {},
    parent:
      subscription === null
        ? {
            type: 'invoice_item_details',
            invoice_item_details: {
              invoice_item: stripeId('ii'),
              proration: false,
              proration_details: { credited_items: null },
              subscription: null,
            },
            subscription_item_details: null,
          }
        : {
            type: 'subscription_item_details',
            invoice_item_details: null,
            subscription_item_details: {
              invoice_item: null,
              proration: false,
              proration_details: { credited_items: null },
              subscription,
              subscription_item: stripeId('si'),
            },
          },
    period: { start: o.createdS, end: addMonthsS(o.createdS, 1) },
    pretax_credit_amounts: [],
    pricing: {
      type: 'price_details',
      price_details: { price: priceIdFor(amount, currency), product: PRODUCT_ID },
      unit_amount_decimal: String(amount),
    },
    quantity: 1,
    quantity_decimal: '1',
    subscription,
    subtotal: amount,
    taxes: [],
  };
  const number = draft ? null : `${INVOICE_NUMBER_PREFIX}-${String(++invoiceSequence).padStart(4, '0')}`;
  return {
    id,
    object: 'invoice',
    account_country: 'US',
    account_name: 'Dunwall Test Account',
    account_tax_ids: null,
    amount_due: amount,
    amount_overpaid: 0,
    amount_paid: status === 'paid' ? amount : 0,
    amount_remaining: status === 'paid' ? 0 : amount,
    amount_shipping: 0,
    application: null,
    attempt_count: attemptCount,
    attempted: attemptCount > 0,
    auto_advance: draft || (status === 'open' && collectionMethod === 'charge_automatically'),
    automatic_tax: { disabled_reason: null, enabled: false, liability: null, provider: null, status: null },
    automatically_finalizes_at: draft ? o.createdS + FINALIZE_DELAY_S : null,
    billing_reason: billingReason,
    collection_method: collectionMethod,
    created: o.createdS,
    currency,
    custom_fields: null,
    customer: o.customer,
    customer_account: null,
    customer_address: null,
    customer_email: null,
    customer_name: null,
    customer_phone: null,
    customer_shipping: null,
    customer_tax_exempt: 'none',
    customer_tax_ids: [],
    default_payment_method: null,
    default_source: null,
    default_tax_rates: [],
    description: null,
    discounts: [],
    due_date: collectionMethod === 'send_invoice' ? (finalized ?? o.createdS) + 30 * DAY_S : null,
    effective_at: finalized,
    ending_balance: draft ? null : 0,
    footer: null,
    from_invoice: null,
    hosted_invoice_url: draft ? null : `https://invoice.stripe.com/i/acct_standin/test_${base62(40)}`,
    invoice_pdf: draft ? null : `https://pay.stripe.com/invoice/acct_standin/test_${base62(40)}/pdf`,
    issuer: { type: 'self' },
    last_finalization_error: null,
    latest_revision: null,
    lines: { object: 'list', data: [line], has_more: false, url: `/v1/invoices/${id}/lines` },
    livemode: false,
    metadata: {},
    next_payment_attempt: nextPaymentAttempt,
    number,
    on_behalf_of: null,
    parent:
      subscription === null
        ? null
        : {
            type: 'subscription_details',
            quote_details: null,
            subscription_details: { metadata: {}, subscription },
          },
    payment_settings: { default_mandate: null, payment_method_options: null, payment_method_types: null },
    period_end: o.createdS,
    period_start: periodStart,
    post_payment_credit_notes_amount: 0,
    pre_payment_credit_notes_amount: 0,
    receipt_number: null,
    rendering: { amount_tax_display: null, pdf: { page_size: 'auto' }, template: null, template_version: null },
    shipping_cost: null,
    shipping_details: null,
    starting_balance: 0,
    statement_descriptor: null,
    status,
    status_transitions: {
      finalized_at: finalized,
      marked_uncollectible_at: status === 'uncollectible' ? settledAt : null,
      paid_at: status === 'paid' ? settledAt : null,
      voided_at: status === 'void' ? settledAt : null,
    },
    subtotal: amount,
    subtotal_excluding_tax: amount,
    test_clock: null,
    total: amount,
    total_discount_amounts: [],
    total_excluding_tax: amount,
    total_pretax_credit_amounts: [],
    total_taxes: [],
    webhooks_delivered_at: o.createdS,
  };
}

// ---------------------------------------------------------------------------------------
// Invoice payments

export type InvoicePaymentStatus = 'open' | 'paid' | 'canceled';

export interface InvoicePaymentOptions {
  id?: string;
  invoice: string;
  paymentIntent: string;
  createdS: number;
  /** Stripe's values: open (not paid yet, e.g. after a failed attempt), paid, canceled. Default open. */
  status?: InvoicePaymentStatus;
  /** Default true: the payment Stripe creates when the invoice is finalized. */
  isDefault?: boolean;
  amountRequested?: number;
  currency?: string;
  /** When it was paid or canceled; default createdS. */
  settledS?: number;
}

export function buildInvoicePayment(o: InvoicePaymentOptions): Obj {
  const status = o.status ?? 'open';
  const amount = o.amountRequested ?? DEFAULT_AMOUNT;
  const settled = o.settledS ?? o.createdS;
  return {
    id: o.id ?? stripeId('inpay'),
    object: 'invoice_payment',
    amount_paid: status === 'paid' ? amount : null,
    amount_requested: amount,
    created: o.createdS,
    currency: o.currency ?? DEFAULT_CURRENCY,
    invoice: o.invoice,
    is_default: o.isDefault ?? true,
    livemode: false,
    payment: { type: 'payment_intent', payment_intent: o.paymentIntent },
    status,
    status_transitions: {
      canceled_at: status === 'canceled' ? settled : null,
      paid_at: status === 'paid' ? settled : null,
    },
  };
}

// ---------------------------------------------------------------------------------------
// Subscriptions

const SUBSCRIPTION_STATUSES = [
  'active',
  'canceled',
  'incomplete',
  'incomplete_expired',
  'past_due',
  'paused',
  'trialing',
  'unpaid',
] as const;

export interface SubscriptionOptions {
  id?: string;
  customer: string;
  /** One of Stripe's subscription statuses. */
  status: string;
  latestInvoice: string | null;
  createdS: number;
  /** Default charge_automatically. */
  collectionMethod?: CollectionMethod;
  /** Default createdS. Since 2025-03-31.basil the period is on the subscription item. */
  currentPeriodStartS?: number;
  amount?: number;
  currency?: string;
  metadata?: Record<string, string>;
  /** For canceled and incomplete_expired: when it ended. Default the end of the current period. */
  endedS?: number;
}

export function buildSubscription(o: SubscriptionOptions): Obj {
  if (!(SUBSCRIPTION_STATUSES as readonly string[]).includes(o.status)) {
    throw new Error(`buildSubscription: ${o.status} is not a Stripe subscription status`);
  }
  const id = o.id ?? stripeId('sub');
  const amount = o.amount ?? DEFAULT_AMOUNT;
  const currency = o.currency ?? DEFAULT_CURRENCY;
  const collectionMethod = o.collectionMethod ?? 'charge_automatically';
  const trialing = o.status === 'trialing';
  const periodStart = o.currentPeriodStartS ?? o.createdS;
  const periodEnd = trialing ? periodStart + 14 * DAY_S : addMonthsS(periodStart, 1);
  // An incomplete subscription expires 23 hours after creation if its first payment fails.
  const ended =
    o.status === 'canceled'
      ? (o.endedS ?? periodEnd)
      : o.status === 'incomplete_expired'
        ? (o.endedS ?? o.createdS + 23 * 3600)
        : null;
  const item: Obj = {
    id: stripeId('si'),
    object: 'subscription_item',
    billing_thresholds: null,
    created: o.createdS,
    current_period_end: periodEnd,
    current_period_start: periodStart,
    discounts: [],
    metadata: {},
    plan: buildPlan(amount, currency),
    price: buildPrice(amount, currency),
    quantity: 1,
    subscription: id,
    tax_rates: [],
  };
  return {
    id,
    object: 'subscription',
    application: null,
    application_fee_percent: null,
    automatic_tax: { disabled_reason: null, enabled: false, liability: null },
    billing_cycle_anchor: o.createdS,
    billing_cycle_anchor_config: null,
    billing_mode: { flexible: null, type: 'classic' },
    billing_schedules: [],
    billing_thresholds: null,
    cancel_at: null,
    cancel_at_period_end: false,
    canceled_at: o.status === 'canceled' ? ended : null,
    cancellation_details: {
      comment: null,
      feedback: null,
      reason: o.status === 'canceled' ? 'cancellation_requested' : null,
    },
    collection_method: collectionMethod,
    created: o.createdS,
    currency,
    customer: o.customer,
    customer_account: null,
    days_until_due: collectionMethod === 'send_invoice' ? 30 : null,
    default_payment_method: null,
    default_source: null,
    default_tax_rates: [],
    description: null,
    discounts: [],
    ended_at: ended,
    invoice_settings: {
      account_tax_ids: null,
      custom_fields: null,
      description: null,
      footer: null,
      issuer: { type: 'self' },
    },
    items: {
      object: 'list',
      data: [item],
      has_more: false,
      total_count: 1,
      url: `/v1/subscription_items?subscription=${id}`,
    },
    latest_invoice: o.latestInvoice,
    livemode: false,
    managed_payments: null,
    metadata: { ...(o.metadata ?? {}) },
    next_pending_invoice_item_invoice: null,
    on_behalf_of: null,
    pause_collection: null,
    payment_settings: { payment_method_options: null, payment_method_types: null, save_default_payment_method: 'off' },
    pending_invoice_item_interval: null,
    pending_setup_intent: null,
    pending_update: null,
    schedule: null,
    start_date: o.createdS,
    status: o.status,
    test_clock: null,
    transfer_data: null,
    trial_end: trialing ? periodEnd : null,
    trial_settings: { end_behavior: { missing_payment_method: 'create_invoice' } },
    trial_start: trialing ? periodStart : null,
  };
}

// ---------------------------------------------------------------------------------------
// Customers and payment methods

export interface PaymentMethodOptions {
  id?: string;
  customer: string | null;
  expMonth: number;
  expYear: number;
  last4?: string;
  createdS?: number;
}

/** A card PaymentMethod, attached to `customer`. */
export function buildPaymentMethod(o: PaymentMethodOptions): Obj {
  return {
    id: o.id ?? stripeId('pm'),
    object: 'payment_method',
    allow_redisplay: 'unspecified',
    billing_details: { address: null, email: null, name: null, phone: null, tax_id: null },
    card: {
      brand: 'visa',
      checks: { address_line1_check: null, address_postal_code_check: null, cvc_check: 'pass' },
      country: 'US',
      display_brand: 'visa',
      exp_month: o.expMonth,
      exp_year: o.expYear,
      fingerprint: base62(16),
      funding: 'credit',
      generated_from: null,
      last4: o.last4 ?? '4242',
      networks: { available: ['visa'], preferred: null },
      regulated_status: 'unregulated',
      three_d_secure_usage: { supported: true },
      wallet: null,
    },
    created: o.createdS ?? PRICE_CREATED_S,
    customer: o.customer,
    livemode: false,
    metadata: {},
    type: 'card',
  };
}

export interface CustomerOptions {
  id?: string;
  /** The PaymentMethod id renewals are charged to (`invoice_settings.default_payment_method`). */
  defaultPaymentMethod?: string | null;
  /** A legacy default source: a Card object (object 'card'), or its id. */
  defaultSource?: Obj | string | null;
  createdS?: number;
  email?: string | null;
}

export function buildCustomer(o: CustomerOptions = {}): Obj {
  const id = o.id ?? buildCustomerId();
  return {
    id,
    object: 'customer',
    address: null,
    balance: 0,
    created: o.createdS ?? PRICE_CREATED_S,
    currency: DEFAULT_CURRENCY,
    default_source: o.defaultSource ?? null,
    delinquent: false,
    description: null,
    discount: null,
    email: o.email ?? null,
    invoice_prefix: base62(8).toUpperCase(),
    invoice_settings: {
      custom_fields: null,
      default_payment_method: o.defaultPaymentMethod ?? null,
      footer: null,
      rendering_options: null,
    },
    livemode: false,
    metadata: {},
    name: null,
    phone: null,
    preferred_locales: [],
    shipping: null,
    tax_exempt: 'none',
    test_clock: null,
  };
}

/** A legacy Card source (`default_source`), as `customer.sources` holds it. */
export function buildCardSource(o: { customer: string; expMonth: number; expYear: number }): Obj {
  return {
    id: stripeId('card'),
    object: 'card',
    brand: 'Visa',
    country: 'US',
    customer: o.customer,
    exp_month: o.expMonth,
    exp_year: o.expYear,
    fingerprint: base62(16),
    funding: 'credit',
    last4: '4242',
    metadata: {},
  };
}

// ---------------------------------------------------------------------------------------
// The server

export interface StripeStandinData {
  subscriptions: Obj[];
  invoices: Obj[];
  invoicePayments: Obj[];
  paymentIntents: Obj[];
  charges: Obj[];
  /** Customer objects (buildCustomer); absent: none. */
  customers?: Obj[];
  /** PaymentMethod objects (buildPaymentMethod); absent: none. */
  paymentMethods?: Obj[];
}

export interface StandinRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  /** The form-encoded body of a POST (empty for a GET). */
  form: URLSearchParams;
  /** The key it was asked with (the bearer), to tell the spaces' keys apart. */
  key: string | null;
  status: number;
}

/**
 * The restricted-key permissions of the endpoints the stand-in serves, named as Stripe's
 * permission errors name them (`rak_<resource>_<read|write>`). Write implies read.
 */
export const STANDIN_PERMISSIONS = [
  'rak_invoice_read',
  'rak_customer_read',
  'rak_subscription_read',
  'rak_payment_method_read',
  'rak_invoice_payment_read',
  'rak_payment_intent_read',
  'rak_charge_read',
  'rak_billing_portal_session_write',
] as const;
export type StandinPermission = (typeof STANDIN_PERMISSIONS)[number];

export interface StripeStandin {
  /** http://127.0.0.1:PORT */
  url: string;
  port: number;
  /** Every request answered, in order. */
  requests: StandinRequest[];
  /** The next `count` requests (any endpoint) answer 429 as Stripe does, with a `Retry-After: <seconds>` header. */
  rateLimitNext(count: number, retryAfterS: number): void;
  /**
   * From the `n`-th request from now on (1 = the next), answer 500 with
   * `Stripe-Should-Retry: false` until `recover()`: an account or network failure
   * mid-import that the client must not retry.
   */
  failFrom(n: number): void;
  recover(): void;
  /** Accepts `key` from now on: with every permission (a secret key), or a restricted key's list. */
  addKey(key: string, permissions: 'all' | readonly StandinPermission[]): void;
  /** Stripe no longer knows `key` (rolled or deleted): 401 from now on. */
  removeKey(key: string): void;
  /** Every request from now on waits, unanswered, until `release()`: Stripe slow past any bound. */
  hold(): void;
  /** Answers the held requests and stops holding. */
  release(): void;
  /** How many requests are waiting in `hold()`. */
  readonly held: number;
  /** Connections are dropped without an answer until `up()`: Stripe unreachable. */
  down(): void;
  up(): void;
  /** Customer Portal sessions are refused as on an account that never saved its portal settings. */
  portalConfigured(configured: boolean): void;
  /** The requests answered to `method path` (the path exactly, or every path under it with a trailing `/`). */
  count(method: string, path: string): number;
  close(): Promise<void>;
}

interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

class ReplyError extends Error {
  constructor(readonly reply: Reply) {
    super(`stand-in replies ${reply.status}`);
  }
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function stripeError(status: number, error: Obj, headers?: Record<string, string>): Reply {
  return { status, body: { error }, ...(headers ? { headers } : {}) };
}

function invalidRequest(message: string, extra: Obj = {}, status = 400): ReplyError {
  return new ReplyError(stripeError(status, { type: 'invalid_request_error', message, ...extra }));
}

/** Stripe's own wording when a key is wrong: a recognisable prefix, never the key itself. */
function maskKey(key: string): string {
  const prefix = /^[a-z]{2,4}_(?:test|live)_/.exec(key)?.[0] ?? '';
  const rest = key.length - prefix.length;
  const tail = rest > 12 ? key.slice(-4) : '';
  return `${prefix}${'*'.repeat(Math.min(24, Math.max(4, rest - tail.length)))}${tail}`;
}

/** Newest first, as Stripe lists: created descending, then id descending. */
function newestFirst(a: Obj, b: Obj): number {
  const ca = typeof a.created === 'number' ? a.created : 0;
  const cb = typeof b.created === 'number' ? b.created : 0;
  if (ca !== cb) return cb - ca;
  const ia = String(a.id);
  const ib = String(b.id);
  return ia === ib ? 0 : ia < ib ? 1 : -1;
}

const MAX_EXPAND_DEPTH = 4;

interface Query {
  params: URLSearchParams;
  expand: string[];
}

/** Splits `expand[0]=…` / `expand[]=…` from the other parameters and refuses the ones a route does not take. */
function parseQuery(params: URLSearchParams, implemented: readonly string[], known: readonly string[]): Query {
  const expand: string[] = [];
  for (const [key, value] of params) {
    if (/^expand\[\d*\]$/.test(key)) {
      if (value.split('.').length > MAX_EXPAND_DEPTH) {
        throw invalidRequest(
          `You cannot expand more than ${MAX_EXPAND_DEPTH} levels of a property. Property: ${value}`,
          {
            param: 'expand',
          },
        );
      }
      expand.push(value);
      continue;
    }
    const base = key.split('[')[0] ?? key;
    if (implemented.includes(base)) continue;
    if (known.includes(base)) {
      throw invalidRequest(`The Stripe stand-in does not implement the \`${base}\` parameter.`, {
        code: 'parameter_unknown',
        param: key,
      });
    }
    throw invalidRequest(`Received unknown parameter: ${key}`, { code: 'parameter_unknown', param: key });
  }
  return { params, expand };
}

function oneOf(q: Query, param: string, allowed: readonly string[]): string | null {
  const v = q.params.get(param);
  if (v === null) return null;
  if (!allowed.includes(v)) {
    const list = `${allowed.slice(0, -1).join(', ')}, or ${allowed[allowed.length - 1] ?? ''}`;
    throw invalidRequest(`Invalid ${param}: must be one of ${list}`, { param });
  }
  return v;
}

const PAGINATION = ['limit', 'starting_after', 'ending_before'] as const;

function parseLimit(q: Query): number {
  const raw = q.params.get('limit');
  if (raw === null) return 10;
  if (!/^-?\d+$/.test(raw)) throw invalidRequest(`Invalid integer: ${raw}`, { param: 'limit' });
  const n = Number(raw);
  if (n < 1) throw invalidRequest('This value must be greater than or equal to 1.', { param: 'limit' });
  if (n > 100) throw invalidRequest('This value must be less than or equal to 100.', { param: 'limit' });
  return n;
}

/** Besides the statuses themselves, `all`, and `ended` (canceled or incomplete_expired). */
const SUBSCRIPTION_STATUS_FILTERS = ['all', 'ended', ...SUBSCRIPTION_STATUSES].sort();
const INVOICE_STATUSES = ['draft', 'open', 'paid', 'uncollectible', 'void'] as const;
const COLLECTION_METHODS = ['charge_automatically', 'send_invoice'] as const;
const INVOICE_PAYMENT_STATUSES = ['canceled', 'open', 'paid'] as const;

/** The permission each endpoint needs of a restricted key; write implies read. */
function permissionFor(method: string, path: string): StandinPermission | null {
  if (method === 'POST' && path === '/v1/billing_portal/sessions') return 'rak_billing_portal_session_write';
  if (method !== 'GET') return null;
  const resource = /^\/v1\/([a-z_]+)/.exec(path)?.[1];
  switch (resource) {
    case 'invoices':
      return 'rak_invoice_read';
    case 'customers':
      return 'rak_customer_read';
    case 'subscriptions':
      return 'rak_subscription_read';
    case 'payment_methods':
      return 'rak_payment_method_read';
    case 'invoice_payments':
      return 'rak_invoice_payment_read';
    case 'payment_intents':
      return 'rak_payment_intent_read';
    case 'charges':
      return 'rak_charge_read';
    default:
      return null;
  }
}

const PORTAL_FLOWS = [
  'payment_method_update',
  'subscription_cancel',
  'subscription_update',
  'subscription_update_confirm',
];
const PORTAL_PARAMS = ['customer', 'flow_data', 'locale', 'return_url', 'configuration', 'on_behalf_of', 'expand'];

/** Stripe's routes the stand-in serves, from the data as it is at each request. */
export async function startStripeStandin(
  data: StripeStandinData,
  opts: { apiKey?: string; keys?: Record<string, 'all' | readonly StandinPermission[]> } = {},
): Promise<StripeStandin> {
  const keys = new Map<string, 'all' | readonly StandinPermission[]>([[opts.apiKey ?? 'rk_test_standin', 'all']]);
  for (const [k, p] of Object.entries(opts.keys ?? {})) keys.set(k, p);
  const requests: StandinRequest[] = [];
  let seen = 0;
  let rateLimited = 0;
  let retryAfter = 1;
  let failAt = Number.POSITIVE_INFINITY;
  let holding = false;
  let isDown = false;
  let portalReady = true;
  const heldReplies: Array<() => void> = [];

  const customers = (): Obj[] => data.customers ?? [];
  const paymentMethods = (): Obj[] => data.paymentMethods ?? [];

  const byId = (): Map<string, Obj> => {
    const index = new Map<string, Obj>();
    for (const list of [
      data.subscriptions,
      data.invoices,
      data.invoicePayments,
      data.paymentIntents,
      data.charges,
      customers(),
      paymentMethods(),
    ]) {
      for (const o of list) if (typeof o.id === 'string') index.set(o.id, o);
    }
    return index;
  };

  /** Replaces ids along `path` by copies of the objects they name; ids not in the data stay ids. */
  const expandPath = (target: Obj, path: string[], index: Map<string, Obj>): void => {
    const [head, ...rest] = path;
    if (head === undefined) return;
    let value = target[head];
    if (typeof value === 'string') {
      const found = index.get(value);
      if (found === undefined) return;
      value = structuredClone(found);
      target[head] = value;
    }
    if (rest.length > 0 && isObj(value)) expandPath(value, rest, index);
  };

  const render = (o: Obj, expand: string[], index: Map<string, Obj>): Obj => {
    const copy = structuredClone(o);
    for (const e of expand) expandPath(copy, e.split('.'), index);
    return copy;
  };

  const list = (url: string, objectName: string, all: Obj[], q: Query, keep: (o: Obj) => boolean): Reply => {
    const limit = parseLimit(q);
    const after = q.params.get('starting_after');
    const before = q.params.get('ending_before');
    if (after !== null && before !== null) {
      throw invalidRequest('You may only specify one of these parameters: ending_before, starting_after.');
    }
    const filtered = all.filter(keep).sort(newestFirst);
    let page: Obj[];
    let hasMore: boolean;
    const cursorId = after ?? before;
    if (cursorId === null) {
      page = filtered.slice(0, limit);
      hasMore = filtered.length > limit;
    } else {
      // The cursor only marks a place in the order: any object of the list's type will do,
      // whether it matches the filters or not.
      const cursor = all.find((o) => o.id === cursorId);
      if (cursor === undefined) {
        throw invalidRequest(`No such ${objectName}: '${cursorId}'`, {
          code: 'resource_missing',
          param: after !== null ? 'starting_after' : 'ending_before',
        });
      }
      if (after !== null) {
        const rest = filtered.filter((o) => newestFirst(o, cursor) > 0);
        page = rest.slice(0, limit);
        hasMore = rest.length > limit;
      } else {
        const rest = filtered.filter((o) => newestFirst(o, cursor) < 0);
        page = rest.slice(Math.max(0, rest.length - limit));
        hasMore = rest.length > limit;
      }
    }
    const nested = q.expand.filter((e) => e.startsWith('data.')).map((e) => e.slice('data.'.length));
    const index = nested.length > 0 ? byId() : new Map<string, Obj>();
    return {
      status: 200,
      body: { object: 'list', data: page.map((o) => render(o, nested, index)), has_more: hasMore, url },
    };
  };

  const retrieve = (objectName: string, param: string, all: Obj[], id: string, q: Query): Reply => {
    const found = all.find((o) => o.id === id);
    if (found === undefined) {
      throw invalidRequest(`No such ${objectName}: '${id}'`, { code: 'resource_missing', param }, 404);
    }
    return { status: 200, body: render(found, q.expand, q.expand.length > 0 ? byId() : new Map()) };
  };

  /** POST /v1/billing_portal/sessions: a session for a known customer, its card form when the flow asks for it. */
  const portalSession = (form: URLSearchParams): Reply => {
    const q = parseQuery(form, ['customer', 'flow_data', 'locale', 'return_url'], PORTAL_PARAMS);
    const customer = q.params.get('customer');
    if (customer === null || customer === '') {
      throw invalidRequest('Missing required param: customer.', { code: 'parameter_missing', param: 'customer' });
    }
    const flow = q.params.get('flow_data[type]');
    if (flow !== null && !PORTAL_FLOWS.includes(flow)) {
      throw invalidRequest(`Invalid flow_data[type]: must be one of ${PORTAL_FLOWS.join(', ')}`, {
        param: 'flow_data[type]',
      });
    }
    const returnUrl = q.params.get('return_url');
    if (returnUrl !== null && !URL.canParse(returnUrl)) {
      throw invalidRequest('Not a valid URL', { code: 'url_invalid', param: 'return_url' });
    }
    // The account's portal configuration is resolved before the customer.
    if (!portalReady) {
      throw invalidRequest(
        'No configuration provided and your test mode default configuration has not been created. Provide a configuration or create your default by saving your customer portal settings in test mode at https://dashboard.stripe.com/test/settings/billing/portal.',
      );
    }
    if (!customers().some((c) => c.id === customer)) {
      throw invalidRequest(`No such customer: '${customer}'`, { code: 'resource_missing', param: 'customer' });
    }
    const id = stripeId('bps');
    return {
      status: 200,
      body: {
        id,
        object: 'billing_portal.session',
        configuration: 'bpc_standin',
        created: Math.floor(Date.now() / 1000),
        customer,
        flow:
          flow === null
            ? null
            : {
                type: flow,
                after_completion: { type: 'portal_homepage', hosted_confirmation: null, redirect: null },
                subscription_cancel: null,
                subscription_update: null,
                subscription_update_confirm: null,
              },
        livemode: false,
        locale: q.params.get('locale') === 'auto' ? null : q.params.get('locale'),
        on_behalf_of: null,
        return_url: returnUrl,
        url: `https://billing.stripe.com/p/session/test_${base62(40)}`,
      },
    };
  };

  const route = (method: string, path: string, params: URLSearchParams, form: URLSearchParams): Reply => {
    const unrecognized = invalidRequest(`Unrecognized request URL (${method}: ${path}).`, {}, 404);
    if (method === 'POST' && path === '/v1/billing_portal/sessions') return portalSession(form);
    if (method !== 'GET') throw unrecognized;

    if (path === '/v1/subscriptions') {
      const q = parseQuery(
        params,
        ['status', 'customer', 'collection_method', ...PAGINATION],
        [
          'automatic_tax',
          'created',
          'current_period_end',
          'current_period_start',
          'customer_account',
          'plan',
          'price',
          'test_clock',
        ],
      );
      const status = oneOf(q, 'status', SUBSCRIPTION_STATUS_FILTERS);
      const customer = q.params.get('customer');
      const collection = oneOf(q, 'collection_method', COLLECTION_METHODS);
      return list('/v1/subscriptions', 'subscription', data.subscriptions, q, (s) => {
        const st = s.status;
        // Without a status Stripe lists every subscription that has not been canceled.
        const statusOk =
          status === 'all' ||
          (status === null && st !== 'canceled') ||
          (status === 'ended' && (st === 'canceled' || st === 'incomplete_expired')) ||
          st === status;
        return (
          statusOk &&
          (customer === null || s.customer === customer) &&
          (collection === null || s.collection_method === collection)
        );
      });
    }

    if (path === '/v1/invoices') {
      const q = parseQuery(
        params,
        ['status', 'collection_method', 'customer', 'subscription', ...PAGINATION],
        ['created', 'customer_account', 'due_date'],
      );
      const status = oneOf(q, 'status', INVOICE_STATUSES);
      const collection = oneOf(q, 'collection_method', COLLECTION_METHODS);
      const customer = q.params.get('customer');
      const subscription = q.params.get('subscription');
      return list('/v1/invoices', 'invoice', data.invoices, q, (i) => {
        const parent = isObj(i.parent) ? i.parent : null;
        const details = parent !== null && isObj(parent.subscription_details) ? parent.subscription_details : null;
        return (
          (status === null || i.status === status) &&
          (collection === null || i.collection_method === collection) &&
          (customer === null || i.customer === customer) &&
          (subscription === null || details?.subscription === subscription)
        );
      });
    }

    if (path === '/v1/customers') {
      const q = parseQuery(params, ['email', ...PAGINATION], ['created', 'test_clock']);
      const email = q.params.get('email');
      return list('/v1/customers', 'customer', customers(), q, (c) => email === null || c.email === email);
    }

    if (path === '/v1/invoice_payments') {
      const q = parseQuery(params, ['invoice', 'status', ...PAGINATION], ['created', 'payment']);
      const invoice = q.params.get('invoice');
      if (invoice === null || invoice === '') {
        throw invalidRequest('Missing required param: invoice.', { code: 'parameter_missing', param: 'invoice' });
      }
      const status = oneOf(q, 'status', INVOICE_PAYMENT_STATUSES);
      return list('/v1/invoice_payments', 'invoice_payment', data.invoicePayments, q, (p) => {
        return p.invoice === invoice && (status === null || p.status === status);
      });
    }

    const single = /^\/v1\/(payment_intents|charges|invoices|customers|payment_methods|subscriptions)\/([^/]+)$/.exec(
      path,
    );
    if (single !== null) {
      const id = decodeURIComponent(single[2] ?? '');
      switch (single[1]) {
        case 'payment_intents':
          return retrieve(
            'payment_intent',
            'intent',
            data.paymentIntents,
            id,
            parseQuery(params, [], ['client_secret']),
          );
        case 'charges':
          return retrieve('charge', 'id', data.charges, id, parseQuery(params, [], []));
        case 'invoices':
          return retrieve('invoice', 'invoice', data.invoices, id, parseQuery(params, [], []));
        case 'customers':
          return retrieve('customer', 'id', customers(), id, parseQuery(params, [], []));
        case 'payment_methods':
          return retrieve('payment_method', 'payment_method', paymentMethods(), id, parseQuery(params, [], []));
        default:
          return retrieve(
            'subscription',
            'subscription_exposed_id',
            data.subscriptions,
            id,
            parseQuery(params, [], []),
          );
      }
    }

    throw unrecognized;
  };

  const answer = (req: IncomingMessage, url: URL, form: URLSearchParams, bearer: string | null): Reply => {
    seen += 1;
    if (seen >= failAt) {
      return stripeError(
        500,
        { type: 'api_error', message: 'An unknown error occurred' },
        { 'Stripe-Should-Retry': 'false' },
      );
    }
    if (rateLimited > 0) {
      rateLimited -= 1;
      return stripeError(
        429,
        {
          type: 'invalid_request_error',
          code: 'rate_limit',
          message: 'Too many requests hit the API too quickly. We recommend an exponential backoff of your requests.',
          doc_url: 'https://stripe.com/docs/error-codes/rate-limit',
        },
        { 'Retry-After': String(retryAfter) },
      );
    }

    if (bearer === null) {
      return stripeError(401, {
        type: 'invalid_request_error',
        message:
          "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
      });
    }
    const permissions = keys.get(bearer);
    if (permissions === undefined) {
      return stripeError(401, {
        type: 'invalid_request_error',
        code: 'api_key_invalid',
        message: `Invalid API Key provided: ${maskKey(bearer)}`,
      });
    }

    const version = req.headers['stripe-version'];
    if (typeof version === 'string' && version.slice(0, 10) < '2025-03-31') {
      return stripeError(400, {
        type: 'invalid_request_error',
        message: `The Stripe stand-in serves 2025-03-31.basil shapes and later, not ${version}.`,
        param: 'Stripe-Version',
      });
    }

    // A restricted key is checked before the resource: a missing permission is answered even for an id that does not exist.
    const method = req.method ?? 'GET';
    const needed = permissionFor(method, url.pathname);
    if (permissions !== 'all' && needed !== null) {
      const write = needed.replace(/_read$/, '_write') as StandinPermission;
      if (!permissions.includes(needed) && !permissions.includes(write)) {
        return stripeError(403, {
          type: 'invalid_request_error',
          message: `The provided key '${maskKey(bearer)}' does not have the required permissions for this endpoint on account 'acct_standin'. Having the '${needed}' permission would allow this request to continue.`,
        });
      }
    }

    try {
      return route(method, url.pathname, url.searchParams, form);
    } catch (err) {
      if (err instanceof ReplyError) return err.reply;
      throw err;
    }
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    if (isDown) {
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = URL.canParse(req.url ?? '/', 'http://127.0.0.1')
        ? new URL(req.url ?? '/', 'http://127.0.0.1')
        : new URL('http://127.0.0.1/');
      const form = new URLSearchParams(req.method === 'POST' ? Buffer.concat(chunks).toString('utf8') : '');
      const auth = req.headers.authorization;
      const bearer = auth === undefined || auth === '' ? null : (/^Bearer\s+(.+)$/i.exec(auth)?.[1]?.trim() ?? '');
      const reply = (): void => {
        if (res.destroyed) return;
        let r: Reply;
        try {
          r = answer(req, url, form, bearer);
        } catch (err) {
          // A fault in the stand-in shows in the test as a 500, not as a crashed test process.
          r = stripeError(500, { type: 'api_error', message: `Stand-in failure: ${(err as Error).message}` });
        }
        const payload = JSON.stringify(r.body);
        const version = req.headers['stripe-version'];
        res.writeHead(r.status, {
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(payload),
          'Request-Id': `req_${base62(14)}`,
          ...(typeof version === 'string' ? { 'Stripe-Version': version } : {}),
          ...(r.headers ?? {}),
        });
        res.end(payload);
        requests.push({
          method: req.method ?? 'GET',
          path: url.pathname,
          query: url.searchParams,
          form,
          key: bearer,
          status: r.status,
        });
      };
      if (holding) heldReplies.push(reply);
      else reply();
    });
  };

  const server = createServer(handle);
  // A stuck client must not hold the test run open.
  server.requestTimeout = 5000;
  server.headersTimeout = 5000;
  server.keepAliveTimeout = 2000;
  server.setTimeout(5000, (socket) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('stripe stand-in: no TCP address');
  const port = address.port;

  const releaseAll = (): void => {
    holding = false;
    for (const reply of heldReplies.splice(0)) reply();
  };

  let closed: Promise<void> | null = null;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    rateLimitNext(count: number, retryAfterS: number): void {
      if (!Number.isInteger(count) || count < 0) throw new Error('rateLimitNext: count must be a non-negative integer');
      if (!(retryAfterS >= 0)) throw new Error('rateLimitNext: retryAfterS must be non-negative');
      rateLimited = count;
      retryAfter = retryAfterS;
    },
    failFrom(n: number): void {
      if (!Number.isInteger(n) || n < 1) throw new Error('failFrom: n must be an integer from 1');
      failAt = seen + n;
    },
    recover(): void {
      failAt = Number.POSITIVE_INFINITY;
    },
    addKey(key: string, permissions: 'all' | readonly StandinPermission[]): void {
      keys.set(key, permissions);
    },
    removeKey(key: string): void {
      keys.delete(key);
    },
    hold(): void {
      holding = true;
    },
    release: releaseAll,
    get held(): number {
      return heldReplies.length;
    },
    down(): void {
      isDown = true;
      server.closeAllConnections();
    },
    up(): void {
      isDown = false;
    },
    portalConfigured(configured: boolean): void {
      portalReady = configured;
    },
    count(method: string, path: string): number {
      return requests.filter(
        (r) => r.method === method && (path.endsWith('/') ? r.path.startsWith(path) : r.path === path),
      ).length;
    },
    close(): Promise<void> {
      closed ??= new Promise<void>((resolve) => {
        releaseAll();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
