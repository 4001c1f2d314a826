import { CUSTOMER_ID_RE } from '../types.js';
import { classifyDecline } from './declines.js';
import type { Change } from './fold.js';

/** The part of a Stripe event that the derivation reads; both API shapes fit it. */
export interface StripeEventLike {
  id: string;
  type: string;
  created: number;
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
  'customer.subscription.updated',
  'customer.deleted',
] as const;
const RELEVANT: ReadonlySet<string> = new Set(RELEVANT_EVENT_TYPES);

/** The fields a derivation used, kept with the event so that every change can be explained. */
export type Facts = Record<string, string | number | boolean | null>;

export type Derivation =
  /** Not an event type Dunwall reads: acknowledged, not kept. */
  | { kind: 'irrelevant' }
  /** A relevant type that changes nothing (no customer, manual invoicing, no status transition). */
  | { kind: 'ignored'; customerId: string | null; why: string; facts: Facts }
  | { kind: 'change'; customerId: string; change: Change; declineCode: string | null; facts: Facts };

type Obj = Record<string, unknown>;

function obj(value: unknown): Obj | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Obj) : null;
}

function str(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

/** A field that is an id, or an expanded object carrying one. */
function idOf(value: unknown): string | null {
  return str(value) ?? str(obj(value)?.id);
}

function customerOf(object: Obj): string | null {
  const id = idOf(object.customer);
  return id !== null && CUSTOMER_ID_RE.test(id) ? id : null;
}

/** The codes of a failed payment intent's last error, most specific first. */
function paymentIntentCodes(pi: Obj | null): Facts {
  const error = obj(pi?.last_payment_error);
  return { decline_code: str(error?.decline_code), code: str(error?.code) };
}

/** A charge carries no decline_code: its outcome reason, then its failure code. */
function chargeCodes(charge: Obj | null): Facts {
  return { outcome_reason: str(obj(charge?.outcome)?.reason), failure_code: str(charge?.failure_code) };
}

/**
 * The decline codes of an invoice's failed payment, when the event carries the payment
 * expanded: before API version 2025-03-31.basil as `payment_intent` / `charge` on the
 * invoice, since then inside `payments.data[].payment`. Ids alone carry no code.
 */
function invoiceCodes(invoice: Obj): Facts {
  const legacy = { ...paymentIntentCodes(obj(invoice.payment_intent)), ...chargeCodes(obj(invoice.charge)) };
  if (Object.values(legacy).some((v) => v !== null)) return legacy;
  const payments = obj(invoice.payments)?.data;
  if (Array.isArray(payments)) {
    for (const entry of [...payments].reverse()) {
      const payment = obj(obj(entry)?.payment);
      const codes = { ...paymentIntentCodes(obj(payment?.payment_intent)), ...chargeCodes(obj(payment?.charge)) };
      if (Object.values(codes).some((v) => v !== null)) return codes;
    }
  }
  return legacy;
}

function compact(facts: Facts): Facts {
  return Object.fromEntries(Object.entries(facts).filter(([, v]) => v !== null && v !== undefined));
}

function declineChange(customerId: string, facts: Facts, codes: (string | number | boolean | null)[]): Derivation {
  const decline = classifyDecline(...codes.map((c) => (typeof c === 'string' ? c : null)));
  const change: Change =
    decline.class === 'hard' ? { kind: 'set', status: 'lockout', reason: 'hard_decline' } : { kind: 'set', status: 'warning', reason: 'soft_decline' };
  return { kind: 'change', customerId, change, declineCode: decline.code, facts: compact({ ...facts, decline_class: decline.class }) };
}

const SUBSCRIPTION_STATUS: Record<string, Change> = {
  past_due: { kind: 'set', status: 'warning', reason: 'subscription_past_due' },
  unpaid: { kind: 'set', status: 'lockout', reason: 'subscription_unpaid' },
  active: { kind: 'set', status: 'active', reason: 'paid' },
};

/** Event to status change (CONTRACT.md section 5), as a value; no IO, no clock. */
export function deriveChange(event: StripeEventLike): Derivation {
  if (!RELEVANT.has(event.type)) return { kind: 'irrelevant' };
  const object = event.data.object;

  if (event.type === 'customer.deleted') {
    const id = str(object.id);
    if (id === null || !CUSTOMER_ID_RE.test(id)) return { kind: 'ignored', customerId: null, why: 'no_customer', facts: {} };
    return { kind: 'change', customerId: id, change: { kind: 'delete' }, declineCode: null, facts: {} };
  }

  const customerId = customerOf(object);
  if (customerId === null) return { kind: 'ignored', customerId: null, why: 'no_customer', facts: {} };

  switch (event.type) {
    case 'charge.failed': {
      const facts = chargeCodes(object);
      return declineChange(customerId, facts, [facts.outcome_reason ?? null, facts.failure_code ?? null]);
    }
    case 'payment_intent.payment_failed': {
      const facts = paymentIntentCodes(object);
      return declineChange(customerId, facts, [facts.decline_code ?? null, facts.code ?? null]);
    }
    case 'invoice.payment_failed':
    case 'invoice.payment_action_required': {
      const collection = str(object.collection_method);
      const next = typeof object.next_payment_attempt === 'number' ? object.next_payment_attempt : null;
      const codes = invoiceCodes(object);
      const declineCode = classifyDecline(
        ...[codes.decline_code, codes.code, codes.outcome_reason, codes.failure_code].map((c) => (typeof c === 'string' ? c : null)),
      ).code;
      const facts = compact({ collection_method: collection, next_payment_attempt: next, ...codes });
      // The customer pays these by hand, from an emailed invoice: nothing to gate on.
      if (collection === 'send_invoice') return { kind: 'ignored', customerId, why: 'send_invoice', facts };
      const change: Change =
        event.type === 'invoice.payment_action_required'
          ? { kind: 'set', status: 'warning', reason: 'payment_action_required' }
          : next !== null
            ? { kind: 'set', status: 'warning', reason: 'soft_decline' }
            : { kind: 'set', status: 'lockout', reason: 'retries_exhausted' };
      return { kind: 'change', customerId, change, declineCode, facts };
    }
    case 'invoice.paid':
    case 'invoice.payment_succeeded':
      return { kind: 'change', customerId, change: { kind: 'set', status: 'active', reason: 'paid' }, declineCode: null, facts: compact({ collection_method: str(object.collection_method) }) };
    case 'customer.subscription.updated': {
      const status = str(object.status);
      const previous = str(obj(event.data.previous_attributes)?.status);
      const collection = str(object.collection_method);
      const facts = compact({ subscription_status: status, previous_subscription_status: previous, collection_method: collection });
      // Invoiced by email, paid by hand: an overdue subscription is not a card to update.
      if (collection === 'send_invoice') return { kind: 'ignored', customerId, why: 'send_invoice', facts };
      // Only a transition counts: an update that leaves the status as it was (a plan or
      // metadata change) says nothing new about payment and must not undo a decline.
      if (previous === null || previous === status) return { kind: 'ignored', customerId, why: 'no_status_transition', facts };
      const change = status === null ? undefined : SUBSCRIPTION_STATUS[status];
      if (!change) return { kind: 'ignored', customerId, why: 'status_not_enforced', facts };
      return { kind: 'change', customerId, change, declineCode: null, facts };
    }
    default:
      return { kind: 'irrelevant' };
  }
}
