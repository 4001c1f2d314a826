/**
 * What opens a link through Dunwall at Stripe (docs/links.md): for `pay`, the invoice's
 * current hosted page while it is open, else a Customer Portal session on the card form; for
 * `card`, that session. Every call bounded in time (3 s), no retries on the request path.
 * The implementation that calls Stripe's API with the space's key lives beside the key; the
 * routes take this interface, so that their tests pass a small fake.
 */

export interface LinkTarget {
  kind: 'pay' | 'card';
  spaceId: number;
  customerId: string;
  invoiceId: string | null;
  locale?: string;
}

export type LinkRedirect =
  { ok: true; location: string } | { ok: false; reason: 'no_key' | 'stripe_error' | 'stripe_timeout' | 'not_found' };

export interface StripeLinks {
  open(target: LinkTarget): Promise<LinkRedirect>;
}

/** Without a Stripe API client: every open falls back (the stored page, the payment link, the page). */
export const NO_STRIPE_LINKS: StripeLinks = {
  open: () => Promise.resolve({ ok: false, reason: 'no_key' }),
};
