import { hostedPageExpiresAtMs } from '../links.js';
import { CUSTOMER_ID_RE } from '../types.js';
import { classifyDecline } from './declines.js';
import { obj, str } from './json.js';
import type { Obj } from './json.js';
import type { EpisodeOutcome } from './fold.js';

/** The part of a Stripe event that the derivation reads; both API shapes fit it. */
export interface StripeEventLike {
  id: string;
  type: string;
  created: number;
  /** Stripe's live (true) or test (false) mode; checked against the tenant's (outcomes.ts). */
  livemode?: boolean;
  data: { object: Record<string, unknown>; previous_attributes?: Record<string, unknown> | null };
}

/** The event types that can change a status: what a tenant selects in the Stripe dashboard. */
export const RELEVANT_EVENT_TYPES = [
  'charge.failed',
  'payment_intent.payment_failed',
  'invoice.payment_failed',
  'invoice.payment_action_required',
  'invoice.paid',
  'invoice.payment_succeeded',
  'invoice.voided',
  'customer.subscription.updated',
  'customer.subscription.deleted',
  'customer.deleted',
] as const;
const RELEVANT: ReadonlySet<string> = new Set(RELEVANT_EVENT_TYPES);

/**
 * The event facts: the fields a derivation used, kept with the event (stripe_events.facts)
 * so that every change can be explained. Not the invoice facts (stripe_invoices), which a
 * decision reads.
 */
export type EventFacts = Record<string, string | number | boolean | null>;
/** @deprecated The store's former name of EventFacts. */
export type Facts = EventFacts;

/**
 * What an invoice event tells of its invoice, kept so that a payment's decline can find
 * its episode whichever arrives first: the episode it belongs to, whether Stripe collects
 * it automatically, whether it is a subscription's first, and the payments it names.
 */
export interface InvoiceLink {
  invoiceId: string;
  /** The subscription id, or the invoice id for an invoice of no subscription. */
  episode: string;
  autoCollected: boolean;
  firstInvoice: boolean;
  /** Payment intents and charges of this invoice (`pi_...`, `ch_...`). */
  paymentIds: string[];
  money: InvoiceMoney;
}

/**
 * What an invoice event tells about money, kept for the pay link and recovery figures:
 * amounts in the currency's smallest unit, as Stripe gives them; null when not in the payload.
 */
export interface InvoiceMoney {
  amountDue: number | null;
  amountRemaining: number | null;
  /** Lowercase ISO 4217 code. */
  currency: string | null;
  /** Stripe's hosted page where the customer pays this invoice. */
  hostedInvoiceUrl: string | null;
  /** draft, open, paid, uncollectible or void. */
  status: string | null;
  /** When the hosted page stops working (domain/links.ts); null or absent: not known. */
  hostedPageExpiresAtMs?: number | null;
}

/** A failed payment intent or charge: it gates only through the invoice it is linked to. */
export interface Decline {
  hard: boolean;
  code: string | null;
  /** The payment intent and charge ids this decline concerns. */
  paymentIds: string[];
  /** Its invoice when the payload names it (before 2025-03-31.basil only). */
  invoiceId: string | null;
}

/**
 * What an `invoice.payment_failed` tells of its own attempt, before any linked decline is
 * read: kept in its facts too (`next_payment_attempt`, the codes), so that the store can
 * weigh it again when a decline of the invoice arrives after it.
 */
export interface InvoiceFailure {
  /** Stripe's next automatic attempt (Unix seconds); null: it will not retry. */
  nextAttempt: number | null;
  /** The class of the decline the payload carries expanded; null: it carries none. */
  payloadHard: boolean | null;
}

export type StripeChange =
  /**
   * `invoiceId`: the invoice a subscription event names (its latest), when no invoice event is at hand.
   * `failure`: set on an `invoice.payment_failed`, whose outcome a linked hard decline can change.
   */
  | { kind: 'episode'; episode: string; outcome: EpisodeOutcome; invoiceId?: string | null; failure?: InvoiceFailure }
  | { kind: 'decline'; decline: Decline }
  /** The customer was deleted: every older episode goes, and older events change nothing. */
  | { kind: 'delete' };

