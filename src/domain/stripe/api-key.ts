import type { Mode } from '../types.js';

/**
 * The tenant's Stripe API key (docs/links.md, "The tenant's Stripe API key"): a restricted
 * key (`rk_live_` / `rk_test_`) or a secret key (`sk_...`). Its prefix names its mode, and
 * the mode it serves. What Dunwall asks Stripe with it, and so the permissions a restricted
 * key needs, is one list here: the check on set and the docs derive from it.
 */

/** Stripe's keys are `rk_` / `sk_`, the mode, then base62 (with underscores in restricted keys). */
export const STRIPE_API_KEY_PATTERN = '^(rk|sk)_(live|test)_[A-Za-z0-9_]{16,247}$';
const STRIPE_API_KEY_RE = new RegExp(STRIPE_API_KEY_PATTERN);

/** The characters of a key shown again (`rk_live_51Ab`): enough to tell keys apart, never enough to use one. */
export const STRIPE_API_KEY_PREFIX_CHARS = 12;

export interface StripeApiKeyForm {
  kind: 'restricted' | 'secret';
  mode: Mode;
}

/** The key's kind and mode; null when it is not a Stripe secret or restricted key (never echoed). */
export function stripeApiKeyForm(key: string): StripeApiKeyForm | null {
  const match = STRIPE_API_KEY_RE.exec(key);
  if (match === null) return null;
  return { kind: match[1] === 'rk' ? 'restricted' : 'secret', mode: match[2] === 'live' ? 'live' : 'test' };
}

export function stripeApiKeyPrefix(key: string): string {
  return key.slice(0, STRIPE_API_KEY_PREFIX_CHARS);
}

/**
 * The permissions a restricted key needs, in the words of Stripe's dashboard (resource and
 * access): read on invoices, customers and subscriptions, write on the Customer portal.
 */
export const STRIPE_KEY_PERMISSIONS = [
  'Invoices: read',
  'Customers: read',
  'Subscriptions: read',
  'Customer portal: write',
] as const;
export type StripeKeyPermission = (typeof STRIPE_KEY_PERMISSIONS)[number];
