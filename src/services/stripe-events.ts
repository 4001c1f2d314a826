import { deriveChange } from '../domain/stripe/derive.js';
import { escapeStrings } from '../domain/stripe/json.js';
import type { StripeEventLike } from '../domain/stripe/derive.js';
import { isLivemodeMismatch } from '../domain/stripe/outcomes.js';
import type { StripeEventOutcomeName, TenantLivemode } from '../domain/stripe/outcomes.js';
import type { StripeEventInput, StripeEventResult, StripeEventStore } from '../store/index.js';

export type IngestOutcome = StripeEventOutcomeName;
export type IngestResult = Omit<StripeEventResult, 'outcome'> & { outcome: IngestOutcome };

/** The tenant an event is for: its id, and the Stripe mode it takes. */
export interface IngestTenant {
  id: number;
  livemode: TenantLivemode;
}

/** The event as the store keeps it, with its derivation; null for a type Dunwall does not read. */
export function toStripeEventInput(event: StripeEventLike): StripeEventInput | null {
  const derivation = deriveChange(event);
  if (derivation.kind === 'irrelevant') return null;
  return {
    event: {
      eventId: event.id,
      eventType: event.type,
      customerId: derivation.customerId,
      created: new Date(event.created * 1000),
      declineCode: derivation.kind === 'change' ? derivation.declineCode : null,
      facts: derivation.kind === 'ignored' ? { ...derivation.facts, ignored: derivation.why } : derivation.facts,
    },
    derivation,
  };
}

const IRRELEVANT: IngestResult = { outcome: 'irrelevant', customerId: null, before: null, after: null };
const MISMATCH: IngestResult = { outcome: 'livemode_mismatch', customerId: null, before: null, after: null };

/**
 * An event of the other mode than the tenant's is answered before anything else and, like
 * an irrelevant type, not kept: once an operator corrects a tenant's mode, a replay of the
 * same events applies them instead of finding them already seen. Every string of an event
 * is escaped before it is read (`escapeStrings`): a U+0000 anywhere in it, which the store
 * cannot hold, must not keep the event from being stored and applied.
 */
function prepare(tenant: IngestTenant, event: StripeEventLike): StripeEventInput | IngestResult {
  if (isLivemodeMismatch(tenant.livemode, event)) return MISMATCH;
  return toStripeEventInput(escapeStrings(event)) ?? IRRELEVANT;
}

const isInput = (p: StripeEventInput | IngestResult): p is StripeEventInput => 'derivation' in p;

/**
 * One Stripe event through the derivation and into the store: the path shared by the
 * webhook and the replay. Irrelevant types and events of the other mode are not kept;
 * every other event is kept with the fields its derivation used, and its effect applied
 * in the same transaction.
 */
export async function ingestStripeEvent(
  store: StripeEventStore,
  tenant: IngestTenant,
  event: StripeEventLike,
  now: Date,
): Promise<IngestResult> {
  const prepared = prepare(tenant, event);
  return isInput(prepared) ? store.recordStripeEvent(tenant.id, prepared, now) : prepared;
}

/** Several events in order; with `dryRun`, nothing is kept and the results say what would happen. */
export async function ingestStripeEvents(
  store: StripeEventStore,
  tenant: IngestTenant,
  events: readonly StripeEventLike[],
  now: Date,
  dryRun: boolean,
): Promise<IngestResult[]> {
  const prepared = events.map((e) => prepare(tenant, e));
  const relevant = prepared.filter(isInput);
  const results = await store.recordStripeEvents(tenant.id, relevant, now, { dryRun });
  let next = 0;
  return prepared.map((p) => (isInput(p) ? (results[next++] ?? IRRELEVANT) : p));
}