export type Derivation =
  /** Not an event type Dunwall reads: acknowledged, not kept. */
  | { kind: 'irrelevant' }
  /** A relevant type that changes nothing (no customer, manual invoicing, no status transition). */
  | { kind: 'ignored'; customerId: string | null; why: string; invoice: InvoiceLink | null; facts: EventFacts }
  | {
      kind: 'change';
      customerId: string;
      change: StripeChange;
      invoice: InvoiceLink | null;
      declineCode: string | null;
      facts: EventFacts;
    };

/** A field that is an id, or an expanded object carrying one. */
function idOf(value: unknown): string | null {
  return str(value) ?? str(obj(value)?.id);
}

const ID_RE = /^[A-Za-z0-9_]{1,255}$/;

/** An id of the given Stripe prefix (`pi`, `ch`, `in`, `sub`), plain or expanded; else null. */
function prefixedId(value: unknown, prefix: string): string | null {
  const id = idOf(value);
  return id !== null && id.startsWith(`${prefix}_`) && ID_RE.test(id) ? id : null;
}

function customerOf(object: Obj): string | null {
  const id = idOf(object.customer);
  return id !== null && CUSTOMER_ID_RE.test(id) ? id : null;
}

function compact(facts: EventFacts): EventFacts {
  return Object.fromEntries(Object.entries(facts).filter(([, v]) => v !== null && v !== undefined));
}

function codesOf(facts: Readonly<Record<string, unknown>>): (string | null)[] {
  return [facts.decline_code, facts.code, facts.outcome_reason, facts.failure_code].map((c) =>
    typeof c === 'string' ? c : null,
  );
}

/** The codes of a failed payment intent's last error, most specific first. */
function paymentIntentCodes(pi: Obj | null): EventFacts {
  const error = obj(pi?.last_payment_error);
  return { decline_code: str(error?.decline_code), code: str(error?.code) };
}

/** A charge carries no decline_code: its outcome reason, then its failure code. */
function chargeCodes(charge: Obj | null): EventFacts {
  return { outcome_reason: str(obj(charge?.outcome)?.reason), failure_code: str(charge?.failure_code) };
}

/**
 * The payments of one invoice read at most: Stripe includes a page of them (`has_more`
 * for the rest), and a signed payload must not make one event write without bound.
 */
export const MAX_INVOICE_PAYMENTS = 100;

/**
 * The invoice's payments. Before 2025-03-31.basil the invoice names one `payment_intent`
 * and one `charge`; from basil on those fields are gone and `payments.data[].payment`
 * (`type`, `payment_intent`, `charge`) lists every attempt, sent only when the payload
 * includes it (Stripe changelog, 2025-03-31.basil: "Adds support for multiple (partial)
 * payments on invoices"). Each entry may be an id or the expanded object.
 */
function invoicePayments(invoice: Obj): Obj[] {
  const legacy = [invoice.payment_intent, invoice.charge].filter((p) => p !== undefined && p !== null);
  const listed = obj(invoice.payments)?.data;
  const basil = Array.isArray(listed)
    ? listed.flatMap((entry) => {
        const payment = obj(obj(entry)?.payment);
        return payment ? [payment.payment_intent, payment.charge].filter((p) => p !== undefined && p !== null) : [];
      })
    : [];
  return [...legacy, ...basil].slice(0, MAX_INVOICE_PAYMENTS).map((p) => obj(p) ?? { id: p });
}

/** When a payment was attempted: its charge's time, else its own. */
function attemptedAt(payment: Obj): number {
  const at = obj(payment.latest_charge)?.created ?? payment.created;
  return typeof at === 'number' ? at : -1;
}

/**
 * The decline codes of the invoice's latest failed payment, when the payload carries it
 * expanded: the latest by its time; at equal or unknown times the first listed, since
 * Stripe lists the newest first.
 */
