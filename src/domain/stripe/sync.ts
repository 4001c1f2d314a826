import type { StripeEventLike } from './derive.js';
import { obj, str } from './json.js';
import type { Obj } from './json.js';

/**
 * Today's state of a Stripe account as the events it would have sent: an import builds
 * these from listed objects and feeds them through the webhook's derivation, so that an
 * imported customer gets exactly the episode a webhook would have given it.
 *
 * Ids are derived from the object and its attempt, so a second import of an unchanged
 * account sends the same ids (each a duplicate, changing nothing), and a later real
 * webhook, dated after the state it reports, supersedes the imported event.
 */

/** Marks an event made by an import rather than sent by Stripe. */
export const SYNC_EVENT_PREFIX = 'evt_sync_';

function seconds(value: unknown): number | null {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : null;
}

/**
 * The object's own mode, carried onto the event made from it (Stripe puts `livemode` on
 * every object and event): a live or test tenant then skips an object of the other mode
 * exactly as its webhook skips such an event.
 */
function modeOf(object: Obj): { livemode?: boolean } {
  return typeof object.livemode === 'boolean' ? { livemode: object.livemode } : {};
}

/** Event ids allow `[A-Za-z0-9_]` only: anything else in an object id becomes `_`. */
function syncId(...parts: (string | number)[]): string {
  return `${SYNC_EVENT_PREFIX}${parts.map((p) => String(p).replace(/[^A-Za-z0-9_]/g, '_')).join('_')}`.slice(0, 259);
}

/** An open invoice that Stripe collects by itself and has tried at least once: a dunning invoice. */
export function isDunningInvoice(invoice: Obj): boolean {
  const attempts = typeof invoice.attempt_count === 'number' ? invoice.attempt_count : 0;
  return (
    str(invoice.status) === 'open' &&
    str(invoice.collection_method) === 'charge_automatically' &&
    (invoice.attempted === true || attempts > 0) &&
    str(invoice.id) !== null
  );
}

/**
 * The invoice's latest failed payment attempt, from its invoice payments (newest first,
 * `payment.payment_intent` expanded with its `latest_charge`): the payment intent that
 * carries a `last_payment_error`, or that waits for the customer (`requires_action`).
 */
function lastFailedPayment(payments: readonly Obj[]): { paymentIntent: Obj; payment: Obj } | null {
  for (const payment of payments) {
    const pi = obj(obj(payment.payment)?.payment_intent);
    if (pi === null) continue;
    if (obj(pi.last_payment_error) !== null || str(pi.status) === 'requires_action')
      return { paymentIntent: pi, payment };
  }
  return null;
}

/**
 * The `invoice.payment_failed` (or `invoice.payment_action_required`) event of a dunning
 * invoice, dated at its latest attempt (the failed charge's time, else the payment's,
 * else the invoice's finalization), carrying every payment so that declines link to it.
 * Null when the invoice is not in dunning.
 */
export function invoiceSyncEvent(invoice: Obj, payments: readonly Obj[]): StripeEventLike | null {
  if (!isDunningInvoice(invoice)) return null;
  const failed = lastFailedPayment(payments);
  const charge = obj(failed?.paymentIntent.latest_charge);
  const transitions = obj(invoice.status_transitions);
  const created =
    seconds(charge?.created) ??
    seconds(failed?.payment.created) ??
    seconds(transitions?.finalized_at) ??
    seconds(invoice.created);
  if (created === null) return null;
  const attempts = typeof invoice.attempt_count === 'number' ? invoice.attempt_count : 1;
  const type =
    failed !== null && str(failed.paymentIntent.status) === 'requires_action'
      ? 'invoice.payment_action_required'
      : 'invoice.payment_failed';
  const listed = payments.flatMap((p) => {
    const payment = obj(p.payment);
    return payment ? [{ payment }] : [];
  });
  return {
    id: syncId(str(invoice.id) ?? '', attempts),
    type,
    created,
    ...modeOf(invoice),
    data: { object: { ...invoice, payments: { object: 'list', data: listed, has_more: false } } },
  };
}

/** What a subscription's status says on its own, as the transition Stripe would have announced. */
const SUBSCRIPTION_ENTERED: Readonly<Record<string, string>> = { past_due: 'active', unpaid: 'past_due' };

/**
 * The `customer.subscription.updated` event of a `past_due` or `unpaid` subscription,
 * dated no later than it can have entered that status: when its latest invoice was
 * finalized (a failed attempt comes after it), else when it was created. Dating it early
 * lets any real event about what happened since supersede it. Null for other statuses.
 */
export function subscriptionSyncEvent(subscription: Obj): StripeEventLike | null {
  const status = str(subscription.status);
  const previous = status === null ? undefined : SUBSCRIPTION_ENTERED[status];
  const id = str(subscription.id);
  if (previous === undefined || id === null) return null;
  const latest = obj(subscription.latest_invoice);
  const created =
    seconds(obj(latest?.status_transitions)?.finalized_at) ?? seconds(latest?.created) ?? seconds(subscription.created);
  if (created === null) return null;
  return {
    id: syncId(id, status ?? '', created),
    type: 'customer.subscription.updated',
    created,
    ...modeOf(subscription),
    data: {
      object: { ...subscription, latest_invoice: str(latest?.id) ?? subscription.latest_invoice },
      previous_attributes: { status: previous },
    },
  };
}
