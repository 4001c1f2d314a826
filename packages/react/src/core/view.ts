/**
 * What a banner or a gate says and links to, whatever draws it (the snippet, React, React
 * Native): the texts (defaults, then the tenant's branding in the reader's language, then the
 * app's own), the countdown to a lockout, and the links, the way to pay first.
 */
import { resolveText } from '../../../../src/domain/branding.js';
import type { Branding, BrandingTextKey } from '../../../../src/domain/branding.js';

export type { Branding };

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
}

export interface Colors {
  accent: string;
  background: string;
  text: string;
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
};

/** Which branding text (`BRANDING_TEXT_KEYS`) stands for which text. */
export const FROM_BRANDING: readonly (readonly [keyof Texts, BrandingTextKey])[] = [
  ['warning', 'banner_body'],
  ['update', 'banner_action'],
  ['countdown', 'banner_countdown'],
  ['lockoutTitle', 'gate_title'],
  ['lockout', 'gate_body'],
  ['pay', 'gate_action'],
  ['payNow', 'pay_action'],
  ['support', 'support'],
];

export const DEFAULT_COLORS: Colors = { accent: '#b42318', background: '#fff8f6', text: '#1d2939' };

const MINUTE_MS = 60_000;

/** Links and images are https only: never `javascript:`, `data:` or plain http. */
export function safeUrl(value: string | null | undefined, base?: string): string | null {
  if (!value) return null;
  try {
    const url = base ? new URL(value, base) : new URL(value);
    return url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

/**
 * `{time}`: "in 3 days" to `at`, rounded to days from two days on, hours from two hours on,
 * else minutes (at least one); `{date}`: the date and time. Returns the sentence and the date.
 */
export function countdown(
  at: number,
  locales: readonly string[],
  text: string,
  now: number = Date.now(),
): [string, string] {
  try {
    const left = at - now;
    const [unit, ms]: [Intl.RelativeTimeFormatUnit, number] =
      left >= 2 * 864e5 ? ['day', 864e5] : left >= 2 * 36e5 ? ['hour', 36e5] : ['minute', MINUTE_MS];
    const n = Math.max(1, Math.round(left / ms));
    // Numeric ("in 1 day", never "tomorrow": a day left may end the day after).
    const time = new Intl.RelativeTimeFormat(locales as string[]).format(n, unit);
    const date = new Intl.DateTimeFormat(locales as string[], { dateStyle: 'medium', timeStyle: 'short' }).format(at);
    // split/join, not replace: no `$&` patterns, and the result only ever becomes text.
    return [text.split('{time}').join(time).split('{date}').join(date), date];
  } catch {
    // A locale tag Intl refuses: the platform's own.
    return locales.length ? countdown(at, [], text, now) : [text, ''];
  }
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

/** A link to follow: where, its text, and whether it opens apart from the app (a new tab). */
export interface Link {
  href: string;
  text: string;
  external: boolean;
}

/**
 * The way to pay leads: the overdue invoice's page (apart, so that the app asks again on
 * return), else the card update page, else the branding's payment link; each link as `safe`
 * takes it (https only).
 */
export function payLinks(
  answer: { status: string; payUrl: string | null; cardUpdateUrl: string | null },
  texts: Texts,
  branding: Branding,
  ownCardUpdateUrl: string | null | undefined,
  safe: (url: string | null | undefined) => string | null,
): Link[] {
  const pay = safe(answer.payUrl);
  const card = safe(answer.cardUpdateUrl ?? ownCardUpdateUrl);
  const links: Link[] = pay ? [{ href: pay, text: texts.payNow, external: true }] : [];
  const other = card ?? (pay ? null : safe(branding.payment_url));
  if (other)
    links.push({
      href: other,
      text: answer.status === 'lockout' && !pay ? (texts.pay ?? texts.update) : texts.update,
      external: false,
    });
  return links;
}

/** Tenant slugs and customer ids are [a-z0-9-] and [A-Za-z0-9_]: safe in a cookie name. */
export function dismissKey(tenant: string, customer: string): string {
  return `dunwall_dismissed_${tenant}_${customer}`.replace(/[^A-Za-z0-9_-]/g, '_');
}

/** The tenant's branding (`GET /api/branding/:slug`, public and cacheable); {} on any failure or after 2 s. */
export async function fetchBranding(
  baseUrl: string,
  tenant: string,
  fetchImpl: typeof fetch = fetch,
): Promise<Branding> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 2_000);
  try {
    const res = await fetchImpl(`${baseUrl.replace(/\/+$/, '')}/api/branding/${encodeURIComponent(tenant)}`, {
      credentials: 'omit',
      signal: controller.signal,
    });
    const body: unknown = res.ok ? await res.json() : {};
    return typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Branding) : {};
  } catch {
    return {};
  } finally {
    clearTimeout(timer);
  }
}
