/**
 * What to show for a status, whatever draws it (the snippet in the DOM, React in the DOM,
 * React Native in native views): a banner, a gate or nothing; its texts, colours, links (the
 * way to pay first), countdown to a lockout, support link, logo and watermark. The drawers
 * only render a view; they decide none of it.
 */
import type { Branding } from '../../../src/domain/branding.js';
import type { Entitlements, SubscriberStatus } from '../../client/src/index.js';
import { textsFor } from './texts.js';
import type { Texts } from './texts.js';

export type { Branding };

export interface Colors {
  accent: string;
  background: string;
  text: string;
}

export const DEFAULT_COLORS: Colors = { accent: '#b42318', background: '#fff8f6', text: '#1d2939' };

/** A link to follow: where, its text, and whether it opens apart from the app (a new tab). */
export interface Link {
  href: string;
  text: string;
  external: boolean;
}

/** What a view is drawn from: a status store's snapshot, or the snippet's answer. */
export interface ViewState {
  status: SubscriberStatus;
  /** Where the status comes from; a gate only from a fresh answer (`service`, or the app's API: `api`). */
  source: string;
  /** While `warning`: when the lockout is scheduled (RFC 3339), else null. */
  lockoutAt: string | null;
  payUrl: string | null;
  cardUpdateUrl: string | null;
  entitlements: Entitlements | null;
}

/** What the app says of a banner or a gate, over the branding's and the defaults. */
export interface ViewOptions {
  /** The app's own texts, over the branding's and the defaults. */
  texts?: Partial<Texts>;
  colors?: Partial<Colors>;
  /** A card update page of the app's, when the answer names none. */
  cardUpdateUrl?: string | null;
}

export interface BannerOptions {
  /** Default true: a × that hides the banner for the session. */
  dismissible?: boolean;
}

export interface GateOptions {
  supportUrl?: string | null;
  logoUrl?: string | null;
}

/** What a banner or a gate (the tenant's own too) is drawn from. */
export interface BillingView<S extends ViewState = ViewState> {
  state: S;
  texts: Texts;
  /** The way to pay first; each `external` link opens apart (a new tab). */
  links: Link[];
  /** The countdown sentence ('' without a scheduled lockout, or before the clock is read). */
  countdown: string;
  support: string | null;
  logo: string | null;
  watermark: boolean;
}

export type Shown = 'banner' | 'gate' | null;

/**
 * A banner for `warning` unless dismissed; a gate for `lockout` from a fresh answer only (the
 * service's, or the app's API's 402): never a false gate; nothing for anything else.
 */
export function shownFor(state: Pick<ViewState, 'status' | 'source'>, dismissed: boolean): Shown {
  if (state.status === 'warning') return dismissed ? null : 'banner';
  return state.status === 'lockout' && (state.source === 'service' || state.source === 'api') ? 'gate' : null;
}

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
 * else minutes (at least one); `{date}`: the date and time. Where `Intl.RelativeTimeFormat`
 * is missing (Hermes), `{time}` is the date. Returns the sentence and the date.
 */
export function countdown(
  at: number,
  locales: readonly string[],
  text: string,
  now: number = Date.now(),
): [string, string] {
  try {
    const date = new Intl.DateTimeFormat(locales as string[], { dateStyle: 'medium', timeStyle: 'short' }).format(at);
    let time = date;
    if (typeof Intl.RelativeTimeFormat === 'function') {
      const left = at - now;
      const [unit, ms]: [Intl.RelativeTimeFormatUnit, number] =
        left >= 2 * 864e5 ? ['day', 864e5] : left >= 2 * 36e5 ? ['hour', 36e5] : ['minute', MINUTE_MS];
      // Numeric ("in 1 day", never "tomorrow": a day left may end the day after).
      time = new Intl.RelativeTimeFormat(locales as string[]).format(Math.max(1, Math.round(left / ms)), unit);
    }
    // split/join, not replace: no `$&` patterns, and the result only ever becomes text.
    return [text.split('{time}').join(time).split('{date}').join(date), date];
  } catch {
    // A locale tag Intl refuses: the platform's own.
    return locales.length ? countdown(at, [], text, now) : [text, ''];
  }
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

/** The gate's links: the way to pay, then the support page; none: the gate says `noLink`. */
export function gateLinks(view: BillingView<ViewState>): Link[] {
  return view.support ? [...view.links, { href: view.support, text: view.texts.support, external: false }] : view.links;
}

export interface ViewInput<S extends ViewState> {
  state: S;
  branding: Branding;
  /** The reader's languages, most wanted first. */
  languages: readonly string[];
  own: ViewOptions & GateOptions;
  /** The time the countdown counts from; null: none yet (server rendering, hydration). */
  now: number | null;
  /** How a link is checked: `safeUrl` in a browser, React Native's own check in an app. */
  safe: (url: string | null | undefined) => string | null;
}

/**
 * The view of a state: its texts (the branding's in the reader's language, the app's over
 * them), links, countdown, support link, logo and watermark; its colours (the branding's are
 * checked by the service, #rrggbb; the app's are its own); and the locales its countdown
 * speaks (its sentence's), for a drawer that moves the countdown on.
 */
export function viewOf<S extends ViewState>({
  state,
  branding,
  languages,
  own,
  now,
  safe,
}: ViewInput<S>): { view: BillingView<S>; colors: Colors; locales: readonly string[] } {
  const { texts, locales } = textsFor(branding, languages, own.texts);
  const at = state.lockoutAt ? Date.parse(state.lockoutAt) : NaN;
  const view: BillingView<S> = {
    state,
    texts,
    links: payLinks(state, texts, branding, own.cardUpdateUrl, safe),
    countdown: now !== null && at === at ? countdown(at, locales, texts.countdown, now)[0] : '',
    support: safe(own.supportUrl ?? branding.support_url),
    logo: safe(own.logoUrl ?? branding.logo_url),
    watermark: state.entitlements?.powered_by_watermark === true,
  };
  return { view, colors: { ...DEFAULT_COLORS, ...branding.colors, ...own.colors }, locales };
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
