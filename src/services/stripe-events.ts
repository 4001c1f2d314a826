import { deriveChange } from '../domain/stripe/derive.js';
import { escapeStrings } from '../domain/stripe/json.js';
import type { StripeEventLike } from '../domain/stripe/derive.js';
import { isLivemodeMismatch } from '../domain/stripe/outcomes.js';
import type { StripeEventOutcomeName, TenantLivemode } from '../domain/stripe/outcomes.js';
import type { StripeEventInput, StripeEventResult, StripeEventStore } from '../store/index.js';

export type IntakeOutcome = StripeEventOutcomeName;
export type IntakeResult = Omit<StripeEventResult, 'outcome'> & { outcome: IntakeOutcome };

/** The tenant an event is for: its id, and the Stripe mode it takes. */
export interface IntakeTenant {
  id: number;
  livemode: TenantLivemode;
}

/** The event as the store keeps it, with its derivation; null for a type Dunwall does not read. */
export function toStripeEventInput(event: StripeEventLike): StripeEventInput | null {
  const derivation = deriveChange(event);
  if (derivation.kind === 'irrelevant') return null;
  const eventFacts =
    derivation.kind === 'ignored' ? { ...derivation.facts, ignored: derivation.why } : derivation.facts;
  return {
    event: {
      eventId: event.id,
      eventType: event.type,
      customerId: derivation.customerId,
      created: new Date(event.created * 1000),
      declineCode: derivation.kind === 'change' ? derivation.declineCode : null,
      facts: eventFacts,
    },
    derivation,
  };
}

const IRRELEVANT: IntakeResult = { outcome: 'irrelevant', customerId: null, before: null, after: null };
const MISMATCH: IntakeResult = { outcome: 'livemode_mismatch', customerId: null, before: null, after: null };

/**
 * An event of the other mode than the tenant's is answered before anything else and, like
 * an irrelevant type, not kept: once an operator corrects a tenant's mode, a replay of the
 * same events applies them instead of finding them already seen. Every string of an event
 * is escaped before it is read (`escapeStrings`): a U+0000 anywhere in it, which the store
 * cannot hold, must not keep the event from being stored and applied.
 */
function prepare(tenant: IntakeTenant, event: StripeEventLike): StripeEventInput | IntakeResult {
  if (isLivemodeMismatch(tenant.livemode, event)) return MISMATCH;
  return toStripeEventInput(escapeStrings(event)) ?? IRRELEVANT;
}

const isInput = (p: StripeEventInput | IntakeResult): p is StripeEventInput => 'derivation' in p;

/**
 * One Stripe event through the derivation and into the store: the path shared by the
 * webhook and the replay. Irrelevant types and events of the other mode are not kept;
 * every other event is kept with its event facts (the fields its derivation used), and its effect applied
 * in the same transaction.
 */
export async function takeInStripeEvent(
  store: StripeEventStore,
  tenant: IntakeTenant,
  event: StripeEventLike,
  now: Date,
): Promise<IntakeResult> {
  const prepared = prepare(tenant, event);
  return isInput(prepared) ? store.recordStripeEvent(tenant.id, prepared, now) : prepared;
}

/** Several events in order; with `dryRun`, nothing is kept and the results say what would happen. */
export async function takeInStripeEvents(
  store: StripeEventStore,
  tenant: IntakeTenant,
  events: readonly StripeEventLike[],
  now: Date,
  dryRun: boolean,
): Promise<IntakeResult[]> {
  const prepared = events.map((e) => prepare(tenant, e));
  const relevant = prepared.filter(isInput);
  const results = await store.recordStripeEvents(tenant.id, relevant, now, { dryRun });
  let next = 0;
  return prepared.map((p) => (isInput(p) ? (results[next++] ?? IRRELEVANT) : p));
}
