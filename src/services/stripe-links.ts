import type { StripeApiKeyStore } from '../store/index.js';
import { stripeCall } from './stripe-api.js';
import type { StripeApiOptions, StripeCallResult, StripeParams, StripeTimers } from './stripe-api.js';

/**
 * Where Dunwall's own pay and card links lead (docs/links.md): asked of Stripe when a
 * customer opens one, with the space's Stripe API key. A pay link goes to the invoice's
 * current hosted page while it is open, and to the card form of a Customer Portal session
 * once it is paid, void or uncollectible; a card link always to that card form. One call
 * or two, each bounded (3 s on the request path), never retried: when Stripe fails, the
 * caller sends the customer somewhere else at once (the fallbacks are the routes').
 */

export interface LinkTarget {
  kind: 'pay' | 'card';
  /** The data space (tenant row of the link's mode) whose Stripe API key is used. */
  spaceId: number;
  customerId: string;
  /** The invoice a pay link is bound to; null for a card link. */
  invoiceId: string | null;
  /** The customer's language (a BCP 47 tag): the portal's, when Stripe has it. */
  locale?: string;
  /** Where the portal's "return" leads: the tenant's `portal_return_url`; absent: the portal's configured default. */
  returnUrl?: string | null;
}

export type LinkRedirect =
  { ok: true; location: string } | { ok: false; reason: 'no_key' | 'stripe_error' | 'stripe_timeout' | 'not_found' };

export interface StripeLinks {
  open(target: LinkTarget): Promise<LinkRedirect>;
}

/** A card's expiry month (1-12) and year. */
export interface CardExpiry {
  month: number;
  year: number;
}

export type CardExpiryResult =
  | { ok: true; expiry: CardExpiry | null }
  | { ok: false; reason: 'no_key' | 'stripe_error' | 'stripe_timeout' | 'not_found' };

export interface StripeCards {
  /**
   * The customer's default card's expiry: `invoice_settings.default_payment_method`, else its
   * `default_source`, when that is a card; `expiry: null` when there is no card.
   */
  defaultCardExpiry(spaceId: number, customerId: string): Promise<CardExpiryResult>;
}

/** Pino's shape, the part used: a failure is logged with the space and the reason, never the key. */
export interface LinkLog {
  warn(obj: Record<string, unknown>, msg: string): void;
}

export interface StripeLinksDeps {
  keys: Pick<StripeApiKeyStore, 'openStripeApiKey'>;
  apiUrl: string;
  timeoutMs: number;
  /** Epoch milliseconds (how long Stripe took, in the log of a failure). */
  now: () => number;
  log: LinkLog;
  timers?: StripeTimers;
}

/** The languages Stripe's Customer Portal is shown in (its `locale` parameter); any other: `auto`. */
const PORTAL_LOCALES = new Set(
  (
    'bg cs da de el en en-AU en-CA en-GB en-IE en-IN en-NZ en-SG es es-419 et fi fil fr fr-CA hr hu id it ja ko ' +
    'lt lv ms mt nb nl pl pt pt-BR ro ru sk sl sv th tr vi zh zh-HK zh-TW'
  ).split(' '),
);

/** Stripe's portal locale for a customer's language: the tag itself, its language alone, or `auto`. */
export function portalLocale(locale: string | undefined): string {
  if (locale === undefined) return 'auto';
  if (PORTAL_LOCALES.has(locale)) return locale;
  const language = locale.split('-')[0] ?? '';
  return PORTAL_LOCALES.has(language) ? language : 'auto';
}

const INVOICE_ID_RE = /^in_[A-Za-z0-9_]{1,250}$/;
const CUSTOMER_ID_RE = /^cus_[A-Za-z0-9_]{1,251}$/;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An `https` URL Stripe handed out (an `http` one only from a loopback stand-in, which the API URL allows). */
function redirectable(v: unknown): string | null {
  if (typeof v !== 'string' || !URL.canParse(v)) return null;
  const url = new URL(v);
  return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
}

/** The id an expandable field names, expanded or not. */
function idOf(v: unknown): string | null {
  if (typeof v === 'string') return v;
  return isRecord(v) && typeof v.id === 'string' ? v.id : null;
}

type Failure = 'stripe_error' | 'stripe_timeout' | 'not_found';

function failureOf(r: Exclude<StripeCallResult, { ok: true }>): Failure {
  if (r.failure === 'timeout') return 'stripe_timeout';
  if (r.failure === 'answered' && r.status === 404) return 'not_found';
  return 'stripe_error';
}

