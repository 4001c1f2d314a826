import { deriveChange } from '../domain/stripe/derive.js';
import type { StripeEventLike } from '../domain/stripe/derive.js';
import type { Store, StripeEventOutcome } from '../store/store.js';

export type IngestOutcome = StripeEventOutcome | 'irrelevant';

/**
 * One Stripe event through the derivation and into the store: the path shared by the
 * webhook and the replay. Irrelevant types are not kept; every other event is kept with
 * the fields its derivation used, and its change applied in the same transaction.
 */
export async function ingestStripeEvent(store: Store, tenantId: number, event: StripeEventLike, now: Date): Promise<IngestOutcome> {
  const derivation = deriveChange(event);
  if (derivation.kind === 'irrelevant') return 'irrelevant';
  return store.recordStripeEvent(
    tenantId,
    {
      eventId: event.id,
      eventType: event.type,
      customerId: derivation.customerId,
      created: new Date(event.created * 1000),
      declineCode: derivation.kind === 'change' ? derivation.declineCode : null,
      facts: derivation.kind === 'ignored' ? { ...derivation.facts, ignored: derivation.why } : derivation.facts,
    },
    derivation.kind === 'change' ? derivation.change : null,
    now,
  );
}
