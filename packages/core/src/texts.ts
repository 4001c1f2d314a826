/**
 * What a banner or a gate says: the defaults, then the tenant's branding in the reader's
 * language, then the app's own. The branding's texts are kept per locale (`fr`, `fr-CA`,
 * `default`); the reader's languages are tried most wanted first, each followed by its shorter
 * forms, then `default`.
 */
import type { Branding, BrandingTextKey } from '../../../src/domain/branding.js';

export interface Texts {
  warning: string;
  update: string;
  dismiss: string;
  lockoutTitle: string;
  lockout: string;
  support: string;
  /** Shown on the gate when the tenant configured neither link. */
  noLink: string;
  /** The gate's link to pay (its `update` when not set). */
  pay?: string;
  /** The link to Stripe's page of the overdue invoice. */
  payNow: string;
  /** The banner's countdown to a lockout: `{time}` ("in 3 days"), `{date}` (the date). */
  countdown: string;
  /** A member's banner (and notice), in place of `warning`: no link is shown to a member. */
  member: string;
  /** A member's gate, in place of `lockout`. */
  memberGate: string;
  /** The card-expiring notice: `{expires}` is the card's month (`MM/YYYY`). */
  notice: string;
}

export const DEFAULT_TEXTS: Texts = {
  warning: 'Your last payment did not go through. Please update your card to keep your access.',
  update: 'Update card',
  dismiss: 'Dismiss',
  lockoutTitle: 'Your account is on hold',
  lockout: 'We could not collect your last payment. Please update your payment method to continue.',
  support: 'Contact support',
  noLink: 'Please contact the support team of this service to restore your access.',
  payNow: 'Pay now',
  countdown: 'Access will be paused {time}.',
  member: "Ask your account's billing admin to update the payment method.",
  memberGate: "Ask your account's billing admin to update the payment method.",
  notice: 'Your card expires {expires}. Update it to keep your subscription running.',
};

/** Which branding text (`BRANDING_TEXT_KEYS` of the domain) stands for which text. */
export const FROM_BRANDING: readonly (readonly [keyof Texts, BrandingTextKey])[] = [
  ['warning', 'banner_body'],
  ['update', 'banner_action'],
  ['countdown', 'banner_countdown'],
  ['lockoutTitle', 'gate_title'],
  ['lockout', 'gate_body'],
  ['pay', 'gate_action'],
  ['payNow', 'pay_action'],
  ['support', 'support'],
  ['member', 'member_body'],
  ['memberGate', 'member_gate_body'],
];

/**
 * The locales to try for a reader's languages, most wanted first, each followed by its
 * shorter forms (`fr-CA` -> `fr-CA`, `fr`), then `default`: the fallback chain.
 */
export function localeChain(languages: readonly string[]): string[] {
  const chain: string[] = [];
  for (const lang of languages) {
    const parts = lang.split('-');
    for (let n = parts.length; n >= 1; n -= 1) {
      const tag = [parts[0]?.toLowerCase(), ...parts.slice(1, n)].join('-');
      if (!chain.includes(tag)) chain.push(tag);
    }
  }
  chain.push('default');
  return chain;
}

/** One branding text and the locale of the chain it came from (`default` included); undefined: none. */
export function resolveText(
  branding: Branding,
  languages: readonly string[],
  key: BrandingTextKey,
): [string, string] | undefined {
  const texts = branding.texts ?? {};
  for (const locale of localeChain(languages)) {
    const text = texts[locale]?.[key];
    if (text !== undefined) return [text, locale];
  }
  return undefined;
}

/**
 * The texts (defaults, then the branding's in the first of `languages` it has, then the
 * app's own), and the locales the countdown speaks: its sentence's.
 */
export function textsFor(
  branding: Branding,
  languages: readonly string[],
  own: Partial<Texts> = {},
): { texts: Texts; locales: readonly string[] } {
  const fromBranding: Partial<Texts> = {};
  let from: string | undefined;
  for (const [ours, theirs] of FROM_BRANDING) {
    const found = resolveText(branding, languages, theirs);
    if (found) fromBranding[ours] = found[0];
    if (ours === 'countdown') from = own.countdown ? 'default' : found?.[1];
  }
  const locales = from === undefined ? ['en'] : from === 'default' ? languages : [from, ...languages];
  return { texts: { ...DEFAULT_TEXTS, ...fromBranding, ...own }, locales };
}
