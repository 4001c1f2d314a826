import type { FeedCursor, ListCursor } from '../../domain/feed-cursor.js';
import type { SubscriberStatus } from '../../domain/types.js';

/**
 * A subscriber's answer as the status feed gives it to its tenant (docs/feed.md): what a
 * signed lookup answers, as stored.
 */
export interface StatusEntry {
  customerId: string;
  status: SubscriberStatus;
  /** While `warning`: when the scheduled lockout falls, in epoch seconds (rounded up, as the lookup); null: none. */
  lockoutAtS: number | null;
  /** While not `active`: the hosted page of the invoice to pay; null: none known. */
  payUrl: string | null;
}

/** A page of a tenant's subscribers answered other than `active`, in customer id order. */
export interface StatusListPage {
  entries: StatusEntry[];
  /** The next page's cursor; null: this was the last. */
  next: ListCursor | null;
  /** Where the feed continues once the whole list is read: the first page's snapshot, on every page. */
  feedCursor: FeedCursor;
}

/** One change of a subscriber's answer; `active` for one that has no record any more. */
export interface StatusChange extends StatusEntry {
  /** Resumes right after this change. */
  cursor: FeedCursor;
  occurredAt: Date;
}

/**
 * What came after a feed cursor: the changes (per subscriber in the order they committed)
 * and where to go on; `expired` when the changes after it were pruned (list again).
 */
export type StatusChanges = { expired: true } | { expired: false; changes: StatusChange[]; next: FeedCursor };

/** The status feed's reads (migration 014): a tenant's non-active subscribers, then their changes. */
export interface StatusFeed {
  /** A page of `limit` at most; the first (cursor null) takes the position the feed continues from. */
  listStatuses(tenantId: number, cursor: ListCursor | null, limit: number): Promise<StatusListPage>;
  /** At most `limit` changes the cursor had not seen, in `seq` order, and the cursor after them. */
  statusChangesAfter(tenantId: number, cursor: FeedCursor, limit: number): Promise<StatusChanges>;
}
