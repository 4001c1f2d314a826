import type { AdminAction, ChangeCause, HistoryEffect, HistorySource } from '../../domain/history.js';
import type { PolicyRule } from '../../domain/policy.js';
import type { Change, EpisodeState } from '../../domain/stripe/fold.js';
import type { StripeEventOutcomeName } from '../../domain/stripe/outcomes.js';
import type { SubscriberStatus } from '../../domain/types.js';

export type { ChangeCause };

export interface HistoryEntry {
  /** The answered status after this entry; null: no record (removed, or never known). */
  status: SubscriberStatus | null;
  /** The status before the tenant's policy. */
  derivedStatus: SubscriberStatus | null;
  lockoutAt: Date | null;
  policyRule: PolicyRule | null;
  /** The tenant's secret key that made an admin change; null: the operator, or not an admin change. */
  secretKeyId: string | null;
  /** What an admin change was; null: not an admin change, or one recorded before this was kept. */
  adminAction: AdminAction | null;
  reason: string | null;
  effect: HistoryEffect;
  /** The episode the change came through (a subscription or invoice id), when one did. */
  episode: string | null;
  source: HistorySource;
  eventId: string | null;
  eventType: string | null;
  declineCode: string | null;
  occurredAt: Date;
  recordedAt: Date;
}

export interface EpisodeRecord {
  episode: string;
  state: EpisodeState;
  reason: string;
  declineCode: string | null;
  /** The time of the event that set the episode. */
  at: Date;
  eventId: string;
  dunningStartedAt: Date | null;
  resolvedAt: Date | null;
  invoice: InvoiceRecord | null;
}

/** What Stripe last told of an invoice. */
export interface InvoiceRecord {
  id: string;
  status: string | null;
  amountDue: number | null;
  amountRemaining: number | null;
  currency: string | null;
  hostedInvoiceUrl: string | null;
}

/**
 * A subscriber as the admin API shows it. A cleared or deleted customer whose history is
 * kept has `status` null.
 */
export interface SubscriberRecord {
  processorCustomerId: string;
  /** The answered status. */
  status: SubscriberStatus | null;
  derivedStatus: SubscriberStatus | null;
  lockoutAt: Date | null;
  payUrl: string | null;
  reason: string | null;
  /** Set while an admin's status overrides the episodes. */
  overriddenAt: Date | null;
  updatedAt: Date | null;
  episodes: EpisodeRecord[];
  history: HistoryEntry[];
}

export type ApplyOutcome = Extract<StripeEventOutcomeName, 'applied' | 'stale'>;

/** A page of a tenant's subscribers, by customer id. */
export interface SubscriberListQuery {
  /** Answered statuses (any of them). */
  status?: readonly SubscriberStatus[];
  /** Derived statuses, before the tenant's policy (any of them). */
  derivedStatus?: readonly SubscriberStatus[];
  reason?: string;
  /** Only those whose record changed at or after this instant. */
  updatedSince?: Date;
  /** The last customer id of the previous page (keyset pagination). */
  after?: string;
  limit: number;
}

export interface SubscriberListRow {
  derivedStatus: SubscriberStatus;
  processorCustomerId: string;
  status: SubscriberStatus;
  reason: string;
  updatedAt: Date;
}

/** A tenant's subscribers: read, listed, counted, and changed by an admin's (or a tenant key's) action. */
export interface SubscriberStore {
  /**
   * An admin's action (docs/stripe.md, statuses from dunning episodes): a status that overrides the episodes as of
   * `cause.occurredAt`, its clearing, or a removal. `stale` when a Stripe event dated later has spoken.
   */
  applyChange(
    tenantId: number,
    customerId: string,
    change: Change,
    cause: ChangeCause,
    now: Date,
  ): Promise<ApplyOutcome>;
  /** A page of the tenant's subscribers in customer id order, and whether more follow. */
  listSubscribers(tenantId: number, query: SubscriberListQuery): Promise<{ rows: SubscriberListRow[]; more: boolean }>;
  /** How many subscribers the tenant has in each status. */
  countSubscribers(
    tenantId: number,
  ): Promise<{ answered: Record<SubscriberStatus, number>; derived: Record<SubscriberStatus, number> }>;
  /** Null only when the store holds neither a record nor a history for the customer. */
  getSubscriber(tenantId: number, customerId: string): Promise<SubscriberRecord | null>;
}
