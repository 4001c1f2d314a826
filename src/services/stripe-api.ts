import { STRIPE_KEY_PERMISSIONS } from '../domain/stripe/api-key.js';
import type { StripeKeyPermission } from '../domain/stripe/api-key.js';

/**
 * Dunwall's own calls to Stripe's REST API with a tenant's Stripe API key (docs/links.md):
 * plain `fetch`, form-encoded bodies, `Authorization: Bearer`, one pinned `Stripe-Version`.
 * Every call is bounded in time and never retried: the callers are requests a person waits
 * on (a customer opening a link, a tenant setting its key), and a retry would only make
 * them wait longer. Outcomes are values; nothing here throws for what Stripe answers.
 * The key is sent to Stripe and nowhere else: never logged, never part of an outcome.
 */

export const DEFAULT_STRIPE_API_URL = 'https://api.stripe.com';
/** The bound of a call on a request's path (a link opened, a key checked). */
export const STRIPE_REQUEST_TIMEOUT_MS = 3_000;
/** The shapes read here (an invoice's status and page, a customer's default payment method) are those of this version on. */
export const STRIPE_API_VERSION = '2025-03-31.basil';
/** A Stripe answer is a small JSON object; anything larger is not one. */
const MAX_ANSWER_BYTES = 1_048_576;

/** The host names `http://` is accepted for: the key travels in every request, in clear only to this machine. */
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * The base URL of Stripe's API (`DUNWALL_STRIPE_API_URL`): https, or http to a loopback
 * address (a local stand-in or proxy). Returns the URL without a trailing slash, or the
 * problem as a sentence.
 */
export function parseStripeApiUrl(text: string): { ok: true; url: string } | { ok: false; problem: string } {
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    return { ok: false, problem: 'must be an http:// or https:// URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { ok: false, problem: 'must be an http:// or https:// URL' };
  if (url.username !== '' || url.password !== '') return { ok: false, problem: 'must not hold credentials' };
  if (url.search !== '' || url.hash !== '') return { ok: false, problem: 'must not hold a query or a fragment' };
  if (url.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname))
    return { ok: false, problem: 'may use http:// only for localhost, 127.0.0.1 or [::1]; use https://' };
  return { ok: true, url: url.href.replace(/\/+$/, '') };
}

/** Timers the bound is kept with; tests pass their own to pass 3 s without waiting them. */
export interface StripeTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const REAL_TIMERS: StripeTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export interface StripeApiOptions {
  /** The base URL, checked by parseStripeApiUrl. */
  apiUrl: string;
  /** The bound of each call, in milliseconds, from its start to the end of its answer. */
  timeoutMs: number;
  timers?: StripeTimers;
}

/** Stripe's error envelope: `{"error": {"type", "code", "message", "param"}}`. */
export interface StripeErrorBody {
  type: string;
  code: string | null;
  message: string | null;
  param: string | null;
}

export type StripeCallResult =
  | { ok: true; status: number; body: Record<string, unknown> }
  /** Stripe answered an error (4xx, 5xx, 429): its status and envelope. */
  | { ok: false; failure: 'answered'; status: number; error: StripeErrorBody }
  /** No answer within the bound. */
  | { ok: false; failure: 'timeout' }
  /** No connection, or an answer that is not Stripe's JSON. */
  | { ok: false; failure: 'unreachable' };

export type StripeParams = ReadonlyArray<readonly [string, string]>;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function errorOf(body: unknown): StripeErrorBody {
  const e = isRecord(body) && isRecord(body.error) ? body.error : {};
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  return { type: text(e.type) ?? 'api_error', code: text(e.code), message: text(e.message), param: text(e.param) };
}