function invoiceCodes(payments: Obj[]): EventFacts {
  let latest: { codes: EventFacts; at: number } | null = null;
  for (const payment of payments) {
    const id = str(payment.id) ?? '';
    const codes = id.startsWith('ch_') ? chargeCodes(payment) : paymentIntentCodes(payment);
    if (!Object.values(codes).some((v) => v !== null)) continue;
    const at = attemptedAt(payment);
    if (latest === null || at > latest.at) latest = { codes, at };
  }
  return latest?.codes ?? {};
}

/**
 * The subscription an invoice belongs to: `invoice.subscription` before 2025-03-31.basil,
 * `invoice.parent.subscription_details.subscription` from it on (Stripe changelog,
 * 2025-03-31.basil: "Adds the parent field to invoices").
 */
function invoiceSubscription(invoice: Obj): string | null {
  return (
    prefixedId(invoice.subscription, 'sub') ??
    prefixedId(obj(obj(invoice.parent)?.subscription_details)?.subscription, 'sub')
  );
}

const MAX_URL_LENGTH = 2048;
const CURRENCY_RE = /^[a-z]{3}$/;
const INVOICE_STATUSES: ReadonlySet<string> = new Set(['draft', 'open', 'paid', 'uncollectible', 'void']);

function amount(value: unknown): number | null {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : null;
}

/**
 * Only an https URL without spaces, quotes or backslashes is kept: it is given to pages as a
 * link, inside JSON the lookup builds from bytes.
 */
