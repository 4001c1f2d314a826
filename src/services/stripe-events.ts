import { deriveChange } from '../domain/stripe/derive.js';
import { escapeStrings } from '../domain/stripe/json.js';
import type { StripeEventLike } from '../domain/stripe/derive.js';
import { isLivemodeMismatch } from '../domain/stripe/outcomes.js';
import type { StripeEventOutcomeName, TenantLivemode } from '../domain/stripe/outcomes.js';
import { cardFactOf, renewalNotice } from '../domain/notices.js';
import type { CardExpiry, CardFact } from '../domain/notices.js';
import type {
  CardNoticeChange,
  CardNoticeStore,
  StripeEventInput,
  StripeEventResult,
  StripeEventStore,
} from '../store/index.js';

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
  notices: NoticeIntake | null = null,
): Promise<IntakeResult[]> {
  const prepared = events.map((e) => prepare(tenant, e));
  const relevant = prepared.filter(isInput);
  const results = await store.recordStripeEvents(tenant.id, relevant, now, { dryRun });
  let next = 0;
  const answered = prepared.map((p) => (isInput(p) ? (results[next++] ?? IRRELEVANT) : p));
  // A dry run says nothing of notices: they never change a status.
  if (dryRun || notices === null) return answered;
  for (const [i, event] of events.entries()) {
    const result = answered[i];
    if (result === undefined || result.outcome === 'livemode_mismatch') continue;
    const change = await takeInCardFact(notices, tenant.id, escapeStrings(event), now);
    if (change !== null && result.outcome === 'irrelevant')
      answered[i] = { ...result, outcome: NOTICE_OUTCOMES[change] };
  }
  return answered;
}

/**
 * Where an `invoice.upcoming` learns the expiry of the customer's default card: Stripe's API
 * with the space's Stripe API key (its customer, then its default payment method). Null: no
 * key, no default card, or Stripe did not answer (nothing is learned).
 */
export interface CardExpirySource {
  defaultCardExpiry(spaceId: number, customerId: string): Promise<CardExpiry | null>;
}

/** What the notices need of an event's intake: their store, and the card source (null: no Stripe API key anywhere). */
export interface NoticeIntake {
  store: CardNoticeStore;
  cards: CardExpirySource | null;
}

/** The longest an `invoice.upcoming` waits for Stripe's answer about the card (the source bounds its own calls too). */
export const CARD_EXPIRY_TIMEOUT_MS = 3_000;

function cardExpiryWithin(cards: CardExpirySource, spaceId: number, customerId: string): Promise<CardExpiry | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), CARD_EXPIRY_TIMEOUT_MS);
    timer.unref();
  });
  const asked = cards.defaultCardExpiry(spaceId, customerId).catch(() => null);
  return Promise.race([asked, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The card fact of an event, applied to the space's notices (docs/notices.md). An
 * `invoice.upcoming` asks Stripe for the default card's expiry first; when it cannot be
 * told, nothing is learned. Null: the event tells nothing of a card.
 */
export async function takeInCardFact(
  notices: NoticeIntake,
  spaceId: number,
  event: StripeEventLike,
  now: Date,
): Promise<CardNoticeChange | null> {
  const fact = cardFactOf(event);
  if (fact === null) return null;
  let applied: Exclude<CardFact, { kind: 'renewal' }> | null;
  if (fact.kind === 'renewal') {
    const expiry = notices.cards === null ? null : await cardExpiryWithin(notices.cards, spaceId, fact.customerId);
    applied = renewalNotice(fact, expiry);
  } else applied = fact;
  if (applied === null) return 'unchanged';
  return notices.store.recordCardFact(
    spaceId,
    applied,
    { eventId: event.id, created: new Date(event.created * 1000) },
    now,
  );
}

/** The answer of an event Dunwall reads for a notice only: what its card fact did. */
const NOTICE_OUTCOMES: Readonly<Record<CardNoticeChange, IntakeOutcome>> = {
  started: 'applied',
  ended: 'applied',
  unchanged: 'ignored',
  stale: 'stale',
  duplicate: 'duplicate',
};

/**
 * `takeInStripeEvent`, then the event's card fact (docs/notices.md): a type read for notices
 * only is answered by what it did to the notice; any other keeps its own outcome.
 */
export async function takeInStripeEventWithNotices(
  store: StripeEventStore,
  notices: NoticeIntake | null,
  tenant: IntakeTenant,
  event: StripeEventLike,
  now: Date,
): Promise<IntakeResult> {
  const result = await takeInStripeEvent(store, tenant, event, now);
  if (notices === null || result.outcome === 'livemode_mismatch') return result;
  const change = await takeInCardFact(notices, tenant.id, escapeStrings(event), now);
  if (change === null || result.outcome !== 'irrelevant') return result;
  return { ...result, outcome: NOTICE_OUTCOMES[change] };
}