/** One call to Stripe's API: `GET` with the parameters in the query, `POST` with them form-encoded. */
export async function stripeCall(
  opts: StripeApiOptions,
  key: string,
  method: 'GET' | 'POST',
  path: string,
  params: StripeParams = [],
): Promise<StripeCallResult> {
  const timers = opts.timers ?? REAL_TIMERS;
  const form = new URLSearchParams(params as [string, string][]).toString();
  const url = `${opts.apiUrl}${path}${method === 'GET' && form !== '' ? `?${form}` : ''}`;
  const controller = new AbortController();
  let timedOut = false;
  const timer = timers.setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, opts.timeoutMs);
  try {
    const response = await fetch(url, {
      method,
      headers: {
        Authorization: `Bearer ${key}`,
        'Stripe-Version': STRIPE_API_VERSION,
        Accept: 'application/json',
        ...(method === 'POST' ? { 'Content-Type': 'application/x-www-form-urlencoded' } : {}),
      },
      ...(method === 'POST' ? { body: form } : {}),
      redirect: 'error',
      signal: controller.signal,
    });
    const text = await response.text();
    if (text.length > MAX_ANSWER_BYTES) return { ok: false, failure: 'unreachable' };
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return response.ok
        ? { ok: false, failure: 'unreachable' }
        : { ok: false, failure: 'answered', status: response.status, error: errorOf(null) };
    }
    if (response.ok && isRecord(body)) return { ok: true, status: response.status, body };
    if (response.ok) return { ok: false, failure: 'unreachable' };
    return { ok: false, failure: 'answered', status: response.status, error: errorOf(body) };
  } catch {
    return timedOut ? { ok: false, failure: 'timeout' } : { ok: false, failure: 'unreachable' };
  } finally {
    timers.clearTimeout(timer);
  }
}

/** A customer id no account holds: a portal session for it proves the permission without creating anything. */
const KEY_CHECK_CUSTOMER = 'cus_DunwallKeyCheck0000000000';

export type StripeKeyCheck =
  | { ok: true }
  /** Stripe does not know the key (401): revoked, rolled, or mistyped. */
  | { ok: false; problem: 'invalid' }
  /** A restricted key without what Dunwall needs. */
  | { ok: false; problem: 'permission'; missing: StripeKeyPermission[] }
  /** The Customer Portal refused a session for another reason than the customer (Stripe's words: not configured yet, ...). */
  | { ok: false; problem: 'portal'; message: string }
  /** Stripe did not answer within the bound, could not be reached, or is rate limiting. */
  | { ok: false; problem: 'unreachable'; why: 'timeout' | 'unreachable' | 'rate_limited' }
  /** Stripe answered something else (a 5xx, an unexpected error). */
  | { ok: false; problem: 'stripe_error'; status: number };

/**
 * Proves what a restricted key needs, by a call per permission, all at once (so the whole
 * check is bounded by one call's bound): list one invoice, one customer, one subscription,
 * and ask a Customer Portal session for a customer that cannot exist (Stripe checks the
 * permission before the resource: a 403 names a missing permission, a `resource_missing`
 * proves it is there). A secret key passes the same calls.
 */
export async function checkStripeApiKey(opts: StripeApiOptions, key: string): Promise<StripeKeyCheck> {
  const calls: Array<readonly [StripeKeyPermission, Promise<StripeCallResult>]> = STRIPE_KEY_PERMISSIONS.map(
    (permission) => [permission, callFor(permission)] as const,
  );
  function callFor(permission: StripeKeyPermission): Promise<StripeCallResult> {
    switch (permission) {
      case 'Invoices: read':
        return stripeCall(opts, key, 'GET', '/v1/invoices', [['limit', '1']]);
      case 'Customers: read':
        return stripeCall(opts, key, 'GET', '/v1/customers', [['limit', '1']]);
      case 'Subscriptions: read':
        return stripeCall(opts, key, 'GET', '/v1/subscriptions', [['limit', '1']]);
      case 'Customer portal: write':
        return stripeCall(opts, key, 'POST', '/v1/billing_portal/sessions', [['customer', KEY_CHECK_CUSTOMER]]);
    }
  }
  const results = await Promise.all(calls.map(async ([permission, call]) => [permission, await call] as const));
  // The worst first: an unknown key says nothing of permissions; no answer says nothing at all.
  if (results.some(([, r]) => !r.ok && r.failure === 'answered' && r.status === 401))
    return { ok: false, problem: 'invalid' };
  for (const [, r] of results) {
    if (r.ok) continue;
    if (r.failure === 'timeout' || r.failure === 'unreachable')
      return { ok: false, problem: 'unreachable', why: r.failure };
    if (r.status === 429) return { ok: false, problem: 'unreachable', why: 'rate_limited' };
  }
  const missing = results
    .filter(([, r]) => !r.ok && r.failure === 'answered' && r.status === 403)
    .map(([permission]) => permission);
  if (missing.length > 0) return { ok: false, problem: 'permission', missing };
  for (const [permission, r] of results) {
    if (r.ok || r.failure !== 'answered') continue;
    if (permission === 'Customer portal: write' && r.status >= 400 && r.status < 500) {
      if (r.error.code === 'resource_missing') continue;
      return { ok: false, problem: 'portal', message: r.error.message ?? 'Stripe refused a Customer Portal session.' };
    }
    return { ok: false, problem: 'stripe_error', status: r.status };
  }
  return { ok: true };
}
