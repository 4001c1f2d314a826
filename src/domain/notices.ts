import { CUSTOMER_ID_RE, NOTICE_KINDS } from './types.js';
import type { NoticeKind } from './types.js';

export { NOTICE_KINDS };
export type { NoticeKind };
import { obj, str } from './stripe/json.js';
import type { StripeEventLike } from './stripe/derive.js';

/**
 * Notices (docs/notices.md): what an active subscriber's answer may tell beside its status,
 * never changing it. Pure: what a Stripe event tells of a customer's card, and whether a
 * card-expiring notice holds.
 */

/** Null when `value` is a valid `policy.notices`; else why not. */
export function noticesProblem(value: unknown): string | null {
  if (!Array.isArray(value)) return 'policy.notices: must be a list';
  for (const v of value as unknown[]) {
    if (typeof v !== 'string' || !(NOTICE_KINDS as readonly string[]).includes(v))
      return `policy.notices: each must be one of ${NOTICE_KINDS.join(', ')}`;
  }
  return null;
}

/** The notices as stored: each kind once, in the order of NOTICE_KINDS. */
export function normaliseNotices(value: readonly string[]): NoticeKind[] {
  return NOTICE_KINDS.filter((k) => value.includes(k));
}

/** A card's expiry as Stripe gives it: month 1 to 12, a four-digit year. */
export interface CardExpiry {
  month: number;
  year: number;
}

/** The expiry's `YYYY-MM`, as the answer carries it. */
export function expiryText(e: CardExpiry): string {
  return `${String(e.year).padStart(4, '0')}-${String(e.month).padStart(2, '0')}`;
}

/** The first instant the card no longer works: midnight UTC after the last day of its month. */
export function expiryEndMs(e: CardExpiry): number {
  return Date.UTC(e.year, e.month, 1);
}

function cardExpiryOf(value: unknown): CardExpiry | null {
  const o = obj(value);
  if (o === null) return null;
  const card = obj(o.card) ?? o;
  const month = card.exp_month;
  const year = card.exp_year;
  if (!Number.isInteger(month) || !Number.isInteger(year)) return null;
  if ((month as number) < 1 || (month as number) > 12 || (year as number) < 2000 || (year as number) > 9999)
    return null;
  return { month: month as number, year: year as number };
}

function customerOf(value: unknown): string | null {
  const id = str(value) ?? str(obj(value)?.id);
  return id !== null && CUSTOMER_ID_RE.test(id) ? id : null;
}

/** A whole number of Unix seconds, or null. */
function unixS(value: unknown): number | null {
  return Number.isSafeInteger(value) && (value as number) > 0 ? (value as number) : null;
}

/**
 * What one Stripe event tells of a customer's card, for its notice:
 * - `expiring`: a card expires at `expiresEndMs`, before `untilMs` (the next renewal, or the
 *   end of its month when the renewal is not known): the notice holds until `untilMs`;
 * - `renewal`: a renewal is due at `renewalMs` (`invoice.upcoming`): whether the notice holds
 *   depends on the default card's expiry, which only Stripe's API tells;
 * - `ended`: the card changed, or the renewal was paid: the notice ends.
 */
export type CardFact =
  | { kind: 'expiring'; customerId: string; expiry: CardExpiry; untilMs: number }
  | { kind: 'renewal'; customerId: string; renewalMs: number }
  | { kind: 'ended'; customerId: string; why: CardEndReason };

export const CARD_END_REASONS = ['card_changed', 'renewal_paid'] as const;
export type CardEndReason = (typeof CARD_END_REASONS)[number];

/** The Stripe event types that can start or end a notice (docs/stripe.md). */
export const NOTICE_EVENT_TYPES = [
  'customer.source.expiring',
  'invoice.upcoming',
  'customer.updated',
  'payment_method.attached',
  'customer.source.updated',
  'invoice.paid',
] as const;

/** Whether a `customer.updated` changed the customer's default card (its previous attributes name it). */
function defaultCardChanged(previous: Record<string, unknown> | null | undefined): boolean {
  const prev = obj(previous);
  if (prev === null) return false;
  if ('default_source' in prev) return true;
  const settings = obj(prev.invoice_settings);
  return settings !== null && 'default_payment_method' in settings;
}

