/**
 * Pay and card links through Dunwall (docs/links.md): the rules that need no IO. A link is
 * `{DUNWALL_PUBLIC_URL}/pay/{token}` or `/card/{token}`; the token is 32 base62 characters
 * (190 bits from the CSPRNG), bound in the store to the data space, the customer and, for
 * `pay`, the invoice, and valid 30 days.
 */

export const LINK_KINDS = ['pay', 'card'] as const;
export type LinkKind = (typeof LINK_KINDS)[number];

/** Where an open sent the customer (customer_link_opens.sent_to). */
export const LINK_DESTINATIONS = ['stripe', 'stored_page', 'payment_link', 'contact_page'] as const;
export type LinkDestination = (typeof LINK_DESTINATIONS)[number];

export const LINK_TOKEN_LENGTH = 32;
/** What a token looks like; anything else is refused before the store is asked. */
export const LINK_TOKEN_RE = /^[0-9A-Za-z]{32}$/;
/** A link is valid this long after it was made (the contract's 30 days). */
export const LINK_TTL_MS = 30 * 86_400_000;
/**
 * A link with less than this left is not handed out again: the next write of its subscriber,
 * or the renewal sweep, makes a new one, so that an answer never carries a link about to die.
 */
export const LINK_RENEW_AHEAD_MS = 7 * 86_400_000;
/** Stripe's answer is waited for this long at most; then the customer goes to the fallback. */
export const LINK_STRIPE_TIMEOUT_MS = 3_000;

const DAY_MS = 86_400_000;
/** Stripe: a hosted invoice page works 30 days after the due date (or finalization), never over 120. */
const HOSTED_PAGE_DAYS = 30;
const HOSTED_PAGE_MAX_DAYS = 120;

/**
 * When Stripe's hosted page of an invoice stops working, from the invoice's own fields
 * (epoch seconds): 30 days after `due_date`, or after finalization for an invoice charged
 * automatically (which has no due date), never more than 120 days after finalization. Null
 * when the invoice does not say when it was finalized (an event of an older API version):
 * then the stored page is not known to have expired.
 */
export function hostedPageExpiresAtMs(fields: { dueDateS: number | null; finalizedAtS: number | null }): number | null {
  if (fields.finalizedAtS === null) return null;
  const finalizedMs = fields.finalizedAtS * 1000;
  const fromMs = fields.dueDateS === null ? finalizedMs : fields.dueDateS * 1000;
  return Math.min(fromMs + HOSTED_PAGE_DAYS * DAY_MS, finalizedMs + HOSTED_PAGE_MAX_DAYS * DAY_MS);
}

const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['localhost', '[::1]']);

function isLoopbackHost(hostname: string): boolean {
  if (LOOPBACK_HOSTS.has(hostname)) return true;
  const v4 = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.exec(hostname);
  return v4 !== null;
}

/**
 * DUNWALL_PUBLIC_URL as links are made from it (no trailing slash), or the problem with it:
 * https, or http for a loopback address only (so that the whole path can be tried on one
 * machine); no query, fragment or credentials, since a token is appended to its path.
 */
export function parsePublicUrl(value: string): { ok: true; url: string } | { ok: false; why: string } {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    return { ok: false, why: 'is not a URL' };
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return { ok: false, why: 'must be https://' };
  if (parsed.protocol === 'http:' && !isLoopbackHost(parsed.hostname))
    return { ok: false, why: 'must be https:// (http:// only for a loopback address such as 127.0.0.1)' };
  if (parsed.username !== '' || parsed.password !== '') return { ok: false, why: 'must not hold credentials' };
  if (parsed.search !== '' || parsed.hash !== '' || value.includes('?') || value.includes('#'))
    return { ok: false, why: 'must not have a query or a fragment' };
  // Links go into JSON built from bytes and COPY text: nothing that needs escaping.
  const url = `${parsed.origin}${parsed.pathname}`.replace(/\/+$/, '');
  if (!/^[!#-[\]-~]+$/.test(url) || url.length > 150)
    return { ok: false, why: 'is too long or holds characters links cannot carry' };
  return { ok: true, url };
}

/** The link of a token as answers carry it. */
export function linkUrl(publicUrl: string, kind: LinkKind, token: string): string {
  return `${publicUrl}/${kind}/${token}`;
}