/** The card of a payment method or a source, when it is one. */
function cardExpiryOf(v: unknown): CardExpiry | null {
  if (!isRecord(v)) return null;
  // A PaymentMethod holds it under `card`; a legacy Card source at its top.
  const card = isRecord(v.card) ? v.card : v.object === 'card' ? v : null;
  if (card === null) return null;
  const month = card.exp_month;
  const year = card.exp_year;
  if (typeof month !== 'number' || typeof year !== 'number') return null;
  if (!Number.isInteger(month) || month < 1 || month > 12 || !Number.isInteger(year)) return null;
  return { month, year };
}

export function stripeLinks(deps: StripeLinksDeps): StripeLinks & StripeCards {
  const api: StripeApiOptions = {
    apiUrl: deps.apiUrl,
    timeoutMs: deps.timeoutMs,
    ...(deps.timers ? { timers: deps.timers } : {}),
  };

  async function call(
    key: string,
    method: 'GET' | 'POST',
    path: string,
    params: StripeParams,
    spaceId: number,
  ): Promise<StripeCallResult> {
    const started = deps.now();
    const result = await stripeCall(api, key, method, path, params);
    if (!result.ok && !(result.failure === 'answered' && result.status === 404)) {
      deps.log.warn(
        {
          space: spaceId,
          call: `${method} ${path.replace(/\/(in|cus)_[A-Za-z0-9_]+/, '/$1_…')}`,
          failure: result.failure,
          ...(result.failure === 'answered' ? { status: result.status, type: result.error.type } : {}),
          ms: deps.now() - started,
        },
        'stripe call failed',
      );
    }
    return result;
  }

  async function portal(key: string, target: LinkTarget): Promise<LinkRedirect> {
    const params: Array<[string, string]> = [
      ['customer', target.customerId],
      ['flow_data[type]', 'payment_method_update'],
      ['locale', portalLocale(target.locale)],
    ];
    if (target.returnUrl) params.push(['return_url', target.returnUrl]);
    const r = await call(key, 'POST', '/v1/billing_portal/sessions', params, target.spaceId);
    if (!r.ok) {
      // Stripe answers a customer it does not know with 400 resource_missing.
      if (r.failure === 'answered' && r.error.code === 'resource_missing') return { ok: false, reason: 'not_found' };
      return { ok: false, reason: failureOf(r) };
    }
    const location = redirectable(r.body.url);
    return location === null ? { ok: false, reason: 'stripe_error' } : { ok: true, location };
  }

  async function open(target: LinkTarget): Promise<LinkRedirect> {
    if (!CUSTOMER_ID_RE.test(target.customerId)) return { ok: false, reason: 'not_found' };
    const key = await deps.keys.openStripeApiKey(target.spaceId);
    if (key === null) return { ok: false, reason: 'no_key' };
    if (target.kind === 'card') return portal(key, target);
    if (target.invoiceId === null || !INVOICE_ID_RE.test(target.invoiceId)) return { ok: false, reason: 'not_found' };
    const r = await call(key, 'GET', `/v1/invoices/${target.invoiceId}`, [], target.spaceId);
    if (!r.ok) return { ok: false, reason: failureOf(r) };
    // The link is bound to its customer: another customer's invoice is not this link's.
    if (idOf(r.body.customer) !== target.customerId) return { ok: false, reason: 'not_found' };
    switch (r.body.status) {
      case 'open': {
        const location = redirectable(r.body.hosted_invoice_url);
        return location === null ? { ok: false, reason: 'stripe_error' } : { ok: true, location };
      }
      case 'paid':
      case 'void':
      case 'uncollectible':
        // Nothing left to pay on it: the card form, so that the next payment succeeds.
        return portal(key, target);
      default:
        return { ok: false, reason: 'not_found' };
    }
  }

  async function defaultCardExpiry(spaceId: number, customerId: string): Promise<CardExpiryResult> {
    if (!CUSTOMER_ID_RE.test(customerId)) return { ok: false, reason: 'not_found' };
    const key = await deps.keys.openStripeApiKey(spaceId);
    if (key === null) return { ok: false, reason: 'no_key' };
    const r = await call(
      key,
      'GET',
      `/v1/customers/${customerId}`,
      [
        ['expand[]', 'invoice_settings.default_payment_method'],
        ['expand[]', 'default_source'],
      ],
      spaceId,
    );
    if (!r.ok) return { ok: false, reason: failureOf(r) };
    if (r.body.deleted === true) return { ok: false, reason: 'not_found' };
    const settings = isRecord(r.body.invoice_settings) ? r.body.invoice_settings : {};
    const method = settings.default_payment_method;
    // The invoice settings' payment method is the one a renewal is charged to; the default source only without one.
    const expiry = method !== null && method !== undefined ? cardExpiryOf(method) : cardExpiryOf(r.body.default_source);
    return { ok: true, expiry };
  }

  return { open, defaultCardExpiry };
}
