/** The tables that grow with traffic and are pruned by age. */
export type RetainedTable =
  'stripe_events' | 'subscriber_history' | 'webhook_events' | 'webhook_attempts' | 'status_changes' | 'stripe_intake';

/** What runs on a clock: pruning by age, scheduled lockouts, policy sweeps, health. */
export interface Maintenance {
  /** The engine the store runs on. */
  readonly engine: 'postgres' | 'embedded';
  /**
   * Deletes at most `batch` rows of `table` older than `before` (Stripe events by when they
   * were received; history entries by when they were recorded, never a subscriber's newest;
   * status changes by when they happened, recording the feed's horizon; Stripe intake
   * counters by their day), in one short transaction. Returns how many; 0 when none is left,
   * or when another instance is pruning the same table at that moment.
   */
  pruneOld(table: RetainedTable, before: Date, batch: number): Promise<number>;
  /**
   * Records, as of their time, at most `limit` scheduled lockouts that fell due by the
   * database's `now()` (a grace that ended, an escalation), each once whichever instances
   * race; returns how many were recorded. `notAfter` (null in service) can only hold a record
   * back: an instance's clock never brings one forward.
   */
  recordDueLockouts(notAfter: Date | null, limit: number): Promise<number>;
  /**
   * Applies one batch (at most `batch` subscribers, one short transaction) of a tenant's
   * policy change that is still going through its subscribers; returns how many were seen,
   * and whether it took a batch (false: none is left, or each is another instance's now).
   */
  sweepPolicy(notAfter: Date | null, batch: number): Promise<{ seen: number; pending: boolean }>;
  /** Throws when the store cannot answer a trivial query. */
  ping(): Promise<void>;
  /** The database's clock (`clock_timestamp()`): what an instance's own clock is compared with. */
  databaseTime(): Promise<Date>;
}