/**
 * The card fact of an event; null when it tells nothing of a card. A `customer.source.expiring`
 * holds until the end of the card's month (Stripe sends it ahead of that month); an
 * `invoice.upcoming` names the renewal (`next_payment_attempt`, else its `period_end`),
 * whose card Stripe's API tells; `customer.updated` with a new default, a card attached
 * (`payment_method.attached`), a source updated (`customer.source.updated`: new expiry) end
 * the notice; so does the subscription's `invoice.paid` (the renewal is paid).
 */
export function cardFactOf(event: StripeEventLike): CardFact | null {
  const o = event.data.object;
  switch (event.type) {
    case 'customer.source.expiring': {
      const customerId = customerOf(o.customer);
      const expiry = cardExpiryOf(o);
      if (customerId === null || expiry === null) return null;
      return { kind: 'expiring', customerId, expiry, untilMs: expiryEndMs(expiry) };
    }
    case 'invoice.upcoming': {
      const customerId = customerOf(o.customer);
      const at = unixS(o.next_payment_attempt) ?? unixS(o.period_end);
      if (customerId === null || at === null) return null;
      return { kind: 'renewal', customerId, renewalMs: at * 1000 };
    }
    case 'customer.updated': {
      const customerId = customerOf(o.id);
      if (customerId === null || !defaultCardChanged(event.data.previous_attributes)) return null;
      return { kind: 'ended', customerId, why: 'card_changed' };
    }
    case 'payment_method.attached':
    case 'customer.source.updated': {
      const customerId = customerOf(o.customer);
      if (customerId === null) return null;
      return { kind: 'ended', customerId, why: 'card_changed' };
    }
    case 'invoice.paid': {
      const customerId = customerOf(o.customer);
      if (
        customerId === null ||
        (str(o.subscription) ?? str(obj(o.subscription)?.id) ?? subscriptionOfParent(o)) === null
      )
        return null;
      return { kind: 'ended', customerId, why: 'renewal_paid' };
    }
    default:
      return null;
  }
}

/** The subscription of an invoice in the API shape from 2025-03-31 on (`parent.subscription_details`). */
function subscriptionOfParent(o: Record<string, unknown>): string | null {
  const details = obj(obj(o.parent)?.subscription_details);
  return str(details?.subscription) ?? str(obj(details?.subscription)?.id);
}

/**
 * With the customer's default card's expiry (from Stripe's API), what an `invoice.upcoming`
 * tells: a notice until the renewal when the card expires before it; else the notice ends
 * (the card will carry the renewal). Null expiry (no default card, or Stripe could not say):
 * nothing is learned.
 */
export function renewalNotice(
  fact: Extract<CardFact, { kind: 'renewal' }>,
  expiry: CardExpiry | null,
): Extract<CardFact, { kind: 'expiring' | 'ended' }> | null {
  if (expiry === null) return null;
  if (expiryEndMs(expiry) <= fact.renewalMs)
    return { kind: 'expiring', customerId: fact.customerId, expiry, untilMs: fact.renewalMs };
  return { kind: 'ended', customerId: fact.customerId, why: 'card_changed' };
}

/** A customer's notice as the store keeps it: null expiry once ended. */
export interface StoredNotice {
  expires: string | null;
  untilMs: number | null;
  /** The Stripe event that set it last (ordering: a later event wins). */
  eventCreatedMs: number;
  eventId: string;
}

/**
 * Whether an event (created at `createdMs`, telling that the notice `ends` or starts) comes
 * after the one that set the stored notice. Stripe orders events by `created`, in seconds,
 * and its event ids carry no order: within one second an event that ends the notice (a new
 * card, the renewal paid) wins over one that starts it, so that a customer who just changed
 * cards is never told to change it; otherwise the one that arrives later wins.
 */
export function noticeSupersedes(stored: StoredNotice | null, createdMs: number, ends: boolean): boolean {
  if (stored === null) return true;
  if (createdMs !== stored.eventCreatedMs) return createdMs > stored.eventCreatedMs;
  const storedEnds = stored.expires === null;
  return ends || !storedEnds;
}

/** The answer's notice at `nowMs`: the expiry while it holds, else null. */
export function noticeAt(stored: Pick<StoredNotice, 'expires' | 'untilMs'>, nowMs: number): string | null {
  if (stored.expires === null || stored.untilMs === null) return null;
  return nowMs < stored.untilMs ? stored.expires : null;
}
