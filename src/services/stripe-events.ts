import { deriveChange } from '../domain/stripe/derive.js';
import type { StripeEventLike } from '../domain/stripe/derive.js';
import type { Store, StripeEventInput, StripeEventResult } from '../store/store.js';

export type IngestOutcome = StripeEventResult['outcome'] | 'irrelevant';
export type IngestResult = Omit<StripeEventResult, 'outcome'> & { outcome: IngestOutcome };

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

/**
 * One Stripe event through the derivation and into the store: the path shared by the
 * webhook and the replay. Irrelevant types are not kept; every other event is kept with
 * the fields its derivation used, and its effect applied in the same transaction.
 */
export async function ingestStripeEvent(store: Store, tenantId: number, event: StripeEventLike, now: Date): Promise<IngestResult> {
  const input = toStripeEventInput(event);
  return input === null ? IRRELEVANT : store.recordStripeEvent(tenantId, input, now);
}

/** Several events in order; with `dryRun`, nothing is kept and the results say what would happen. */
export async function ingestStripeEvents(store: Store, tenantId: number, events: readonly StripeEventLike[], now: Date, dryRun: boolean): Promise<IngestResult[]> {
  const inputs = events.map(toStripeEventInput);
  const relevant = inputs.filter((i): i is StripeEventInput => i !== null);
  const results = await store.recordStripeEvents(tenantId, relevant, now, { dryRun });
  let next = 0;
  return inputs.map((i) => (i === null ? IRRELEVANT : (results[next++] ?? IRRELEVANT)));
}