export function hostedInvoiceUrl(value: unknown): string | null {
  if (typeof value !== 'string' || value.length > MAX_URL_LENGTH || !/^https:\/\/[!#-[\]-~]+$/.test(value)) return null;
  try {
    return new URL(value).protocol === 'https:' ? value : null;
  } catch {
    return null;
  }
}

function invoiceMoney(invoice: Obj): InvoiceMoney {
  const currency = str(invoice.currency);
  const status = str(invoice.status);
  return {
    amountDue: amount(invoice.amount_due),
    amountRemaining: amount(invoice.amount_remaining),
    currency: currency !== null && CURRENCY_RE.test(currency) ? currency : null,
    hostedInvoiceUrl: hostedInvoiceUrl(invoice.hosted_invoice_url),
    status: status !== null && INVOICE_STATUSES.has(status) ? status : null,
    hostedPageExpiresAtMs: hostedPageExpiresAtMs({
      dueDateS: seconds(invoice.due_date),
      finalizedAtS: seconds(obj(invoice.status_transitions)?.finalized_at),
    }),
  };
}

/** An epoch-seconds field, or null. */
function seconds(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : null;
}

function invoiceLink(invoice: Obj): InvoiceLink | null {
  const invoiceId = prefixedId(invoice.id, 'in');
  if (invoiceId === null) return null;
  const subscription = invoiceSubscription(invoice);
  const paymentIds = invoicePayments(invoice).flatMap((p) => {
    const id = prefixedId(p.id, 'pi') ?? prefixedId(p.id, 'ch');
    return id === null ? [] : [id];
  });
  return {
    invoiceId,
    episode: subscription ?? invoiceId,
    autoCollected: str(invoice.collection_method) !== 'send_invoice',
    firstInvoice: subscription !== null && str(invoice.billing_reason) === 'subscription_create',
    paymentIds: [...new Set(paymentIds)],
    money: invoiceMoney(invoice),
  };
}

/**
 * The episode outcome of a decline linked to an invoice: none when the invoice is paid
 * by hand (`send_invoice`); a subscription's first invoice is always a warning.
 */
export function linkedDeclineOutcome(
  decline: Pick<Decline, 'hard'>,
  invoice: Pick<InvoiceLink, 'autoCollected' | 'firstInvoice'>,
): EpisodeOutcome | null {
  if (!invoice.autoCollected) return null;
  if (invoice.firstInvoice) return { state: 'warning', reason: 'first_payment_failed' };
  return decline.hard ? { state: 'lockout', reason: 'hard_decline' } : { state: 'warning', reason: 'soft_decline' };
}

/**
 * The outcome of an `invoice.payment_failed` (docs/stripe.md, which decline counts): none
 * for an invoice paid by hand; a subscription's first invoice is a warning whatever its
 * decline or retries; else a hard decline is a lockout, retries or not, and otherwise the
 * retry schedule decides. The decline is the one the payload carries expanded when it
 * does, else `linkedHard`: the class of the latest decline linked to the invoice dated at
 * or before the failure's second (null: none is known). Stripe sends `invoice.payments`
 * only when asked, so most invoice payloads carry no decline at all.
 */
export function invoiceFailureOutcome(
  invoice: Pick<InvoiceLink, 'autoCollected' | 'firstInvoice'>,
  failure: InvoiceFailure,
  linkedHard: boolean | null,
): EpisodeOutcome | null {
  if (!invoice.autoCollected) return null;
  if (invoice.firstInvoice) return { state: 'warning', reason: 'first_payment_failed' };
  if (failure.payloadHard ?? linkedHard ?? false) return { state: 'lockout', reason: 'hard_decline' };
  return failure.nextAttempt !== null
    ? { state: 'warning', reason: 'soft_decline' }
    : { state: 'lockout', reason: 'retries_exhausted' };
}

/** An invoice failure as its stored event facts tell it (those `invoiceChange` keeps). */
export function invoiceFailureOfEventFacts(facts: Readonly<Record<string, unknown>>): InvoiceFailure {
  const codes = codesOf(facts);
  const next = facts.next_payment_attempt;
  return {
    nextAttempt: typeof next === 'number' ? next : null,
    payloadHard: codes.some((c) => c !== null) ? classifyDecline(...codes).class === 'hard' : null,
  };
}

/**
 * A failed payment intent or charge. Its invoice is in its own `invoice` field before
 * 2025-03-31.basil, which removed that field from both objects (same changelog entry as
 * the invoice's payments); from then on only an invoice event naming the payment links it.
 */
function declineOf(event: StripeEventLike, customerId: string): Derivation {
  const object = event.data.object;
  const isCharge = event.type === 'charge.failed';
  const codes = isCharge ? chargeCodes(object) : paymentIntentCodes(object);
  const decline = classifyDecline(...codesOf(codes));
  const own = isCharge ? prefixedId(object.id, 'ch') : prefixedId(object.id, 'pi');
  const other = isCharge ? prefixedId(object.payment_intent, 'pi') : prefixedId(object.latest_charge, 'ch');
  const invoiceId = prefixedId(object.invoice, 'in');
  const facts = compact({ ...codes, decline_class: decline.class, invoice: invoiceId });
  if (own === null) return { kind: 'ignored', customerId, why: 'no_payment_id', invoice: null, facts };
  const paymentIds = other === null ? [own] : [own, other];
  return {
    kind: 'change',
    customerId,
    change: { kind: 'decline', decline: { hard: decline.class === 'hard', code: decline.code, paymentIds, invoiceId } },
    invoice: null,
    declineCode: decline.code,
    facts,
  };
}

const SUBSCRIPTION_TRANSITIONS: Readonly<Record<string, EpisodeOutcome>> = {
  past_due: { state: 'warning', reason: 'subscription_past_due' },
  unpaid: { state: 'lockout', reason: 'subscription_unpaid' },
  active: { state: 'resolved', reason: 'paid' },
  trialing: { state: 'resolved', reason: 'paid' },
  canceled: { state: 'resolved', reason: 'subscription_ended' },
  incomplete_expired: { state: 'resolved', reason: 'subscription_ended' },
};

function subscriptionChange(event: StripeEventLike, customerId: string): Derivation {
  const object = event.data.object;
  const subscription = prefixedId(object.id, 'sub');
  const status = str(object.status);
  const previous = str(obj(event.data.previous_attributes)?.status);
  const collection = str(object.collection_method);
  const facts = compact({
    subscription,
    subscription_status: status,
    previous_subscription_status: previous,
    collection_method: collection,
  });
  const ignored = (why: string): Derivation => ({ kind: 'ignored', customerId, why, invoice: null, facts });
  if (subscription === null) return ignored('no_subscription');
  const ended: EpisodeOutcome = { state: 'resolved', reason: 'subscription_ended' };
  if (event.type === 'customer.subscription.deleted')
    return {
      kind: 'change',
      customerId,
      change: { kind: 'episode', episode: subscription, outcome: ended },
      invoice: null,
      declineCode: null,
      facts,
    };
  // Only a transition counts: an update that leaves the status as it was (a plan or
  // metadata change) says nothing new about payment and must not undo a decline.
  if (previous === null || previous === status) return ignored('no_status_transition');
  const outcome = status === null ? undefined : SUBSCRIPTION_TRANSITIONS[status];
  if (!outcome) return ignored('status_not_enforced');
  // The contract exempts send_invoice invoices, not subscriptions: an overdue subscription
  // gates whatever its collection method. Its latest invoice is the one its customer pays.
  const invoiceId = prefixedId(object.latest_invoice, 'in');
  return {
    kind: 'change',
    customerId,
    change: { kind: 'episode', episode: subscription, outcome, invoiceId },
    invoice: null,
    declineCode: null,
    facts,
  };
}

function invoiceChange(event: StripeEventLike, customerId: string): Derivation {
  const object = event.data.object;
  const link = invoiceLink(object);
  const next = typeof object.next_payment_attempt === 'number' ? object.next_payment_attempt : null;
  const codes = invoiceCodes(invoicePayments(object));
  const decline = classifyDecline(...codesOf(codes));
  const facts = compact({
    invoice: link?.invoiceId ?? null,
    episode: link?.episode ?? null,
    collection_method: str(object.collection_method),
    billing_reason: str(object.billing_reason),
    next_payment_attempt: next,
    ...codes,
  });
  const ignored = (why: string): Derivation => ({ kind: 'ignored', customerId, why, invoice: link, facts });
  if (link === null) return ignored('no_invoice_id');
  const change = (outcome: EpisodeOutcome, failure?: InvoiceFailure): Derivation => ({
    kind: 'change',
    customerId,
    change: { kind: 'episode', episode: link.episode, outcome, ...(failure ? { failure } : {}) },
    invoice: link,
    declineCode: decline.code,
    facts,
  });

  if (event.type === 'invoice.paid' || event.type === 'invoice.payment_succeeded' || event.type === 'invoice.voided') {
    // An emailed invoice of no subscription never started an episode: nothing to resolve.
    if (!link.autoCollected && link.episode === link.invoiceId) return ignored('send_invoice');
    return change({ state: 'resolved', reason: event.type === 'invoice.voided' ? 'voided' : 'paid' });
  }
  // The customer pays these by hand, from an emailed invoice: nothing to gate on.
  if (!link.autoCollected) return ignored('send_invoice');
  if (event.type === 'invoice.payment_action_required')
    return change({ state: 'warning', reason: 'payment_action_required' });
  // invoice.payment_failed. The payload rarely carries its payment expanded: the store
  // reads the declines linked to the invoice to tell a hard one (invoiceFailureOutcome).
  const failure = invoiceFailureOfEventFacts(facts);
  return change(invoiceFailureOutcome(link, failure, null) ?? { state: 'warning', reason: 'soft_decline' }, failure);
}

/** Event to episode change (docs/stripe.md, statuses from dunning episodes), as a value; no IO, no clock. */
export function deriveChange(event: StripeEventLike): Derivation {
  if (!RELEVANT.has(event.type)) return { kind: 'irrelevant' };
  const object = event.data.object;

  if (event.type === 'customer.deleted') {
    const id = str(object.id);
    if (id === null || !CUSTOMER_ID_RE.test(id))
      return { kind: 'ignored', customerId: null, why: 'no_customer', invoice: null, facts: {} };
    return { kind: 'change', customerId: id, change: { kind: 'delete' }, invoice: null, declineCode: null, facts: {} };
  }

  const customerId = customerOf(object);
  if (customerId === null) return { kind: 'ignored', customerId: null, why: 'no_customer', invoice: null, facts: {} };

  switch (event.type) {
    case 'charge.failed':
    case 'payment_intent.payment_failed':
      return declineOf(event, customerId);
    case 'customer.subscription.updated':
    case 'customer.subscription.deleted':
      return subscriptionChange(event, customerId);
    default:
      return invoiceChange(event, customerId);
  }
}
