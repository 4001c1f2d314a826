/**
 * What to show for a status, whatever draws it (the snippet in the DOM, React in the DOM,
 * React Native in native views): a banner, a gate or nothing; its texts, colours, links (the
 * way to pay first), countdown to a lockout, support link, logo and watermark. The drawers
 * only render a view; they decide none of it.
 */
import type { Branding } from '../../../src/domain/branding.js';
import type { Entitlements, KnownSubscriberBody, SubscriberStatus } from '../../client/src/index.js';
import { textsFor } from './texts.js';
import type { Texts } from './texts.js';

export type { Branding };

/** What an active answer may tell ahead of a failure: the lookup's `notice`. */
export type Notice = NonNullable<KnownSubscriberBody['notice']>;

/**
 * Who reads: `billing_admin` (the default) can pay; a `member` cannot, and is shown the
 * banner and the gate with the member's texts and no pay or card link. Display only.
 */
export type Role = 'billing_admin' | 'member';

/** The unknown roles said in the console: each once per page. */
const toldRoles = new Set<string>();

/**
 * The role an app named. Anything but `billing_admin` (or nothing) is a member: a mistyped
 * role hides the payment links from whoever reads, it never shows them to a member (it is
 * said in the console, once).
 */
export function roleOf(value: string | null | undefined, tenant: string): Role {
  if (value == null || value === 'billing_admin') return 'billing_admin';
  if (value !== 'member' && !toldRoles.has(value) && toldRoles.add(value))
    console.warn(`[dunwall] unknown_role: "${value}" (tenant "${tenant}"): shown as member`);
  return 'member';
}

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
  /** With `active`: what the answer tells ahead of a failure; none: nothing to tell. */
  notice?: Notice | null;
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
  /** A member's: `warning` and `lockout` are the member's texts, `noLink` is empty. */
  texts: Texts;
  /** The banner's sentence: the warning's, the notice's, or the member's. */
  message: string;
  role: Role;
  /** The way to pay first (the card link alone for a notice; none for a member); each `external` link opens apart (a new tab). */
  links: Link[];
  /** The countdown sentence ('' without a scheduled lockout, or before the clock is read). */
  countdown: string;
  support: string | null;
  logo: string | null;
  watermark: boolean;
}

export type Shown = 'banner' | 'notice' | 'gate' | null;

/**
 * A banner for `warning` unless dismissed; a soft banner for an active answer's notice unless
 * dismissed (never a gate); a gate for `lockout` from a fresh answer only (the service's, or
 * the app's API's 402): never a false gate; nothing for anything else.
 */
export function shownFor(state: Pick<ViewState, 'status' | 'source' | 'notice'>, dismissed: boolean): Shown {
  if (state.status === 'warning') return dismissed ? null : 'banner';
  if (state.status === 'active') return state.notice && !dismissed ? 'notice' : null;
  return state.status === 'lockout' && (state.source === 'service' || state.source === 'api') ? 'gate' : null;
}

/** A notice of a kind and month this code knows (`card_expiring`, `YYYY-MM`), else null: an unknown one is not shown. */
export function noticeOf(value: unknown): Notice | null {
  const n = value as Notice | null;
  return n?.kind === 'card_expiring' && /^\d{4}-(0[1-9]|1[0-2])$/.test(n.expires) ? n : null;
}

const MINUTE_MS = 60_000;

/** The hosts of this machine (127.0.0.0/8, ::1, localhost), as `URL` writes them. */
export const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;

/**
 * Links and images are https, or http to this machine only (a service tried locally, with
 * `DUNWALL_PUBLIC_URL=http://127.0.0.1:...`): never `javascript:`, `data:` or plain http to a host.
 */
export function safeUrl(value: string | null | undefined, base?: string): string | null {
  if (!value) return null;
  try {
    const url = base ? new URL(value, base) : new URL(value);
    return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.test(url.hostname)) ? url.href : null;
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
  /** Default `billing_admin`. */
  role?: Role;
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
  role = 'billing_admin',
}: ViewInput<S>): { view: BillingView<S>; colors: Colors; locales: readonly string[] } {
  const found = textsFor(branding, languages, own.texts);
  const { locales } = found;
  const member = role === 'member';
  // A member is told whom to ask, never sent to pay: no link, and no "contact support to restore" either.
  const texts = member
    ? { ...found.texts, warning: found.texts.member, lockout: found.texts.memberGate, noLink: '' }
    : found.texts;
  const at = state.lockoutAt ? Date.parse(state.lockoutAt) : NaN;
  const card = safe(state.cardUpdateUrl ?? own.cardUpdateUrl);
  const notice = state.status === 'active' ? state.notice : undefined;
  const view: BillingView<S> = {
    state,
    texts,
    // `{expires}` as MM/YYYY; split/join, not replace: the text only ever becomes text.
    message:
      notice && !member
        ? texts.notice.split('{expires}').join(notice.expires.replace(/(\d+)-(\d+)/, '$2/$1'))
        : texts.warning,
    role,
    links: member
      ? []
      : notice
        ? card
          ? [{ href: card, text: texts.update, external: false }]
          : []
        : payLinks(state, texts, branding, own.cardUpdateUrl, safe),
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
