import type { SubscriberStatus, TenantAuth } from '../../domain/types.js';
import type { ListenHandlers } from '../db/db.js';

/**
 * Where a reader of the change log (migration 006) stands: the snapshot it last read at,
 * opaque to all but the store.
 */
export type ChangePosition = string;

/** What a non-active answer carries beside its status (null: nothing). */
export interface SubscriberExtra {
  /** While `warning`: when the policy's scheduled lockout falls, in epoch seconds. */
  lockoutAtS: number | null;
  /** The hosted page of the invoice to pay. */
  payUrl: string | null;
  /** The card link through Dunwall a warning answers as `card_update_url`; absent or null: none. */
  cardUrl?: string | null;
}

/** A customer's card-expiring notice while it holds (docs/notices.md). */
export interface CardNoticeExtra {
  /** The card's expiry, YYYY-MM. */
  expires: string;
  /** When it stops holding (the renewal, or the end of the card's month), in epoch seconds. */
  untilS: number;
  /** The card link through Dunwall the notice carries; absent or null: the tenant's own URL, if any. */
  cardUrl?: string | null;
}

/**
 * A tenant whose row or credentials cannot be read for the lookup (a sealed secret that does
 * not open: altered, or copied from another row). It is left out of the read so that it costs
 * that tenant only; `reason` names the row and the kind of secret, never its value.
 */
export interface UnreadableTenant {
  id: number;
  slug: string;
  reason: string;
}

/** Receives a snapshot load: the tenants and the subscriber count first, then each subscriber. */
export interface LookupStateSink {
  begin(subscribers: number, tenants: readonly TenantAuth[], unreadable: readonly UnreadableTenant[]): void;
  /** A subscriber, its customer id as the ASCII bytes `bytes[start..end)` of the load's stream: no string per row. */
  subscriber(
    tenantId: number,
    bytes: Uint8Array,
    start: number,
    end: number,
    status: SubscriberStatus,
    extra: SubscriberExtra | null,
  ): void;
  /** A notice that holds, after every subscriber (its customer may have no status kept). */
  notice?(tenantId: number, customerId: string, notice: CardNoticeExtra): void;
}

/** The changes a reader at some position had not seen, each key with its value now. */
export interface LookupChanges {
  position: ChangePosition;
  /** The log was pruned past the position: changes may be missing, so the reader reloads. */
  gap: boolean;
  /**
   * Changed tenants: as they are now, or null when deleted or unreadable (then `unreadable`
   * says which and why).
   */
  tenants: { id: number; tenant: TenantAuth | null; unreadable?: UnreadableTenant }[];
  /** Changed subscribers: their status now, or null when they have no record any more. */
  subscribers: {
    tenantId: number;
    customerId: string;
    status: SubscriberStatus | null;
    extra: SubscriberExtra | null;
    /** The customer's notice that holds now; absent or null: none. */
    notice?: CardNoticeExtra | null;
  }[];
}

/**
 * The change log every process's read model follows (migration 006): a snapshot, then
 * every change committed since a position, woken by notifications.
 */
export interface ChangeLog {
  /** Everything the lookup reads, as of one snapshot; returns that snapshot's position. */
  loadLookupState(sink: LookupStateSink): Promise<ChangePosition>;
  /** Every change committed since `since` (whatever the order its writers committed in). */
  lookupChangesSince(since: ChangePosition): Promise<LookupChanges>;
  /** Forgets change log rows recorded more than `olderThanMs` ago, by the database's clock; returns how many. */
  pruneLookupChanges(olderThanMs: number): Promise<number>;
  /** This instance's own writes that may change a lookup's answer, each reported once committed. */
  onCommit(listener: () => void): () => void;
  /** A notification for every instance's committed change (migration 006), and for each loss and recovery of the listener. */
  listenForChanges(handlers: ListenHandlers): Promise<() => Promise<void>>;
}
