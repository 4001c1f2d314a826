import type { ApplicableDerivation } from '../../domain/stripe/decide.js';
import type { Facts } from '../../domain/stripe/derive.js';
import type { CustomerStatus } from '../../domain/stripe/fold.js';
import type { StripeIntakeCount, StripeIntakeKind } from '../../domain/stripe/intake.js';
import type { StripeEventOutcomeName } from '../../domain/stripe/outcomes.js';
import type { Credential, Mode } from '../../domain/types.js';
import type { CardFact } from '../../domain/notices.js';

/**
 * What the store answers of one event (the outcomes of STRIPE_EVENT_OUTCOMES an event that
 * reaches it can have); pending: a decline not linked to an invoice (yet), it gates only once
 * an invoice event links it.
 */
export type StripeEventOutcome = Exclude<StripeEventOutcomeName, 'irrelevant' | 'livemode_mismatch'>;

/** What one event did: its outcome, and the customer's status before and after it (null: unknown). */
export interface StripeEventResult {
  outcome: StripeEventOutcome;
  customerId: string | null;
  before: CustomerStatus | null;
  after: CustomerStatus | null;
}

/** A relevant event's derivation: what the store applies. */
export type StripeDerivation = ApplicableDerivation;

export interface StripeEventInput {
  event: StripeEventRecord;
  derivation: StripeDerivation;
}

export interface StripeEventRecord {
  eventId: string;
  eventType: string;
  customerId: string | null;
  created: Date;
  declineCode: string | null;
  /** The fields the derivation used. */
  facts: Facts;
}

/** A tenant's Stripe signing secrets: `tenantId`, its own row; per mode, the space and its secrets. */
export interface StripeSigning {
  tenantId: number;
  spaces: Record<Mode, { spaceId: number; secrets: Credential<string>[] }>;
}

/** The tenant's Stripe events: their signing secrets, and each event kept with its effect. */
export interface StripeEventStore {
  /**
   * The tenant's Stripe signing secrets of each mode, with the data space of that mode
   * (docs/test-mode.md), expired ones included (the caller filters by time); null: no such tenant.
   */
  getStripeSigningSecrets(slug: string): Promise<StripeSigning | null>;
  /**
   * Keeps a Stripe event and applies its derivation in one transaction. A redelivered
   * event id is a `duplicate` and changes nothing.
   */
  recordStripeEvent(tenantId: number, input: StripeEventInput, now: Date): Promise<StripeEventResult>;
  /**
   * Several events, each in its own transaction, in the order given; with `dryRun`, all of
   * them in one transaction that is rolled back, so that the results say what they would do.
   */
  recordStripeEvents(
    tenantId: number,
    inputs: readonly StripeEventInput[],
    now: Date,
    options?: { dryRun?: boolean },
  ): Promise<StripeEventResult[]>;
}

/**
 * What a card fact did to a customer's notice (migration 025): started (or moved), ended,
 * nothing (the same, or an end with none kept), stale (a later event set it), or duplicate
 * (this very event set it).
 */
export type CardNoticeChange = 'started' | 'ended' | 'unchanged' | 'stale' | 'duplicate';

/** The customers' card-expiring notices (docs/notices.md), learned from Stripe's events. */
export interface CardNoticeStore {
  /** Applies a started or ended card fact of a Stripe event to the space's customer. */
  recordCardFact(
    spaceId: number,
    fact: Extract<CardFact, { kind: 'expiring' | 'ended' }>,
    event: { eventId: string; created: Date },
    now: Date,
  ): Promise<CardNoticeChange>;
}

export type { StripeIntakeCount, StripeIntakeKind };

/** One UTC day of a tenant's Stripe intake: a count per kind. */
export interface StripeIntakeDay {
  /** YYYY-MM-DD. */
  day: string;
  counts: Record<StripeIntakeKind, number>;
}

/** A tenant's Stripe intake as kept: the days from some day on, and the last of each kind. */
export interface StripeIntakeSummary {
  /** Oldest first; only days with a row. */
  days: StripeIntakeDay[];
  /** The latest of each kind among every day still kept (whatever the range of `days`); null: none. */
  lastAt: Record<StripeIntakeKind, Date | null>;
}

/**
 * The Stripe intake counters (migration 016): counted in memory by each process, added here
 * in batches, read by the tenant's health.
 */
export interface StripeIntakeStore {
  /**
   * Adds the counts, one row per (tenant, day, kind), in one statement; `last_at` only ever
   * moves later. Counts of a tenant deleted meanwhile are dropped.
   */
  addStripeIntake(counts: readonly StripeIntakeCount[]): Promise<void>;
  /** The tenant's days from `since` (a UTC midnight) on, and the last of each kind ever kept. */
  stripeIntake(tenantId: number, since: Date): Promise<StripeIntakeSummary>;
}

/** The Stripe intake: the tenant's signing secrets, each event kept with its effect, and the intake's counters. */
export interface StripeStore extends StripeEventStore, StripeIntakeStore, CardNoticeStore {}
