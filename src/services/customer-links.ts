import type { Branding } from '../domain/branding.js';
import { LINK_STRIPE_TIMEOUT_MS, LINK_TOKEN_RE } from '../domain/links.js';
import type { LinkDestination, LinkKind } from '../domain/links.js';
import type { CustomerLinks, ResolvedLink } from '../store/index.js';
import type { LinkRedirect, StripeLinks } from './stripe-links.js';

/**
 * Opening a pay or card link (docs/links.md, GET /pay/:token and /card/:token): the token is
 * resolved, Stripe is asked for the page (bounded in time), and when Stripe fails or is slow
 * the customer is still sent somewhere useful: the stored hosted invoice page if it is not
 * known to have expired, else the branding's payment link, else a page saying whom to
 * contact. An unknown, forged or expired token gets that page with 410. Nothing here throws:
 * a customer never sees a 5xx from a link. Every open of a valid link is recorded.
 */

export type LinkAnswer =
  | { kind: 'redirect'; location: string; sentTo: Exclude<LinkDestination, 'contact_page'> }
  /** The contact page: 410 for a token that names no valid link, 200 when every way out failed. */
  | { kind: 'page'; status: 200 | 410; branding: Branding | null };

export interface OpenLinkDeps {
  links: Pick<CustomerLinks, 'resolve' | 'recordOpen'>;
  stripe: StripeLinks;
  /** The branding of the tenant a data space belongs to; null: none known. */
  brandingOf: (spaceId: number) => Branding | null;
  now: () => number;
  log: { warn(obj: object, msg: string): void };
  /** How long Stripe is waited for; default 3 s. */
  stripeTimeoutMs?: number;
}

const TIMED_OUT: LinkRedirect = { ok: false, reason: 'stripe_timeout' };
const FAILED: LinkRedirect = { ok: false, reason: 'stripe_error' };

/** Stripe's answer, or a failure once `ms` have passed: never longer, whatever the client does. */
function bounded(open: () => Promise<LinkRedirect>, ms: number): Promise<LinkRedirect> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(TIMED_OUT), ms);
    let started: Promise<LinkRedirect>;
    try {
      started = open();
    } catch {
      started = Promise.resolve(FAILED);
    }
    started.then(
      (r) => {
        clearTimeout(timer);
        resolve(r);
      },
      () => {
        clearTimeout(timer);
        resolve(FAILED);
      },
    );
  });
}

/**
 * The reader's first language (`fr`, `pt-BR`) from Accept-Language, for Stripe's pages;
 * undefined when it names none of that form (Stripe then chooses).
 */
export function readerLocale(acceptLanguage: string | undefined): string | undefined {
  const first = acceptLanguage?.slice(0, 64).split(',')[0]?.split(';')[0]?.trim() ?? '';
  const m = /^([a-zA-Z]{2})(?:-([a-zA-Z]{2}))?$/.exec(first);
  if (m === null) return undefined;
  return m[2] === undefined ? (m[1] ?? '').toLowerCase() : `${(m[1] ?? '').toLowerCase()}-${m[2].toUpperCase()}`;
}

/** Where a link goes when Stripe did not answer with a page. */
function fallback(link: ResolvedLink, branding: Branding | null): LinkAnswer {
  if (link.kind === 'pay' && link.storedPage !== null)
    return { kind: 'redirect', location: link.storedPage, sentTo: 'stored_page' };
  const paymentUrl = branding?.payment_url;
  if (paymentUrl !== undefined) return { kind: 'redirect', location: paymentUrl, sentTo: 'payment_link' };
  return { kind: 'page', status: 200, branding };
}

export async function openLink(
  deps: OpenLinkDeps,
  kind: LinkKind,
  token: string,
  acceptLanguage: string | undefined,
): Promise<LinkAnswer> {
  const locale = readerLocale(acceptLanguage);
  if (!LINK_TOKEN_RE.test(token)) return { kind: 'page', status: 410, branding: null };
  const at = new Date(deps.now());
  let link: ResolvedLink | null;
  try {
    link = await deps.links.resolve(token, at);
  } catch (err) {
    // The store is down: which link this is cannot be told. The page, not a 5xx.
    deps.log.warn({ err: { message: (err as Error).message } }, 'links: a token could not be resolved');
    return { kind: 'page', status: 200, branding: null };
  }
  if (link === null || link.kind !== kind) return { kind: 'page', status: 410, branding: null };
  const branding = deps.brandingOf(link.spaceId);
  const resolved = link;
  const redirect = await bounded(
    () =>
      deps.stripe.open({
        kind,
        spaceId: resolved.spaceId,
        customerId: resolved.customerId,
        invoiceId: resolved.invoiceId,
        ...(locale === undefined ? {} : { locale }),
      }),
    deps.stripeTimeoutMs ?? LINK_STRIPE_TIMEOUT_MS,
  );
  const answer: LinkAnswer = redirect.ok
    ? { kind: 'redirect', location: redirect.location, sentTo: 'stripe' }
    : fallback(link, branding);
  if (!redirect.ok && redirect.reason !== 'no_key')
    deps.log.warn(
      { space: link.spaceId, kind, reason: redirect.reason },
      'links: Stripe did not give a page; fell back',
    );
  try {
    await deps.links.recordOpen({
      spaceId: link.spaceId,
      kind,
      customerId: link.customerId,
      invoiceId: link.invoiceId,
      at,
      sentTo: answer.kind === 'redirect' ? answer.sentTo : 'contact_page',
    });
  } catch (err) {
    // An open not recorded costs a figure, never the customer's way out.
    deps.log.warn({ err: { message: (err as Error).message } }, 'links: an open could not be recorded');
  }
  return answer;
}
