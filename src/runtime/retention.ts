import type { Logger } from 'pino';
import type { Maintenance, RetainedTable } from '../store/index.js';
import { DEFAULT_STATUS_FEED_RETENTION_DAYS } from './config.js';
import type { Metrics } from '../metrics/index.js';

const DAY_MS = 86_400_000;
/** Rows deleted per transaction: short enough that a webhook never waits on one. */
export const RETENTION_BATCH = 500;
/** A breath between batches, so that the writes of webhooks and the admin API go first. */
const PAUSE_BETWEEN_BATCHES_MS = 50;
/** At most this many batches a run (250,000 rows); the rest waits for the next run. */
const MAX_BATCHES_PER_RUN = 500;
/** The first run comes a minute after the start, then one an hour. */
const FIRST_RUN_DELAY_MS = 60_000;
export const RETENTION_INTERVAL_MS = 3_600_000;
/** Days the Stripe intake counters are kept (a tenant's health reads the last 7). */
export const STRIPE_INTAKE_RETENTION_DAYS = 90;

export interface RetentionSettings {
  /** Days processed Stripe events are kept (their ids catch Stripe's redeliveries). */
  stripeEventsDays: number;
  /** Days history entries are kept; 0: for ever. A subscriber's newest entry always stays. */
  historyDays: number;
  /** Days downstream webhook messages (once none waits) and attempts are kept. */
  downstreamDays: number;
  /** Days the status feed's changes are kept (default 7); a cursor older than what is kept answers 410. */
  statusFeedDays?: number;
  /** Days the Stripe intake counters are kept (default STRIPE_INTAKE_RETENTION_DAYS), by their UTC day. */
  stripeIntakeDays?: number;
}

export interface RetentionOptions extends RetentionSettings {
  maintenance: Pick<Maintenance, 'pruneOld'>;
  now?: () => number;
  log: Pick<Logger, 'info' | 'warn'>;
  /** Rows per transaction; tests pass a small one. */
  batch?: number;
  sleep?: (ms: number) => Promise<void>;
}

export type RetentionRun = Record<RetainedTable, number>;

function emptyRun(): RetentionRun {
  return {
    stripe_events: 0,
    subscriber_history: 0,
    webhook_events: 0,
    webhook_attempts: 0,
    status_changes: 0,
    stripe_intake: 0,
  };
}

/**
 * Prunes processed Stripe events, old history, webhook messages, the status feed's changes
 * and the Stripe intake counters by age, in small batches, one instance at a time (the store takes a lock per
 * batch), in the background of the service.
 */
export class Retention {
  readonly deleted: RetentionRun = emptyRun();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<RetentionRun> | null = null;
  private stopped = false;

  constructor(private readonly opts: RetentionOptions) {}

  /** Schedules the runs: a minute after the start, then every hour. */
  start(): this {
    const schedule = (delayMs: number) => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.runOnce()
          .catch((err: unknown) =>
            this.opts.log.warn(
              { err: { message: (err as Error).message } },
              'retention: pruning failed; trying again at the next run',
            ),
          )
          .finally(() => schedule(RETENTION_INTERVAL_MS));
      }, delayMs);
      this.timer.unref();
    };
    schedule(FIRST_RUN_DELAY_MS);
    return this;
  }

  /** One run over both tables (a run under way is joined, not doubled). */
  runOnce(): Promise<RetentionRun> {
    this.running ??= this.prune().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  private async prune(): Promise<RetentionRun> {
    const nowMs = (this.opts.now ?? Date.now)();
    const run: RetentionRun = emptyRun();
    const plan: [RetainedTable, number][] = [['stripe_events', this.opts.stripeEventsDays]];
    if (this.opts.historyDays > 0) plan.push(['subscriber_history', this.opts.historyDays]);
    plan.push(['webhook_attempts', this.opts.downstreamDays], ['webhook_events', this.opts.downstreamDays]);
    plan.push(['status_changes', this.opts.statusFeedDays ?? DEFAULT_STATUS_FEED_RETENTION_DAYS]);
    plan.push(['stripe_intake', this.opts.stripeIntakeDays ?? STRIPE_INTAKE_RETENTION_DAYS]);
    const batch = this.opts.batch ?? RETENTION_BATCH;
    const sleep = this.opts.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()));
    for (const [table, days] of plan) {
      const before = new Date(nowMs - days * DAY_MS);
      for (let i = 0; i < MAX_BATCHES_PER_RUN && !this.stopped; i += 1) {
        const n = await this.opts.maintenance.pruneOld(table, before, batch);
        run[table] += n;
        this.deleted[table] += n;
        if (n < batch) break;
        await sleep(PAUSE_BETWEEN_BATCHES_MS);
      }
    }
    if (Object.values(run).some((n) => n > 0))
      this.opts.log.info(
        { deleted: run },
        'retention: pruned old Stripe events, history, webhook messages, status changes and intake counters',
      );
    return run;
  }
}

/** Rows the retention pruned by age since the start, by table, read at each scrape. */
export function observeRetention(metrics: Metrics, retention: Pick<Retention, 'deleted'>): void {
  const pruned = (name: string, help: string, table: RetainedTable) =>
    metrics.observeCounter(name, help, () => retention.deleted[table]);
  pruned('dunwall_retention_stripe_events_deleted_total', 'Processed Stripe events pruned by age', 'stripe_events');
  pruned('dunwall_retention_history_deleted_total', 'History entries pruned by age', 'subscriber_history');
  pruned(
    'dunwall_retention_webhook_messages_deleted_total',
    'Downstream webhook messages pruned by age',
    'webhook_events',
  );
  pruned(
    'dunwall_retention_webhook_attempts_deleted_total',
    'Downstream webhook attempts pruned by age',
    'webhook_attempts',
  );
  pruned('dunwall_retention_status_changes_deleted_total', "The status feed's changes pruned by age", 'status_changes');
  pruned('dunwall_retention_stripe_intake_deleted_total', 'Stripe intake counter rows pruned by age', 'stripe_intake');
}
